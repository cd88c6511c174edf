//! Service-account tokens: what the TokenRequest API (`serviceaccounts/<name>/token`)
//! issues and what the authenticator accepts afterwards.
//!
//! A CCM started with `--use-service-account-credentials` asks for one token per
//! controller and then calls the API as `system:serviceaccount:<ns>:<name>`, so the
//! token must work as a bearer token, survive a restart of the server, and stop working
//! when it expires or its ServiceAccount is deleted (or recreated with a new uid), as
//! kube-apiserver's do (kubernetes pkg/serviceaccount/jwt.go, claims.go). Tokens are JWTs
//! with upstream's claims (`iss`, `sub`, `aud`, `exp`, `iat`, `nbf`, `jti`,
//! `kubernetes.io.{namespace, serviceaccount.{name, uid}}`); unlike upstream they are
//! signed with HMAC-SHA256 under a key of the server (no key pair to publish: nothing
//! outside this server verifies them).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

/// The issuer kube-apiserver is started with by the real control plane of this project
/// (`--service-account-issuer`), also its default API audience.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The claims of a valid token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub audiences: Vec<String>,
    pub jti: String,
    /// Expiry, seconds since the epoch.
    pub exp: i64,
}

impl Claims {
    /// `system:serviceaccount:<namespace>:<name>`.
    pub fn username(&self) -> String {
        username(&self.namespace, &self.name)
    }
}

/// The user name of a service account (apiserver pkg/authentication/serviceaccount
/// `MakeUsername`).
pub fn username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The groups of a service account's user, `system:authenticated` included (apiserver
/// pkg/authentication/serviceaccount `MakeGroupNames`, plus the group the authenticator
/// union adds to everyone it authenticates).
pub fn groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".into(),
    ]
}

/// Signs and verifies tokens with one key.
#[derive(Clone)]
pub struct Signer {
    key: ring::hmac::Key,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer(..)")
    }
}

impl Signer {
    /// A signer whose key is derived from `secret` (the server's admin token, which a
    /// restart keeps, so tokens stay valid across restarts).
    pub fn new(secret: &str) -> Signer {
        let seed = ring::digest::digest(
            &ring::digest::SHA256,
            format!("ccm-conformance service account tokens\n{secret}").as_bytes(),
        );
        Signer {
            key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, seed.as_ref()),
        }
    }

    /// A token for the ServiceAccount `namespace/name` (uid `uid`), valid from `now` for
    /// `seconds`, for `audiences`.
    pub fn issue(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        audiences: &[String],
        now: i64,
        seconds: i64,
    ) -> String {
        let header = json!({"alg": "HS256", "kid": "ccm-conformance"});
        let claims = json!({
            "aud": audiences,
            "exp": now + seconds,
            "iat": now,
            "iss": ISSUER,
            "jti": uuid::Uuid::new_v4().to_string(),
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": name, "uid": uid},
            },
            "nbf": now,
            "sub": username(namespace, name),
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let tag = ring::hmac::sign(&self.key, signing_input.as_bytes());
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    /// The claims of `token` if this signer issued it and it is valid at `now`
    /// (not before `nbf`, before `exp`, issued by [`ISSUER`]). Whether the
    /// ServiceAccount still exists is for the caller to check.
    pub fn verify(&self, token: &str, now: i64) -> Option<Claims> {
        let (signing_input, signature) = token.rsplit_once('.')?;
        let (_, payload) = signing_input.split_once('.')?;
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        ring::hmac::verify(&self.key, signing_input.as_bytes(), &signature).ok()?;
        let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
        let int = |k: &str| claims.get(k).and_then(Value::as_i64);
        if claims.get("iss").and_then(Value::as_str) != Some(ISSUER)
            || int("nbf").is_some_and(|nbf| now < nbf)
            || int("exp").is_none_or(|exp| now >= exp)
        {
            return None;
        }
        let k8s = claims.get("kubernetes.io")?;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        Some(Claims {
            namespace: text(k8s.get("namespace"))?,
            name: text(k8s.pointer("/serviceaccount/name"))?,
            uid: text(k8s.pointer("/serviceaccount/uid"))?,
            audiences: claims
                .get("aud")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            jti: text(claims.get("jti")).unwrap_or_default(),
            exp: int("exp")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_tokens_verify_until_they_expire() {
        let signer = Signer::new("secret");
        let aud = vec![ISSUER.to_string()];
        let token = signer.issue("kube-system", "ccm", "u-1", &aud, 1_000, 600);
        let claims = signer.verify(&token, 1_000).expect("valid");
        assert_eq!(claims.username(), "system:serviceaccount:kube-system:ccm");
        assert_eq!((claims.uid.as_str(), claims.exp), ("u-1", 1_600));
        assert_eq!(claims.audiences, aud);
        assert!(signer.verify(&token, 1_599).is_some());
        assert!(signer.verify(&token, 1_600).is_none(), "expired");
        assert!(signer.verify(&token, 999).is_none(), "not yet valid");
    }

    #[test]
    fn other_keys_and_tampering_are_refused() {
        let signer = Signer::new("secret");
        let token = signer.issue("ns", "sa", "u", &[], 0, 3600);
        assert!(Signer::new("other").verify(&token, 1).is_none());
        let (head, _) = token.rsplit_once('.').expect("three parts");
        let forged_claims = json!({"iss": ISSUER, "exp": 9_999_999_999_i64,
            "kubernetes.io": {"namespace": "kube-system", "serviceaccount": {"name": "admin", "uid": "u"}}});
        let (h, _) = head.split_once('.').expect("header");
        let forged = format!(
            "{h}.{}.{}",
            URL_SAFE_NO_PAD.encode(forged_claims.to_string()),
            token.rsplit_once('.').expect("sig").1
        );
        assert!(signer.verify(&forged, 1).is_none());
        for garbage in ["", "a.b", "a.b.c", "...", "not a token"] {
            assert!(signer.verify(garbage, 1).is_none(), "{garbage:?}");
        }
    }
}
