//! The AWS provider's cloud config: upstream's INI (gcfg) format, unchanged.
//!
//! Mirrors `kubernetes/cloud-provider-aws` `pkg/providers/v1/config/config.go`:
//! `[Global]` (`Zone`, `VPC`, `SubnetID`, `RouteTableID`, `RoleARN`,
//! `KubernetesClusterTag`, `KubernetesClusterID`, `ElbSecurityGroup`, ...) and
//! `[ServiceOverride "<key>"]` sections with `Service`, `Region`, `URL`, `SigningRegion`,
//! `SigningName`, `SigningMethod`, each required but the last two (`validateOverrides`).
//! The region is the zone minus its letter, as upstream derives it without IMDS.
//! Unknown variables are warnings, as gcfg's `FatalOnly` makes them. The file is read with
//! the shared [`crate::providers::gcfg`] reader.

use crate::providers::gcfg::{Section, SyntaxError, parse_gcfg};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("cannot read cloud config {path}: {reason}")]
    Read { path: String, reason: String },
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    #[error("cloud config [ServiceOverride {key:?}]: {reason}")]
    Override { key: String, reason: String },
    #[error("cloud config: {0}")]
    Invalid(String),
}

/// One `[ServiceOverride]`: where a service's API is and how to sign for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceOverride {
    pub service: String,
    pub region: String,
    pub url: String,
    pub signing_region: String,
    pub signing_name: String,
}

/// The parsed config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AwsConfig {
    pub zone: String,
    pub region: String,
    pub vpc: String,
    pub subnet_id: String,
    pub route_table_id: String,
    /// `KubernetesClusterID`, else the legacy `KubernetesClusterTag`.
    pub cluster_id: String,
    pub elb_security_group: String,
    /// `NodeIPFamilies` (multi-valued, in order; `ipv4` when unset, as upstream's
    /// `newAWSCloud` defaults it): which address families nodes get, and in which order.
    pub node_ip_families: Vec<String>,
    pub overrides: Vec<ServiceOverride>,
}

/// `NodeIPFamilies` values upstream acts on (others are ignored, as its `switch` does).
pub const FAMILY_IPV4: &str = "ipv4";
pub const FAMILY_IPV6: &str = "ipv6";

const GLOBAL_KEYS: &[&str] = &[
    "zone",
    "vpc",
    "subnetid",
    "routetableid",
    "rolearn",
    "sourcearn",
    "kubernetesclustertag",
    "kubernetesclusterid",
    "disablesecuritygroupingress",
    "elbsecuritygroup",
    "disablestrictzonecheck",
    "nodeipfamilies",
    "clusterserviceloadbalancerhealthprobemode",
    "clusterserviceloadbalancerhealthprobeport",
    "clusterserviceloadbalancerhealthprobepath",
    "clusterservicesharedloadbalancerhealthprobeport",
    "clusterservicesharedloadbalancerhealthprobepath",
];

impl AwsConfig {
    /// Reads the file; an empty path is an empty config.
    pub fn load(path: &str) -> Result<(Self, Vec<String>), ConfigError> {
        if path.is_empty() {
            return Self::parse("");
        }
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        Self::parse(&text)
    }

