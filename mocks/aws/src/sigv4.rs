//! Server-side AWS Signature Version 4 checks: recompute the signature of each request
//! with the configured secret and compare, so a client that signs wrongly (bad region,
//! wrong key, missing header) fails here as it would against AWS, instead of passing
//! silently as with moto (cloud-apis.md §4.1). HMAC-SHA256 and SHA-256 come from `ring`,
//! already in the build for rustls, so this costs no extra compile time.
//!
//! Algorithm as documented by AWS ("Create a signed AWS API request", sigv4 docs) and
//! implemented by `awslabs/aws-sdk-rust` `aws-sigv4`: canonical request, string to sign,
//! derived signing key. Non-S3 services encode the path twice; here it is always `/`.

use axum::http::{HeaderMap, Method, Uri};
use ring::{digest, hmac};

const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// The parts of an `Authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authorization {
    pub access_key_id: String,
    pub date: String,
    pub region: String,
    pub service: String,
    pub signed_headers: Vec<String>,
    pub signature: String,
}

/// Why a request's signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SigV4Error {
    #[error("the request has no Authorization header")]
    Missing,
    #[error("the Authorization header is malformed: {0}")]
    Malformed(String),
    #[error("the access key id {0:?} is not known")]
    UnknownKey(String),
    #[error(
        "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."
    )]
    Mismatch,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

/// Parses `AWS4-HMAC-SHA256 Credential=AK/date/region/service/aws4_request,
/// SignedHeaders=a;b, Signature=hex`.
pub(crate) fn parse_authorization(value: &str) -> Result<Authorization, SigV4Error> {
    let malformed = |why: &str| SigV4Error::Malformed(why.to_string());
    let rest = value
        .strip_prefix(ALGORITHM)
        .ok_or_else(|| malformed("the algorithm is not AWS4-HMAC-SHA256"))?;
    if !rest.starts_with([' ', '\t']) {
        return Err(malformed("no space after the algorithm"));
    }
    // Exactly the three components, each once, in any order, comma-separated with optional
    // spaces (SDKs write `, `; some tools `,`). Anything else is refused rather than
    // skipped: skipping an empty or unknown component let a one-byte change to a signed
    // header (`,,` for `, `) still verify (found by the property tests).
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for part in rest.split(',') {
        let (name, v) = part
            .trim()
            .split_once('=')
            .ok_or_else(|| malformed("a component is not Name=value"))?;
        let slot = match name {
            "Credential" => &mut credential,
            "SignedHeaders" => &mut signed,
            "Signature" => &mut signature,
            _ => return Err(malformed("an unknown component")),
        };
        if slot.replace(v).is_some() {
            return Err(malformed("a component is given twice"));
        }
    }
    let credential = credential.ok_or_else(|| malformed("no Credential"))?;
    let scope: Vec<&str> = credential.split('/').collect();
    let [key, date, region, service, terminator] = scope.as_slice() else {
        return Err(malformed(
            "Credential is not KEY/DATE/REGION/SERVICE/aws4_request",
        ));
    };
    if *terminator != "aws4_request" {
        return Err(malformed(
            "the credential scope does not end in aws4_request",
        ));
    }
    Ok(Authorization {
        access_key_id: key.to_string(),
        date: date.to_string(),
        region: region.to_string(),
        service: service.to_string(),
        signed_headers: signed
            .ok_or_else(|| malformed("no SignedHeaders"))?
            .split(';')
            .map(str::to_string)
            .collect(),
        signature: signature
            .ok_or_else(|| malformed("no Signature"))?
            .to_string(),
    })
}

