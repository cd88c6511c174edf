//! The vSphere cloud config: upstream's `vsphere.conf`, YAML first, legacy INI second.
//!
//! Exists because the harness and real deployments hand the CCM the file
//! `kubernetes/cloud-provider-vsphere` reads (`pkg/common/config/types_yaml.go` and the
//! legacy `types_ini_legacy.go`): `global` credentials/port/`insecureFlag`/`caFile`, one
//! `vcenter.<name>` entry per vCenter with its `server` and `datacenters`, and `labels`
//! naming the tag categories for zone and region, and `nodes` choosing which guest IPs
//! become InternalIP and ExternalIP by subnet (`pkg/cloudprovider/vsphere/config/
//! types_yaml.go` `NodesYAML`, INI `[Nodes]` in `types_ini_legacy.go`): by subnet
//! (`internalNetworkSubnetCidr`, `externalNetworkSubnetCidr` and their `exclude…` forms) and
//! by the NIC's VM network name (`internalVmNetworkName`, `externalVmNetworkName`). Only one
//! vCenter is supported here.
//!
//! Credentials are either in the file (`user`/`password`) or in a Secret the file names
//! (`secretName` + `secretNamespace`, per `vcenter.<name>` or in `global`, the entry's pair
//! winning; INI `secret-name`/`secret-namespace`): then the file needs no user, as
//! upstream's `config_yaml.go` `validateConfig` / `isSecretInfoProvided` decide, and the
//! provider reads the Secret when it logs in (see `super::credentials`). `ipFamily`
//! (`types_yaml.go`, a list in `global` or per vcenter; INI `ip-family`, a comma list, as
//! `config_ini_legacy.go` `validateIPFamily` splits it) chooses which address families
//! nodes get, default IPv4 only. Upstream's `secretsDirectory` and session-manager
//! settings are not supported.

use serde::Deserialize;

use crate::controllers::route::Cidr;

/// Why the config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading vSphere cloud config {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("vSphere cloud config is neither YAML ({yaml}) nor INI ({ini})")]
    Syntax { yaml: String, ini: String },
    #[error("vSphere cloud config: {0}")]
    Invalid(String),
    /// Upstream's startup check (`pkg/cloudprovider/vsphere/cloud.go` `validateDualStack`).
    #[error(
        "multiple IP families specified for virtual center {0:?} but {DUAL_STACK_ENV} env var is not set"
    )]
    DualStackDisabled(String),
}

/// The environment variable that allows more than one `ipFamily` (any value; upstream
/// checks it with `os.LookupEnv`, `cloud.go` `dualStackFeatureGateEnv`).
pub const DUAL_STACK_ENV: &str = "ENABLE_ALPHA_DUAL_STACK";

/// One `ipFamily` entry (upstream `IPv4Family` / `IPv6Family`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpFamily {
    Ipv4,
    Ipv6,
}

impl IpFamily {
    /// `ipv4` / `ipv6`, ignoring case; anything else is upstream's "Invalid IP Family type".
    fn parse(value: &str) -> Result<Self, ConfigError> {
        if value.eq_ignore_ascii_case("ipv4") {
            Ok(IpFamily::Ipv4)
        } else if value.eq_ignore_ascii_case("ipv6") {
            Ok(IpFamily::Ipv6)
        } else {
            Err(ConfigError::Invalid(format!(
                "Invalid IP Family type {value:?} in ipFamily (ipv4 or ipv6)"
            )))
        }
    }

    pub fn matches(self, ip: &std::net::IpAddr) -> bool {
        match self {
            IpFamily::Ipv4 => ip.is_ipv4(),
            IpFamily::Ipv6 => ip.is_ipv6(),
        }
    }
}

impl std::fmt::Display for IpFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IpFamily::Ipv4 => "ipv4",
            IpFamily::Ipv6 => "ipv6",
        })
    }
}

