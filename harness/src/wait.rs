//! Bounded waits. Cases never sleep and then assert: they poll a probe until it says
//! done or the deadline passes, and a timeout reports the last thing observed.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::case::CaseError;

/// What a probe saw.
pub enum Probe<T> {
    /// The condition holds; the value is handed back.
    Done(T),
    /// Not yet; the text says what was observed (used in the failure message).
    Pending(String),
}

const POLL: Duration = Duration::from_millis(50);

/// Polls `probe` until it returns `Done` or `timeout` passes.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, probe: F) -> Result<T, CaseError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Probe<T>, CaseError>>,
{
    eventually_every(what, timeout, POLL, probe).await
}

/// [`eventually`] polling every `period` (external clusters: a real API server and a
/// real cloud get polled gently over minutes).
pub async fn eventually_every<T, F, Fut>(
    what: &str,
    timeout: Duration,
    period: Duration,
    mut probe: F,
) -> Result<T, CaseError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Probe<T>, CaseError>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last = match probe().await? {
            Probe::Done(v) => return Ok(v),
            Probe::Pending(seen) => seen,
        };
        if Instant::now() >= deadline {
            return Err(CaseError::with_detail(
                format!(
                    "timed out after {timeout:?} waiting for {what}; observed: {}",
                    first_line(&last)
                ),
                last,
            ));
        }
        tokio::time::sleep(period).await;
    }
}

/// Checks that `probe` keeps returning `Done` for the whole `period` (e.g. "the taint is
/// still there"): the first `Pending` fails the case with what was observed.
pub async fn holds_for<F, Fut>(what: &str, period: Duration, mut probe: F) -> Result<(), CaseError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Probe<()>, CaseError>>,
{
    let end = Instant::now() + period;
    loop {
        if let Probe::Pending(seen) = probe().await? {
            return Err(CaseError::with_detail(
                format!(
                    "expected {what} for {period:?}; observed: {}",
                    first_line(&seen)
                ),
                seen,
            ));
        }
        if Instant::now() >= end {
            return Ok(());
        }
        tokio::time::sleep(POLL * 2).await;
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn eventually_returns_value_and_times_out_with_observation() {
        let mut n = 0;
        let v = eventually("n to reach 3", Duration::from_secs(5), || {
            n += 1;
            let n = n;
            async move {
                Ok(if n >= 3 {
                    Probe::Done(n)
                } else {
                    Probe::Pending(format!("n={n}"))
                })
            }
        })
        .await
        .unwrap();
        assert_eq!(v, 3);
        let err = eventually::<(), _, _>("never", Duration::from_millis(120), || async {
            Ok(Probe::Pending("still waiting".into()))
        })
        .await
        .unwrap_err();
        match err {
            CaseError::Failed { message, .. } => {
                assert!(message.contains("still waiting"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn holds_for_fails_on_first_violation() {
        let mut n = 0;
        let err = holds_for("n below 2", Duration::from_secs(5), || {
            n += 1;
            let n = n;
            async move {
                Ok(if n < 2 {
                    Probe::Done(())
                } else {
                    Probe::Pending(format!("n={n}"))
                })
            }
        })
        .await
        .unwrap_err();
        assert!(matches!(err, CaseError::Failed { .. }));
        holds_for("always", Duration::from_millis(150), || async {
            Ok(Probe::Done(()))
        })
        .await
        .unwrap();
    }
}
