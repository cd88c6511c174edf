//! `cloud.conf` from a Kubernetes Secret (`[Global] secret-name` / `secret-namespace`).
//!
//! Exists for installers that keep OpenStack credentials in a Secret and ship a `cloud.conf`
//! that only points at it. Behaviour of the legacy in-tree provider
//! (`k8s.io/legacy-cloud-providers/openstack` `readConfig` / `setConfigFromSecret`): when
//! both keys are set, the Secret is read through the API at startup and its config text is
//! read over the file's; a missing Secret or key is a startup error. Upstream reads the key
//! `clouds.conf`; `cloud.conf` (the key of cloud-provider-openstack's own `cloud-config`
//! Secret) is accepted too.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::config::{CloudConfig, ConfigError, parse_gcfg, secret_reference};

/// Keys looked up in the Secret, in order.
pub const SECRET_KEYS: [&str; 2] = ["clouds.conf", "cloud.conf"];

#[derive(Debug, thiserror::Error)]
pub enum SecretConfigError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cloud config secret {namespace}/{name}: {reason}")]
    Secret {
        namespace: String,
        name: String,
        reason: String,
    },
}

/// Reads the file at `path`; when it names a Secret, gets it with the client `connect`
/// builds (only then) and applies its config over the file's.
pub async fn load_config<F, Fut, E>(
    path: &str,
    connect: F,
) -> Result<(CloudConfig, Vec<String>), SecretConfigError>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<kube::Client, E>>,
    E: std::fmt::Display,
{
    let text = CloudConfig::read(path)?;
    let Some((namespace, name)) = secret_reference(&text)? else {
        return Ok(CloudConfig::parse(&text)?);
    };
    let fail = |reason: String| SecretConfigError::Secret {
        namespace: namespace.clone(),
        name: name.clone(),
        reason,
    };
    let client = connect().await.map_err(|e| fail(e.to_string()))?;
    let secret = Api::<Secret>::namespaced(client, &namespace)
        .get(&name)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let overlay = secret_text(&secret).map_err(&fail)?;
    // Syntax errors in the Secret are reported as the Secret's, not the file's.
    parse_gcfg(&overlay).map_err(|e| fail(e.to_string()))?;
    let (config, mut warnings) = CloudConfig::parse_layers(&text, &overlay)?;
    warnings.push(format!(
        "cloud config: credentials read from secret {namespace}/{name}"
    ));
    Ok((config, warnings))
}

/// The config text under the first of [`SECRET_KEYS`] present.
pub fn secret_text(secret: &Secret) -> Result<String, String> {
    let data = secret.data.clone().unwrap_or_default();
    let strings = secret.string_data.clone().unwrap_or_default();
    for key in SECRET_KEYS {
        if let Some(bytes) = data.get(key) {
            return String::from_utf8(bytes.0.clone())
                .map_err(|_| format!("key {key:?} is not UTF-8"));
        }
        if let Some(text) = strings.get(key) {
            return Ok(text.clone());
        }
    }
    Err(format!(
        "no {:?} or {:?} key",
        SECRET_KEYS[0], SECRET_KEYS[1]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(key: &str, value: &str) -> Secret {
        Secret {
            data: Some([(key.to_owned(), ByteString(value.as_bytes().to_vec()))].into()),
            ..Default::default()
        }
    }

    #[test]
    fn reads_either_key_and_reports_missing() {
        assert_eq!(
            secret_text(&secret("clouds.conf", "[Global]")).as_deref(),
            Ok("[Global]")
        );
        assert_eq!(secret_text(&secret("cloud.conf", "x")).as_deref(), Ok("x"));
        let missing = secret_text(&secret("other", "x"));
        assert!(missing.is_err_and(|e| e.contains("clouds.conf")));
    }

    #[tokio::test]
    async fn a_file_without_secret_keys_never_connects() {
        let dir = tempfile::tempdir();
        let Ok(dir) = dir else { panic!("tempdir") };
        let path = dir.path().join("cloud.conf");
        assert!(std::fs::write(&path, "[Global]\nauth-url=http://x/v3\nusername=u\n").is_ok());
        let path = path.display().to_string();
        let r = load_config(&path, || async {
            Err::<kube::Client, _>("must not connect")
        })
        .await;
        assert!(r.is_ok(), "{r:?}");
        let with_secret = dir.path().join("secret.conf");
        assert!(
            std::fs::write(
                &with_secret,
                "[Global]\nsecret-name=s\nsecret-namespace=kube-system\n"
            )
            .is_ok()
        );
        let r = load_config(&with_secret.display().to_string(), || async {
            Err::<kube::Client, _>("no cluster")
        })
        .await;
        let Err(e) = r else {
            panic!("expected an error")
        };
        assert_eq!(
            e.to_string(),
            "cloud config secret kube-system/s: no cluster"
        );
    }
}
