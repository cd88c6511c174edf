//! [`ProviderFactory`]: what the rest of the CCM knows about a cloud, as data.
//!
//! Exists so each cloud can describe itself (a `FACTORY` in its own folder) without
//! seeing the list of clouds: this file imports no cloud and not the registry
//! ([`super::registry`], which holds that list and reads these factories), so a cloud's
//! imports never lead back to the registry.

use futures::future::BoxFuture;

use super::any_cloud::AnyCloud;
use crate::options::Options;

/// Why a provider could not be built: its own error type, boxed. Printed after
/// `<name> provider: ` as one startup line.
pub type ProviderError = Box<dyn std::error::Error + Send + Sync>;

/// What [`ProviderFactory::new`] answers: the provider, with the warnings to log once
/// logging is up.
pub type NewProvider<'a> = BoxFuture<'a, Result<(AnyCloud, Vec<String>), ProviderError>>;

/// One cloud in the registry.
#[derive(Debug)]
pub struct ProviderFactory {
    /// The `--cloud-provider` value (also the prefix of its startup errors).
    pub name: &'static str,
    /// The cloud as prose names it, in messages about its flags.
    pub display_name: &'static str,
    /// Whether `--node-labels` is a flag of this provider; with any other provider the
    /// flag is a startup error naming the providers that own it.
    pub accepts_node_labels: bool,
    /// Builds the provider from the flags (`--cloud-config`, and any flag of its own),
    /// with the warnings to log once logging is up.
    pub new: for<'a> fn(&'a Options) -> NewProvider<'a>,
    /// Appends the metric families the provider records itself (Prometheus text format)
    /// to `/metrics`; rendered whichever provider runs, so the families are always there.
    pub render_metrics: Option<fn(&mut String)>,
}
