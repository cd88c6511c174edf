//! `cloud.conf` for the OpenStack provider, in upstream's gcfg (git-config style INI)
//! format, read with the shared [`crate::providers::gcfg`] reader.
//!
//! Exists because CCMs are configured with upstream's file format, unchanged
//! (`kubernetes/cloud-provider-openstack` `pkg/openstack/openstack.go` `ReadConfig`,
//! `pkg/client/client.go` `AuthOpts`). Upstream reads with
//! `gcfg.FatalOnly(gcfg.ReadInto(...))`: syntax and value errors are fatal, unknown
//! sections/variables ("extra data") are not; we return those as warnings to log.

use crate::providers::gcfg::{self, Section, parse_gcfg};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("cannot read cloud config {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("cloud config line {line}: {reason}")]
    Syntax { line: usize, reason: String },
    #[error("cloud config [{section}] {key}: invalid boolean {value:?}")]
    BadBool {
        section: String,
        key: String,
        value: String,
    },
    #[error("cloud config [{section}] {key}: invalid value {value:?}")]
    BadValue {
        section: String,
        key: String,
        value: String,
    },
    #[error("cloud config [Global]: {0}")]
    Missing(&'static str),
}

impl From<gcfg::SyntaxError> for ConfigError {
    fn from(e: gcfg::SyntaxError) -> Self {
        ConfigError::Syntax {
            line: e.line,
            reason: e.reason,
        }
    }
}

/// The typed values of a [`Section`] this provider reads, failing with its own errors.
trait TypedValues {
    fn get_seconds(&self, key: &str) -> Result<Option<u64>, ConfigError>;
    fn get_u32(&self, key: &str) -> Result<Option<u32>, ConfigError>;
    fn get_bool(&self, key: &str) -> Result<Option<bool>, ConfigError>;
}

impl TypedValues for Section {
    fn get_seconds(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        self.get(key)
            .map(|v| {
                crate::options::parse_go_duration(v)
                    .map(|d| d.as_secs())
                    .or_else(|_| v.parse::<u64>())
                    .map_err(|_| ConfigError::BadValue {
                        section: self.name.clone(),
                        key: key.to_owned(),
                        value: v.to_owned(),
                    })
            })
            .transpose()
    }
    fn get_u32(&self, key: &str) -> Result<Option<u32>, ConfigError> {
        self.get(key)
            .map(|v| {
                v.parse::<u32>().map_err(|_| ConfigError::BadValue {
                    section: self.name.clone(),
                    key: key.to_owned(),
                    value: v.to_owned(),
                })
            })
            .transpose()
    }
    fn get_bool(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        self.get(key)
            .map(|v| match v.to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" | "1" => Ok(true),
                "false" | "no" | "off" | "0" => Ok(false),
                _ => Err(ConfigError::BadBool {
                    section: self.name.clone(),
                    key: key.to_owned(),
                    value: v.to_owned(),
                }),
            })
            .transpose()
    }
}

/// `[Global]` authentication options (`pkg/client/client.go` `AuthOpts`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlobalOpts {
    pub auth_url: String,
    pub username: String,
    pub user_id: String,
    pub password: String,
    pub project_id: String,
    pub project_name: String,
    pub domain_id: String,
    pub domain_name: String,
    pub user_domain_id: String,
    pub user_domain_name: String,
    pub project_domain_id: String,
    pub project_domain_name: String,
    pub region: String,
    pub application_credential_id: String,
    pub application_credential_name: String,
    pub application_credential_secret: String,
    pub ca_file: String,
    pub tls_insecure: bool,
    /// Catalog interface, `public` unless `os-endpoint-type` says otherwise.
    pub endpoint_type: String,
}

/// `[Networking]` options that shape node addresses (`pkg/openstack/openstack.go`
/// `NetworkingOpts`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkingOpts {
    pub ipv6_support_disabled: bool,
    pub public_network_name: Vec<String>,
    pub internal_network_name: Vec<String>,
    pub address_sort_order: String,
}

