//! Seed files: one JSON document that sets a mock's initial state, fault rules and
//! lifecycle modes, so a scenario ("three nodes, the second one's lookups throttled, load
//! balancers stuck pending") can be written down once and started with
//! `ccm-conformance mock <cloud> --seed FILE`. The cloud-independent parts are parsed and
//! checked here; `state` is the cloud's own (e.g. OpenStack's `{"servers": [...]}`).
//!
//! ```json
//! {
//!   "state": { "servers": [ { "name": "node-0", "az": "nova" } ] },
//!   "faults": [
//!     { "service": "compute", "path": "/servers/", "kind": "throttle", "count": 2 },
//!     { "kind": "latency", "latency_ms": 20, "jitter_ms": 10, "probability": 0.25 }
//!   ],
//!   "fault_seed": 42,
//!   "lifecycle": {
//!     "default": { "mode": "immediate" },
//!     "types": { "loadbalancer": { "mode": "reads", "n": 2 } },
//!     "ids": { "my-lb-id": { "mode": "stuck" } }
//!   }
//! }
//! ```
//!
//! Every key is optional; unknown keys are refused (a typo must not be silently ignored).
//! Fault rules are in [`crate::faults`]; lifecycle modes in [`crate::lifecycle`]. Whether a
//! lifecycle type name is known is the cloud's check ([`LifecycleSeed::policies`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::faults::{FaultError, FaultJson, Faults};
use crate::lifecycle::{LifecycleError, Mode, Policies};

/// Why a seed file was refused.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    #[error("reading seed file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("seed file {path}: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("seed file {path}: faults: {source}")]
    Fault { path: PathBuf, source: FaultError },
    #[error("seed file {path}: lifecycle {key}: {source}")]
    Lifecycle {
        path: PathBuf,
        key: String,
        source: LifecycleError,
    },
    #[error("seed file {path}: lifecycle type {kind:?} is not one of {known}")]
    LifecycleType {
        path: PathBuf,
        kind: String,
        known: String,
    },
}

/// Lifecycle modes: a default, by resource type, and by resource id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LifecycleSeed {
    #[serde(default)]
    pub default: Option<Mode>,
    #[serde(default)]
    pub types: BTreeMap<String, Mode>,
    #[serde(default)]
    pub ids: BTreeMap<String, Mode>,
}

impl LifecycleSeed {
    /// The policies, with `types` checked against the cloud's `known` type names.
    pub fn policies(&self, known: &[&str]) -> Result<Policies, SeedError> {
        self.policies_at(Path::new("<seed>"), known)
    }

    fn policies_at(&self, path: &Path, known: &[&str]) -> Result<Policies, SeedError> {
        let check = |key: String, mode: Mode| {
            mode.validate().map_err(|source| SeedError::Lifecycle {
                path: path.to_path_buf(),
                key,
                source,
            })
        };
        let mut p = Policies::default();
        if let Some(mode) = self.default {
            p.default = check("default".into(), mode)?;
        }
        for (kind, mode) in &self.types {
            if !known.contains(&kind.as_str()) {
                return Err(SeedError::LifecycleType {
                    path: path.to_path_buf(),
                    kind: kind.clone(),
                    known: known.join(", "),
                });
            }
            p.by_type
                .insert(kind.clone(), check(format!("types.{kind}"), *mode)?);
        }
        for (id, mode) in &self.ids {
            p.by_id
                .insert(id.clone(), check(format!("ids.{id}"), *mode)?);
        }
        Ok(p)
    }
}

/// A seed file; `S` is the cloud's own `state` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedFile<S = serde_json::Value> {
    #[serde(default)]
    pub state: S,
    #[serde(default)]
    /// Checked by [`SeedFile::parse`] (errors name the rule's index).
    pub faults: Vec<FaultJson>,
    #[serde(default)]
    pub fault_seed: Option<u64>,
    #[serde(default)]
    pub lifecycle: LifecycleSeed,
}