    /// Parses config text; returns warnings for unknown sections and variables.
    pub fn parse(text: &str) -> Result<(Self, Vec<String>), ConfigError> {
        let mut cfg = AwsConfig::default();
        let mut warnings = Vec::new();
        let mut legacy_tag = String::new();
        for s in parse_gcfg(text)? {
            match s.name.as_str() {
                "global" => {
                    let get = |k: &str| s.get(k).unwrap_or_default().to_owned();
                    cfg.zone = get("zone");
                    cfg.vpc = get("vpc");
                    cfg.subnet_id = get("subnetid");
                    cfg.route_table_id = get("routetableid");
                    cfg.cluster_id = get("kubernetesclusterid");
                    legacy_tag = get("kubernetesclustertag");
                    cfg.elb_security_group = get("elbsecuritygroup");
                    cfg.node_ip_families = s
                        .get_all("nodeipfamilies")
                        .into_iter()
                        .map(|f| f.trim().to_owned())
                        .filter(|f| !f.is_empty())
                        .collect();
                    warn_unknown(&s, GLOBAL_KEYS, &mut warnings);
                }
                "serviceoverride" => {
                    cfg.overrides.push(service_override(&s)?);
                    warn_unknown(
                        &s,
                        &[
                            "service",
                            "region",
                            "url",
                            "signingregion",
                            "signingname",
                            "signingmethod",
                        ],
                        &mut warnings,
                    );
                }
                other => warnings.push(format!("cloud config: unknown section [{other}]")),
            }
        }
        if cfg.cluster_id.is_empty() {
            cfg.cluster_id = legacy_tag;
        }
        if cfg.node_ip_families.is_empty() {
            cfg.node_ip_families = vec![FAMILY_IPV4.to_owned()];
        }
        cfg.region = region_of_zone(&cfg.zone);
        if cfg.region.is_empty() {
            cfg.region = std::env::var("AWS_REGION").unwrap_or_default();
        }
        if cfg.region.is_empty() {
            return Err(ConfigError::Invalid(
                "[Global] Zone is required to know the region (no instance metadata is read)"
                    .into(),
            ));
        }
        Ok((cfg, warnings))
    }

    /// The override for `service` (`ec2`, `elasticloadbalancing`) in our region, if any.
    /// Upstream since its move to aws-sdk-go-v2 names services by the SDK's service IDs
    /// (`EC2`, `Elastic Load Balancing`, `Elastic Load Balancing v2`; cloud-provider-aws
    /// `pkg/providers/v1/config/config.go` resolvers); SDK v1's signing names (`ec2`,
    /// `elasticloadbalancing`) are kept for older configs. Names compare ignoring case.
    /// This client speaks ELB and ELBv2 at one endpoint: the classic override is taken
    /// first, then the v2 one.
    pub fn override_for(&self, service: &str) -> Option<&ServiceOverride> {
        let aliases: &[&str] = match service {
            "ec2" => &["ec2"],
            "elasticloadbalancing" => &[
                "elasticloadbalancing",
                "elastic load balancing",
                "elastic load balancing v2",
            ],
            other => return self.overrides.iter().find(|o| o.service == other),
        };
        aliases.iter().find_map(|name| {
            self.overrides
                .iter()
                .find(|o| o.service == *name && o.region == self.region)
                .or_else(|| self.overrides.iter().find(|o| o.service == *name))
        })
    }
}

/// `us-west-2a` -> `us-west-2` (upstream `azToRegion`: drop the last character).
pub fn region_of_zone(zone: &str) -> String {
    let mut chars = zone.chars();
    chars.next_back();
    chars.as_str().to_owned()
}

fn warn_unknown(s: &Section, known: &[&str], warnings: &mut Vec<String>) {
    for (k, _) in &s.values {
        if !known.contains(&k.as_str()) {
            warnings.push(format!(
                "cloud config: unknown variable {k:?} in [{}]",
                s.name
            ));
        }
    }
}

