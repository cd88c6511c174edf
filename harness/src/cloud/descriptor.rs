//! A cloud as the rest of the project knows it: one [`CloudDescriptor`] per cloud, in
//! that cloud's own file, listed once in [`super::registry`]. It holds the cloud's names,
//! how to start its mock and the harness backend over it, how to serve that mock alone
//! (`ccm-conformance mock <name>`), and which upstream CCM to build. A cloud that has only
//! a name (no mock, no upstream build) is a descriptor too: cases then run against a real
//! cloud through a provider's driver, and what needs the mock skips.

use futures::future::BoxFuture;

use super::capability::Backend;
use super::standalone::{StandaloneError, StandaloneMock};
use crate::error::CaseError;

/// Starts a fresh mock and the backend over it: `(seeded nodes, address block)`.
pub(crate) type StartBackend =
    fn(usize, u8) -> BoxFuture<'static, Result<Box<dyn Backend>, CaseError>>;

/// Serves the mock alone until SIGINT/SIGTERM.
pub(crate) type ServeMock = fn(StandaloneMock) -> BoxFuture<'static, Result<(), StandaloneError>>;

/// One cloud.
#[derive(Debug)]
pub struct CloudDescriptor {
    /// The name in case names, `--provider`, `CCM_CONFORMANCE_PROVIDERS`, `mock <name>`
    /// and the upstream build cache.
    pub name: &'static str,
    /// Other names `--provider` accepts for it.
    pub aliases: &'static [&'static str],
    /// What a CCM's `--cloud-provider` calls it.
    pub cloud_provider: &'static str,
    /// Its mock, when this project has one.
    pub(crate) mock: Option<MockEntry>,
    /// Upstream's CCM for it, built from its Go module (`ccm-conformance upstream build`).
    pub upstream: Option<UpstreamEntry>,
}

/// How a mock cloud starts, for the cases and alone.
pub(crate) struct MockEntry {
    pub start: StartBackend,
    pub serve: ServeMock,
    /// How `mock <name> --tls` is taken.
    pub tls: MockTls,
    /// Whether `mock <name> --imds` serves an instance metadata service.
    pub imds: bool,
}

impl std::fmt::Debug for MockEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockEntry")
            .field("tls", &self.tls)
            .field("imds", &self.imds)
            .finish_non_exhaustive()
    }
}

/// Whether a mock serves HTTPS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MockTls {
    /// Plain HTTP unless `--tls` asks for HTTPS.
    OnRequest,
    /// Always HTTPS (its clients refuse anything else); `--tls` changes nothing.
    Always,
    /// Plain HTTP only; `--tls` is refused.
    Never,
}

/// Upstream's binaries for a cloud.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamEntry {
    /// The cloud-controller-manager.
    pub ccm: ccm_upstream::Upstream,
    /// A per-node agent the CCM relies on, one per node, where it has one.
    pub node_manager: Option<ccm_upstream::Upstream>,
}

impl CloudDescriptor {
    /// A cloud known only by name: no mock, no upstream build.
    pub const fn named(name: &'static str, cloud_provider: &'static str) -> Self {
        Self {
            name,
            aliases: &[],
            cloud_provider,
            mock: None,
            upstream: None,
        }
    }

    /// Whether this project has a mock of it.
    pub fn has_mock(&self) -> bool {
        self.mock.is_some()
    }
}
