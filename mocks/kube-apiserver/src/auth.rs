//! Who is calling, and may they do this?
//!
//! Exists so cases can check how a CCM behaves with real credentials: over TLS every
//! request must carry an identity (a bearer token, or a client certificate signed by
//! the server's CA), and a second, read-only identity lets a case watch the CCM fail
//! with the 403 a real RBAC denial gives. Authentication follows upstream's order
//! (apiserver pkg/authentication/request/union: x509 first, then bearer tokens: the
//! static admin and read-only tokens, then service-account tokens from the TokenRequest
//! API, [`crate::tokens`]). Authorization is a fixed two-role table, narrowed by
//! [`Denial`]s a case sets on the running server: a ClusterRole that lacks one rule (the
//! CCM without `delete` on nodes, cloud-provider-openstack#3225) is that role minus one
//! verb on one resource for one user, which is all a case needs to watch a CCM meet a
//! real 403. With [`crate::Config::rbac`], service accounts and client certificates
//! outside `system:masters` are authorized by the RBAC objects stored in the server
//! instead ([`Role::Rbac`], [`crate::rbac`]); without it they are admins.

use axum::http::{HeaderMap, Method, header};
use mock_cloud::tls::PeerCertificates;

/// The user name behind the admin token.
pub const ADMIN_USER: &str = "ccm-conformance-admin";
/// The user name behind the read-only token.
pub const READONLY_USER: &str = "ccm-conformance-readonly";
/// A client certificate whose subject carries this organization (group) is read-only;
/// any other certificate signed by the CA is an admin (like `system:masters`).
pub const READONLY_GROUP: &str = "ccm-conformance:readonly";
/// The group [`crate::ApiServer::client_cert`] puts into the certificates it mints.
pub const ADMIN_GROUP: &str = "system:masters";
/// The user of requests without credentials (upstream's anonymous authenticator).
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The group of [`ANONYMOUS_USER`].
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";

/// What a caller may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Everything.
    Admin,
    /// get, list and watch only.
    ReadOnly,
    /// Nothing but the public endpoints: `system:anonymous`, whom kube-apiserver's default
    /// `--anonymous-auth=true` lets in and RBAC then refuses (403, not 401).
    Anonymous,
    /// Whatever the stored RBAC objects grant ([`crate::rbac::authorize`]).
    Rbac,
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
    pub role: Role,
}

impl Identity {
    fn admin(user: &str) -> Identity {
        Identity {
            user: user.into(),
            groups: vec![ADMIN_GROUP.into()],
            role: Role::Admin,
        }
    }

    /// Whether this identity may send `method` (read-only callers get GET only, which
    /// covers the get, list and watch verbs). [`Role::Rbac`] callers pass this check;
    /// the RBAC objects decide for them.
    pub fn may(&self, method: &Method) -> bool {
        match self.role {
            Role::Admin | Role::Rbac => true,
            Role::ReadOnly => matches!(*method, Method::GET | Method::HEAD),
            Role::Anonymous => false,
        }
    }
}

/// One verb on one resource a user may not use although its role allows it: what a
/// missing RBAC rule amounts to. `resource` is the plural (`nodes`), or `plural/sub`
/// for a subresource (`nodes/status`), as RBAC rules name them; `group` is the API group
/// (`""` for core).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Denial {
    pub user: String,
    pub verb: String,
    pub group: String,
    pub resource: String,
}

impl Denial {
    /// Whether this denial covers `verb` by `user` on `resource` in `group`.
    pub fn covers(&self, user: &str, verb: &str, group: &str, resource: &str) -> bool {
        self.user == user && self.verb == verb && self.group == group && self.resource == resource
    }
}

/// Maps a bearer token other than the static ones to the user and groups it stands for.
pub type TokenLookup<'a> = dyn Fn(&str) -> Option<(String, Vec<String>)> + 'a;