fn service_override(s: &Section) -> Result<ServiceOverride, ConfigError> {
    let key = s.subsection.clone().unwrap_or_default();
    let need = |k: &str, label: &str| -> Result<String, ConfigError> {
        match s.get(k).map(str::trim) {
            Some(v) if !v.is_empty() => Ok(v.to_owned()),
            _ => Err(ConfigError::Override {
                key: key.clone(),
                reason: format!("{label} is missing"),
            }),
        }
    };
    let service = need("service", "Service")?;
    let o = ServiceOverride {
        region: need("region", "Region")?,
        url: need("url", "URL")?,
        signing_region: need("signingregion", "SigningRegion")?,
        signing_name: s.get("signingname").unwrap_or_default().trim().to_owned(),
        service: service.to_ascii_lowercase(),
    };
    if !(o.url.starts_with("http://") || o.url.starts_with("https://")) {
        return Err(ConfigError::Override {
            key,
            reason: format!("URL {:?} is not http(s)", o.url),
        });
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = r#"
[Global]
Zone = us-west-2a
VPC = vpc-1
SubnetID = subnet-1
KubernetesClusterID = c1
RoleARN = arn:aws:iam::1:role/x

[ServiceOverride "1"]
Service = ec2
Region = us-west-2
URL = http://127.0.0.1:1234
SigningRegion = us-west-2

[ServiceOverride "2"]
Service = elasticloadbalancing
Region = us-west-2
URL = http://127.0.0.1:1234
SigningRegion = us-west-2
SigningName = elasticloadbalancing
"#;

    #[test]
    fn sdk_v2_service_ids_are_understood() {
        let conf = "[Global]\nZone = us-west-2a\n\
            [ServiceOverride \"1\"]\nService = EC2\nRegion = us-west-2\nURL = http://e\nSigningRegion = us-west-2\n\
            [ServiceOverride \"2\"]\nService = Elastic Load Balancing v2\nRegion = us-west-2\nURL = http://v2\nSigningRegion = us-west-2\n\
            [ServiceOverride \"3\"]\nService = Elastic Load Balancing\nRegion = us-west-2\nURL = http://v1\nSigningRegion = us-west-2\n\
            [ServiceOverride \"4\"]\nService = ec2imds\nRegion = us-west-2\nURL = http://imds\nSigningRegion = us-west-2\n";
        let (c, _) = AwsConfig::parse(conf).expect("parses");
        assert_eq!(
            c.override_for("ec2").map(|o| o.url.as_str()),
            Some("http://e")
        );
        assert_eq!(
            c.override_for("elasticloadbalancing")
                .map(|o| o.url.as_str()),
            Some("http://v1")
        );
        assert_eq!(
            c.override_for("ec2imds").map(|o| o.url.as_str()),
            Some("http://imds")
        );
    }

    #[test]
    fn parses_upstream_shape() {
        let (c, warnings) = AwsConfig::parse(CONF).expect("parses");
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(c.region, "us-west-2");
        assert_eq!(c.zone, "us-west-2a");
        assert_eq!(c.cluster_id, "c1");
        assert_eq!(c.vpc, "vpc-1");
        assert_eq!(c.node_ip_families, vec!["ipv4".to_owned()]);
        let ec2 = c.override_for("ec2").expect("ec2");
        assert_eq!(ec2.url, "http://127.0.0.1:1234");
        assert_eq!(
            c.override_for("elasticloadbalancing")
                .map(|o| o.signing_name.as_str()),
            Some("elasticloadbalancing")
        );
    }

    #[test]
    fn node_ip_families_are_multi_valued_in_order() {
        let text = "[Global]\nZone=us-west-2a\nNodeIPFamilies=ipv6\nNodeIPFamilies=ipv4\n";
        let (c, w) = AwsConfig::parse(text).expect("parses");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            c.node_ip_families,
            vec!["ipv6".to_owned(), "ipv4".to_owned()]
        );
    }

    #[test]
    fn legacy_tag_unknown_keys_and_errors() {
        let (c, w) =
            AwsConfig::parse("[Global]\nZone=eu-west-1b\nKubernetesClusterTag=old\nBogus=1\n")
                .expect("parses");
        assert_eq!(c.cluster_id, "old");
        assert_eq!(c.region, "eu-west-1");
        assert_eq!(w.len(), 1);
        let missing_url = "[Global]\nZone=us-west-2a\n[ServiceOverride \"1\"]\nService=ec2\nRegion=us-west-2\nSigningRegion=us-west-2\n";
        let err = AwsConfig::parse(missing_url).expect_err("no URL");
        assert!(err.to_string().contains("URL is missing"), "{err}");
        assert!(AwsConfig::parse("[Global\n").is_err());
    }
}
