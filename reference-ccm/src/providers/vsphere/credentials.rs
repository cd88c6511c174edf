//! vCenter credentials from the Kubernetes Secret that `vsphere.conf` names.
//!
//! Exists because deployments of cloud-provider-vsphere keep the vCenter password in a
//! Secret rather than in the config file (`global.secretName` / `secretNamespace`). Upstream
//! (`pkg/common/credentialmanager/credentialmanager.go`, called from
//! `pkg/common/connectionmanager/connectionmanager.go` `Connect`) reads it through an
//! informer only when it logs in, so the CCM starts without it and a missing Secret or
//! missing keys only fail lookups ("credentials not found for server ..."). We GET the
//! Secret each time a login needs it, which sees the same data without a watch.
//!
//! Keys (upstream `parseConfig`): `<server>.username` and `<server>.password`, one trailing
//! newline trimmed, `<server>` being the vcenter's `server` from the config; or, for
//! servers whose name has characters a key cannot (IPv6), the set `server_<id>`,
//! `username_<id>`, `password_<id>`, taken verbatim. An incomplete set, a key of neither
//! form or an empty user name or password makes the whole Secret unusable, as upstream.
//! Not supported: the shared session manager keys (`<server>.vc-session-manager-url`,
//! `-token`) are unknown keys here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::config::SecretRef;

/// Why no credentials came out of the Secret.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("credentials not found for server {server}: secret {secret} does not exist")]
    NoSecret { server: String, secret: SecretRef },
    #[error("credentials not found for server {server} in secret {secret}")]
    NoServer { server: String, secret: SecretRef },
    #[error("reading secret {secret}: {reason}")]
    Read { secret: SecretRef, reason: String },
    #[error("secret {secret}: {reason}")]
    Malformed { secret: SecretRef, reason: String },
}

/// A user name and password for one vCenter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credential {
    pub user: String,
    pub password: String,
}

/// Reads `secret` and returns the credentials it holds for `server`.
pub async fn fetch(
    client: &kube::Client,
    secret: &SecretRef,
    server: &str,
) -> Result<Credential, CredentialsError> {
    let found = Api::<Secret>::namespaced(client.clone(), &secret.namespace)
        .get_opt(&secret.name)
        .await
        .map_err(|e| CredentialsError::Read {
            secret: secret.clone(),
            reason: e.to_string(),
        })?
        .ok_or_else(|| CredentialsError::NoSecret {
            server: server.to_owned(),
            secret: secret.clone(),
        })?;
    let malformed = |reason: String| CredentialsError::Malformed {
        secret: secret.clone(),
        reason,
    };
    parse(&secret_data(&found).map_err(malformed)?)
        .map_err(malformed)?
        .remove(server)
        .ok_or_else(|| CredentialsError::NoServer {
            server: server.to_owned(),
            secret: secret.clone(),
        })
}

/// The Secret's `data` as text, with `stringData` over it (as the API server merges them).
pub fn secret_data(secret: &Secret) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (key, value) in secret.data.iter().flatten() {
        let text =
            String::from_utf8(value.0.clone()).map_err(|_| format!("key {key:?} is not UTF-8"))?;
        out.insert(key.clone(), text);
    }
    out.extend(secret.string_data.clone().unwrap_or_default());
    Ok(out)
}

/// Credentials by server from a Secret's data (the key formats are in the module docs).
pub fn parse(data: &BTreeMap<String, String>) -> Result<BTreeMap<String, Credential>, String> {
    let mut out: BTreeMap<String, Credential> = BTreeMap::new();
    let mut others = Vec::new();
    for (key, value) in data {
        let value = value.strip_suffix('\n').unwrap_or(value).to_owned();
        if let Some(server) = key.strip_suffix(".username") {
            out.entry(server.to_owned()).or_default().user = value;
        } else if let Some(server) = key.strip_suffix(".password") {
            out.entry(server.to_owned()).or_default().password = value;
        } else {
            others.push(key.as_str());
        }
    }
    for key in others {
        let (kind, id) = ["server_", "username_", "password_"]
            .into_iter()
            .find_map(|prefix| Some((prefix, key.strip_prefix(prefix)?)))
            .ok_or_else(|| format!("unknown key {key:?}"))?;
        if id.is_empty() {
            return Err(format!("key {key:?} has no identifier after {kind:?}"));
        }
        let part = |prefix: &str| {
            data.get(&format!("{prefix}{id}"))
                .ok_or_else(|| format!("key {key:?} has no matching {prefix}{id}"))
        };
        if kind == "server_" {
            let credential = Credential {
                user: part("username_")?.clone(),
                password: part("password_")?.clone(),
            };
            out.insert(data[key].clone(), credential);
        } else {
            part("server_")?;
        }
    }
    match out
        .iter()
        .find(|(_, c)| c.user.is_empty() || c.password.is_empty())
    {
        Some((server, _)) => Err(format!("user name or password missing for server {server}")),
        None => Ok(out),
    }
}
