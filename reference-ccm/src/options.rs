//! Command-line flags of the reference CCM.
//!
//! Exists so the harness can start this binary exactly like an upstream CCM: same flag
//! names, same defaults, Go-style values (`--flag=value`, `--flag value`,
//! `--leader-elect=false`, durations like `1m30s`). Defaults follow
//! `kubernetes/cloud-provider` `options/` and `config/v1alpha1/defaults.go` and
//! `kubernetes/controller-manager` `options/generic.go`.
//!
//! Only parses and checks flags: the checks that need the list of providers (the
//! `--cloud-provider` name, which provider owns `--node-labels`) are
//! `crate::providers::registry::validate`'s, which fills their errors in with the
//! registry's names. So this module imports no provider and every provider can read
//! [`Options`].

use std::collections::BTreeMap;
use std::time::Duration;

use clap::{ArgAction, Parser};

/// Canonical names of the controllers a CCM knows (`kubernetes/cloud-provider`
/// `names/controller_names.go`), with their pre-1.27 aliases.
pub const CLOUD_NODE: &str = "cloud-node-controller";
pub const CLOUD_NODE_LIFECYCLE: &str = "cloud-node-lifecycle-controller";
pub const SERVICE_LB: &str = "service-lb-controller";
pub const NODE_ROUTE: &str = "node-route-controller";
const KNOWN_CONTROLLERS: [(&str, &str); 4] = [
    (CLOUD_NODE, "cloud-node"),
    (CLOUD_NODE_LIFECYCLE, "cloud-node-lifecycle"),
    (SERVICE_LB, "service"),
    (NODE_ROUTE, "route"),
];

/// Errors found while validating flags (after clap's own parsing).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OptionsError {
    #[error("--cloud-provider cannot be empty")]
    MissingCloudProvider,
    /// `known`: the registered names, `openstack, aws, ...` (from the registry).
    #[error("unknown cloud provider {name:?} (known: {known})")]
    UnknownCloudProvider { name: String, known: String },
    #[error("--controllers: {0:?} is not in the list of known controllers")]
    UnknownController(String),
    #[error("--leader-elect-resource-lock: {0:?} is not supported, only \"leases\"")]
    UnsupportedResourceLock(String),
    #[error("--concurrent-node-syncs must be greater than 0, got {0}")]
    BadNodeSyncs(usize),
    #[error("invalid duration {value:?}: {reason}")]
    BadDuration { value: String, reason: &'static str },
    #[error("invalid --node-labels key {key:?}: {reason}")]
    BadNodeLabelKey { key: String, reason: String },
    /// `--node-labels` with a provider whose factory does not accept it; `owners`: the
    /// providers that do, `<Display> provider (--cloud-provider=<name>)` joined by ` or `
    /// (from the registry).
    #[error("--node-labels is a flag of the {owners}, not of {provider:?}")]
    NodeLabelsNotAccepted { provider: String, owners: String },
}

