//! Why a case did not pass. A leaf module (it imports nothing from the harness), so every
//! layer — cloud control, environment, runner, suites — can return it.
//!
//! A failure is one line (`message`, expected vs observed) and an optional long `detail`;
//! an infrastructure failure (an API call, a mock's control) also keeps the error it came
//! from as its [`std::error::Error::source`], so `anyhow` chains and logs show the cause
//! instead of a flattened string. What reports show is unchanged: `message` is
//! `"<context>: <error>"`.

use std::fmt;
use std::sync::Arc;

/// The error an infrastructure failure came from.
pub type Source = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Why a case did not pass.
#[derive(Debug, Clone)]
pub enum CaseError {
    /// `message` is one line (expected vs observed); `detail` may be long. `source` is the
    /// error behind an infrastructure failure ([`CaseError::infra`]).
    Failed {
        message: String,
        detail: String,
        source: Option<Source>,
    },
    /// The case does not apply here; the reason is shown on TestGrid.
    Skipped(String),
}

impl CaseError {
    pub fn failed(message: impl Into<String>) -> Self {
        CaseError::Failed {
            message: message.into(),
            detail: String::new(),
            source: None,
        }
    }

    pub fn with_detail(message: impl Into<String>, detail: impl Into<String>) -> Self {
        CaseError::Failed {
            message: message.into(),
            detail: detail.into(),
            source: None,
        }
    }

    /// Wraps an infrastructure error (API call, mock control) as a failure that keeps it as
    /// its source; the message reads `"<context>: <err>"`.
    pub fn infra<E>(context: &str, err: E) -> Self
    where
        E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    {
        let source: Source = Arc::from(err.into());
        CaseError::Failed {
            message: format!("{context}: {source}"),
            detail: String::new(),
            source: Some(source),
        }
    }

    /// The same failure with its message rewritten by `f` (a context prefix); a skip stays
    /// as it is.
    pub fn map_message(self, f: impl FnOnce(&str) -> String) -> Self {
        match self {
            CaseError::Failed {
                message,
                detail,
                source,
            } => CaseError::Failed {
                message: f(&message),
                detail,
                source,
            },
            skipped => skipped,
        }
    }

    /// The same failure with `more` appended to its detail (a log tail, a journal dump);
    /// a skip stays as it is.
    pub fn and_detail(self, more: impl FnOnce(&str) -> String) -> Self {
        match self {
            CaseError::Failed {
                message,
                detail,
                source,
            } => {
                let detail = more(&detail);
                CaseError::Failed {
                    message,
                    detail,
                    source,
                }
            }
            skipped => skipped,
        }
    }
}

/// Two errors are equal when they read the same (the source is not compared).
impl PartialEq for CaseError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                CaseError::Failed {
                    message: m1,
                    detail: d1,
                    ..
                },
                CaseError::Failed {
                    message: m2,
                    detail: d2,
                    ..
                },
            ) => m1 == m2 && d1 == d2,
            (CaseError::Skipped(a), CaseError::Skipped(b)) => a == b,
            _ => false,
        }
    }
}

impl fmt::Display for CaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaseError::Failed {
                message, detail, ..
            } if detail.is_empty() => f.write_str(message),
            CaseError::Failed {
                message, detail, ..
            } => write!(f, "{message}\n{detail}"),
            CaseError::Skipped(why) => write!(f, "skipped: {why}"),
        }
    }
}

impl std::error::Error for CaseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CaseError::Failed {
                source: Some(s), ..
            } => Some(s.as_ref() as &(dyn std::error::Error + 'static)),
            _ => None,
        }
    }
}

/// Fails the case with `expected ..., observed ...` unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::CaseError::failed(format!($($fmt)+)));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infra_keeps_its_source_and_reads_as_before() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let err = CaseError::infra("starting mock AWS", io);
        assert_eq!(err.to_string(), "starting mock AWS: refused");
        let source = std::error::Error::source(&err).expect("a source");
        assert_eq!(source.to_string(), "refused");
        assert_eq!(err, CaseError::failed("starting mock AWS: refused"));
    }

    #[test]
    fn strings_are_sources_too_and_skips_read_as_skips() {
        let err = CaseError::infra("listing", "boom".to_string());
        assert_eq!(err.to_string(), "listing: boom");
        let skip = CaseError::Skipped("no routes".into());
        assert_eq!(skip.to_string(), "skipped: no routes");
        assert!(std::error::Error::source(&skip).is_none());
    }

    #[test]
    fn detail_is_appended_to_failures_only() {
        let err = CaseError::with_detail("m", "d").and_detail(|d| format!("{d}+log"));
        assert_eq!(err, CaseError::with_detail("m", "d+log"));
        let skip = CaseError::Skipped("x".into()).and_detail(|d| format!("{d}+log"));
        assert_eq!(skip, CaseError::Skipped("x".into()));
    }
}
