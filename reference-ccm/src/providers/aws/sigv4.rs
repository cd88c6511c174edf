//! AWS Signature Version 4 for the query-protocol requests of the AWS provider.
//!
//! Exists because the provider talks to EC2 and ELB with its own small client (see the
//! provider's module docs for why not `aws-sdk-*`). Written from the AWS documentation
//! ("Create a signed AWS API request"): canonical request, string to sign, a signing key
//! derived from the secret, date, region and service. HMAC and SHA-256 come from `ring`,
//! which rustls already builds. Query-protocol paths are always `/` here.

use ring::{digest, hmac};

const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// A key pair (no session token support: the harness uses static keys).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

/// What is signed; header names must be lower case.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// Raw query string without `?` (may be empty).
    pub query: &'a str,
    /// Headers to sign (name lower case, value trimmed), `host` included.
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

/// RFC 3986 unreserved characters stay, everything else is `%XX`.
pub fn uri_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Query parameters sorted by name then value, each already encoded by the caller.
fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(&str, &str)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    pairs.sort_unstable();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// The `Authorization` header value for `req` at `amz_date` (`YYYYMMDDTHHMMSSZ`).
pub fn authorization(
    creds: &Credentials,
    region: &str,
    service: &str,
    amz_date: &str,
    req: &Request<'_>,
) -> String {
    let mut headers: Vec<(&str, &str)> = req.headers.to_vec();
    headers.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let canonical_headers: String = headers
        .iter()
        .map(|(k, v)| format!("{k}:{}\n", v.trim()))
        .collect();
    let signed_headers = headers
        .iter()
        .map(|(k, _)| *k)
        .collect::<Vec<_>>()
        .join(";");
    let canonical_request = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed_headers}\n{}",
        req.method,
        req.path,
        canonical_query(req.query),
        sha256_hex(req.body)
    );
    let date = amz_date.get(..8).unwrap_or(amz_date);
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let string_to_sign = format!(
        "{ALGORITHM}\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical_request.as_bytes())
    );
    let k_date = hmac_sha256(
        format!("AWS4{}", creds.secret_access_key).as_bytes(),
        date.as_bytes(),
    );
    let k_region = hmac_sha256(&k_date, region.as_bytes());
    let k_service = hmac_sha256(&k_region, service.as_bytes());
    let k_signing = hmac_sha256(&k_service, b"aws4_request");
    let signature = hex(&hmac_sha256(&k_signing, string_to_sign.as_bytes()));
    format!(
        "{ALGORITHM} Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
        creds.access_key_id
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worked example of the AWS SigV4 documentation (IAM ListUsers).
    #[test]
    fn documented_example() {
        let creds = Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
        };
        let headers = [
            (
                "content-type",
                "application/x-www-form-urlencoded; charset=utf-8",
            ),
            ("host", "iam.amazonaws.com"),
            ("x-amz-date", "20150830T123600Z"),
        ];
        let req = Request {
            method: "GET",
            path: "/",
            query: "Action=ListUsers&Version=2010-05-08",
            headers: &headers,
            body: b"",
        };
        let auth = authorization(&creds, "us-east-1", "iam", "20150830T123600Z", &req);
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
        );
    }

    #[test]
    fn encoding_keeps_unreserved_only() {
        assert_eq!(uri_encode("a b/c~d.e_f-g*"), "a%20b%2Fc~d.e_f-g%2A");
        assert_eq!(canonical_query("b=2&a=1&a=0"), "a=0&a=1&b=2");
        assert!(
            !format!(
                "{:?}",
                Credentials {
                    access_key_id: "A".into(),
                    secret_access_key: "S3CR3T".into()
                }
            )
            .contains("S3CR3T")
        );
    }
}