/// All flags. Flags whose controllers are not implemented yet are accepted with their
/// upstream defaults so a command line written for an upstream CCM also works here.
#[derive(Debug, Clone, Parser)]
// Go's pflag lets a later occurrence of a flag override an earlier one; wrappers (and the
// harness, which appends per-case flags) rely on it.
#[command(
    name = "reference-ccm",
    args_override_self = true,
    version,
    about = "Reference cloud-controller-manager"
)]
pub struct Options {
    /// Provider of cloud services (required; "openstack", "aws" or "vsphere").
    #[arg(long, default_value = "")]
    pub cloud_provider: String,
    /// Path to the cloud provider configuration file.
    #[arg(long, default_value = "")]
    pub cloud_config: String,
    /// Path to a kubeconfig; absent means in-cluster / $KUBECONFIG / ~/.kube/config.
    #[arg(long, default_value = "")]
    pub kubeconfig: String,
    /// Controllers to enable: '*' = all, 'name' enables, '-name' disables.
    #[arg(long, default_value = "*", value_delimiter = ',')]
    pub controllers: Vec<String>,
    #[arg(long, default_value = "5m", value_parser = parse_go_duration)]
    pub node_status_update_frequency: Duration,
    #[arg(long, default_value = "5s", value_parser = parse_go_duration)]
    pub node_monitor_period: Duration,
    #[arg(long, default_value_t = 1)]
    pub concurrent_node_syncs: usize,
    /// 0 means the same as --concurrent-node-syncs.
    #[arg(long, default_value_t = 0)]
    pub concurrent_node_status_updates: usize,
    #[arg(long, default_value_t = 1)]
    pub concurrent_service_syncs: usize,
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub leader_elect: bool,
    #[arg(long, default_value = "15s", value_parser = parse_go_duration)]
    pub leader_elect_lease_duration: Duration,
    #[arg(long, default_value = "10s", value_parser = parse_go_duration)]
    pub leader_elect_renew_deadline: Duration,
    #[arg(long, default_value = "2s", value_parser = parse_go_duration)]
    pub leader_elect_retry_period: Duration,
    #[arg(long, default_value = "leases")]
    pub leader_elect_resource_lock: String,
    #[arg(long, default_value = "cloud-controller-manager")]
    pub leader_elect_resource_name: String,
    #[arg(long, default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,
    /// Leader migration (KEP-2436): migrated controllers run under a second lease.
    /// Only with `--leader-elect`.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub enable_leader_migration: bool,
    /// A `LeaderMigrationConfiguration` file; empty = the built-in default. Ignored
    /// without `--enable-leader-migration`, as upstream.
    #[arg(long, default_value = "")]
    pub leader_migration_config: String,
    /// HTTPS port for /healthz and /metrics; 0 disables serving.
    #[arg(long, default_value_t = 10258)]
    pub secure_port: u16,
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: std::net::IpAddr,
    /// Paths served without authorization. Upstream delegates every other path to the API
    /// server's SubjectAccessReview and, with no `--authorization-kubeconfig`, denies it
    /// (k8s.io/cloud-provider `options/options.go`: `/healthz`, `/readyz`, `/livez`); this
    /// CCM does not delegate, so any other path is denied. Deployments that scrape
    /// `/metrics` without credentials add it here.
    #[arg(long, value_delimiter = ',', default_value = "/healthz,/readyz,/livez")]
    pub authorization_always_allow_paths: Vec<String>,
    #[arg(long, default_value = "kubernetes")]
    pub cluster_name: String,
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub configure_cloud_routes: bool,
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub allocate_node_cidrs: bool,
    /// Each controller calls the API as a ServiceAccount of its own in kube-system
    /// (`node-controller`, `service-controller`, `route-controller`), with tokens from the
    /// TokenRequest API, as upstream's dynamic client builder does.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub use_service_account_credentials: bool,
    #[arg(long, default_value = "")]
    pub cluster_cidr: String,
    #[arg(long, default_value = "10s", value_parser = parse_go_duration)]
    pub route_reconciliation_period: Duration,
    #[arg(long, default_value_t = 20.0)]
    pub kube_api_qps: f32,
    #[arg(long, default_value_t = 30)]
    pub kube_api_burst: u32,
    /// Only JSON is spoken; protobuf is accepted and logged as ignored.
    #[arg(long, default_value = "application/vnd.kubernetes.protobuf")]
    pub kube_api_content_type: String,
    #[arg(long, default_value = "12h", value_parser = parse_go_duration)]
    pub min_resync_period: Duration,
    /// Log verbosity, klog style (0-10).
    #[arg(long = "v", default_value_t = 0)]
    pub verbosity: u8,
    /// vSphere provider only: labels every node gets at initialization, `k=v,k2=v2`
    /// (repeatable; a value may be empty). Each key must be a qualified label name.
    /// cloud-provider-vsphere `pkg/cloudprovider/vsphere/options/flags.go`.
    #[arg(long, value_name = "KEY=VALUE,...", value_parser = parse_string_to_string)]
    pub node_labels: Vec<BTreeMap<String, String>>,
    /// TEST ONLY, hidden: the OpenStack load-balancer naming scheme. `legacy` (default) is
    /// upstream's; `v2` renames every load balancer, a deliberately broken upgrade the
    /// upgrade suite (UP-01, UP-04) must catch.
    #[arg(long, value_enum, default_value_t = LbNameScheme::Legacy, hide = true)]
    pub testing_lb_name_scheme: LbNameScheme,
    /// TEST ONLY, hidden, repeatable: make the provider's instance answers those of
    /// another cloud's CCM (`empty-provider-id`, `nil-metadata`, `v1-instances`,
    /// `additional-labels=k=v;k2=v2`), so the NodeInit cases NI-06/08/13/16 can reach
    /// controller paths no real cloud API leads to; see `providers::quirks`.
    #[arg(long, value_parser = crate::providers::quirks::parse_quirk, hide = true)]
    pub testing_provider_quirk: Vec<crate::providers::quirks::ProviderQuirk>,
    /// TEST ONLY, hidden, repeatable: deliberately break one upstream guarantee
    /// (`forget-finalizer`, `skip-lookup-before-create`, `retry-without-backoff`,
    /// `delete-nodes-on-cloud-errors`, `drop-failed-deletes`), so the Chaos suite can prove
    /// it catches a CCM that lacks it; see [`TestingBreak`].
    #[arg(long, value_enum, hide = true)]
    pub testing_break: Vec<TestingBreak>,
}

