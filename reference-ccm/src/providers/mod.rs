//! Cloud providers the reference CCM knows, one module each, and the registry of them.
//!
//! Exists to keep every cloud's wire protocol and config format out of the
//! controllers, which only see [`crate::cloud::Instances`], [`crate::cloud::LoadBalancer`]
//! and [`crate::cloud::Routes`] (through [`AnyCloud`], the one type they are started with
//! whichever `--cloud-provider` was chosen).
//!
//! A new provider is a folder `providers/<cloud>/` whose `mod.rs` implements [`Provider`]
//! (every provider has the same methods: what it lacks answers an error naming the
//! capability) and defines its [`ProviderFactory`] `FACTORY` (its `--cloud-provider` name,
//! how it is built from the flags, the flags it owns, its own metrics), plus its `pub mod`
//! line below and its entry in [`registry::PROVIDERS`]. Nothing else in the crate names a
//! cloud: flag validation, startup errors and `/metrics` read the registry.
//!
//! Imports run one way: the startup path reads [`registry`], the registry reads each
//! cloud's `FACTORY`, and a cloud reads, of `providers`, only this file and the shared
//! modules beside it ([`Provider`]/[`AnyCloud`], [`ProviderFactory`], [`gcfg`],
//! [`service_ranges`], [`xml`]), none of which imports a cloud or the registry. So this
//! file re-exports the shared types but nothing of the registry, and no cloud imports
//! another cloud's folder.

mod any_cloud;
mod factory;
pub mod gcfg;
pub mod quirks;
pub mod registry;
pub mod service_ranges;
pub mod xml;

pub use any_cloud::{AnyCloud, Provider};
pub use factory::{NewProvider, ProviderError, ProviderFactory};

// Every cloud's module; its factory is listed in `registry::PROVIDERS`.
pub mod aws;
pub mod azure;
pub mod gce;
pub mod openstack;
pub mod vsphere;

/// TEST ONLY (`--testing-break=skip-lookup-before-create`, set once at startup): every
/// provider's EnsureLoadBalancer takes its create-or-update lookup as "not found".
static SKIP_LOOKUP_BEFORE_CREATE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Sets the process's `--testing-break=skip-lookup-before-create`; only the first call counts.
pub fn use_skip_lookup_before_create(skip: bool) {
    let _ = SKIP_LOOKUP_BEFORE_CREATE.set(skip);
}

/// Whether this process runs `--testing-break=skip-lookup-before-create`.
pub fn skip_lookup_before_create() -> bool {
    SKIP_LOOKUP_BEFORE_CREATE.get().copied().unwrap_or(false)
}

/// The one decision point of every provider's EnsureLoadBalancer: the existing load balancer
/// that `lookup` finds (update it) or `None` (create it). With `skip` (the TEST ONLY
/// `--testing-break=skip-lookup-before-create`, [`skip_lookup_before_create`]) the lookup
/// is not made and the answer is always "not found", so each ensure creates the load
/// balancer again. Lookups of the delete and get paths never come through here.
pub async fn lookup_before_create<T, E>(
    skip: bool,
    lookup: impl std::future::Future<Output = Result<Option<T>, E>>,
) -> Result<Option<T>, E> {
    if skip {
        return Ok(None);
    }
    lookup.await
}

/// The Kubernetes client a provider gets in [`Provider::initialize`], once; `Debug` by
/// hand because `kube::Client` has none.
#[derive(Default)]
pub struct KubeClient(std::sync::OnceLock<kube::Client>);

impl std::fmt::Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "KubeClient(set)"
        } else {
            "KubeClient(unset)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn lookup_before_create_answers_not_found_without_looking_only_when_skipping() {
        let looked = AtomicBool::new(false);
        let lookup = || async {
            looked.store(true, Ordering::SeqCst);
            Ok::<_, String>(Some("lb-1"))
        };
        assert_eq!(
            lookup_before_create(false, lookup()).await,
            Ok(Some("lb-1"))
        );
        assert!(looked.swap(false, Ordering::SeqCst));
        assert_eq!(lookup_before_create(true, lookup()).await, Ok(None));
        assert!(
            !looked.load(Ordering::SeqCst),
            "the lookup must not be made"
        );
        // A failing lookup is not made either: the break answers "not found".
        let failing = async { Err::<Option<u8>, _>("boom".to_owned()) };
        assert_eq!(lookup_before_create(true, failing).await, Ok(None));
        let failing = async { Err::<Option<u8>, _>("boom".to_owned()) };
        assert_eq!(
            lookup_before_create(false, failing).await,
            Err("boom".to_owned())
        );
        let absent = async { Ok::<Option<u8>, String>(None) };
        assert_eq!(lookup_before_create(false, absent).await, Ok(None));
    }
}