/// The Secret holding the vCenter credentials (`secretNamespace`/`secretName`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The resolved settings for the one vCenter the provider talks to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VsphereConfig {
    /// The vcenter entry's name (YAML `vcenter.<name>`, INI `[VirtualCenter "<name>"]`).
    pub name: String,
    /// `server`: host name or IP of the vCenter.
    pub server: String,
    pub port: u16,
    /// Credentials from the file; unused when [`Self::secret`] is set.
    pub user: String,
    pub password: String,
    /// Where the credentials are when the file names a Secret.
    pub secret: Option<SecretRef>,
    /// `ipFamily`, in order: the address families nodes get (default IPv4 only).
    pub ip_families: Vec<IpFamily>,
    pub insecure: bool,
    pub ca_file: String,
    /// Datacenter names FindByUuid & co. are scoped to; empty = the whole inventory.
    pub datacenters: Vec<String>,
    pub zone_category: String,
    pub region_category: String,
    /// `nodes`: subnets picking a node's InternalIP and ExternalIP among its guest IPs.
    pub nodes: NodeNetworks,
}

/// The subnet settings of `nodes` (upstream `nodemanager.go` `DiscoverNode` /
/// `discoverIPs`): a guest IP in an internal subnet becomes the InternalIP of its family, one
/// in an external subnet the ExternalIP; IPs in an exclude subnet are never the address of
/// that kind. Each setting is a comma-separated CIDR list; empty lists mean "not set".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeNetworks {
    pub internal_subnets: Vec<Cidr>,
    pub external_subnets: Vec<Cidr>,
    pub exclude_internal_subnets: Vec<Cidr>,
    pub exclude_external_subnets: Vec<Cidr>,
    /// `internalVmNetworkName` / `externalVmNetworkName`: a NIC on this VM network (names
    /// compared ignoring case) gives the address when no subnet matched; empty = unset.
    pub internal_vm_network_name: String,
    pub external_vm_network_name: String,
}

/// A comma-separated CIDR list (upstream `parseCIDRs`: an unparsable entry is an error).
fn parse_cidrs(key: &str, value: Option<&str>) -> Result<Vec<Cidr>, ConfigError> {
    let value = value.unwrap_or("").trim();
    if value.is_empty() {
        return Ok(Vec::new());
    }
    value
        .split(',')
        .map(|c| {
            Cidr::parse(c)
                .ok_or_else(|| ConfigError::Invalid(format!("nodes {key}: {c:?} is not a CIDR")))
        })
        .collect()
}

impl VsphereConfig {
    /// `https://server:port/sdk`.
    pub fn sdk_url(&self) -> String {
        format!("{}/sdk", self.base_url())
    }

    pub fn base_url(&self) -> String {
        if self.server.contains(':') && !self.server.starts_with('[') {
            format!("https://[{}]:{}", self.server, self.port)
        } else {
            format!("https://{}:{}", self.server, self.port)
        }
    }

