//! Which cloud a case runs against. A leaf: it knows names, nothing about mocks or cases,
//! so the runner, the CLI and the reports can speak of providers without pulling in a cloud.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    OpenStack,
    Aws,
    Vsphere,
    Azure,
}

impl Provider {
    /// The providers run by default (`CCM_CONFORMANCE_PROVIDERS` / `--provider` pick others).
    pub fn all() -> &'static [Provider] {
        &[
            Provider::OpenStack,
            Provider::Aws,
            Provider::Vsphere,
            Provider::Azure,
        ]
    }

    /// The name used by `--cloud-provider`, in case names and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenStack => "openstack",
            Provider::Aws => "aws",
            Provider::Vsphere => "vsphere",
            Provider::Azure => "azure",
        }
    }

    pub fn parse(s: &str) -> Result<Provider, String> {
        match s.trim() {
            "openstack" => Ok(Provider::OpenStack),
            "aws" => Ok(Provider::Aws),
            "vsphere" => Ok(Provider::Vsphere),
            "azure" => Ok(Provider::Azure),
            other => Err(format!(
                "unknown provider {other:?} (known: openstack, aws, vsphere, azure)"
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
                Provider::Azure
            ]
        );
        assert!(Provider::parse("gce").unwrap_err().contains("vsphere"));
    }

    #[test]
    fn lists_drop_repeats_and_blanks() {
        assert_eq!(
            Provider::parse_list("aws,,openstack,aws"),
            Ok(vec![Provider::Aws, Provider::OpenStack])
        );
        assert!(Provider::parse_list("aws,gce").is_err());
    }
}