/// The tokens and transport rules a server authenticates against.
#[derive(Debug, Clone)]
pub struct Authenticator {
    pub admin_token: String,
    pub readonly_token: String,
    /// Serving TLS: requests without credentials are refused.
    pub tls: bool,
    /// Authorize service accounts and certificates outside `system:masters` by RBAC.
    pub rbac: bool,
}

/// Why a request has no identity (always answered with 401 Unauthorized).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("unknown bearer token")]
    UnknownToken,
    #[error("malformed Authorization header")]
    MalformedHeader,
    #[error("client certificate without a readable subject")]
    UnreadableCertificate,
}

impl Authenticator {
    /// The caller of a request. Without credentials it is `system:anonymous` (group
    /// `system:unauthenticated`), as kube-apiserver's anonymous authenticator makes it
    /// (apiserver pkg/authentication/request/anonymous), with no permissions: RBAC answers
    /// 403. `allow_anonymous` applies to plain HTTP only: client-go and kubectl never send
    /// a bearer token to an `http://` server (client-go tools/clientcmd/client_config.go),
    /// so there the anonymous user is an admin unless the harness turned that off.
    ///
    /// A bearer token that is neither the admin's nor the read-only one is handed to
    /// `other_token`, which returns the service account it stands for (user and groups),
    /// if any.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        peer: Option<&PeerCertificates>,
        allow_anonymous: bool,
        other_token: &TokenLookup<'_>,
    ) -> Result<Identity, AuthError> {
        let not_privileged = if self.rbac { Role::Rbac } else { Role::Admin };
        if let Some(peer) = peer {
            let leaf = peer.0.first().ok_or(AuthError::UnreadableCertificate)?;
            let (user, groups) =
                certificate_subject(leaf.as_ref()).ok_or(AuthError::UnreadableCertificate)?;
            let role = if groups.iter().any(|g| g == READONLY_GROUP) {
                Role::ReadOnly
            } else if groups.iter().any(|g| g == ADMIN_GROUP) {
                Role::Admin
            } else {
                not_privileged
            };
            return Ok(Identity { user, groups, role });
        }
        if let Some(value) = headers.get(header::AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim)
                .ok_or(AuthError::MalformedHeader)?;
            return if token == self.admin_token {
                Ok(Identity::admin(ADMIN_USER))
            } else if token == self.readonly_token {
                Ok(Identity {
                    user: READONLY_USER.into(),
                    groups: vec![READONLY_GROUP.into()],
                    role: Role::ReadOnly,
                })
            } else if let Some((user, groups)) = other_token(token) {
                Ok(Identity {
                    user,
                    groups,
                    role: not_privileged,
                })
            } else {
                Err(AuthError::UnknownToken)
            };
        }
        if !self.tls && allow_anonymous {
            return Ok(Identity::admin(ANONYMOUS_USER));
        }
        Ok(Identity {
            user: ANONYMOUS_USER.into(),
            groups: vec![UNAUTHENTICATED_GROUP.into()],
            role: Role::Anonymous,
        })
    }
}

