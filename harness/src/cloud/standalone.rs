//! A mock cloud served alone (`ccm-conformance mock <cloud>`), for people and for the
//! judges that drive a mock with real SDKs: the seed file loaded, the mock started, its
//! ready object printed and written atomically to the ready file, then served until
//! SIGINT/SIGTERM. Generic over [`MockCloud`], so each cloud's descriptor names only its
//! mock type; `Provider::serve_mock` checks the request against the descriptor first.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use mock_cloud::{MockCloud, MockOptions};

/// What `mock <cloud>` was asked for.
#[derive(Debug, Clone)]
pub struct StandaloneMock {
    pub listen: SocketAddr,
    /// Seeded instances, named node-0, node-1, ...
    pub nodes: usize,
    /// Seed file: initial state, fault rules, lifecycle modes.
    pub seed: Option<PathBuf>,
    pub tls: bool,
    pub imds: bool,
    /// Written once serving: the mock's connection object.
    pub ready_file: Option<PathBuf>,
}

/// Why a mock could not be served.
#[derive(Debug, thiserror::Error)]
pub enum StandaloneError {
    /// The command line or the seed file asks for what the mock cannot be (exit status 2).
    #[error("{0}")]
    BadInput(String),
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

/// Serving one mock type alone: what each cloud's descriptor points at
/// ([`Provider::serve_mock`](crate::Provider::serve_mock) checks the request first).
pub(crate) fn serve<M: MockCloud>(
    args: StandaloneMock,
) -> BoxFuture<'static, Result<(), StandaloneError>> {
    Box::pin(async move {
        let bad_seed = |e: &dyn std::fmt::Display| StandaloneError::BadInput(e.to_string());
        let seed = match &args.seed {
            Some(path) => M::load_seed(path).map_err(|e| bad_seed(&e))?,
            None => M::Seed::default(),
        };
        let options = MockOptions {
            listen: args.listen,
            nodes: args.nodes,
            tls: args.tls,
            imds: args.imds,
        };
        let mock = match M::start(M::config(&options, seed)).await {
            Ok(mock) => mock,
            Err(e) if args.seed.is_some() && M::is_seed_error(&e) => return Err(bad_seed(&e)),
            Err(e) => {
                return Err(anyhow::Error::new(e)
                    .context(format!("starting mock {}", M::LABEL))
                    .into());
            }
        };
        let ready = serde_json::to_value(mock.ready()).map_err(anyhow::Error::from)?;
        announce(&ready, args.ready_file.as_deref())?;
        crate::interrupt::until_signal()
            .await
            .map_err(anyhow::Error::from)?;
        mock.shutdown().await;
        Ok(())
    })
}

/// Prints the ready object and writes it atomically to the ready file.
pub fn announce(ready: &serde_json::Value, ready_file: Option<&Path>) -> anyhow::Result<()> {
    use anyhow::Context;
    let text = serde_json::to_string_pretty(ready)?;
    println!("{text}");
    if let Some(path) = ready_file {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, &text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
