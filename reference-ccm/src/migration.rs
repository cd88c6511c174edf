//! Leader migration (KEP-2436): which controllers run under the migration lease.
//!
//! Exists so an HA control plane can move the cloud controllers from
//! kube-controller-manager to this CCM without ever running one twice: controllers listed
//! in the `LeaderMigrationConfiguration` for this component (or `*`) run only while this
//! process holds the migration lease; the others run under the main lease; those listed
//! for another component do not run here at all. Behaviour of `kubernetes/controller-manager`
//! `pkg/leadermigration` (`config/`, `filter.go`, `migrator.go`) and
//! `kubernetes/cloud-provider` `app/controllermanager.go`, paraphrased:
//! - the file is decoded strictly (unknown fields are errors); `kind` must be
//!   `LeaderMigrationConfiguration`, `apiVersion` `controllermanager.config.k8s.io/v1`
//!   (`v1alpha1`/`v1beta1` still accepted); `leaderName` is required; `resourceLock`
//!   defaults to `leases`; every entry needs `name` and `component`.
//! - without a file the default is used: leader `cloud-provider-extraction-migration`,
//!   `route`, `service` and `cloud-node-lifecycle` with component `*`; the cloud-node
//!   controller is never migrated.
//! - names are resolved through this CCM's canonical names and aliases; an unknown name is
//!   a startup error (one line, exit 1), so a typo cannot silently run a controller twice.

use serde::Deserialize;

use crate::options::Options;

/// The component name this process answers to in `controllerLeaders[].component`.
pub const COMPONENT: &str = "cloud-controller-manager";
/// Lease name of the built-in default configuration.
pub const DEFAULT_LEADER_NAME: &str = "cloud-provider-extraction-migration";
const KIND: &str = "LeaderMigrationConfiguration";
const API_VERSIONS: [&str; 3] = [
    "controllermanager.config.k8s.io/v1",
    "controllermanager.config.k8s.io/v1beta1",
    "controllermanager.config.k8s.io/v1alpha1",
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MigrationError {
    #[error("--leader-migration-config {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("leader migration config: {0}")]
    Decode(String),
    #[error("leader migration config: {0}")]
    Invalid(String),
    #[error(
        "leader migration config: controllerLeaders[{index}].name {name:?} is not a known controller"
    )]
    UnknownController { index: usize, name: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    kind: Option<String>,
    api_version: Option<String>,
    #[serde(default)]
    leader_name: String,
    #[serde(default)]
    resource_lock: String,
    #[serde(default)]
    controller_leaders: Vec<RawLeader>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLeader {
    #[serde(default)]
    name: String,
    #[serde(default)]
    component: String,
}

/// Where a controller runs in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Under the main lease (not in the migration config).
    Main,
    /// Under the migration lease (listed for this component or `*`).
    Migrated,
    /// Listed for another component: not run here.
    Elsewhere,
}

/// A validated `LeaderMigrationConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationConfig {
    pub leader_name: String,
    pub resource_lock: String,
    /// (canonical controller name, component).
    pub controller_leaders: Vec<(&'static str, String)>,
}

impl MigrationConfig {
    /// The configuration used when `--leader-migration-config` is empty.
    pub fn default_config() -> Self {
        let names = ["route", "service", "cloud-node-lifecycle"];
        Self {
            leader_name: DEFAULT_LEADER_NAME.to_owned(),
            resource_lock: "leases".to_owned(),
            controller_leaders: names
                .iter()
                .filter_map(|n| Options::canonical_controller(n))
                .map(|c| (c, "*".to_owned()))
                .collect(),
        }
    }

    /// The configuration the flags ask for: `None` when migration is off.
    pub fn from_options(opts: &Options) -> Result<Option<Self>, MigrationError> {
        if !opts.enable_leader_migration || !opts.leader_elect {
            return Ok(None);
        }
        if opts.leader_migration_config.is_empty() {
            return Ok(Some(Self::default_config()));
        }
        Self::load(&opts.leader_migration_config).map(Some)
    }

