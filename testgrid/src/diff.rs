//! Comparing two runs: what broke, what got fixed, what flaked, what got slower.
//!
//! Why: comparing a CCM release against the previous one (or a run against last night's)
//! is otherwise done by eye on TestGrid (reference §7, "Comparing runs is manual"). Rows are
//! matched by TestGrid's row name, `suite.case` (§0 rule 1); a row's verdict is its last
//! attempt, and a row with both passing and failing attempts is a flake, as TestGrid's
//! merged cell reads (§2.3).

use std::fmt;
use std::time::Duration;

use crate::read::{CaseRecord, Results, Status};

/// When a case counts as slower: at least this factor *and* this many seconds more, so
/// sub-second noise does not show up.
#[derive(Debug, Clone, Copy)]
pub struct RegressionThreshold {
    pub factor: f64,
    pub min_increase: Duration,
}

impl Default for RegressionThreshold {
    fn default() -> Self {
        Self {
            factor: 1.5,
            min_increase: Duration::from_secs(2),
        }
    }
}

/// A case that got slower.
#[derive(Debug, Clone, PartialEq)]
pub struct Slower {
    pub row: String,
    pub before: Duration,
    pub after: Duration,
}

/// The differences between run A (before) and run B (after), each list sorted by row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diff {
    /// Fails in B; passed (or was skipped) in A, or is new in B.
    pub new_failures: Vec<String>,
    /// Failed in A, passes in B.
    pub fixes: Vec<String>,
    /// Fails in both.
    pub still_failing: Vec<String>,
    /// Mixed pass/fail attempts in B.
    pub flakes: Vec<String>,
    /// Only in B / only in A.
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub slower: Vec<Slower>,
}

impl Diff {
    /// Something that passed before fails now.
    pub fn has_new_failures(&self) -> bool {
        !self.new_failures.is_empty()
    }
}

/// Compares run `a` (before) with run `b` (after).
pub fn diff(a: &Results, b: &Results, threshold: RegressionThreshold) -> Diff {
    let mut d = Diff::default();
    for (row, after) in b {
        if after.is_flaky() {
            d.flakes.push(row.clone());
        }
        let Some(before) = a.get(row) else {
            d.added.push(row.clone());
            if after.failed() {
                d.new_failures.push(row.clone());
            }
            continue;
        };
        match (before.failed(), after.failed()) {
            (false, true) => d.new_failures.push(row.clone()),
            (true, false) if passed(after) => d.fixes.push(row.clone()),
            (true, true) => d.still_failing.push(row.clone()),
            _ => {}
        }
        if let (Some(t0), Some(t1)) = (ran_time(before), ran_time(after)) {
            let slower_enough = t1.as_secs_f64() >= t0.as_secs_f64() * threshold.factor
                && t1.saturating_sub(t0) >= threshold.min_increase;
            if slower_enough {
                d.slower.push(Slower {
                    row: row.clone(),
                    before: t0,
                    after: t1,
                });
            }
        }
    }
    d.removed = a.keys().filter(|r| !b.contains_key(*r)).cloned().collect();
    d
}

fn passed(r: &CaseRecord) -> bool {
    r.last().is_some_and(|a| a.status == Status::Passed)
}

/// Durations are compared only between passing runs: a failure's time says nothing.
fn ran_time(r: &CaseRecord) -> Option<Duration> {
    if passed(r) { r.time() } else { None }
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let section = |f: &mut fmt::Formatter<'_>, title: &str, rows: &[String]| {
            if rows.is_empty() {
                return Ok(());
            }
            writeln!(f, "{title} ({}):", rows.len())?;
            for r in rows {
                writeln!(f, "  {r}")?;
            }
            Ok(())
        };
        section(f, "New failures", &self.new_failures)?;
        section(f, "Fixed", &self.fixes)?;
        section(f, "Still failing", &self.still_failing)?;
        section(f, "Flaky", &self.flakes)?;
        section(f, "Added", &self.added)?;
        section(f, "Removed", &self.removed)?;
        if !self.slower.is_empty() {
            writeln!(f, "Slower ({}):", self.slower.len())?;
            for s in &self.slower {
                writeln!(
                    f,
                    "  {} {:.1}s -> {:.1}s",
                    s.row,
                    s.before.as_secs_f64(),
                    s.after.as_secs_f64()
                )?;
            }
        }
        writeln!(
            f,
            "{} new failures, {} fixed, {} still failing, {} flaky, {} added, {} removed, {} slower",
            self.new_failures.len(),
            self.fixes.len(),
            self.still_failing.len(),
            self.flakes.len(),
            self.added.len(),
            self.removed.len(),
            self.slower.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::Attempt;

    fn rec(row: &str, attempts: &[(Status, u64)]) -> (String, CaseRecord) {
        let (suite, name) = row.split_once('.').unwrap();
        (
            row.to_string(),
            CaseRecord {
                suite: suite.into(),
                name: name.into(),
                attempts: attempts
                    .iter()
                    .map(|&(status, s)| Attempt {
                        status,
                        time: Duration::from_secs(s),
                        message: None,
                        properties: Vec::new(),
                    })
                    .collect(),
            },
        )
    }

    use Status::*;

    #[test]
    fn classifies_every_kind_of_change() {
        let a: Results = [
            rec("s.broke", &[(Passed, 1)]),
            rec("s.fixed", &[(Failed, 1)]),
            rec("s.still", &[(Errored, 1)]),
            rec("s.slow", &[(Passed, 10)]),
            rec("s.noise", &[(Passed, 1)]),
            rec("s.gone", &[(Passed, 1)]),
            rec("s.flaky", &[(Passed, 1)]),
        ]
        .into_iter()
        .collect();
        let b: Results = [
            rec("s.broke", &[(Failed, 1)]),
            rec("s.fixed", &[(Passed, 1)]),
            rec("s.still", &[(Failed, 1)]),
            rec("s.slow", &[(Passed, 20)]),
            rec("s.noise", &[(Passed, 2)]),
            rec("s.new", &[(Failed, 1)]),
            rec("s.flaky", &[(Failed, 1), (Passed, 1)]),
        ]
        .into_iter()
        .collect();
        let d = diff(&a, &b, RegressionThreshold::default());
        assert_eq!(d.new_failures, vec!["s.broke", "s.new"]);
        assert_eq!(d.fixes, vec!["s.fixed"]);
        assert_eq!(d.still_failing, vec!["s.still"]);
        assert_eq!(d.flakes, vec!["s.flaky"]);
        assert_eq!(d.added, vec!["s.new"]);
        assert_eq!(d.removed, vec!["s.gone"]);
        assert_eq!(d.slower.len(), 1, "{:?}", d.slower);
        assert_eq!(d.slower[0].row, "s.slow");
        assert!(d.has_new_failures());
        let text = d.to_string();
        assert!(
            text.contains("New failures (2):\n  s.broke\n  s.new"),
            "{text}"
        );
        assert!(text.contains("s.slow 10.0s -> 20.0s"), "{text}");
    }

    #[test]
    fn identical_runs_have_no_differences() {
        let a: Results = [rec("s.a", &[(Passed, 3)]), rec("s.b", &[(Skipped, 0)])]
            .into_iter()
            .collect();
        let d = diff(&a, &a, RegressionThreshold::default());
        assert_eq!(d, Diff::default());
        assert!(!d.has_new_failures());
    }
}
