//! The API client each controller gets: the CCM's own (its kubeconfig), or, with
//! `--use-service-account-credentials`, one per controller that calls the API as a
//! ServiceAccount of its own in `kube-system`.
//!
//! Upstream (k8s.io/cloud-provider options/options.go, app/controllermanager.go): the flag
//! swaps the `SimpleControllerClientBuilder` for k8s.io/controller-manager
//! pkg/clientbuilder `DynamicControllerClientBuilder`, which gets or creates the
//! ServiceAccount, asks the TokenRequest API for a token (an hour by default) and renews it
//! before it expires; the client keeps the kubeconfig's server and CA, drops its
//! credentials, and appends `/system:serviceaccount:kube-system:<name>` to the User-Agent.
//! The cloud-node and cloud-node-lifecycle controllers share `node-controller` (the names
//! kube-controller-manager used, so kube-apiserver's bootstrap `system:controller:*` roles
//! apply); service-lb is `service-controller`, node-route `route-controller`. Leader
//! election stays on the CCM's own credentials, as upstream's.
//!
//! Here the token goes to a file that kube-rs re-reads about every minute, and a task
//! renews it when 80 % of its lifetime has passed.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};

/// User-Agent on every Kubernetes request; the harness tells CCM writes by it. Here, with
/// the clients that append to it, so this module needs nothing of the crate root (which
/// re-exports it as `crate::USER_AGENT`).
pub const USER_AGENT: &str = concat!("reference-ccm/", env!("CARGO_PKG_VERSION"));

/// Where the controllers' ServiceAccounts live.
const NAMESPACE: &str = "kube-system";
/// The lifetime asked for (upstream's `defaultExpirationSeconds`).
const EXPIRATION_SECONDS: i64 = 3600;

#[derive(Debug, thiserror::Error)]
pub enum ClientBuilderError {
    #[error("ServiceAccount {NAMESPACE}/{name}: {source}")]
    ServiceAccount {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("token for ServiceAccount {NAMESPACE}/{name}: {reason}")]
    Token { name: String, reason: String },
    #[error("client for ServiceAccount {NAMESPACE}/{name}: {source}")]
    Client {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Builds the controllers' clients from the CCM's own configuration.
pub struct ClientBuilder {
    root_config: kube::Config,
    root: kube::Client,
    per_controller: bool,
    token_dir: PathBuf,
}

impl ClientBuilder {
    /// `per_controller`: `--use-service-account-credentials`.
    pub fn new(root_config: kube::Config, root: kube::Client, per_controller: bool) -> Self {
        let token_dir = std::env::temp_dir().join(format!("reference-ccm-{}", std::process::id()));
        Self {
            root_config,
            root,
            per_controller,
            token_dir,
        }
    }

    /// The client of the controllers that call the API as `name` (`node-controller`,
    /// `service-controller`, `route-controller`): the CCM's own client unless
    /// `--use-service-account-credentials` is set.
    pub async fn client(&self, name: &str) -> Result<kube::Client, ClientBuilderError> {
        if !self.per_controller {
            return Ok(self.root.clone());
        }
        get_or_create_service_account(&self.root, name).await?;
        std::fs::create_dir_all(&self.token_dir).map_err(|e| ClientBuilderError::Token {
            name: name.into(),
            reason: format!("creating {}: {e}", self.token_dir.display()),
        })?;
        let file = self.token_dir.join(format!("{name}.token"));
        let lifetime = write_token(&self.root, name, &file).await?;
        tokio::spawn(renew(
            self.root.clone(),
            name.to_string(),
            file.clone(),
            lifetime,
        ));

        let mut config = self.root_config.clone();
        config.auth_info = kube::config::AuthInfo {
            token_file: Some(file.to_string_lossy().into_owned()),
            ..Default::default()
        };
        let agent = format!("{}/system:serviceaccount:{NAMESPACE}:{name}", USER_AGENT);
        config
            .headers
            .retain(|(header, _)| header != http::header::USER_AGENT);
        if let Ok(value) = http::HeaderValue::from_str(&agent) {
            config.headers.push((http::header::USER_AGENT, value));
        }
        kube::Client::try_from(config).map_err(|source| ClientBuilderError::Client {
            name: name.into(),
            source,
        })
    }
}

/// k8s.io/controller-manager pkg/clientbuilder `getOrCreateServiceAccount`.
async fn get_or_create_service_account(
    root: &kube::Client,
    name: &str,
) -> Result<(), ClientBuilderError> {
    let api: Api<ServiceAccount> = Api::namespaced(root.clone(), NAMESPACE);
    let fail = |source| ClientBuilderError::ServiceAccount {
        name: name.into(),
        source,
    };
    if api.get_opt(name).await.map_err(fail)?.is_some() {
        return Ok(());
    }
    let sa = ServiceAccount {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NAMESPACE.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &sa).await {
        Ok(_) => Ok(()),
        // Someone else created it meanwhile.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(fail(e)),
    }
}

/// Asks for a token and writes it to `file` (mode 0600); returns its lifetime.
async fn write_token(
    root: &kube::Client,
    name: &str,
    file: &std::path::Path,
) -> Result<Duration, ClientBuilderError> {
    let api: Api<ServiceAccount> = Api::namespaced(root.clone(), NAMESPACE);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(EXPIRATION_SECONDS),
            ..Default::default()
        },
        ..Default::default()
    };
    let fail = |reason: String| ClientBuilderError::Token {
        name: name.into(),
        reason,
    };
    let answer = api
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let status = answer
        .status
        .ok_or_else(|| fail("the TokenRequest came back without a status".into()))?;
    let lifetime = (status.expiration_timestamp.0 - jiff::Timestamp::now())
        .total(jiff::Unit::Second)
        .ok()
        .filter(|s| *s > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(Duration::from_secs(EXPIRATION_SECONDS as u64));
    let tmp = file.with_extension("new");
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| fail(format!("writing {}: {e}", tmp.display())))?;
        out.write_all(status.token.as_bytes())
            .map_err(|e| fail(format!("writing {}: {e}", tmp.display())))?;
    }
    std::fs::rename(&tmp, file).map_err(|e| fail(format!("writing {}: {e}", file.display())))?;
    Ok(lifetime)
}

/// Renews the token when 80 % of its lifetime has passed, retrying every 10 s on errors.
async fn renew(root: kube::Client, name: String, file: PathBuf, mut lifetime: Duration) {
    loop {
        tokio::time::sleep(lifetime.mul_f64(0.8)).await;
        loop {
            match write_token(&root, &name, &file).await {
                Ok(next) => {
                    lifetime = next;
                    break;
                }
                Err(e) => {
                    tracing::warn!("renewing the token: {e}");
                    tokio::time::sleep(Duration::from_secs(10)).await;
                }
            }
        }
    }
}
