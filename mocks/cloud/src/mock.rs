//! What every cloud mock is from the outside, under uniform names: started from a config,
//! announcing itself with a ready object (the connection details a CCM needs, written as
//! JSON by `ccm-conformance mock <cloud>`), exposing its admin routes, shut down. The
//! root crate's `mock` command is one generic function over this trait.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;

use serde::Serialize;

use crate::seed::SeedError;

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

/// A running cloud mock.
pub trait MockCloud: Sized + Send + 'static {
    /// The cloud's name in messages (`"OpenStack"`, `"AWS"`, `"vSphere"`).
    const LABEL: &'static str;
    /// The seed file's content (`Default`: no seed file).
    type Seed: Default + Send;
    type Config: Send;
    type Error: std::error::Error + Send + Sync + 'static;
    /// The ready object (connection details), serialized as the ready file.
    type Ready: Serialize;

    /// Reads a seed file.
    fn load_seed(path: &Path) -> Result<Self::Seed, SeedError>;

    /// The config for the CLI's options and seed.
    fn config(options: &MockOptions, seed: Self::Seed) -> Self::Config;

    /// Binds and starts serving.
    fn start(config: Self::Config) -> impl Future<Output = Result<Self, Self::Error>> + Send;

    /// Whether a start error is the seed's fault (the CLI exits with status 2 for those).
    fn is_seed_error(error: &Self::Error) -> bool;

    /// The ready object.
    fn ready(&self) -> Self::Ready;

    /// The admin routes (journal, faults, reset, the cloud's own), unnested, over the
    /// same state the mock serves.
    fn admin_router(&self) -> axum::Router;

    /// Stops serving (and the data plane); sockets are closed when this returns.
    fn shutdown(self) -> impl Future<Output = ()> + Send;
}