/// Subject common name (the user) and organizations (the groups) of a DER
/// certificate, as upstream maps client certificates (apiserver
/// pkg/authentication/request/x509 `CommonNameUserConversion`). `None` when the
/// certificate cannot be read or has no common name.
pub fn certificate_subject(der: &[u8]) -> Option<(String, Vec<String>)> {
    const SEQUENCE: u8 = 0x30;
    const SET: u8 = 0x31;
    const OID: u8 = 0x06;
    const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
    const OID_ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

    let (tag, cert, _) = der_element(der)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, mut tbs, _) = der_element(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    // TBSCertificate: [0] version (optional), serialNumber, signature, issuer,
    // validity, subject, ...
    if tbs.first() == Some(&0xa0) {
        tbs = der_element(tbs)?.2;
    }
    for _ in 0..4 {
        tbs = der_element(tbs)?.2;
    }
    let (tag, mut name, _) = der_element(tbs)?;
    if tag != SEQUENCE {
        return None;
    }
    let mut common_name = None;
    let mut organizations = Vec::new();
    while !name.is_empty() {
        let (tag, mut rdn, rest) = der_element(name)?;
        name = rest;
        if tag != SET {
            return None;
        }
        while !rdn.is_empty() {
            let (tag, attribute, rest) = der_element(rdn)?;
            rdn = rest;
            if tag != SEQUENCE {
                return None;
            }
            let (tag, oid, value) = der_element(attribute)?;
            if tag != OID {
                return None;
            }
            let (_, value, _) = der_element(value)?;
            let text = String::from_utf8(value.to_vec()).ok()?;
            if oid == OID_COMMON_NAME {
                common_name = Some(text);
            } else if oid == OID_ORGANIZATION {
                organizations.push(text);
            }
        }
    }
    common_name
        .filter(|cn| !cn.is_empty())
        .map(|cn| (cn, organizations))
}