/// Values of the hidden `--testing-lb-name-scheme` flag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LbNameScheme {
    #[default]
    Legacy,
    V2,
}

/// Values of the hidden, repeatable `--testing-break` flag: each one makes the reference
/// CCM a deliberately broken CCM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum TestingBreak {
    /// The service controller never adds the `service.kubernetes.io/load-balancer-cleanup`
    /// finalizer (it still ensures load balancers and writes status), so a Service deleted
    /// while the CCM is not watching leaves its cloud load balancer behind.
    ForgetFinalizer,
    /// Every provider's EnsureLoadBalancer treats its create-or-update lookup as "not
    /// found" and creates the load balancer again (lookups of the delete path are intact).
    SkipLookupBeforeCreate,
    /// The work queue requeues failed keys at once instead of with exponential backoff.
    RetryWithoutBackoff,
    /// The node lifecycle controller takes an error from the cloud's instance-exists check
    /// for "the instance is gone" and deletes the NotReady node (the outage upstream's
    /// `MonitorNodes` guards against by keeping the node, kubernetes/kubernetes#71562).
    DeleteNodesOnCloudErrors,
    /// The service controller gives up on a Service being deleted whose load-balancer
    /// delete failed (never syncs it again), so it keeps its cleanup finalizer until the
    /// next CCM start (upstream requeues every failed key with backoff).
    DropFailedDeletes,
}

impl Options {
    /// Whether `--testing-break=<what>` was given.
    pub fn breaks(&self, what: TestingBreak) -> bool {
        self.testing_break.contains(&what)
    }

    /// Checks what clap cannot and the registry is not needed for: controller names, lock
    /// kind, worker counts. `crate::providers::registry::validate` runs it after checking
    /// `--cloud-provider` and before the `--node-labels` checks.
    pub fn validate(&self) -> Result<(), OptionsError> {
        self.enabled_controllers()?;
        if self.leader_elect_resource_lock != "leases" {
            return Err(OptionsError::UnsupportedResourceLock(
                self.leader_elect_resource_lock.clone(),
            ));
        }
        if self.concurrent_node_syncs == 0 {
            return Err(OptionsError::BadNodeSyncs(0));
        }
        Ok(())
    }