/// RFC 3986 encoding with AWS's unreserved set.
fn uri_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn canonical_query(query: Option<&str>) -> String {
    let mut pairs: Vec<(String, String)> = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .map(|(k, v)| (uri_encode(&k), uri_encode(&v)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn canonical_path(path: &str) -> String {
    if path.is_empty() {
        return "/".to_string();
    }
    // Non-S3 services encode each segment of the (already encoded) path once more.
    path.split('/')
        .map(uri_encode)
        .collect::<Vec<_>>()
        .join("/")
}

/// The signature of a request under `auth`'s scope and signed headers.
fn signature(
    secret: &str,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    auth: &Authorization,
    amz_date: &str,
    payload_hash: &str,
) -> Result<String, SigV4Error> {
    let mut canonical_headers = String::new();
    for name in &auth.signed_headers {
        let values: Vec<String> = headers
            .get_all(name.as_str())
            .iter()
            .map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        if values.is_empty() {
            return Err(SigV4Error::Malformed(format!(
                "signed header {name:?} is not in the request"
            )));
        }
        canonical_headers.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    let canonical_request = format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        method.as_str(),
        canonical_path(uri.path()),
        canonical_query(uri.query()),
        canonical_headers,
        auth.signed_headers.join(";"),
        payload_hash
    );
    let scope = format!(
        "{}/{}/{}/aws4_request",
        auth.date, auth.region, auth.service
    );
    let string_to_sign = format!(
        "{ALGORITHM}\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical_request.as_bytes())
    );
    let mut key = hmac_sha256(format!("AWS4{secret}").as_bytes(), auth.date.as_bytes());
    for part in [auth.region.as_str(), auth.service.as_str(), "aws4_request"] {
        key = hmac_sha256(&key, part.as_bytes());
    }
    Ok(hex(&hmac_sha256(&key, string_to_sign.as_bytes())))
}

/// Signs a request the way an SDK does: sets `x-amz-date` and `authorization` over
/// `host`, `content-type` and `x-amz-date` (those present). Used by this crate's tests and,
/// re-exported as [`crate::sign_request`], by callers that play a second API client
/// against the mock (the harness deleting a load balancer out of band).
pub fn sign(
    method: &Method,
    uri: &Uri,
    headers: &mut HeaderMap,
    body: &[u8],
    key: (&str, &str),
    region: &str,
    service: &str,
) {
    use axum::http::HeaderValue;
    let now = jiff::Timestamp::now();
    let amz_date = now.strftime("%Y%m%dT%H%M%SZ").to_string();
    let auth = Authorization {
        access_key_id: key.0.to_string(),
        date: amz_date[..8].to_string(),
        region: region.to_string(),
        service: service.to_string(),
        signed_headers: ["content-type", "host", "x-amz-date"]
            .into_iter()
            .filter(|h| *h == "x-amz-date" || headers.contains_key(*h))
            .map(str::to_string)
            .collect(),
        signature: String::new(),
    };
    if let Ok(v) = HeaderValue::from_str(&amz_date) {
        headers.insert("x-amz-date", v);
    }
    let sig = signature(
        key.1,
        method,
        uri,
        headers,
        &auth,
        &amz_date,
        &sha256_hex(body),
    )
    .unwrap_or_default();
    let value = format!(
        "{ALGORITHM} Credential={}/{}/{region}/{service}/aws4_request, SignedHeaders={}, Signature={sig}",
        key.0,
        auth.date,
        auth.signed_headers.join(";")
    );
    if let Ok(v) = HeaderValue::from_str(&value) {
        headers.insert("authorization", v);
    }
}

/// Verifies a request signed with the `Authorization` header. `secret_for` returns the
/// secret of a known access key id.
pub(crate) fn verify(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
    secret_for: impl Fn(&str) -> Option<String>,
) -> Result<Authorization, SigV4Error> {
    let header = headers
        .get("authorization")
        .ok_or(SigV4Error::Missing)?
        .to_str()
        .map_err(|_| SigV4Error::Malformed("not ASCII".into()))?;
    let auth = parse_authorization(header)?;
    let secret = secret_for(&auth.access_key_id)
        .ok_or_else(|| SigV4Error::UnknownKey(auth.access_key_id.clone()))?;
    let amz_date = headers
        .get("x-amz-date")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| SigV4Error::Malformed("no X-Amz-Date header".into()))?;

    let payload_hash = match headers
        .get("x-amz-content-sha256")
        .and_then(|v| v.to_str().ok())
    {
        Some(h) if h != "UNSIGNED-PAYLOAD" => h.to_string(),
        _ => sha256_hex(body),
    };
    let expected = signature(
        &secret,
        method,
        uri,
        headers,
        &auth,
        amz_date,
        &payload_hash,
    )?;
    // Also refuse a body that does not match a signed content hash.
    if payload_hash != sha256_hex(body) && payload_hash != "UNSIGNED-PAYLOAD" {
        return Err(SigV4Error::Mismatch);
    }
    // A mock needs no constant-time comparison.
    if expected != auth.signature {
        return Err(SigV4Error::Mismatch);
    }
    Ok(auth)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    /// The worked example of the AWS SigV4 documentation (IAM ListUsers, 2015-08-30).
    fn example() -> (Method, Uri, HeaderMap) {
        let uri: Uri = "/?Action=ListUsers&Version=2010-05-08"
            .parse()
            .expect("uri");
        let mut h = HeaderMap::new();
        h.insert(
            "content-type",
            HeaderValue::from_static("application/x-www-form-urlencoded; charset=utf-8"),
        );
        h.insert("host", HeaderValue::from_static("iam.amazonaws.com"));
        h.insert("x-amz-date", HeaderValue::from_static("20150830T123600Z"));
        h.insert("authorization", HeaderValue::from_static(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"));
        (Method::GET, uri, h)
    }

    fn secret(k: &str) -> Option<String> {
        (k == "AKIDEXAMPLE").then(|| "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".to_string())
    }

    #[test]
    fn documented_example_verifies() {
        let (m, u, h) = example();
        let auth = verify(&m, &u, &h, b"", secret).expect("valid");
        assert_eq!(auth.service, "iam");
        assert_eq!(auth.region, "us-east-1");
    }

    #[test]
    fn tampering_is_refused() {
        let (m, u, mut h) = example();
        assert_eq!(
            verify(&Method::POST, &u, &h, b"", secret),
            Err(SigV4Error::Mismatch)
        );
        assert_eq!(verify(&m, &u, &h, b"x", secret), Err(SigV4Error::Mismatch));
        let other: Uri = "/?Action=ListUsers&Version=2010-05-09"
            .parse()
            .expect("uri");
        assert_eq!(
            verify(&m, &other, &h, b"", secret),
            Err(SigV4Error::Mismatch)
        );
        assert!(matches!(
            verify(&m, &u, &h, b"", |_| None),
            Err(SigV4Error::UnknownKey(k)) if k == "AKIDEXAMPLE"
        ));
        h.remove("host");
        assert!(matches!(
            verify(&m, &u, &h, b"", secret),
            Err(SigV4Error::Malformed(_))
        ));
        h.remove("authorization");
        assert_eq!(verify(&m, &u, &h, b"", secret), Err(SigV4Error::Missing));
    }

    #[test]
    fn malformed_headers() {
        for bad in [
            "Basic abc",
            "AWS4-HMAC-SHA256 Credential=a/b/c, SignedHeaders=host, Signature=00",
            "AWS4-HMAC-SHA256 Credential=a/b/c/d/e, SignedHeaders=host, Signature=00",
            "AWS4-HMAC-SHA256 Credential=a/b/c/d/aws4_request, Signature=00",
        ] {
            assert!(
                matches!(parse_authorization(bad), Err(SigV4Error::Malformed(_))),
                "{bad}"
            );
        }
    }
}