/// One DER element: (tag, contents, what follows). Single-byte tags and definite
/// lengths only, which is all X.509 names use.
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *input.first()?;
    let first = *input.get(1)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 {
            return None;
        }
        let bytes = input.get(2..2 + count)?;
        let len = bytes
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, 2 + count)
    };
    let end = header.checked_add(len)?;
    let contents = input.get(header..end)?;
    Some((tag, contents, input.get(end..)?))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::http::HeaderValue;
    use mock_cloud::tls::TestCa;

    use super::*;

    fn authenticator(tls: bool) -> Authenticator {
        Authenticator {
            admin_token: "admin-t".into(),
            readonly_token: "ro-t".into(),
            tls,
            rbac: false,
        }
    }

    fn no_token(_: &str) -> Option<(String, Vec<String>)> {
        None
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {token}")).expect("header"),
        );
        h
    }

    #[test]
    fn reads_user_and_groups_from_a_client_certificate() {
        let ca = TestCa::generate("ca").expect("ca");
        // (mock-cloud's `issue_client` keeps one organization: rcgen's distinguished
        // name holds one value per attribute type.)
        let cert = ca.issue_client("alice", &["team-a"]).expect("cert");
        let (user, groups) = certificate_subject(cert.cert_der.as_ref()).expect("subject");
        assert_eq!(user, "alice");
        assert_eq!(groups, vec!["team-a"]);
    }

    #[test]
    fn garbage_certificates_have_no_subject() {
        assert_eq!(certificate_subject(&[]), None);
        assert_eq!(certificate_subject(&[0x30, 0x84, 0xff, 0xff]), None);
        assert_eq!(certificate_subject(&[0x30, 0x03, 0x30, 0x01, 0x02]), None);
        let ca = TestCa::generate("ca").expect("ca");
        let der = ca.issue_client("bob", &[]).expect("cert").cert_der;
        for cut in [1, 10, 100, der.as_ref().len() / 2] {
            let _ = certificate_subject(&der.as_ref()[..cut]);
        }
    }

    #[test]
    fn tokens_and_roles() {
        let auth = authenticator(true);
        let admin = auth
            .authenticate(&bearer("admin-t"), None, false, &no_token)
            .expect("admin");
        assert_eq!(admin.role, Role::Admin);
        assert!(admin.may(&Method::DELETE));
        let ro = auth
            .authenticate(&bearer("ro-t"), None, false, &no_token)
            .expect("ro");
        assert_eq!(ro.user, READONLY_USER);
        assert!(ro.may(&Method::GET));
        assert!(!ro.may(&Method::PATCH) && !ro.may(&Method::POST));
        assert_eq!(
            auth.authenticate(&bearer("nope"), None, false, &no_token),
            Err(AuthError::UnknownToken)
        );
    }

    #[test]
    fn rbac_governs_service_accounts_and_certificates_outside_system_masters() {
        let ca = TestCa::generate("ca").expect("ca");
        let peer = |groups: &[&str]| {
            let cert = ca.issue_client("node-1", groups).expect("cert");
            PeerCertificates(Arc::new(vec![cert.cert_der]))
        };
        let sa = |token: &str| {
            (token == "sa-t").then(|| ("system:serviceaccount:kube-system:ccm".to_string(), vec![]))
        };
        for (rbac, expected) in [(false, Role::Admin), (true, Role::Rbac)] {
            let auth = Authenticator {
                rbac,
                ..authenticator(true)
            };
            let id = auth
                .authenticate(&bearer("sa-t"), None, false, &sa)
                .expect("service account");
            assert_eq!(
                (id.user.as_str(), id.role),
                ("system:serviceaccount:kube-system:ccm", expected)
            );
            let id = auth
                .authenticate(
                    &HeaderMap::new(),
                    Some(&peer(&["system:nodes"])),
                    false,
                    &sa,
                )
                .expect("cert");
            assert_eq!(id.role, expected);
            // system:masters and the fixed tokens keep their roles.
            let id = auth
                .authenticate(&HeaderMap::new(), Some(&peer(&[ADMIN_GROUP])), false, &sa)
                .expect("cert");
            assert_eq!(id.role, Role::Admin);
            let id = auth
                .authenticate(&bearer("ro-t"), None, false, &sa)
                .expect("ro");
            assert_eq!(id.role, Role::ReadOnly);
            assert_eq!(
                auth.authenticate(&bearer("other"), None, false, &sa),
                Err(AuthError::UnknownToken)
            );
        }
    }

    #[test]
    fn denials_match_user_verb_group_and_resource_exactly() {
        let d = Denial {
            user: "ccm".into(),
            verb: "delete".into(),
            group: String::new(),
            resource: "nodes".into(),
        };
        assert!(d.covers("ccm", "delete", "", "nodes"));
        assert!(!d.covers("other", "delete", "", "nodes"));
        assert!(!d.covers("ccm", "deletecollection", "", "nodes"));
        assert!(!d.covers("ccm", "delete", "", "nodes/status"));
        assert!(!d.covers("ccm", "delete", "apps", "nodes"));
    }

    #[test]
    fn no_credentials_is_anonymous_and_powerless_except_over_plain_http() {
        let none = HeaderMap::new();
        let anonymous = Identity {
            user: ANONYMOUS_USER.into(),
            groups: vec![UNAUTHENTICATED_GROUP.into()],
            role: Role::Anonymous,
        };
        assert_eq!(
            authenticator(true).authenticate(&none, None, true, &no_token),
            Ok(anonymous.clone())
        );
        assert!(!anonymous.may(&Method::GET));
        assert_eq!(
            authenticator(false)
                .authenticate(&none, None, true, &no_token)
                .expect("anon")
                .user,
            ANONYMOUS_USER
        );
        assert_eq!(
            authenticator(false).authenticate(&none, None, false, &no_token),
            Ok(anonymous)
        );
    }

    #[test]
    fn client_certificates_win_and_map_the_readonly_group() {
        let ca = TestCa::generate("ca").expect("ca");
        let peer = |groups: &[&str]| {
            let cert = ca.issue_client("carol", groups).expect("cert");
            PeerCertificates(Arc::new(vec![cert.cert_der]))
        };
        let auth = authenticator(true);
        let id = auth
            .authenticate(
                &bearer("wrong"),
                Some(&peer(&[ADMIN_GROUP])),
                false,
                &no_token,
            )
            .expect("cert");
        assert_eq!((id.user.as_str(), id.role), ("carol", Role::Admin));
        let id = auth
            .authenticate(
                &HeaderMap::new(),
                Some(&peer(&[READONLY_GROUP])),
                false,
                &no_token,
            )
            .expect("cert");
        assert_eq!(id.role, Role::ReadOnly);
    }
}