/// `[LoadBalancer]` options used by the Octavia provider (`pkg/openstack/openstack.go`
/// `LoadBalancerOpts`, defaults from `ReadConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancerOpts {
    /// `enabled` (default true): false disables the LoadBalancer capability.
    pub enabled: bool,
    pub lb_provider: String,
    pub lb_method: String,
    pub subnet_id: String,
    pub network_id: String,
    pub floating_network_id: String,
    pub floating_subnet_id: String,
    pub create_monitor: bool,
    /// Seconds (`monitor-delay`, default 5s).
    pub monitor_delay: u64,
    /// Seconds (`monitor-timeout`, default 3s).
    pub monitor_timeout: u64,
    pub monitor_max_retries: u32,
    pub monitor_max_retries_down: u32,
}

impl Default for LoadBalancerOpts {
    fn default() -> Self {
        Self {
            enabled: true,
            lb_provider: "amphora".to_owned(),
            lb_method: "ROUND_ROBIN".to_owned(),
            subnet_id: String::new(),
            network_id: String::new(),
            floating_network_id: String::new(),
            floating_subnet_id: String::new(),
            create_monitor: false,
            monitor_delay: 5,
            monitor_timeout: 3,
            monitor_max_retries: 1,
            monitor_max_retries_down: 3,
        }
    }
}

/// `[Route]` options (`pkg/openstack/openstack.go` `RouterOpts`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteOpts {
    /// Without a router ID the provider has no Routes capability.
    pub router_id: String,
}

/// The whole file: typed parts used now, every section kept for later controllers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CloudConfig {
    pub global: GlobalOpts,
    pub networking: NetworkingOpts,
    pub load_balancer: LoadBalancerOpts,
    pub route: RouteOpts,
    pub sections: Vec<Section>,
}

const GLOBAL_KEYS: &[&str] = &[
    "auth-url",
    "username",
    "user-id",
    "password",
    "tenant-id",
    "tenant-name",
    "project-id",
    "project-name",
    "trust-id",
    "trustee-id",
    "trustee-password",
    "domain-id",
    "domain-name",
    "tenant-domain-id",
    "tenant-domain-name",
    "project-domain-id",
    "project-domain-name",
    "user-domain-id",
    "user-domain-name",
    "region",
    "ca-file",
    "cert-file",
    "key-file",
    "tls-insecure",
    "application-credential-id",
    "application-credential-name",
    "application-credential-secret",
    "os-endpoint-type",
    "use-clouds",
    "clouds-file",
    "cloud",
];
const NETWORKING_KEYS: &[&str] = &[
    "ipv6-support-disabled",
    "public-network-name",
    "internal-network-name",
    "address-sort-order",
];
const KNOWN_SECTIONS: &[&str] = &[
    "global",
    "loadbalancer",
    "loadbalancerclass",
    "networking",
    "route",
    "metadata",
    "blockstorage",
];