impl<S: DeserializeOwned + Default> SeedFile<S> {
    /// Reads and checks a seed file (fault rules compile, lifecycle modes are usable).
    pub fn load(path: &Path) -> Result<Self, SeedError> {
        let text = std::fs::read(path).map_err(|source| SeedError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses and checks seed JSON; `path` only names the source in errors.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self, SeedError> {
        let seed: SeedFile<S> =
            serde_json::from_slice(bytes).map_err(|source| SeedError::Parse {
                path: path.to_path_buf(),
                source,
            })?;
        // Dry run into a throwaway engine: the same checks the admin API makes.
        Faults::new()
            .try_add_all(seed.faults.clone())
            .map_err(|source| SeedError::Fault {
                path: path.to_path_buf(),
                source,
            })?;
        seed.lifecycle.policies_at(path, &[]).or_else(|e| match e {
            // Type names are the cloud's to check; only the modes are checked here.
            SeedError::LifecycleType { .. } => Ok(Policies::default()),
            other => Err(other),
        })?;
        Ok(seed)
    }
}

impl<S> SeedFile<S> {
    /// Installs the seed's fault rules and RNG seed into `faults` (all rules or none).
    pub fn apply_faults(&self, faults: &Faults) -> Result<Vec<u64>, FaultError> {
        if let Some(seed) = self.fault_seed {
            faults.set_seed(seed);
        }
        faults.try_add_all(self.faults.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct State {
        #[serde(default)]
        servers: Vec<String>,
    }

    fn parse(json: &str) -> Result<SeedFile<State>, SeedError> {
        SeedFile::parse(json.as_bytes(), Path::new("test.json"))
    }

    #[test]
    fn full_example_parses_and_applies() {
        let seed = parse(
            r#"{"state":{"servers":["a"]},
                "faults":[{"kind":"throttle","count":2},{"latency_ms":5}],
                "fault_seed":42,
                "lifecycle":{"default":{"mode":"stuck"},
                             "types":{"loadbalancer":{"mode":"reads","n":2}},
                             "ids":{"x":{"mode":"error"}}}}"#,
        )
        .expect("valid");
        assert_eq!(seed.state.servers, vec!["a".to_string()]);
        let faults = Faults::new();
        assert_eq!(seed.apply_faults(&faults).map(|v| v.len()).ok(), Some(2));
        assert_eq!(faults.seed(), 42);
        let p = seed
            .lifecycle
            .policies(&["loadbalancer"])
            .expect("policies");
        assert_eq!(p.default, Mode::Stuck);
        assert_eq!(p.mode_for(&["loadbalancer"], "y"), Mode::Reads { n: 2 });
        assert_eq!(p.mode_for(&["loadbalancer"], "x"), Mode::Error);
        assert!(matches!(
            seed.lifecycle.policies(&["pool"]),
            Err(SeedError::LifecycleType { .. })
        ));
    }

    #[test]
    fn empty_object_is_an_empty_seed() {
        let seed = parse("{}").expect("valid");
        assert!(seed.faults.is_empty() && seed.state.servers.is_empty());
    }

    #[test]
    fn bad_seeds_are_refused_with_the_reason() {
        for (json, want) in [
            ("not json", "test.json"),
            (r#"{"fault":[]}"#, "unknown field"),
            (r#"{"state":{"server":[]}}"#, "unknown field"),
            (r#"{"faults":[{"status":200}]}"#, "fault rule 0"),
            (
                r#"{"faults":[{"status":500},{"path":"("}]}"#,
                "fault rule 1",
            ),
            (
                r#"{"lifecycle":{"default":{"mode":"seconds","t":-1}}}"#,
                "lifecycle default",
            ),
            (r#"{"fault_seed":-3}"#, "expected u64"),
        ] {
            let err = parse(json).expect_err(json).to_string();
            assert!(err.contains(want), "{json}: {err}");
        }
        let missing = SeedFile::<State>::load(Path::new("/nonexistent/seed.json"));
        assert!(matches!(missing, Err(SeedError::Read { .. })));
    }
}
