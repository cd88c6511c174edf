//! Load-balancer updates as the mock clouds' journals record them: when each load balancer's
//! calls started and ended and how many backend writes it got, for LB-24 ([`super::scale`])
//! to count updates and their overlap.

use ccm_harness::Environment;

/// One Service's load-balancer update as the cloud journal shows it.
#[derive(Debug, Clone)]
pub(crate) struct LbUpdate {
    /// First and last load-balancer call attributed to this load balancer.
    pub start: jiff::Timestamp,
    pub end: jiff::Timestamp,
    /// Backend writes (member/target/instance registrations).
    pub writes: usize,
}

/// Where the load-balancer journal stands now, for [`lb_update_spans`].
pub(crate) fn lb_journal_mark(env: &Environment) -> u64 {
    match env.cloud() {
        ccm_harness::CloudControl::OpenStack(m) => m.admin().journal().last_seq(),
        ccm_harness::CloudControl::Aws(m) => m.admin().journal().last_seq(),
        ccm_harness::CloudControl::Vsphere(m) => m.mock.admin().journal().last_seq(),
    }
}

/// Load-balancer calls after `mark`, grouped per load balancer, keeping the load balancers
/// that got a backend write. OpenStack: calls name the LB by id, by name (`?name=`) or by
/// one of its pools; AWS: by `LoadBalancerName`, `LoadBalancerArn` or `TargetGroupArn`.
pub(crate) fn lb_update_spans(env: &Environment, mark: u64) -> Vec<LbUpdate> {
    use std::collections::BTreeMap;
    // (time, text naming the LB, is a backend write)
    let calls: Vec<(jiff::Timestamp, String, bool)> = match env.cloud() {
        ccm_harness::CloudControl::OpenStack(m) => m
            .admin()
            .journal()
            .since(mark)
            .into_iter()
            .filter(|e| e.service == "load-balancer")
            .map(|e| {
                let write = e.method == "PUT" && e.path.ends_with("/members");
                (e.time, format!("{}?{}", e.path, e.query), write)
            })
            .collect(),
        ccm_harness::CloudControl::Aws(m) => m
            .admin()
            .journal()
            .since(mark)
            .into_iter()
            .filter(|e| e.service == "elb" || e.service == "elbv2")
            .map(|e| {
                let write = [
                    "RegisterInstancesWithLoadBalancer",
                    "DeregisterInstancesFromLoadBalancer",
                    "RegisterTargets",
                    "DeregisterTargets",
                ]
                .iter()
                .any(|a| e.query.contains(&format!("Action={a}")));
                (e.time, e.query.clone(), write)
            })
            .collect(),
        ccm_harness::CloudControl::Vsphere(_) => Vec::new(),
    };
    // Keys (ids, names, pool ids) that identify each load balancer in a call.
    let keys: Vec<(String, Vec<String>)> = match env.cloud() {
        ccm_harness::CloudControl::OpenStack(m) => m
            .admin()
            .load_balancers()
            .iter()
            .map(|lb| {
                let id = lb["id"].as_str().unwrap_or_default().to_string();
                let mut k = vec![id.clone()];
                k.extend(lb["name"].as_str().map(str::to_string));
                k.extend(
                    lb["pools"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|p| p["id"].as_str().map(str::to_string)),
                );
                (id, k)
            })
            .collect(),
        ccm_harness::CloudControl::Aws(_) => env
            .cloud()
            .load_balancers()
            .into_iter()
            .map(|lb| (lb.id.clone(), vec![lb.id, lb.name]))
            .collect(),
        ccm_harness::CloudControl::Vsphere(_) => Vec::new(),
    };
    let mut spans: BTreeMap<String, LbUpdate> = BTreeMap::new();
    for (time, text, write) in calls {
        // Whole tokens only: `web-1` must not match `web-10`.
        let tokens: Vec<&str> = text.split(['/', '?', '&', '=']).collect();
        let Some((id, _)) = keys.iter().find(|(_, k)| {
            k.iter()
                .any(|k| !k.is_empty() && tokens.contains(&k.as_str()))
        }) else {
            continue;
        };
        let span = spans.entry(id.clone()).or_insert(LbUpdate {
            start: time,
            end: time,
            writes: 0,
        });
        span.start = span.start.min(time);
        span.end = span.end.max(time);
        span.writes += usize::from(write);
    }
    spans.into_values().filter(|u| u.writes > 0).collect()
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