impl CloudConfig {
    /// Reads and parses a file; returns the config and non-fatal warnings.
    pub fn load(path: &str) -> Result<(Self, Vec<String>), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        Self::parse(&text)
    }

    /// Parses text; unknown sections/variables become warnings, as gcfg "extra data".
    pub fn parse(text: &str) -> Result<(Self, Vec<String>), ConfigError> {
        Self::from_sections(parse_gcfg(text)?)
    }

    fn from_sections(sections: Vec<Section>) -> Result<(Self, Vec<String>), ConfigError> {
        let mut warnings = Vec::new();
        let mut cfg = CloudConfig::default();
        for s in &sections {
            let known_keys: &[&str] = match s.name.as_str() {
                "global" => GLOBAL_KEYS,
                "networking" => NETWORKING_KEYS,
                name if KNOWN_SECTIONS.contains(&name) => continue,
                name => {
                    warnings.push(format!("cloud config: unknown section [{name}] ignored"));
                    continue;
                }
            };
            for (k, _) in &s.values {
                if !known_keys.contains(&k.as_str()) {
                    warnings.push(format!(
                        "cloud config: unknown variable {k:?} in [{}] ignored",
                        s.name
                    ));
                }
            }
        }
        let empty = Section::default();
        let global = sections
            .iter()
            .rev()
            .find(|s| s.name == "global")
            .unwrap_or(&empty);
        let get = |k: &str| global.get(k).unwrap_or_default().to_owned();
        let either = |a: &str, b: &str| {
            let v = get(a);
            if v.is_empty() { get(b) } else { v }
        };
        cfg.global = GlobalOpts {
            auth_url: get("auth-url"),
            username: get("username"),
            user_id: get("user-id"),
            password: get("password"),
            project_id: either("project-id", "tenant-id"),
            project_name: either("project-name", "tenant-name"),
            domain_id: get("domain-id"),
            domain_name: get("domain-name"),
            user_domain_id: get("user-domain-id"),
            user_domain_name: get("user-domain-name"),
            project_domain_id: either("project-domain-id", "tenant-domain-id"),
            project_domain_name: either("project-domain-name", "tenant-domain-name"),
            region: get("region"),
            application_credential_id: get("application-credential-id"),
            application_credential_name: get("application-credential-name"),
            application_credential_secret: get("application-credential-secret"),
            ca_file: get("ca-file"),
            tls_insecure: global.get_bool("tls-insecure")?.unwrap_or(false),
            endpoint_type: {
                let v = get("os-endpoint-type");
                if v.is_empty() { "public".to_owned() } else { v }
            },
        };
        if let Some(net) = sections.iter().rev().find(|s| s.name == "networking") {
            cfg.networking = NetworkingOpts {
                ipv6_support_disabled: net.get_bool("ipv6-support-disabled")?.unwrap_or(false),
                public_network_name: net.get_all("public-network-name"),
                internal_network_name: net.get_all("internal-network-name"),
                address_sort_order: net.get("address-sort-order").unwrap_or_default().to_owned(),
            };
        }
        if let Some(lb) = sections.iter().rev().find(|s| s.name == "loadbalancer") {
            let d = LoadBalancerOpts::default();
            let text = |k: &str, default: &str| {
                let v = lb.get(k).unwrap_or_default();
                if v.is_empty() {
                    default.to_owned()
                } else {
                    v.to_owned()
                }
            };
            cfg.load_balancer = LoadBalancerOpts {
                enabled: lb.get_bool("enabled")?.unwrap_or(d.enabled),
                lb_provider: text("lb-provider", &d.lb_provider),
                lb_method: text("lb-method", &d.lb_method),
                subnet_id: text("subnet-id", ""),
                network_id: text("network-id", ""),
                floating_network_id: text("floating-network-id", ""),
                floating_subnet_id: text("floating-subnet-id", ""),
                create_monitor: lb.get_bool("create-monitor")?.unwrap_or(d.create_monitor),
                monitor_delay: lb.get_seconds("monitor-delay")?.unwrap_or(d.monitor_delay),
                monitor_timeout: lb
                    .get_seconds("monitor-timeout")?
                    .unwrap_or(d.monitor_timeout),
                monitor_max_retries: lb
                    .get_u32("monitor-max-retries")?
                    .unwrap_or(d.monitor_max_retries),
                monitor_max_retries_down: lb
                    .get_u32("monitor-max-retries-down")?
                    .unwrap_or(d.monitor_max_retries_down),
            };
        }
        if let Some(route) = sections.iter().rev().find(|s| s.name == "route") {
            cfg.route.router_id = route.get("router-id").unwrap_or_default().to_owned();
        }
        if cfg.global.auth_url.is_empty() {
            return Err(ConfigError::Missing("auth-url is required"));
        }
        let has_app_cred = !cfg.global.application_credential_id.is_empty()
            || !cfg.global.application_credential_name.is_empty();
        if !has_app_cred && cfg.global.username.is_empty() && cfg.global.user_id.is_empty() {
            return Err(ConfigError::Missing(
                "username, user-id or application-credential-id is required",
            ));
        }
        cfg.sections = sections;
        Ok((cfg, warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
# comment
; other comment
[Global]
auth-url = http://127.0.0.1:5000/v3
username = "admin"
password = "p#ss;word \"q\""   # trailing comment
Tenant-Name = demo
domain-name = Default
region = RegionOne
tls-insecure
some-future-key = x

[LoadBalancer]
floating-network-id = abc

[Networking]
internal-network-name = private
internal-network-name = private2
public-network-name = public

[LoadBalancerClass "fast"]
floating-network-id = def
"#;

    /// The in-tree provider's `secret-name`/`secret-namespace` (and its `kubeconfig-path`)
    /// are not cloud-provider-openstack settings (`pkg/openstack/openstack.go` `ReadConfig`
    /// reads only --cloud-config): unknown variables, warned about and otherwise ignored.
    #[test]
    fn legacy_secret_keys_are_unknown_variables() {
        let text = "[Global]\nauth-url = http://k/v3\nusername = u\nsecret-name = occm\n\
                    secret-namespace = kube-system\nkubeconfig-path = /k\n";
        let (cfg, warnings) = match CloudConfig::parse(text) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(cfg.global.auth_url, "http://k/v3");
        assert_eq!(
            warnings,
            vec![
                "cloud config: unknown variable \"secret-name\" in [global] ignored",
                "cloud config: unknown variable \"secret-namespace\" in [global] ignored",
                "cloud config: unknown variable \"kubeconfig-path\" in [global] ignored",
            ]
        );
        // Without credentials in the file there is nothing to fall back on.
        assert!(
            CloudConfig::parse("[Global]\nsecret-name = occm\nsecret-namespace = ks\n").is_err()
        );
    }

    #[test]
    fn parses_upstream_shapes() {
        let (cfg, warnings) = match CloudConfig::parse(GOOD) {
            Ok(v) => v,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(cfg.global.auth_url, "http://127.0.0.1:5000/v3");
        assert_eq!(cfg.global.username, "admin");
        assert_eq!(cfg.global.password, "p#ss;word \"q\"");
        assert_eq!(cfg.global.project_name, "demo");
        assert_eq!(cfg.global.domain_name, "Default");
        assert_eq!(cfg.global.region, "RegionOne");
        assert!(cfg.global.tls_insecure);
        assert_eq!(cfg.global.endpoint_type, "public");
        assert_eq!(
            cfg.networking.internal_network_name,
            vec!["private", "private2"]
        );
        assert_eq!(cfg.networking.public_network_name, vec!["public"]);
        let class = cfg.sections.iter().find(|s| s.name == "loadbalancerclass");
        assert_eq!(class.and_then(|s| s.subsection.as_deref()), Some("fast"));
        assert_eq!(cfg.load_balancer.floating_network_id, "abc");
        assert_eq!(cfg.load_balancer.lb_method, "ROUND_ROBIN");
        assert!(cfg.load_balancer.enabled);
        assert!(cfg.route.router_id.is_empty());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("some-future-key"));
    }

    #[test]
    fn malformed_files_fail() {
        let cases = [
            "auth-url = x\n",                                           // outside a section
            "[Global\nauth-url = x\n",                                  // unclosed header
            "[Global]\nauth-url = \"x\n",                               // unterminated quote
            "[Global]\n= x\n",                                          // empty name
            "[Global]\nauth url = x\n",                                 // bad name
            "[Global]\nauth-url = x\\q\n",                              // bad escape
            "[Global]\nauth-url=x\nusername=u\ntls-insecure = maybe\n", // bad bool
            "[Global]\nusername = u\n",                                 // no auth-url
            "[Global \"unquoted]\nauth-url=x\n",                        // bad subsection
        ];
        for text in cases {
            assert!(CloudConfig::parse(text).is_err(), "should fail: {text:?}");
        }
        assert!(matches!(
            CloudConfig::load("/nonexistent/cloud.conf"),
            Err(ConfigError::Read { .. })
        ));
    }

    #[test]
    fn load_balancer_and_route_sections() {
        let text = "[Global]\nauth-url=x\nusername=u\n[LoadBalancer]\nsubnet-id=s1\n\
                    create-monitor=true\nmonitor-delay=10s\nmonitor-max-retries=2\n\
                    [Route]\nrouter-id=r1\n";
        let cfg = match CloudConfig::parse(text) {
            Ok((cfg, _)) => cfg,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(cfg.load_balancer.subnet_id, "s1");
        assert!(cfg.load_balancer.create_monitor);
        assert_eq!(cfg.load_balancer.monitor_delay, 10);
        assert_eq!(cfg.load_balancer.monitor_timeout, 3);
        assert_eq!(cfg.load_balancer.monitor_max_retries, 2);
        assert_eq!(cfg.route.router_id, "r1");
        let bad = "[Global]\nauth-url=x\nusername=u\n[LoadBalancer]\nmonitor-delay=soon\n";
        assert!(matches!(
            CloudConfig::parse(bad),
            Err(ConfigError::BadValue { .. })
        ));
    }
}
