//! What goes wrong in the cloud during a soak: a named preset or a fault file, as rules of
//! the mocks' shared fault engine (`mock_cloud::faults`), each firing by probability from
//! the engine's seeded generator.
//!
//! - `light`: what a healthy public cloud does on a busy day — now and then a 500, the
//!   cloud's own throttling answer, a little latency with jitter.
//! - `heavy`: a bad day — more of each, connections reset without an answer, and reads of
//!   a resource created moments ago answering not-found (eventual consistency, which real
//!   EC2, ARM and Octavia show).
//! - a file: a JSON array of fault rules in the mocks' wire form (`FaultJson`, the same
//!   rules `POST <admin>/faults` takes), or an object with such an array under `faults` (a
//!   mock seed file's form).

use mock_cloud::{Fault, FaultJson, FaultKind};

/// A named set of fault rules.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultPlan {
    /// `light`, `heavy`, `none` or the file's path.
    pub name: String,
    pub rules: Vec<FaultJson>,
}

/// A rule of `kind` firing with `probability`, its answers marked as the soak's.
pub fn rule(kind: FaultKind, probability: f64) -> FaultJson {
    FaultJson {
        kind: Some(kind),
        probability: Some(probability),
        message: Some("injected by ccm-conformance soak".into()),
        ..FaultJson::default()
    }
}

fn error(status: u16, probability: f64) -> FaultJson {
    FaultJson {
        status,
        ..rule(FaultKind::Error, probability)
    }
}

fn latency(ms: u64, jitter: u64, probability: f64) -> FaultJson {
    FaultJson {
        latency_ms: Some(ms),
        jitter_ms: Some(jitter),
        ..rule(FaultKind::Latency, probability)
    }
}

impl FaultPlan {
    /// `none`, `light`, `heavy`, or the path of a fault file; anything else is an error
    /// naming the presets.
    pub fn parse(what: &str) -> Result<FaultPlan, String> {
        let rules = match what {
            "none" => Vec::new(),
            "light" => vec![
                error(500, 0.02),
                rule(FaultKind::Throttle, 0.02),
                latency(5, 40, 0.2),
            ],
            "heavy" => vec![
                error(500, 0.05),
                error(503, 0.03),
                rule(FaultKind::Throttle, 0.06),
                rule(FaultKind::Reset, 0.02),
                FaultJson {
                    window_ms: Some(1_000),
                    ..rule(FaultKind::NotFoundAfterCreate, 1.0)
                },
                latency(10, 90, 0.3),
            ],
            path if std::path::Path::new(path).is_file() => {
                let text =
                    std::fs::read_to_string(path).map_err(|e| format!("--faults {path}: {e}"))?;
                Self::parse_file(&text).map_err(|e| format!("--faults {path}: {e}"))?
            }
            other => {
                return Err(format!(
                    "--faults {other:?}: not a preset (none, light, heavy) and no such file"
                ));
            }
        };
        Ok(FaultPlan {
            name: what.to_string(),
            rules,
        })
    }

    /// A fault file's rules, each checked as the engine checks it (so a bad rule is refused
    /// here, before anything starts, with its position).
    pub fn parse_file(text: &str) -> Result<Vec<FaultJson>, String> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum File {
            Rules(Vec<FaultJson>),
            Seed { faults: Vec<FaultJson> },
        }
        let rules = match serde_json::from_str::<File>(text) {
            Ok(File::Rules(r)) | Ok(File::Seed { faults: r }) => r,
            Err(e) => {
                // The untagged error says only "did not match"; the array form's own
                // error says where and why.
                let detail = serde_json::from_str::<Vec<FaultJson>>(text)
                    .err()
                    .map_or_else(|| e.to_string(), |e| e.to_string());
                return Err(format!(
                    "not a JSON array of fault rules (or {{\"faults\": [...]}}): {detail}"
                ));
            }
        };
        for (i, r) in rules.iter().enumerate() {
            Fault::try_from(r.clone()).map_err(|e| format!("rule {}: {e}", i + 1))?;
        }
        Ok(rules)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_engine_rules_and_heavy_is_heavier() {
        for name in ["none", "light", "heavy"] {
            let plan = FaultPlan::parse(name).unwrap();
            for r in &plan.rules {
                Fault::try_from(r.clone()).unwrap();
            }
        }
        let p = |name: &str| -> f64 {
            FaultPlan::parse(name)
                .unwrap()
                .rules
                .iter()
                .filter(|r| r.effective_kind() != FaultKind::Latency)
                .filter(|r| r.effective_kind() != FaultKind::NotFoundAfterCreate)
                .map(|r| r.probability.unwrap_or(1.0))
                .sum()
        };
        assert!(p("heavy") > p("light") && p("light") > 0.0);
        assert!(FaultPlan::parse("none").unwrap().rules.is_empty());
    }

    #[test]
    fn an_unknown_preset_or_a_malformed_file_is_one_clear_error() {
        let e = FaultPlan::parse("medium").unwrap_err();
        assert!(e.contains("none, light, heavy"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        for (text, want) in [
            ("{not json", "not a JSON array"),
            (r#"[{"kind": "error", "status": 200}]"#, "rule 1"),
            (r#"[{"probability": 2.0, "status": 500}]"#, "rule 1"),
            (r#"[{"statuss": 500}]"#, "unknown field"),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = FaultPlan::parse(path.to_str().unwrap()).unwrap_err();
            assert!(e.contains(want) && e.contains("f.json"), "{text}: {e}");
        }
        std::fs::write(
            &path,
            r#"{"faults": [{"kind": "throttle", "probability": 0.5}, {"status": 503}]}"#,
        )
        .unwrap();
        let plan = FaultPlan::parse(path.to_str().unwrap()).unwrap();
        assert_eq!(plan.rules.len(), 2);
    }
}