    /// Checks every `--node-labels` key, as upstream's main.go does with IsQualifiedName
    /// before starting (run by `crate::providers::registry::validate` once it knows the
    /// provider owns the flag).
    pub fn validate_node_labels(&self) -> Result<(), OptionsError> {
        for key in self.node_labels().keys() {
            check_qualified_name(key).map_err(|reason| OptionsError::BadNodeLabelKey {
                key: key.clone(),
                reason,
            })?;
        }
        Ok(())
    }

    /// `--node-labels`, all occurrences merged (a later one wins for a repeated key).
    pub fn node_labels(&self) -> BTreeMap<String, String> {
        self.node_labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Workers for the periodic address sync (0 = same as node syncs, as upstream).
    pub fn node_status_workers(&self) -> usize {
        if self.concurrent_node_status_updates == 0 {
            self.concurrent_node_syncs
        } else {
            self.concurrent_node_status_updates
        }
    }

    /// The canonical name of a controller given by canonical name or alias.
    pub fn canonical_controller(name: &str) -> Option<&'static str> {
        KNOWN_CONTROLLERS
            .iter()
            .find(|(c, alias)| *c == name || *alias == name)
            .map(|(c, _)| *c)
    }

    /// Canonical names of the enabled controllers, in the canonical order.
    /// Semantics of `k8s.io/controller-manager` `IsControllerEnabled`: an explicit
    /// `name`/`-name` wins, otherwise `*` enables.
    pub fn enabled_controllers(&self) -> Result<Vec<&'static str>, OptionsError> {
        let canonical = Self::canonical_controller;
        let mut star = false;
        let mut on = Vec::new();
        let mut off = Vec::new();
        for raw in &self.controllers {
            let item = raw.trim();
            if item.is_empty() {
                continue;
            }
            if item == "*" {
                star = true;
            } else if let Some(name) = item.strip_prefix('-') {
                off.push(
                    canonical(name).ok_or_else(|| OptionsError::UnknownController(item.into()))?,
                );
            } else {
                on.push(
                    canonical(item).ok_or_else(|| OptionsError::UnknownController(item.into()))?,
                );
            }
        }
        Ok(KNOWN_CONTROLLERS
            .iter()
            .map(|(c, _)| *c)
            .filter(|c| !off.contains(c) && (on.contains(c) || star))
            .collect())
    }
}

/// Parses one value of a pflag `StringToString` flag (`spf13/pflag` `string_to_string.go`):
/// without `=` it is an error; with exactly one `=` the whole value (outer double quotes
/// trimmed) is one pair, so the value may hold commas; otherwise it is one CSV record of
/// `key=value` fields (`"` quoting, `""` for a quote inside).
pub fn parse_string_to_string(value: &str) -> Result<BTreeMap<String, String>, String> {
    let pairs = match value.matches('=').count() {
        0 => return Err(format!("{value} must be formatted as key=value")),
        1 => vec![value.trim_matches('"').to_owned()],
        _ => csv_record(value)?,
    };
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| format!("{pair} must be formatted as key=value"))
        })
        .collect()
}

/// The fields of one CSV record, as Go's `encoding/csv` reads them by default.
fn csv_record(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut rest = line;
    loop {
        let (field, after) = if let Some(quoted) = rest.strip_prefix('"') {
            let mut field = String::new();
            let mut chars = quoted.char_indices();
            loop {
                match chars.next() {
                    Some((i, '"')) if quoted[i + 1..].starts_with('"') => {
                        field.push('"');
                        chars.next();
                    }
                    Some((i, '"')) => break (field, &quoted[i + 1..]),
                    Some((_, c)) => field.push(c),
                    None => return Err(format!("{line}: unterminated quoted field")),
                }
            }
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            if rest[..end].contains('"') {
                return Err(format!("{line}: bare \" in a non-quoted field"));
            }
            (rest[..end].to_owned(), &rest[end..])
        };
        fields.push(field);
        match after.strip_prefix(',') {
            Some(next) => rest = next,
            None if after.is_empty() => return Ok(fields),
            None => return Err(format!("{line}: text after a quoted field")),
        }
    }
}