    pub fn load(path: &str) -> Result<Self, MigrationError> {
        let text = std::fs::read_to_string(path).map_err(|e| MigrationError::Read {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        Self::parse(&text)
    }

    /// Decodes (YAML or JSON) and validates.
    pub fn parse(text: &str) -> Result<Self, MigrationError> {
        let raw: RawConfig =
            serde_saphyr::from_str(text).map_err(|e| MigrationError::Decode(one_line(&e)))?;
        match raw.kind.as_deref() {
            Some(KIND) => {}
            other => {
                return Err(MigrationError::Invalid(format!(
                    "kind must be {KIND}, got {other:?}"
                )));
            }
        }
        match raw.api_version.as_deref() {
            Some(v) if API_VERSIONS.contains(&v) => {}
            other => {
                return Err(MigrationError::Invalid(format!(
                    "apiVersion must be {}, got {other:?}",
                    API_VERSIONS[0]
                )));
            }
        }
        if raw.leader_name.is_empty() {
            return Err(MigrationError::Invalid("leaderName is required".into()));
        }
        let resource_lock = if raw.resource_lock.is_empty() {
            "leases".to_owned()
        } else {
            raw.resource_lock
        };
        // Upstream also accepts `endpoints`; this CCM only speaks Lease locks, as with
        // --leader-elect-resource-lock.
        if resource_lock != "leases" {
            return Err(MigrationError::Invalid(format!(
                "resourceLock {resource_lock:?} is not supported, only \"leases\""
            )));
        }
        let mut controller_leaders = Vec::new();
        for (index, leader) in raw.controller_leaders.into_iter().enumerate() {
            if leader.name.is_empty() || leader.component.is_empty() {
                return Err(MigrationError::Invalid(format!(
                    "controllerLeaders[{index}] needs both name and component"
                )));
            }
            let canonical = Options::canonical_controller(&leader.name).ok_or(
                MigrationError::UnknownController {
                    index,
                    name: leader.name.clone(),
                },
            )?;
            controller_leaders.push((canonical, leader.component));
        }
        Ok(Self {
            leader_name: raw.leader_name,
            resource_lock,
            controller_leaders,
        })
    }

    /// Where `controller` (a canonical name) runs in this process.
    pub fn placement(&self, controller: &str) -> Placement {
        match self
            .controller_leaders
            .iter()
            .find(|(name, _)| *name == controller)
        {
            None => Placement::Main,
            Some((_, component)) if component == "*" || component == COMPONENT => {
                Placement::Migrated
            }
            Some(_) => Placement::Elsewhere,
        }
    }
}

fn one_line(e: &impl std::fmt::Display) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{CLOUD_NODE, CLOUD_NODE_LIFECYCLE, NODE_ROUTE, SERVICE_LB};

    #[test]
    fn default_migrates_route_service_lifecycle_not_cloud_node() {
        let c = MigrationConfig::default_config();
        assert_eq!(c.leader_name, "cloud-provider-extraction-migration");
        assert_eq!(c.placement(CLOUD_NODE), Placement::Main);
        for name in [CLOUD_NODE_LIFECYCLE, SERVICE_LB, NODE_ROUTE] {
            assert_eq!(c.placement(name), Placement::Migrated, "{name}");
        }
    }

    #[test]
    fn parses_explicit_config_with_components() {
        let text = "kind: LeaderMigrationConfiguration\napiVersion: controllermanager.config.k8s.io/v1\nleaderName: mig\nresourceLock: leases\ncontrollerLeaders:\n  - name: service-lb-controller\n    component: cloud-controller-manager\n  - name: route\n    component: kube-controller-manager\n";
        let c = MigrationConfig::parse(text);
        let Ok(c) = c else { panic!("{c:?}") };
        assert_eq!(c.leader_name, "mig");
        assert_eq!(c.placement(SERVICE_LB), Placement::Migrated);
        assert_eq!(c.placement(NODE_ROUTE), Placement::Elsewhere);
        assert_eq!(c.placement(CLOUD_NODE_LIFECYCLE), Placement::Main);
    }

    #[test]
    fn rejects_bad_configs_with_one_line() {
        let head =
            "kind: LeaderMigrationConfiguration\napiVersion: controllermanager.config.k8s.io/v1\n";
        let cases = [
            (format!("{head}controllerLeaders: []\n"), "leaderName"),
            (
                format!(
                    "{head}leaderName: x\ncontrollerLeaders:\n  - name: bogus\n    component: '*'\n"
                ),
                "bogus",
            ),
            (
                format!("{head}leaderName: x\ncontrollerLeaders:\n  - name: route\n"),
                "component",
            ),
            (format!("{head}leaderName: x\nextra: 1\n"), "extra"),
            (
                "kind: Other\napiVersion: controllermanager.config.k8s.io/v1\nleaderName: x\n"
                    .to_owned(),
                "kind",
            ),
            (
                format!("{head}leaderName: x\nresourceLock: configmaps\n"),
                "resourceLock",
            ),
            ("[: not yaml".to_owned(), "leader migration config"),
        ];
        for (text, needle) in cases {
            let err = MigrationConfig::parse(&text)
                .map(|_| ())
                .map_err(|e| e.to_string());
            let Err(line) = err else {
                panic!("{text} should fail")
            };
            assert!(line.contains(needle), "{text}: {line}");
            assert!(!line.contains('\n'), "{line}");
        }
    }

    #[test]
    fn only_with_the_enable_flag_and_leader_election() {
        use clap::Parser;
        let parse = |args: &[&str]| Options::try_parse_from(args.iter().copied());
        let Ok(o) = parse(&["x", "--leader-migration-config=/nonexistent"]) else {
            panic!("parse")
        };
        assert_eq!(MigrationConfig::from_options(&o), Ok(None));
        let Ok(o) = parse(&["x", "--enable-leader-migration"]) else {
            panic!("parse")
        };
        assert_eq!(
            MigrationConfig::from_options(&o),
            Ok(Some(MigrationConfig::default_config()))
        );
        let Ok(o) = parse(&["x", "--enable-leader-migration", "--leader-elect=false"]) else {
            panic!("parse")
        };
        assert_eq!(MigrationConfig::from_options(&o), Ok(None));
        let Ok(o) = parse(&[
            "x",
            "--enable-leader-migration",
            "--leader-migration-config=/nonexistent/m.yaml",
        ]) else {
            panic!("parse")
        };
        assert!(matches!(
            MigrationConfig::from_options(&o),
            Err(MigrationError::Read { .. })
        ));
    }
}