    pub fn load(path: &str) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        Self::parse(&text)
    }

    /// Upstream refuses more than one IP family unless [`DUAL_STACK_ENV`] is set
    /// (`cloud.go` `validateDualStack`); `enabled` says whether it is.
    pub fn check_dual_stack(&self, enabled: bool) -> Result<(), ConfigError> {
        if self.ip_families.len() > 1 && !enabled {
            return Err(ConfigError::DualStackDisabled(self.name.clone()));
        }
        Ok(())
    }

    /// YAML first (upstream tries YAML, then falls back to INI, `config.go` `ReadConfig`).
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        match serde_saphyr::from_str::<YamlConfig>(text) {
            Ok(y) if y.vcenter.is_some() || y.global.is_some() => from_yaml(y),
            Ok(_) => parse_ini(text).map_err(|ini| ConfigError::Syntax {
                yaml: "no global or vcenter section".into(),
                ini,
            }),
            Err(yaml) => parse_ini(text).map_err(|ini| ConfigError::Syntax {
                yaml: yaml.to_string(),
                ini,
            }),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Names {
    List(Vec<String>),
    Csv(String),
}

impl Names {
    fn into_vec(self) -> Vec<String> {
        match self {
            Names::List(v) => v,
            Names::Csv(s) => split_csv(&s),
        }
    }
}

fn split_csv(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct YamlCommon {
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    port: Option<u16>,
    #[serde(default)]
    insecure_flag: Option<bool>,
    #[serde(default)]
    ca_file: Option<String>,
    #[serde(default)]
    datacenters: Option<Names>,
    #[serde(default)]
    secret_name: Option<String>,
    #[serde(default)]
    secret_namespace: Option<String>,
    #[serde(default, rename = "ipFamily")]
    ip_family: Option<Vec<String>>,
}

impl YamlCommon {
    /// The Secret when both its name and namespace are set (upstream `isSecretInfoProvided`).
    fn secret(&self) -> Option<SecretRef> {
        match (
            self.secret_namespace.as_deref(),
            self.secret_name.as_deref(),
        ) {
            (Some(namespace), Some(name)) if !namespace.is_empty() && !name.is_empty() => {
                Some(SecretRef {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => None,
        }
    }

    /// The `ipFamily` entries that are not blank; `None` when there are none.
    fn ip_families(&self) -> Option<Vec<&str>> {
        let list: Vec<&str> = self
            .ip_family
            .iter()
            .flatten()
            .map(|f| f.trim())
            .filter(|f| !f.is_empty())
            .collect();
        (!list.is_empty()).then_some(list)
    }
}

#[derive(Debug, Deserialize, Default)]
struct YamlLabels {
    #[serde(default)]
    zone: Option<String>,
    #[serde(default)]
    region: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct YamlNodes {
    #[serde(default)]
    internal_network_subnet_cidr: Option<String>,
    #[serde(default)]
    external_network_subnet_cidr: Option<String>,
    #[serde(default)]
    exclude_internal_network_subnet_cidr: Option<String>,
    #[serde(default)]
    exclude_external_network_subnet_cidr: Option<String>,
    #[serde(default)]
    internal_vm_network_name: Option<String>,
    #[serde(default)]
    external_vm_network_name: Option<String>,
}

impl YamlNodes {
    fn resolve(&self) -> Result<NodeNetworks, ConfigError> {
        Ok(NodeNetworks {
            internal_subnets: parse_cidrs(
                "internalNetworkSubnetCidr",
                self.internal_network_subnet_cidr.as_deref(),
            )?,
            external_subnets: parse_cidrs(
                "externalNetworkSubnetCidr",
                self.external_network_subnet_cidr.as_deref(),
            )?,
            exclude_internal_subnets: parse_cidrs(
                "excludeInternalNetworkSubnetCidr",
                self.exclude_internal_network_subnet_cidr.as_deref(),
            )?,
            exclude_external_subnets: parse_cidrs(
                "excludeExternalNetworkSubnetCidr",
                self.exclude_external_network_subnet_cidr.as_deref(),
            )?,
            internal_vm_network_name: self.internal_vm_network_name.clone().unwrap_or_default(),
            external_vm_network_name: self.external_vm_network_name.clone().unwrap_or_default(),
        })
    }
}

#[derive(Debug, Deserialize, Default)]
struct YamlConfig {
    #[serde(default)]
    global: Option<YamlCommon>,
    #[serde(default)]
    vcenter: Option<std::collections::BTreeMap<String, YamlCommon>>,
    #[serde(default)]
    labels: Option<YamlLabels>,
    #[serde(default)]
    nodes: Option<YamlNodes>,
}

fn from_yaml(y: YamlConfig) -> Result<VsphereConfig, ConfigError> {
    let global = y.global.unwrap_or_default();
    let mut vcs = y.vcenter.unwrap_or_default().into_iter();
    let (name, vc) = match (vcs.next(), vcs.next()) {
        (Some(one), None) => one,
        (None, _) => return Err(ConfigError::Invalid("no vcenter entry".into())),
        (Some(_), Some(_)) => {
            return Err(ConfigError::Invalid(
                "more than one vcenter entry is not supported".into(),
            ));
        }
    };
    let labels = y.labels.unwrap_or_default();
    let nodes = y.nodes.unwrap_or_default().resolve()?;
    // The entry's own list, else the global one, else IPv4 (upstream validateConfig).
    let ip_families = match vc.ip_families().or_else(|| global.ip_families()) {
        Some(list) => list
            .into_iter()
            .map(IpFamily::parse)
            .collect::<Result<_, _>>()?,
        None => vec![IpFamily::Ipv4],
    };
    let secret = vc.secret().or_else(|| global.secret());
    let config = VsphereConfig {
        // An entry without `server` uses its key (upstream `types_yaml.go` validateConfig).
        server: vc.server.unwrap_or_else(|| name.clone()),
        name,
        port: vc.port.or(global.port).unwrap_or(443),
        user: vc.user.or(global.user).unwrap_or_default(),
        password: vc.password.or(global.password).unwrap_or_default(),
        secret,
        ip_families,
        insecure: vc.insecure_flag.or(global.insecure_flag).unwrap_or(false),
        ca_file: vc.ca_file.or(global.ca_file).unwrap_or_default(),
        datacenters: vc
            .datacenters
            .or(global.datacenters)
            .map(Names::into_vec)
            .unwrap_or_default(),
        zone_category: labels.zone.unwrap_or_default(),
        region_category: labels.region.unwrap_or_default(),
        nodes,
    };
    validate(config)
}

fn validate(c: VsphereConfig) -> Result<VsphereConfig, ConfigError> {
    if c.server.is_empty() {
        return Err(ConfigError::Invalid("vcenter server is empty".into()));
    }
    if c.user.is_empty() && c.secret.is_none() {
        return Err(ConfigError::Invalid(
            "no user for the vcenter (and no secretName/secretNamespace)".into(),
        ));
    }
    Ok(c)
}

/// Legacy INI: `[Global]`, `[VirtualCenter "server"]`, `[Labels]` (gcfg syntax).
fn parse_ini(text: &str) -> Result<VsphereConfig, String> {
    let mut section = String::new();
    let mut global = YamlCommon::default();
    let mut vc: Option<(String, YamlCommon)> = None;
    let mut labels = YamlLabels::default();
    let mut nodes = YamlNodes::default();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(head) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let head = head.trim();
            if let Some(rest) = head
                .strip_prefix("VirtualCenter")
                .or_else(|| head.strip_prefix("virtualcenter"))
            {
                let server = rest.trim().trim_matches('"').to_owned();
                if vc.is_some() {
                    return Err("more than one VirtualCenter section is not supported".into());
                }
                vc = Some((server, YamlCommon::default()));
                section = "vc".into();
            } else {
                section = head.to_ascii_lowercase();
            }
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("line {}: expected key = value", n + 1))?;
        let key = k.trim().to_ascii_lowercase();
        let value = v.trim().trim_matches('"').to_owned();
        let target = match section.as_str() {
            "global" => &mut global,
            "vc" => match vc.as_mut() {
                Some((_, c)) => c,
                None => continue,
            },
            "labels" => {
                match key.as_str() {
                    "zone" => labels.zone = Some(value),
                    "region" => labels.region = Some(value),
                    _ => {}
                }
                continue;
            }
            "nodes" => {
                match key.as_str() {
                    "internal-network-subnet-cidr" => {
                        nodes.internal_network_subnet_cidr = Some(value)
                    }
                    "external-network-subnet-cidr" => {
                        nodes.external_network_subnet_cidr = Some(value)
                    }
                    "exclude-internal-network-subnet-cidr" => {
                        nodes.exclude_internal_network_subnet_cidr = Some(value)
                    }
                    "exclude-external-network-subnet-cidr" => {
                        nodes.exclude_external_network_subnet_cidr = Some(value)
                    }
                    "internal-vm-network-name" => nodes.internal_vm_network_name = Some(value),
                    "external-vm-network-name" => nodes.external_vm_network_name = Some(value),
                    _ => {}
                }
                continue;
            }
            "" => return Err(format!("line {}: key outside a section", n + 1)),
            _ => continue,
        };
        match key.as_str() {
            "user" => target.user = Some(value),
            "password" => target.password = Some(value),
            "port" => {
                target.port = Some(
                    value
                        .parse()
                        .map_err(|_| format!("line {}: bad port {value:?}", n + 1))?,
                )
            }
            "insecure-flag" => target.insecure_flag = Some(matches!(value.as_str(), "1" | "true")),
            "ca-file" => target.ca_file = Some(value),
            "datacenters" => target.datacenters = Some(Names::Csv(value)),
            "server" => target.server = Some(value),
            "secret-name" => target.secret_name = Some(value),
            "secret-namespace" => target.secret_namespace = Some(value),
            "ip-family" => target.ip_family = Some(value.split(',').map(str::to_owned).collect()),
            _ => {}
        }
    }
    let (name, vc) = vc.ok_or("no VirtualCenter section")?;
    let mut map = std::collections::BTreeMap::new();
    map.insert(name, vc);
    from_yaml(YamlConfig {
        global: Some(global),
        vcenter: Some(map),
        labels: Some(labels),
        nodes: Some(nodes),
    })
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_with_global_defaults() {
        let c = VsphereConfig::parse(
            "global:\n  user: admin\n  password: pw\n  port: 8443\n  insecureFlag: true\n\
             vcenter:\n  vc1:\n    server: 127.0.0.1\n    datacenters:\n      - DC0\n      - DC1\n\
             labels:\n  zone: k8s-zone\n  region: k8s-region\n",
        )
        .unwrap();
        assert_eq!(c.server, "127.0.0.1");
        assert_eq!(c.port, 8443);
        assert_eq!(c.user, "admin");
        assert!(c.insecure);
        assert_eq!(c.datacenters, vec!["DC0", "DC1"]);
        assert_eq!(c.zone_category, "k8s-zone");
        assert_eq!(c.sdk_url(), "https://127.0.0.1:8443/sdk");
    }

    #[test]
    fn yaml_vcenter_overrides_and_csv_datacenters() {
        let c = VsphereConfig::parse(
            "global:\n  user: a\n  caFile: /g.pem\nvcenter:\n  vc.example:\n    user: b\n    caFile: /v.pem\n    datacenters: 'DC0, DC1'\n",
        )
        .unwrap();
        assert_eq!(c.server, "vc.example");
        assert_eq!(c.user, "b");
        assert_eq!(c.ca_file, "/v.pem");
        assert_eq!(c.port, 443);
        assert_eq!(c.datacenters, vec!["DC0", "DC1"]);
    }

    #[test]
    fn legacy_ini() {
        let c = VsphereConfig::parse(
            "[Global]\nuser = \"admin\"\npassword = \"pw\"\nport = \"9443\"\ninsecure-flag = \"1\"\n\n\
             [VirtualCenter \"10.0.0.5\"]\ndatacenters = \"DC0\"\n\n[Labels]\nregion = k8s-region\nzone = k8s-zone\n",
        )
        .unwrap();
        assert_eq!(c.server, "10.0.0.5");
        assert_eq!(c.port, 9443);
        assert!(c.insecure);
        assert_eq!(c.datacenters, vec!["DC0"]);
        assert_eq!(c.region_category, "k8s-region");
    }

    #[test]
    fn nodes_subnets_yaml_and_ini() {
        let c = VsphereConfig::parse(
            "global:\n  user: a\nvcenter:\n  vc1:\n    server: h\n\
             nodes:\n  internalNetworkSubnetCidr: \"10.0.0.0/8,fd00::/8\"\n  externalNetworkSubnetCidr: 192.168.0.0/16\n  excludeInternalNetworkSubnetCidr: 10.9.0.0/16\n",
        )
        .unwrap();
        let cidr = |s: &str| Cidr::parse(s).unwrap();
        assert_eq!(
            c.nodes.internal_subnets,
            vec![cidr("10.0.0.0/8"), cidr("fd00::/8")]
        );
        assert_eq!(c.nodes.external_subnets, vec![cidr("192.168.0.0/16")]);
        assert_eq!(c.nodes.exclude_internal_subnets, vec![cidr("10.9.0.0/16")]);
        assert!(c.nodes.exclude_external_subnets.is_empty());
        let ini = VsphereConfig::parse(
            "[Global]\nuser = a\n[VirtualCenter \"h\"]\n[Nodes]\ninternal-network-subnet-cidr = \"10.0.0.0/8\"\n\
             external-network-subnet-cidr = \"192.168.0.0/16\"\nexclude-external-network-subnet-cidr = 192.168.9.0/24\n",
        )
        .unwrap();
        assert_eq!(ini.nodes.internal_subnets, vec![cidr("10.0.0.0/8")]);
        assert_eq!(ini.nodes.external_subnets, vec![cidr("192.168.0.0/16")]);
        assert_eq!(
            ini.nodes.exclude_external_subnets,
            vec![cidr("192.168.9.0/24")]
        );
        // The VM network names (upstream config tests `TestReadConfigNetworkName`).
        let named = VsphereConfig::parse(
            "global:\n  user: a\nvcenter:\n  vc1:\n    server: h\n\
             nodes:\n  internalVmNetworkName: \"Internal K8s Traffic\"\n  externalVmNetworkName: \"External/Outbound Traffic\"\n",
        )
        .unwrap();
        assert_eq!(named.nodes.internal_vm_network_name, "Internal K8s Traffic");
        assert_eq!(
            named.nodes.external_vm_network_name,
            "External/Outbound Traffic"
        );
        let named_ini = VsphereConfig::parse(
            "[Global]\nuser = a\n[VirtualCenter \"h\"]\n[Nodes]\ninternal-vm-network-name = \"Internal K8s Traffic\"\n\
             external-vm-network-name = \"External/Outbound Traffic\"\n",
        )
        .unwrap();
        assert_eq!(named_ini.nodes, named.nodes);
        // No `nodes`: nothing set.
        let none = VsphereConfig::parse("global:\n  user: a\nvcenter:\n  vc1: {}\n").unwrap();
        assert_eq!(none.nodes, NodeNetworks::default());
        // A bad CIDR is an error, as upstream's net.ParseCIDR makes it.
        let bad = VsphereConfig::parse(
            "global:\n  user: a\nvcenter:\n  vc1: {}\nnodes:\n  internalNetworkSubnetCidr: 10.0.0.0/33\n",
        );
        assert!(
            matches!(bad, Err(ConfigError::Invalid(m)) if m.contains("internalNetworkSubnetCidr"))
        );
    }

    fn secret(namespace: &str, name: &str) -> Option<SecretRef> {
        Some(SecretRef {
            namespace: namespace.into(),
            name: name.into(),
        })
    }

    /// upstream config_yaml.go `validateConfig`: with a Secret no user is needed; the
    /// vcenter entry's Secret wins over the global one; half a reference is none.
    #[test]
    fn secret_references_yaml_and_ini() {
        let global = VsphereConfig::parse(
            "global:\n  secretName: creds\n  secretNamespace: kube-system\nvcenter:\n  vc1:\n    server: 10.0.0.1\n",
        )
        .unwrap();
        assert_eq!(global.secret, secret("kube-system", "creds"));
        assert_eq!(global.user, "");
        let per_vc = VsphereConfig::parse(
            "global:\n  secretName: creds\n  secretNamespace: kube-system\nvcenter:\n  vc1:\n    secretName: vc1-creds\n    secretNamespace: vc1\n",
        )
        .unwrap();
        assert_eq!(per_vc.secret, secret("vc1", "vc1-creds"));
        let only_vc = VsphereConfig::parse(
            "vcenter:\n  vc1:\n    secretName: vc1-creds\n    secretNamespace: vc1\n",
        )
        .unwrap();
        assert_eq!(only_vc.secret, secret("vc1", "vc1-creds"));
        let ini = VsphereConfig::parse(
            "[Global]\nsecret-name = \"creds\"\nsecret-namespace = \"kube-system\"\n[VirtualCenter \"10.0.0.1\"]\n",
        )
        .unwrap();
        assert_eq!(ini.secret, secret("kube-system", "creds"));
        // A name without a namespace is no Secret, so a user is required again.
        let half = VsphereConfig::parse("global:\n  secretName: creds\nvcenter:\n  vc1: {}\n");
        assert!(matches!(half, Err(ConfigError::Invalid(m)) if m.contains("no user")));
        // File credentials alone: no Secret.
        let file = VsphereConfig::parse("global:\n  user: a\nvcenter:\n  vc1: {}\n").unwrap();
        assert_eq!(file.secret, None);
    }

    /// `ipFamily`: a YAML list (global or per vcenter, the entry's winning), an INI comma
    /// list, default IPv4; case ignored; anything else "Invalid IP Family type".
    #[test]
    fn ip_families_yaml_and_ini() {
        use IpFamily::{Ipv4, Ipv6};
        let parse = |yaml: &str| VsphereConfig::parse(yaml).map(|c| c.ip_families);
        assert_eq!(
            parse("global:\n  user: a\nvcenter:\n  vc1: {}\n").unwrap(),
            vec![Ipv4]
        );
        assert_eq!(
            parse("global:\n  user: a\n  ipFamily: [IPv6, ipv4]\nvcenter:\n  vc1: {}\n").unwrap(),
            vec![Ipv6, Ipv4]
        );
        assert_eq!(
            parse("global:\n  user: a\n  ipFamily: [ipv4, ipv6]\nvcenter:\n  vc1:\n    ipFamily:\n      - ipv6\n")
                .unwrap(),
            vec![Ipv6]
        );
        assert_eq!(
            parse("global:\n  user: a\n  ipFamily: []\nvcenter:\n  vc1: {}\n").unwrap(),
            vec![Ipv4]
        );
        let bad = parse("global:\n  user: a\n  ipFamily: [ipv4, ipv5]\nvcenter:\n  vc1: {}\n");
        assert!(
            matches!(&bad, Err(ConfigError::Invalid(m)) if m.starts_with("Invalid IP Family type \"ipv5\"")),
            "{bad:?}"
        );
        let ini = |text: &str| VsphereConfig::parse(text).map(|c| c.ip_families);
        assert_eq!(
            ini("[Global]\nuser = a\nip-family = \"ipv4, ipv6\"\n[VirtualCenter \"h\"]\n").unwrap(),
            vec![Ipv4, Ipv6]
        );
        assert_eq!(
            ini("[Global]\nuser = a\nip-family = ipv4\n[VirtualCenter \"h\"]\nip-family = ipv6,\n")
                .unwrap(),
            vec![Ipv6]
        );
        assert!(ini("[Global]\nuser = a\n[VirtualCenter \"h\"]\nip-family = ipx\n").is_err());
    }

    /// upstream cloud.go `validateDualStack`.
    #[test]
    fn more_than_one_ip_family_needs_the_alpha_env() {
        let dual = VsphereConfig::parse(
            "global:\n  user: a\n  ipFamily: [ipv4, ipv6]\nvcenter:\n  mock:\n    server: 127.0.0.1\n",
        )
        .unwrap();
        let e = dual.check_dual_stack(false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "multiple IP families specified for virtual center \"mock\" but ENABLE_ALPHA_DUAL_STACK env var is not set"
        );
        assert!(dual.check_dual_stack(true).is_ok());
        let single = VsphereConfig::parse("global:\n  user: a\nvcenter:\n  vc1: {}\n").unwrap();
        assert!(single.check_dual_stack(false).is_ok());
        // INI: the VirtualCenter section names the virtual center.
        let ini = VsphereConfig::parse(
            "[Global]\nuser = a\n[VirtualCenter \"10.0.0.5\"]\nip-family = ipv6,ipv4\n",
        )
        .unwrap();
        assert!(
            ini.check_dual_stack(false)
                .unwrap_err()
                .to_string()
                .contains("\"10.0.0.5\"")
        );
    }

    #[test]
    fn rejects_garbage_and_missing_vcenter() {
        assert!(VsphereConfig::parse("not = [valid").is_err());
        assert!(VsphereConfig::parse("global:\n  user: a\n").is_err());
        assert!(VsphereConfig::parse("[Global]\nuser = a\n").is_err());
    }
}
