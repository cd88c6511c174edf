//! Which cloud a case runs against: a handle on one entry of the registry of clouds
//! ([`crate::cloud::registry`]). The runner, the CLI and the reports speak of providers by
//! it without knowing any cloud: every name, alias and build entry comes from the cloud's
//! descriptor.

use std::sync::LazyLock;

use crate::cloud::descriptor::{CloudDescriptor, MockTls};
use crate::cloud::registry::CLOUDS;
use crate::cloud::standalone::{StandaloneError, StandaloneMock};

/// A cloud from the registry (or one known only by name, [`Provider::named`]).
#[derive(Clone, Copy)]
pub struct Provider(&'static CloudDescriptor);

static ALL: LazyLock<Vec<Provider>> =
    LazyLock::new(|| CLOUDS.iter().map(|&d| Provider(d)).collect());

impl Provider {
    /// The providers run by default (`CCM_CONFORMANCE_PROVIDERS` / `--provider` pick
    /// others): every cloud in the registry, in its order.
    pub fn all() -> &'static [Provider] {
        &ALL
    }

    /// A cloud this project has neither a mock nor an upstream build of, known by its name
    /// and its CCM's `--cloud-provider` name: cases run against it only on a real cluster,
    /// through the provider's driver. Each call leaks one small descriptor (a process
    /// names a handful at most).
    pub fn named(name: &str, cloud_provider: &str) -> Provider {
        if let Some(known) = Provider::find(name) {
            return known;
        }
        let name: &'static str = Box::leak(name.to_string().into_boxed_str());
        let cloud_provider: &'static str = Box::leak(cloud_provider.to_string().into_boxed_str());
        Provider(Box::leak(Box::new(CloudDescriptor::named(
            name,
            cloud_provider,
        ))))
    }

    /// Everything the registry knows about this cloud.
    pub fn descriptor(self) -> &'static CloudDescriptor {
        self.0
    }

    /// The name in case names and on the command line (`--provider`, `mock <cloud>`).
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// What a CCM's `--cloud-provider` calls it.
    pub fn cloud_provider(self) -> &'static str {
        self.0.cloud_provider
    }

    /// Upstream's CCM for this cloud, where the project builds one.
    pub fn upstream_ccm(self) -> Option<&'static ccm_upstream::Upstream> {
        self.0.upstream.as_ref().map(|u| &u.ccm)
    }

    /// The per-node agent upstream's CCM relies on beside it, if any.
    pub fn upstream_node_manager(self) -> Option<&'static ccm_upstream::Upstream> {
        self.0
            .upstream
            .as_ref()
            .and_then(|u| u.node_manager.as_ref())
    }

    /// Serves this cloud's mock alone as `args` ask, until SIGINT/SIGTERM; what the mock
    /// cannot be (no mock, `--tls` or `--imds` it does not serve) is bad input.
    pub async fn serve_mock(self, args: StandaloneMock) -> Result<(), StandaloneError> {
        let name = self.name();
        let Some(mock) = self.descriptor().mock.as_ref() else {
            return Err(StandaloneError::BadInput(format!(
                "no mock of {name} in this project (mocks: {})",
                Provider::all()
                    .iter()
                    .filter(|p| p.descriptor().has_mock())
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        if args.tls && mock.tls == MockTls::Never {
            return Err(StandaloneError::BadInput(format!(
                "--tls is not supported for the {name} mock yet"
            )));
        }
        if args.imds && !mock.imds {
            return Err(StandaloneError::BadInput(format!(
                "--imds is not served by the {name} mock (only by mocks with an instance metadata service)"
            )));
        }
        (mock.serve)(args).await
    }

    /// A registered cloud by its name or one of its aliases.
    fn find(name: &str) -> Option<Provider> {
        Provider::all()
            .iter()
            .copied()
            .find(|p| p.0.name == name || p.0.aliases.contains(&name))
    }

    pub fn parse(s: &str) -> Result<Provider, String> {
        let s = s.trim();
        Provider::find(s).ok_or_else(|| {
            let known: Vec<&str> = Provider::all().iter().map(|p| p.name()).collect();
            format!("unknown provider {s:?} (known: {})", known.join(", "))
        })
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

    /// Its place in the registry (clouds known only by name come after, by name).
    fn rank(self) -> (usize, &'static str) {
        let index = CLOUDS
            .iter()
            .position(|d| d.name == self.0.name)
            .unwrap_or(usize::MAX);
        (index, self.0.name)
    }
}

impl PartialEq for Provider {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Provider {}

impl std::hash::Hash for Provider {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name.hash(state)
    }
}

impl PartialOrd for Provider {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Provider {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Provider({})", self.0.name)
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str) -> Provider {
        Provider::parse(name).unwrap()
    }

    #[test]
    fn the_registry_order_is_the_default_order() {
        let names: Vec<&str> = Provider::all().iter().map(|p| p.name()).collect();
        assert_eq!(names, ["openstack", "aws", "vsphere", "azure", "gcp"]);
        let mut sorted = vec![p("gcp"), p("aws"), p("openstack")];
        sorted.sort();
        assert_eq!(sorted, [p("openstack"), p("aws"), p("gcp")]);
        assert!(Provider::parse("gke").unwrap_err().contains("vsphere"));
    }

    #[test]
    fn gcp_registers_as_gce() {
        assert_eq!(p("gce"), p("gcp"));
        assert_eq!(p("gcp").name(), "gcp");
        assert_eq!(p("gcp").cloud_provider(), "gce");
        assert_eq!(p("azure").cloud_provider(), "azure");
    }

    #[test]
    fn lists_drop_repeats_and_blanks() {
        assert_eq!(
            Provider::parse_list("aws,,openstack,aws"),
            Ok(vec![p("aws"), p("openstack")])
        );
        assert!(Provider::parse_list("aws,gke").is_err());
    }

    #[test]
    fn a_cloud_known_only_by_name_has_no_mock_and_sorts_last() {
        let hetzner = Provider::named("hetzner", "hcloud");
        assert_eq!(hetzner.name(), "hetzner");
        assert_eq!(hetzner.cloud_provider(), "hcloud");
        assert!(!hetzner.descriptor().has_mock());
        assert!(hetzner.descriptor().upstream.is_none());
        assert!(p("gcp") < hetzner);
        // A registered name keeps its descriptor.
        assert!(Provider::named("aws", "x").descriptor().has_mock());
        // Naming it does not make it parse as a registered cloud.
        assert!(Provider::parse("hetzner").is_err());
    }
}
