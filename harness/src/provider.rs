//! Which cloud a case runs against. A leaf: it knows names, nothing about mocks or cases,
//! so the runner, the CLI and the reports can speak of providers without pulling in a cloud.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    OpenStack,
    Aws,
    Vsphere,
    Azure,
    Gcp,
}

impl Provider {
    /// The providers run by default (`CCM_CONFORMANCE_PROVIDERS` / `--provider` pick others).
    pub fn all() -> &'static [Provider] {
        &[
            Provider::OpenStack,
            Provider::Aws,
            Provider::Vsphere,
            Provider::Azure,
            Provider::Gcp,
        ]
    }

    /// The name in case names and on the command line (`--provider`, `mock <cloud>`).
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenStack => "openstack",
            Provider::Aws => "aws",
            Provider::Vsphere => "vsphere",
            Provider::Azure => "azure",
            Provider::Gcp => "gcp",
        }
    }

    /// What a CCM's `--cloud-provider` calls it: the name, except GCP, whose provider
    /// registers as `gce` (cloud-provider-gcp `providers/gce/gce.go` `ProviderName`).
    pub fn cloud_provider(self) -> &'static str {
        match self {
            Provider::Gcp => "gce",
            other => other.name(),
        }
    }

    pub fn parse(s: &str) -> Result<Provider, String> {
        match s.trim() {
            "openstack" => Ok(Provider::OpenStack),
            "aws" => Ok(Provider::Aws),
            "vsphere" => Ok(Provider::Vsphere),
            "azure" => Ok(Provider::Azure),
            "gcp" | "gce" => Ok(Provider::Gcp),
            other => Err(format!(
                "unknown provider {other:?} (known: openstack, aws, vsphere, azure, gcp)"
            )),
        }
    }

    /// A comma-separated list.
    pub fn parse_list(s: &str) -> Result<Vec<Provider>, String> {
        let mut out = Vec::new();
        for p in s.split(',').filter(|p| !p.trim().is_empty()) {
            let p = Provider::parse(p)?;
            if !out.contains(&p) {
                out.push(p);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vsphere_is_a_default_provider() {
        assert_eq!(Provider::parse("vsphere"), Ok(Provider::Vsphere));
        assert_eq!(Provider::Vsphere.name(), "vsphere");
        assert_eq!(
            Provider::all(),
            &[
                Provider::OpenStack,
                Provider::Aws,
                Provider::Vsphere,
                Provider::Azure,
                Provider::Gcp
            ]
        );
        assert!(Provider::parse("gke").unwrap_err().contains("vsphere"));
    }

    #[test]
    fn gcp_registers_as_gce() {
        assert_eq!(Provider::parse("gcp"), Ok(Provider::Gcp));
        assert_eq!(Provider::parse("gce"), Ok(Provider::Gcp));
        assert_eq!(Provider::Gcp.name(), "gcp");
        assert_eq!(Provider::Gcp.cloud_provider(), "gce");
        assert_eq!(Provider::Azure.cloud_provider(), "azure");
    }

    #[test]
    fn lists_drop_repeats_and_blanks() {
        assert_eq!(
            Provider::parse_list("aws,,openstack,aws"),
            Ok(vec![Provider::Aws, Provider::OpenStack])
        );
        assert!(Provider::parse_list("aws,gke").is_err());
    }
}