/// A Kubernetes qualified name (label key): an optional DNS-1123 subdomain prefix of at
/// most 253 characters and `/`, then a name of at most 63 characters from `[A-Za-z0-9-_.]`
/// that starts and ends alphanumeric (apimachinery `validation.IsQualifiedName`). `Err`
/// says every rule the key breaks.
pub fn check_qualified_name(key: &str) -> Result<(), String> {
    let mut problems = Vec::new();
    let name = match key.split_once('/') {
        None => key,
        Some((_, name)) if name.contains('/') => {
            return Err("a qualified name has at most one '/' (e.g. 'example.com/MyName')".into());
        }
        Some((prefix, name)) => {
            if prefix.is_empty() {
                problems.push("the prefix before '/' must not be empty".to_owned());
            } else if prefix.len() > 253 {
                problems.push("the prefix must be at most 253 characters".to_owned());
            } else if !prefix.split('.').all(|label| {
                let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
                label.starts_with(alnum)
                    && label.ends_with(alnum)
                    && label.chars().all(|c| alnum(c) || c == '-')
            }) {
                problems.push(
                    "the prefix must be a lowercase DNS subdomain (labels of a-z, 0-9 and '-' \
                     starting and ending alphanumeric, joined by '.', e.g. 'example.com')"
                        .to_owned(),
                );
            }
            name
        }
    };
    if name.is_empty() {
        problems.push("the name must not be empty".to_owned());
    } else {
        if name.len() > 63 {
            problems.push("the name must be at most 63 characters".to_owned());
        }
        let alnum = |c: char| c.is_ascii_alphanumeric();
        if !(name.starts_with(alnum)
            && name.ends_with(alnum)
            && name
                .chars()
                .all(|c| alnum(c) || matches!(c, '-' | '_' | '.')))
        {
            problems.push(
                "the name must consist of alphanumerics, '-', '_' or '.', and start and end \
                 with an alphanumeric (e.g. 'MyName', 'my.name', '123-abc')"
                    .to_owned(),
            );
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// Parses a Go `time.ParseDuration` string: `300ms`, `1.5h`, `1m30s`, `0`.
pub fn parse_go_duration(value: &str) -> Result<Duration, OptionsError> {
    let bad = |reason| OptionsError::BadDuration {
        value: value.to_owned(),
        reason,
    };
    let s = value.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(bad("empty"));
    }
    if s.starts_with('-') {
        return Err(bad("negative durations are not allowed here"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| bad("missing unit"))?;
        if num_len == 0 {
            return Err(bad("expected a number"));
        }
        let number: f64 = rest[..num_len].parse().map_err(|_| bad("bad number"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad("unknown unit")),
        };
        rest = &rest[unit_len..];
        total += number * seconds_per_unit;
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad("out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Options {
        let mut all = vec!["reference-ccm"];
        all.extend_from_slice(args);
        match Options::try_parse_from(all) {
            Ok(o) => o,
            Err(e) => panic!("parse failed: {e}"),
        }
    }

    #[test]
    fn defaults_match_upstream() {
        let o = parse(&["--cloud-provider=openstack"]);
        assert_eq!(o.node_status_update_frequency, Duration::from_secs(300));
        assert_eq!(o.node_monitor_period, Duration::from_secs(5));
        assert_eq!(o.concurrent_node_syncs, 1);
        assert_eq!(o.node_status_workers(), 1);
        assert!(o.leader_elect);
        assert_eq!(o.leader_elect_lease_duration, Duration::from_secs(15));
        assert_eq!(o.leader_elect_renew_deadline, Duration::from_secs(10));
        assert_eq!(o.leader_elect_retry_period, Duration::from_secs(2));
        assert_eq!(o.leader_elect_resource_name, "cloud-controller-manager");
        assert_eq!(o.leader_elect_resource_namespace, "kube-system");
        assert!(!o.enable_leader_migration);
        assert_eq!(o.leader_migration_config, "");
        assert_eq!(o.secure_port, 10258);
        assert_eq!(o.cluster_name, "kubernetes");
        assert!(o.configure_cloud_routes);
        assert!(!o.allocate_node_cidrs);
        assert_eq!(o.route_reconciliation_period, Duration::from_secs(10));
        assert_eq!(o.enabled_controllers().ok().map(|c| c.len()), Some(4));
        assert_eq!(o.validate(), Ok(()));
    }

    #[test]
    fn go_style_values() {
        let o = parse(&[
            "--cloud-provider",
            "openstack",
            "--leader-elect=false",
            "--node-status-update-frequency=1m30s",
            "--concurrent-node-syncs",
            "50",
            "--concurrent-node-status-updates=7",
            "--secure-port=0",
            "--v=4",
        ]);
        assert!(!o.leader_elect);
        assert_eq!(o.node_status_update_frequency, Duration::from_secs(90));
        assert_eq!(o.concurrent_node_syncs, 50);
        assert_eq!(o.node_status_workers(), 7);
        assert_eq!(o.secure_port, 0);
        assert_eq!(o.verbosity, 4);
        let bare = parse(&["--cloud-provider=openstack", "--leader-elect"]);
        assert!(bare.leader_elect);
        // As with Go's pflag, the last occurrence of a flag wins.
        let twice = parse(&[
            "--cloud-provider=openstack",
            "--configure-cloud-routes=false",
            "--configure-cloud-routes=true",
            "--cluster-name=a",
            "--cluster-name=b",
        ]);
        assert!(twice.configure_cloud_routes);
        assert_eq!(twice.cluster_name, "b");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_go_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_go_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_go_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_go_duration("1h2m3s"), Ok(Duration::from_secs(3723)));
        assert_eq!(parse_go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "5", "5x", "m", "-1s", "1s2"] {
            assert!(parse_go_duration(bad).is_err(), "{bad} should fail");
        }
        assert!(Options::try_parse_from(["x", "--node-monitor-period=5"]).is_err());
    }

    #[test]
    fn controllers_star_minus_and_aliases() {
        let o = parse(&[
            "--cloud-provider=openstack",
            "--controllers=*,-service,-route",
        ]);
        assert_eq!(
            o.enabled_controllers(),
            Ok(vec![CLOUD_NODE, CLOUD_NODE_LIFECYCLE])
        );
        let o = parse(&["--cloud-provider=openstack", "--controllers=cloud-node"]);
        assert_eq!(o.enabled_controllers(), Ok(vec![CLOUD_NODE]));
        let o = parse(&[
            "--cloud-provider=openstack",
            "--controllers=*,-cloud-node-controller",
        ]);
        assert_eq!(
            o.enabled_controllers(),
            Ok(vec![CLOUD_NODE_LIFECYCLE, SERVICE_LB, NODE_ROUTE])
        );
        let o = parse(&["--cloud-provider=openstack", "--controllers=*,bogus"]);
        assert_eq!(
            o.validate(),
            Err(OptionsError::UnknownController("bogus".into()))
        );
    }

    /// The `--cloud-provider` checks are the registry's (`providers::registry` tests).
    #[test]
    fn lock_and_worker_validation() {
        let o = parse(&[
            "--cloud-provider=openstack",
            "--leader-elect-resource-lock=endpoints",
        ]);
        assert!(matches!(
            o.validate(),
            Err(OptionsError::UnsupportedResourceLock(_))
        ));
        let o = parse(&["--cloud-provider=openstack", "--concurrent-node-syncs=0"]);
        assert_eq!(o.validate(), Err(OptionsError::BadNodeSyncs(0)));
        assert!(Options::try_parse_from(["x", "--no-such-flag=1"]).is_err());
    }
}

#[cfg(test)]
mod node_labels_tests {
    use super::*;

    fn opts(args: &[&str]) -> Result<Options, String> {
        let mut all = vec!["reference-ccm"];
        all.extend_from_slice(args);
        Options::try_parse_from(all).map_err(|e| e.to_string())
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// pflag StringToString: one `=` is one pair (commas kept), more is a CSV record.
    #[test]
    fn node_labels_parse_like_pflag_string_to_string() {
        assert_eq!(
            parse_string_to_string("node.foo.bar=vsphere,foo.bar/mapi="),
            Ok(map(&[("node.foo.bar", "vsphere"), ("foo.bar/mapi", "")]))
        );
        assert_eq!(parse_string_to_string("a=b,c"), Ok(map(&[("a", "b,c")])));
        assert_eq!(parse_string_to_string("\"a=b\""), Ok(map(&[("a", "b")])));
        assert_eq!(
            parse_string_to_string("a=1,\"b=x,\"\"y\"\"\",c="),
            Ok(map(&[("a", "1"), ("b", "x,\"y\""), ("c", "")]))
        );
        assert!(parse_string_to_string("novalue").is_err());
        assert!(parse_string_to_string("a=1,b=2,junk").is_err());
        assert!(parse_string_to_string("a=1,b=\"2").is_err());
        assert!(parse_string_to_string("a=1,\"b=2\"x").is_err());
        assert!(opts(&["--node-labels=novalue"]).is_err());
    }

    #[test]
    fn node_labels_accumulate_over_repeated_flags() {
        let o = opts(&[
            "--cloud-provider=vsphere",
            "--node-labels=a=1,b=2",
            "--node-labels",
            "b=3",
        ])
        .expect("parse");
        assert_eq!(o.node_labels(), map(&[("a", "1"), ("b", "3")]));
        assert_eq!(o.validate(), Ok(()));
        assert_eq!(o.validate_node_labels(), Ok(()));
        let none = opts(&["--cloud-provider=vsphere"]).expect("parse");
        assert!(none.node_labels().is_empty());
    }

    /// Which provider owns the flag is the registry's check (`providers::registry` tests).
    #[test]
    fn node_label_keys_must_be_qualified() {
        let o = opts(&[
            "--cloud-provider=vsphere",
            "--node-labels=ok=1,Bad_Prefix.com/x=2",
        ])
        .expect("parse");
        assert_eq!(o.validate(), Ok(()));
        let Err(e) = o.validate_node_labels() else {
            panic!("must fail")
        };
        assert!(
            e.to_string()
                .starts_with("invalid --node-labels key \"Bad_Prefix.com/x\": "),
            "{e}"
        );
    }

    /// The cases of apimachinery's `TestIsQualifiedName`.
    #[test]
    fn qualified_names() {
        let long = |n| "a".repeat(n);
        for ok in [
            "simple",
            "now-with-dashes",
            "1-starts-with-num",
            "1234",
            "simple/simple",
            "now-with-dashes/simple",
            "now.with.dots/simple",
            "1-num.2-num/3-num",
            "1.2.3.4/5678",
            "Uppercase_Is_OK_123",
            "example.com/Uppercase_Is_OK_123",
            "requests.storage-foo",
            &long(63),
            &format!("{}/{}", long(253), "b".repeat(63)),
        ] {
            assert_eq!(check_qualified_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "nospecialchars%^=@",
            "cantendwithadash-",
            "-cantstartwithadash-",
            "only/one/slash",
            "Example.com/abc",
            "example_com/abc",
            "example.com/",
            "/simple",
            "",
            &long(64),
            &format!("{}/abc", long(254)),
        ] {
            assert!(check_qualified_name(bad).is_err(), "{bad}");
        }
    }
}

#[cfg(test)]
mod testing_flag_tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn lb_name_scheme_defaults_to_legacy_parses_v2_and_is_hidden() {
        let parse = |extra: &[&str]| {
            let mut all = vec!["reference-ccm", "--cloud-provider=openstack"];
            all.extend_from_slice(extra);
            Options::try_parse_from(all)
        };
        assert_eq!(
            parse(&[]).map(|o| o.testing_lb_name_scheme).ok(),
            Some(LbNameScheme::Legacy)
        );
        assert_eq!(
            parse(&["--testing-lb-name-scheme=v2"])
                .map(|o| o.testing_lb_name_scheme)
                .ok(),
            Some(LbNameScheme::V2)
        );
        assert!(parse(&["--testing-lb-name-scheme=v3"]).is_err());
        let help = Options::command().render_long_help().to_string();
        assert!(!help.contains("testing-lb-name-scheme"), "{help}");
    }

    #[test]
    fn provider_quirk_defaults_to_none_is_repeatable_and_hidden() {
        use crate::providers::quirks::ProviderQuirk;
        let parse = |extra: &[&str]| {
            let mut all = vec!["reference-ccm", "--cloud-provider=openstack"];
            all.extend_from_slice(extra);
            Options::try_parse_from(all)
        };
        assert_eq!(
            parse(&[]).map(|o| o.testing_provider_quirk).ok(),
            Some(vec![])
        );
        assert_eq!(
            parse(&[
                "--testing-provider-quirk=nil-metadata",
                "--testing-provider-quirk",
                "additional-labels=example.com/a=1",
            ])
            .map(|o| o.testing_provider_quirk)
            .ok(),
            Some(vec![
                ProviderQuirk::NilMetadata,
                ProviderQuirk::AdditionalLabels([("example.com/a".into(), "1".into())].into()),
            ])
        );
        assert!(parse(&["--testing-provider-quirk=hot-loop"]).is_err());
        let help = Options::command().render_long_help().to_string();
        assert!(!help.contains("testing-provider-quirk"), "{help}");
    }

    #[test]
    fn testing_break_defaults_to_none_is_repeatable_and_hidden() {
        let parse = |extra: &[&str]| {
            let mut all = vec!["reference-ccm", "--cloud-provider=openstack"];
            all.extend_from_slice(extra);
            Options::try_parse_from(all)
        };
        let none = parse(&[]).expect("parse");
        assert_eq!(none.testing_break, vec![]);
        assert!(!none.breaks(TestingBreak::ForgetFinalizer));
        let all = parse(&[
            "--testing-break=forget-finalizer",
            "--testing-break",
            "skip-lookup-before-create",
            "--testing-break=retry-without-backoff",
            "--testing-break=delete-nodes-on-cloud-errors",
            "--testing-break=drop-failed-deletes",
        ])
        .expect("parse");
        assert_eq!(
            all.testing_break,
            vec![
                TestingBreak::ForgetFinalizer,
                TestingBreak::SkipLookupBeforeCreate,
                TestingBreak::RetryWithoutBackoff,
                TestingBreak::DeleteNodesOnCloudErrors,
                TestingBreak::DropFailedDeletes,
            ]
        );
        assert!(all.breaks(TestingBreak::SkipLookupBeforeCreate));
        let one = parse(&["--testing-break=retry-without-backoff"]).expect("parse");
        assert!(one.breaks(TestingBreak::RetryWithoutBackoff));
        assert!(!one.breaks(TestingBreak::ForgetFinalizer));
        assert_eq!(one.validate(), Ok(()));
        for bad in [
            "--testing-break=hot-loop",
            "--testing-break=",
            "--testing-break=Forget-Finalizer",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad} should be rejected");
        }
        let help = Options::command().render_long_help().to_string();
        assert!(!help.contains("testing-break"), "{help}");
        let short = Options::command().render_help().to_string();
        assert!(!short.contains("testing-break"), "{short}");
    }
}
