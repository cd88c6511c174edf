//! The registry: [`PROVIDERS`], every cloud this CCM can run, and what is read from it.
//!
//! Exists so that flag validation (`--cloud-provider`, flags only some providers own),
//! provider construction, startup errors and `/metrics` are written once, over
//! [`PROVIDERS`], instead of once per cloud. This is the one file that names every cloud;
//! only the startup path (`crate::run`) reads it, and no cloud imports it (a cloud
//! describes itself with [`ProviderFactory`], which lives apart in `factory.rs`), so
//! imports run one way: registry -> clouds -> shared provider types.

use super::factory::ProviderFactory;
use crate::options::{Options, OptionsError};

/// Every provider this CCM can run, in the order error messages list them. Adding a cloud
/// is its folder, its `pub mod` line in `providers/mod.rs` and its entry here.
pub static PROVIDERS: &[&ProviderFactory] = &[
    &super::openstack::FACTORY,
    &super::aws::FACTORY,
    &super::vsphere::FACTORY,
    &super::azure::FACTORY,
    &super::gce::FACTORY,
];

/// The registered provider named `name` (a `--cloud-provider` value).
pub fn factory(name: &str) -> Option<&'static ProviderFactory> {
    PROVIDERS.iter().copied().find(|p| p.name == name)
}

/// The `--cloud-provider` names, in registry order.
pub fn names() -> impl Iterator<Item = &'static str> {
    PROVIDERS.iter().map(|p| p.name)
}

/// The registered provider `--cloud-provider` names.
pub fn provider_factory(opts: &Options) -> Result<&'static ProviderFactory, OptionsError> {
    match opts.cloud_provider.as_str() {
        "" => Err(OptionsError::MissingCloudProvider),
        name => factory(name).ok_or_else(|| OptionsError::UnknownCloudProvider {
            name: name.to_owned(),
            known: known_providers(),
        }),
    }
}

/// Checks the flags, those that need the registry included, in upstream's order: the
/// provider (present, registered), then [`Options::validate`] (controllers, lock, worker
/// counts), then whether the provider owns `--node-labels`, then
/// [`Options::validate_node_labels`] (the keys). Answers the provider's factory.
pub fn validate(opts: &Options) -> Result<&'static ProviderFactory, OptionsError> {
    let provider = provider_factory(opts)?;
    opts.validate()?;
    if !opts.node_labels.is_empty() && !provider.accepts_node_labels {
        return Err(OptionsError::NodeLabelsNotAccepted {
            provider: opts.cloud_provider.clone(),
            owners: node_labels_owners(),
        });
    }
    opts.validate_node_labels()?;
    Ok(provider)
}

/// Every registered provider's own metric families (its factory's `render_metrics`), in
/// registry order, for [`crate::metrics::Metrics::with_provider_families`].
pub fn metric_families() -> Vec<fn(&mut String)> {
    PROVIDERS.iter().filter_map(|p| p.render_metrics).collect()
}

/// `openstack, aws, ...`: the registered `--cloud-provider` names, in registry order.
fn known_providers() -> String {
    names().collect::<Vec<_>>().join(", ")
}

