//! What a conformance case is: a name in the upstream e2e style, tags, and an async body
//! that gets a ready [`Environment`](crate::Environment) and returns pass, fail or skip.

use std::future::Future;
use std::pin::Pin;

use crate::cloud::Provider;
use crate::env::Environment;

/// Tags shown in the case name, as upstream e2e tags read on TestGrid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// Meaningful against a real cluster and cloud too.
    Conformance,
    /// Needs cloud control or fault injection: only against our mocks.
    Mock,
    /// Takes more than a few seconds on purpose.
    Slow,
}

impl Tag {
    pub fn label(self) -> &'static str {
        match self {
            Tag::Conformance => "[Conformance]",
            Tag::Mock => "[Mock]",
            Tag::Slow => "[Slow]",
        }
    }
}

/// Why a case did not pass.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseError {
    /// `message` is one line (expected vs observed); `detail` may be long.
    Failed { message: String, detail: String },
    /// The case does not apply here; the reason is shown on TestGrid.
    Skipped(String),
}

impl CaseError {
    pub fn failed(message: impl Into<String>) -> Self {
        CaseError::Failed {
            message: message.into(),
            detail: String::new(),
        }
    }

    pub fn with_detail(message: impl Into<String>, detail: impl Into<String>) -> Self {
        CaseError::Failed {
            message: message.into(),
            detail: detail.into(),
        }
    }

    /// Wraps an infrastructure error (API call, mock control) as a failure.
    pub fn infra(context: &str, err: impl std::fmt::Display) -> Self {
        CaseError::failed(format!("{context}: {err}"))
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

pub type CaseFuture<'a> = Pin<Box<dyn Future<Output = Result<CaseMetrics, CaseError>> + Send + 'a>>;
/// A case body. It borrows the environment the runner built for it.
pub type CaseFn = for<'a> fn(&'a mut Environment) -> CaseFuture<'a>;

/// Numeric results a case reports (JUnit properties, graphed by TestGrid).
pub type CaseMetrics = Vec<(String, String)>;

/// One conformance case, instantiated once per provider.
#[derive(Clone)]
pub struct Case {
    /// Stable identifier from `shared/reference/ccm-behaviour.md` §4, e.g. `NI-01`.
    pub id: &'static str,
    /// Suite, e.g. `NodeInit`.
    pub suite: &'static str,
    /// What it checks, in the e2e style ("removes the uninitialized taint").
    pub title: &'static str,
    pub tags: &'static [Tag],
    /// Extra CCM flags this case needs (e.g. a short address-sync period).
    pub ccm_args: &'static [&'static str],
    /// Start the CCM before the body runs (most cases); false when the body does it.
    pub start_ccm: bool,
    pub run: CaseFn,
}

impl Case {
    /// `[sig-cloud-provider] [openstack] NodeInit removes ... (NI-01) [Conformance]`
    pub fn full_name(&self, provider: Provider) -> String {
        let tags: Vec<&str> = self.tags.iter().map(|t| t.label()).collect();
        format!(
            "[sig-cloud-provider] [{}] {} {} ({}) {}",
            provider.name(),
            self.suite,
            self.title,
            self.id,
            tags.join(" ")
        )
        .trim_end()
        .to_string()
    }

    pub fn is_mock_only(&self) -> bool {
        self.tags.contains(&Tag::Mock)
    }
}
