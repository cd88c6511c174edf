//! What every cloud mock is from the outside, under uniform names: started from a config,
//! announcing itself with a ready object (the connection details a CCM needs, written as
//! JSON by `ccm-conformance mock <cloud>`), exposing its admin routes, shut down. The
//! root crate's `mock` command is one generic function over this trait.
//!
//! What the five mocks do alike is done here once: a seed file is a [`SeedFile`] of the
//! cloud's own state ([`LoadSeed`], so [`MockCloud::load_seed`] is provided), and the
//! admin router is the mock's [`AdminApi`] journaled as service `admin`
//! ([`MockCloud::admin_router`] is provided). A mock implements only what differs: its
//! options, how it starts, which of its start errors are the seed's, its ready object,
//! its admin API and how it stops.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::admin::AdminApi;
use crate::seed::{SeedError, SeedFile};

/// What `ccm-conformance mock <cloud>` passes to every mock (each takes what it supports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MockOptions {
    pub listen: SocketAddr,
    /// Seeded instances, named node-0, node-1, ...
    pub nodes: usize,
    /// Serve HTTPS (openstack; vsphere always does).
    pub tls: bool,
    /// Also serve an instance metadata service (aws).
    pub imds: bool,
}

/// A seed file a mock can read from disk: every mock's is a [`SeedFile`] of its state.
pub trait LoadSeed: Sized {
    /// Reads and checks the file ([`SeedFile::load`]).
    fn load_seed(path: &Path) -> Result<Self, SeedError>;
}

impl<S: DeserializeOwned + Default> LoadSeed for SeedFile<S> {
    fn load_seed(path: &Path) -> Result<Self, SeedError> {
        SeedFile::load(path)
    }
}

/// A running cloud mock.
pub trait MockCloud: Sized + Send + 'static {
    /// The cloud's name in messages (`"OpenStack"`, `"AWS"`, `"vSphere"`).
    const LABEL: &'static str;
    /// The seed file's content (`Default`: no seed file).
    type Seed: LoadSeed + Default + Send;
    type Config: Send;
    type Error: std::error::Error + Send + Sync + 'static;
    /// The ready object (connection details), serialized as the ready file.
    type Ready: Serialize;

    /// Reads a seed file.
    fn load_seed(path: &Path) -> Result<Self::Seed, SeedError> {
        Self::Seed::load_seed(path)
    }

    /// The config for the CLI's options and seed.
    fn config(options: &MockOptions, seed: Self::Seed) -> Self::Config;

    /// Binds and starts serving.
    fn start(config: Self::Config) -> impl Future<Output = Result<Self, Self::Error>> + Send;

    /// Whether a start error is the seed's fault (the CLI exits with status 2 for those).
    fn is_seed_error(error: &Self::Error) -> bool;

    /// The ready object.
    fn ready(&self) -> Self::Ready;

    /// The admin API (journal, faults, reset, the cloud's own routes) over the same state
    /// the mock serves.
    fn admin_api(&self) -> AdminApi;

    /// The admin routes, unnested, each request journaled as service `admin` with its
    /// `/admin…` path.
    fn admin_router(&self) -> axum::Router {
        self.admin_api().journaled()
    }

    /// Stops serving (and the data plane); sockets are closed when this returns.
    fn shutdown(self) -> impl Future<Output = ()> + Send;
}