/// Who owns `--node-labels`: `<Display> provider (--cloud-provider=<name>)` for each
/// provider whose factory accepts it.
fn node_labels_owners() -> String {
    PROVIDERS
        .iter()
        .filter(|p| p.accepts_node_labels)
        .map(|p| format!("{} provider (--cloud-provider={})", p.display_name, p.name))
        .collect::<Vec<_>>()
        .join(" or ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn opts(args: &[&str]) -> Options {
        let mut all = vec!["reference-ccm"];
        all.extend_from_slice(args);
        match Options::try_parse_from(all) {
            Ok(o) => o,
            Err(e) => panic!("parse failed: {e}"),
        }
    }

    fn check(args: &[&str]) -> Result<&'static str, OptionsError> {
        validate(&opts(args)).map(|p| p.name)
    }

    #[test]
    fn provider_validation() {
        assert_eq!(check(&[]), Err(OptionsError::MissingCloudProvider));
        assert!(matches!(
            check(&["--cloud-provider=nope"]),
            Err(OptionsError::UnknownCloudProvider { name, .. }) if name == "nope"
        ));
        assert_eq!(check(&["--cloud-provider=openstack"]), Ok("openstack"));
        // The provider is checked first, then the flags that need none.
        assert!(matches!(
            check(&["--cloud-provider=nope", "--controllers=*,bogus"]),
            Err(OptionsError::UnknownCloudProvider { .. })
        ));
        assert_eq!(
            check(&["--cloud-provider=openstack", "--controllers=*,bogus"]),
            Err(OptionsError::UnknownController("bogus".into()))
        );
        let o = opts(&[
            "--cloud-provider=openstack",
            "--leader-elect-resource-lock=endpoints",
        ]);
        assert!(matches!(
            validate(&o),
            Err(OptionsError::UnsupportedResourceLock(_))
        ));
        assert_eq!(
            check(&["--cloud-provider=openstack", "--concurrent-node-syncs=0"]),
            Err(OptionsError::BadNodeSyncs(0))
        );
    }

    #[test]
    fn node_labels_need_vsphere_and_qualified_keys() {
        assert_eq!(
            check(&[
                "--cloud-provider=vsphere",
                "--node-labels=a=1,b=2",
                "--node-labels",
                "b=3",
            ]),
            Ok("vsphere")
        );
        let Err(e) = check(&["--cloud-provider=openstack", "--node-labels=a=b"]) else {
            panic!("must fail")
        };
        assert!(
            matches!(&e, OptionsError::NodeLabelsNotAccepted { provider, .. } if provider == "openstack"),
            "{e:?}"
        );
        // Ownership is checked before the keys, and after the other flags.
        assert!(matches!(
            check(&["--cloud-provider=openstack", "--node-labels=-a=b"]),
            Err(OptionsError::NodeLabelsNotAccepted { .. })
        ));
        assert_eq!(
            check(&[
                "--cloud-provider=openstack",
                "--node-labels=a=b",
                "--controllers=bogus"
            ]),
            Err(OptionsError::UnknownController("bogus".into()))
        );
        let Err(e) = check(&[
            "--cloud-provider=vsphere",
            "--node-labels=ok=1,Bad_Prefix.com/x=2",
        ]) else {
            panic!("must fail")
        };
        assert!(
            e.to_string()
                .starts_with("invalid --node-labels key \"Bad_Prefix.com/x\": "),
            "{e}"
        );
    }

    /// The provider errors are written from the registry, in its order, with the text
    /// they had when each provider was named here by hand.
    #[test]
    fn provider_errors_are_written_from_the_registry() {
        let Err(unknown) = check(&["--cloud-provider=nope"]) else {
            panic!("must fail")
        };
        assert_eq!(
            unknown.to_string(),
            "unknown cloud provider \"nope\" (known: openstack, aws, vsphere, azure, gce)"
        );
        let Err(not_owned) = check(&["--cloud-provider=openstack", "--node-labels=a=b"]) else {
            panic!("must fail")
        };
        assert_eq!(
            not_owned.to_string(),
            "--node-labels is a flag of the vSphere provider (--cloud-provider=vsphere), \
             not of \"openstack\""
        );
        assert_eq!(
            provider_factory(&opts(&["--cloud-provider=gce"])).map(|p| p.name),
            Ok("gce")
        );
        assert_eq!(
            names().collect::<Vec<_>>(),
            ["openstack", "aws", "vsphere", "azure", "gce"]
        );
        assert_eq!(factory("aws").map(|p| p.display_name), Some("AWS"));
        assert!(factory("nope").is_none());
    }

    /// `/metrics` carries every registered provider's own families, whichever runs.
    #[test]
    fn metric_families_are_rendered_on_metrics() {
        let text = crate::metrics::Metrics::with_provider_families(metric_families()).render();
        for name in [
            "openstack_api_request_duration_seconds",
            "openstack_api_requests_total",
            "openstack_api_request_errors_total",
        ] {
            assert!(text.contains(&format!("# TYPE {name} ")), "{name}");
        }
        // After the route controller's families, before the workqueue's.
        let at = |needle: &str| text.find(needle).unwrap_or(usize::MAX);
        assert!(at("route_controller_route_sync_total") < at("openstack_api_"));
        assert!(at("openstack_api_") < at("# HELP workqueue_adds_total"));
    }
}
