//! Splitting one run's cases over N processes or Prow jobs (`run --shard K/N`,
//! `CCM_CONFORMANCE_SHARD=K/N`), so that the N shards of one case list always partition
//! it: every case in exactly one shard, whatever the machine, because each shard computes
//! the same assignment from the same list.
//!
//! The assignment balances the shards by time: with the durations of an earlier run
//! (`--shard-durations JUNIT`), longest case first, each to the shard with the least time
//! so far (ties: the lower shard); a case the earlier run lacks counts as that run's
//! median. Without durations every case counts the same, which deals the sorted names out
//! in turn. Adding or removing a case moves others between shards, but the N shards of
//! the new list still partition it — what `merge` relies on.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

/// Shard `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not a shard: K/N with 1 <= K <= N, e.g. 2/3");
        let (k, n) = text.trim().split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The shard (1-based) of each name, in the order given. `durations`: case name to time
/// (names it lacks count as its median; empty: every case the same).
pub fn assign(
    names: &[String],
    durations: &BTreeMap<String, Duration>,
    count: usize,
) -> Vec<usize> {
    let count = count.max(1);
    let median = {
        let mut known: Vec<Duration> = durations.values().copied().collect();
        known.sort();
        known
            .get(known.len() / 2)
            .copied()
            .unwrap_or(Duration::from_secs(1))
    };
    let weight = |name: &str| durations.get(name).copied().unwrap_or(median);
    // Longest first; equal ones by name, so the order never depends on the input's.
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| {
        weight(&names[b])
            .cmp(&weight(&names[a]))
            .then_with(|| names[a].cmp(&names[b]))
    });
    let mut load = vec![Duration::ZERO; count];
    let mut out = vec![0; names.len()];
    for i in order {
        let lightest = (0..count)
            .min_by_key(|&s| (load[s], s))
            .expect("at least one shard");
        load[lightest] += weight(&names[i]);
        out[i] = lightest + 1;
    }
    out
}

/// The names of `names` that belong to `shard`, in the order given.
pub fn select<'a>(
    names: &'a [String],
    durations: &BTreeMap<String, Duration>,
    shard: Shard,
) -> Vec<&'a String> {
    let of = assign(names, durations, shard.count);
    names
        .iter()
        .zip(of)
        .filter(|(_, s)| *s == shard.index)
        .map(|(n, _)| n)
        .collect()
}

/// Case name to the time its last attempt took, from a JUnit file or a run's directory.
pub fn durations_from(junit: &Path) -> Result<BTreeMap<String, Duration>, String> {
    let results = ccm_testgrid::read::read_results(junit).map_err(|e| e.to_string())?;
    Ok(results
        .values()
        .filter_map(|r| r.time().map(|t| (r.name.clone(), t)))
        .collect())
}

/// A digest of the whole case list (before sharding), so `merge` can tell shards of
/// different lists apart: FNV-1a over the sorted names.
pub fn list_digest(names: &[String]) -> String {
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for name in sorted {
        for b in name.bytes().chain(std::iter::once(b'\n')) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("case {i:03}")).collect()
    }

    fn partitions(names: &[String], durations: &BTreeMap<String, Duration>, count: usize) {
        let mut seen: Vec<&String> = Vec::new();
        for k in 1..=count {
            seen.extend(select(names, durations, Shard { index: k, count }));
        }
        seen.sort();
        let mut all: Vec<&String> = names.iter().collect();
        all.sort();
        assert_eq!(seen, all, "{count} shards");
    }

    #[test]
    fn shards_parse_and_refuse_the_impossible() {
        assert_eq!("2/3".parse(), Ok(Shard { index: 2, count: 3 }));
        assert_eq!(Shard { index: 1, count: 1 }.to_string(), "1/1");
        for bad in ["0/3", "4/3", "x/y", "3", "1/0", "", "-1/3", "1/3/5"] {
            let err = bad.parse::<Shard>().unwrap_err();
            assert!(err.contains("K/N"), "{bad}: {err}");
        }
    }

    #[test]
    fn every_case_is_in_exactly_one_shard_with_or_without_durations() {
        let list = names(80);
        let mut durations = BTreeMap::new();
        for (i, n) in list.iter().enumerate().filter(|(i, _)| i % 3 != 0) {
            durations.insert(
                n.clone(),
                Duration::from_millis(100 + (i as u64 * 37) % 900),
            );
        }
        for count in 1..=7 {
            partitions(&list, &BTreeMap::new(), count);
            partitions(&list, &durations, count);
        }
    }

    #[test]
    fn a_list_with_a_case_added_or_removed_is_still_partitioned() {
        let mut list = names(30);
        list.push("case new".into());
        partitions(&list, &BTreeMap::new(), 3);
        list.remove(4);
        list.remove(0);
        partitions(&list, &BTreeMap::new(), 3);
    }

    #[test]
    fn the_assignment_does_not_depend_on_the_input_order() {
        let list = names(20);
        let mut reversed = list.clone();
        reversed.reverse();
        let a: Vec<&String> = select(&list, &BTreeMap::new(), Shard { index: 2, count: 3 });
        let mut b: Vec<&String> = select(&reversed, &BTreeMap::new(), Shard { index: 2, count: 3 });
        b.sort();
        assert_eq!(a, b);
    }

    #[test]
    fn durations_balance_the_shards() {
        // One long case and many short ones: the long one gets a shard of its own.
        let list = names(9);
        let mut durations: BTreeMap<String, Duration> = list
            .iter()
            .map(|n| (n.clone(), Duration::from_secs(10)))
            .collect();
        durations.insert(list[4].clone(), Duration::from_secs(80));
        let shard_of = assign(&list, &durations, 2);
        let long = shard_of[4];
        assert!(
            shard_of
                .iter()
                .enumerate()
                .all(|(i, s)| i == 4 || *s != long)
        );
        // Without durations: dealt out in turn, sizes differing by at most one.
        let even = assign(&list, &BTreeMap::new(), 2);
        let ones = even.iter().filter(|s| **s == 1).count();
        assert_eq!((ones, 9 - ones), (5, 4));
    }

    #[test]
    fn the_list_digest_ignores_order_and_sees_changes() {
        let list = names(5);
        let mut other = list.clone();
        other.reverse();
        assert_eq!(list_digest(&list), list_digest(&other));
        other.push("case extra".into());
        assert_ne!(list_digest(&list), list_digest(&other));
    }
}
