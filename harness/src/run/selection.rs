//! Which cases a run runs: the providers, `--focus`/`--skip`, the failed cases of an
//! earlier run (`--rerun-failed`) and this process's shard (`--shard K/N`). Kept apart
//! from the request so that the rule "kept by every filter, then dealt to shards" is
//! written once: every shard of a run must compute the same list from the same input (the
//! list's digest in `metadata.json` is how `merge` checks it), whether the filters came
//! from flags or from the environment. libtest's own filters (`cargo test -- NAME`,
//! `--exact`, `--skip`) apply after it, in the runner.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use regex::Regex;

use crate::case::Case;
use crate::provider::Provider;
use crate::shard::Shard;

/// The cases of an earlier run to run again.
#[derive(Debug, Clone)]
pub struct Rerun {
    /// The JUnit file or artifacts directory they were read from.
    pub from: PathBuf,
    /// Full names of the cases whose last attempt failed or errored there.
    pub failed: BTreeSet<String>,
}

/// The case filters of a run; the default keeps every case.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only cases whose full name matches.
    pub focus: Option<Regex>,
    /// Leave out cases whose full name matches.
    pub skip: Option<Regex>,
    /// Only these cases.
    pub rerun: Option<Rerun>,
    /// Only this shard of what the filters keep.
    pub shard: Option<Shard>,
    /// Case name to an earlier run's duration, to balance the shards.
    pub shard_durations: BTreeMap<String, Duration>,
}

/// The providers a list of names (each possibly comma-separated) asks for, in the order
/// given without repeats; no names: every provider.
pub fn parse_providers(names: &[String]) -> Result<Vec<Provider>, String> {
    let joined = names.join(",");
    if joined.split(',').all(|n| n.trim().is_empty()) {
        return Ok(Provider::all().to_vec());
    }
    Provider::parse_list(&joined)
}

impl Selection {
    /// Whether `--focus`, `--skip` and `--rerun-failed` keep the case `name` (its shard
    /// aside).
    pub fn keeps(&self, name: &str) -> bool {
        self.rerun.as_ref().is_none_or(|r| r.failed.contains(name))
            && self.focus.as_ref().is_none_or(|f| f.is_match(name))
            && !self.skip.as_ref().is_some_and(|s| s.is_match(name))
    }

    /// The full names of every case of `providers` the filters keep, in run order: the list
    /// a run (or each of its shards) starts from.
    pub fn kept_names(&self, cases: &[Case], providers: &[Provider]) -> Vec<String> {
        providers
            .iter()
            .flat_map(|&p| cases.iter().map(move |c| c.full_name(p)))
            .filter(|name| self.keeps(name))
            .collect()
    }

    /// What this process runs: the kept cases, narrowed to its shard.
    pub fn chosen(&self, cases: &[Case], providers: &[Provider]) -> BTreeSet<String> {
        let kept = self.kept_names(cases, providers);
        match self.shard {
            Some(shard) => crate::shard::select(&kept, &self.shard_durations, shard)
                .into_iter()
                .cloned()
                .collect(),
            None => kept.into_iter().collect(),
        }
    }

    /// `metadata.json` entries of a shard: `shard` (K/N) and `case-list`, the digest of the
    /// list every shard of the run starts from, which `merge` compares. None unsharded.
    pub fn shard_metadata(&self, cases: &[Case], providers: &[Provider]) -> Vec<(String, String)> {
        let Some(shard) = self.shard else {
            return Vec::new();
        };
        let list = self.kept_names(cases, providers);
        vec![
            ("shard".into(), shard.to_string()),
            ("case-list".into(), crate::shard::list_digest(&list)),
        ]
    }

    /// Names `--rerun-failed` asks for that are not cases of `providers` here (renamed or
    /// removed since), to warn about.
    pub fn unknown_reruns(&self, cases: &[Case], providers: &[Provider]) -> Vec<String> {
        let Some(rerun) = &self.rerun else {
            return Vec::new();
        };
        let known: BTreeSet<String> = providers
            .iter()
            .flat_map(|&p| cases.iter().map(move |c| c.full_name(p)))
            .collect();
        rerun.failed.difference(&known).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn no_provider_names_means_every_provider() {
        assert_eq!(parse_providers(&[]).unwrap(), Provider::all().to_vec());
        assert_eq!(
            parse_providers(&names(&[""])).unwrap(),
            Provider::all().to_vec()
        );
        let two = parse_providers(&names(&["aws,openstack", "aws"])).unwrap();
        let two: Vec<&str> = two.iter().map(|p| p.name()).collect();
        assert_eq!(two, ["aws", "openstack"]);
        assert!(parse_providers(&names(&["nonesuch"])).is_err());
    }

    fn case(id: &'static str) -> Case {
        Case {
            id,
            suite: "NodeInit",
            title: "does something",
            tags: &[],
            ccm_args: &[],
            start_ccm: false,
            needs: &[],
            run: |_| Box::pin(async { Ok(Vec::new()) }),
        }
    }

    #[test]
    fn the_shards_partition_what_the_filters_keep_and_share_its_digest() {
        let cases: Vec<Case> = ["NI-01", "NI-02", "NI-03", "NI-04", "NI-05"]
            .into_iter()
            .map(case)
            .collect();
        let providers = parse_providers(&names(&["aws,gcp"])).unwrap();
        let filters = Selection {
            skip: Some(Regex::new(r"\(NI-03\)").unwrap()),
            ..Selection::default()
        };
        let kept = filters.kept_names(&cases, &providers);
        assert_eq!(kept.len(), 8);
        assert!(filters.shard_metadata(&cases, &providers).is_empty());
        let mut seen = Vec::new();
        let mut digests = BTreeSet::new();
        for index in 1..=3 {
            let shard = Selection {
                shard: Some(Shard { index, count: 3 }),
                ..filters.clone()
            };
            seen.extend(shard.chosen(&cases, &providers));
            let meta = shard.shard_metadata(&cases, &providers);
            assert_eq!(meta[0], ("shard".to_string(), format!("{index}/3")));
            digests.insert(meta[1].clone());
        }
        seen.sort();
        let mut all = kept.clone();
        all.sort();
        assert_eq!(seen, all, "every kept case in exactly one shard");
        assert_eq!(digests.len(), 1, "one list, one digest");
    }

    #[test]
    fn every_filter_must_keep_a_case() {
        let mut s = Selection::default();
        assert!(s.keeps("[aws] NodeInit x (NI-01)"));
        s.focus = Some(Regex::new("NodeInit").unwrap());
        s.skip = Some(Regex::new(r"\(NI-02\)").unwrap());
        assert!(s.keeps("[aws] NodeInit x (NI-01)"));
        assert!(!s.keeps("[aws] NodeInit y (NI-02)"));
        assert!(!s.keeps("[aws] LoadBalancer z (LB-01)"));
        s.rerun = Some(Rerun {
            from: PathBuf::from("junit.xml"),
            failed: ["[aws] NodeInit w (NI-03)".to_string()].into(),
        });
        assert!(!s.keeps("[aws] NodeInit x (NI-01)"));
        assert!(s.keeps("[aws] NodeInit w (NI-03)"));
    }
}
