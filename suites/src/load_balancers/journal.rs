//! Load-balancer updates as the cloud's journal records them (classified by the harness's
//! cloud backends): when each load balancer's calls started and ended and how many backend
//! writes it got, for LB-24 ([`super::scale`]) to count updates and their overlap.

use ccm_harness::Environment;

pub(crate) use ccm_harness::cloud::LbUpdate;

/// Where the load-balancer journal stands now, for [`lb_update_spans`].
pub(crate) fn lb_journal_mark(env: &Environment) -> u64 {
    env.cloud().journal_mark()
}

/// Load-balancer calls after `mark`, grouped per load balancer (each cloud tells which load
/// balancer a call names), keeping the load balancers that got a backend write.
pub(crate) fn lb_update_spans(env: &Environment, mark: u64) -> Vec<LbUpdate> {
    env.cloud().lb_updates_since(mark)
}

/// The largest number of updates whose [start, end] spans overlap at one instant.
pub(crate) fn max_overlap(updates: &[LbUpdate]) -> usize {
    let mut edges: Vec<(jiff::Timestamp, i32)> = updates
        .iter()
        .flat_map(|u| [(u.start, 1), (u.end, -1)])
        .collect();
    // Starts before ends at the same instant: touching spans count as overlapping.
    edges.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let (mut now, mut max) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        max = max.max(now);
    }
    usize::try_from(max).unwrap_or(0)
}

#[cfg(test)]
mod lb24_tests {
    use super::*;

    fn at(ms: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
    }

    fn span(start: i64, end: i64) -> LbUpdate {
        LbUpdate {
            start: at(start),
            end: at(end),
            writes: 1,
        }
    }

    #[test]
    fn overlap_counts_spans_open_at_the_same_instant() {
        assert_eq!(max_overlap(&[]), 0);
        assert_eq!(max_overlap(&[span(0, 10), span(20, 30)]), 1);
        assert_eq!(max_overlap(&[span(0, 10), span(5, 30), span(8, 9)]), 3);
        assert_eq!(max_overlap(&[span(0, 10), span(10, 20)]), 2);
    }
}
