//! Property tests of everything that reads client bytes: the query-protocol form parser
//! (`params`), the SigV4 `Authorization` header and canonical request (`sigv4`), the whole
//! endpoint (body, query string, every action with arbitrary parameters), the XML writer
//! that echoes client text back, the instance metadata service's paths and headers, and
//! the ELB health-check target. Properties: nothing panics or answers 5xx; what can
//! round-trip does; a refusal is the service's own XML error envelope with a `Code` and
//! leaves no resource behind; a request signed by an independent reference signer
//! verifies, and any single-byte change to it does not.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use ring::{digest, hmac};

use crate::Config;
use crate::params::{Params, wildcard_match};
use crate::sigv4::{self, SigV4Error};
use crate::testing::{EC2, ELB, ELBV2, Mock, Reply};
use crate::xml::{escape, is_xml_char};

/// `cases` per property, or `AWS_PROPTEST_CASES` of them (a longer hunt).
fn runner(cases: u32) -> TestRunner {
    let cases = std::env::var("AWS_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    TestRunner::new(RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    })
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn check(result: Result<(), proptest::test_runner::TestError<impl std::fmt::Debug>>) {
    if let Err(e) = result {
        panic!("{e}");
    }
}

fn fail(msg: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(msg.into())
}

/// Whether `body` is one well-formed XML 1.0 document (balanced, matching end tags, one
/// root, only XML characters).
fn well_formed(body: &str) -> Result<(), String> {
    if let Some(c) = body.chars().find(|c| !is_xml_char(*c)) {
        return Err(format!(
            "character U+{:04X} is not allowed in XML",
            c as u32
        ));
    }
    let mut reader = quick_xml::Reader::from_str(body);
    reader.config_mut().check_end_names = true;
    let (mut depth, mut roots) = (0usize, 0usize);
    loop {
        match reader.read_event().map_err(|e| e.to_string())? {
            quick_xml::events::Event::Start(_) => {
                if depth == 0 {
                    roots += 1;
                }
                depth += 1;
            }
            quick_xml::events::Event::Empty(_) if depth == 0 => roots += 1,
            quick_xml::events::Event::End(_) => depth = depth.saturating_sub(1),
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    if depth != 0 || roots != 1 {
        return Err(format!("{roots} root elements, {depth} left open"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// params.rs

/// Keys and values as clients may send them, including the characters form encoding must
/// carry (`&`, `=`, `+`, `%`, spaces, non-ASCII, controls).
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9.]{1,12}",
        "\\PC{0,8}",
        "[&=+% \u{1}\u{7f}é/]{1,6}",
    ]
}

#[test]
fn form_parser_never_panics_and_refuses_in_aws_terms() {
    // Raw bytes, and forms built from the pieces the readers look for.
    let bytes = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..96),
        "((Filter|Tag|InstanceId|Action|MaxResults|DryRun)(\\.(1|2|01|\\+1|x|Name|Key|Value))*=[a-z0-9%+&=]{0,4}&?){0,8}"
            .prop_map(String::into_bytes),
    ];
    check(runner(512).run(&bytes, |bytes| {
        match Params::parse(&bytes) {
            Err(e) if e.status == StatusCode::BAD_REQUEST && e.code == "MalformedQueryString" => {}
            Err(e) => return Err(fail(format!("{bytes:?}: {e:?}"))),
            Ok(p) => {
                // Every reader copes with whatever was parsed, and refuses in AWS terms.
                for e in [p.filters().err(), p.tags("Tag").err(), p.action().err()]
                    .into_iter()
                    .flatten()
                {
                    prop_assert_eq!(e.status, StatusCode::BAD_REQUEST);
                    prop_assert!(e.code == "MissingParameter", "{:?}", e);
                }
                for e in [p.int("MaxResults").err(), p.bool("DryRun").err()]
                    .into_iter()
                    .flatten()
                {
                    prop_assert_eq!(e.code, "InvalidParameterValue");
                }
                let _ = (p.list("InstanceId"), p.journal_query());
            }
        }
        Ok(())
    }));
}

#[test]
fn encoded_params_parse_back_to_the_same_map() {
    let map = prop::collection::btree_map(
        text().prop_filter("non-empty", |k| !k.is_empty()),
        text(),
        0..8,
    );
    check(runner(512).run(&map, |map: BTreeMap<String, String>| {
        let mut form = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &map {
            form.append_pair(k, v);
        }
        let encoded = form.finish();
        let p = Params::parse(encoded.as_bytes()).map_err(|e| fail(format!("{encoded}: {e}")))?;
        for (k, v) in &map {
            prop_assert_eq!(p.get(k), Some(v.as_str()), "{}", encoded);
        }
        // The journal's form is the same map again.
        let again = Params::parse(p.journal_query().as_bytes()).map_err(|e| fail(e.to_string()))?;
        prop_assert_eq!(again, p);
        Ok(())
    }));
}

#[test]
fn numbered_lists_come_back_in_index_order() {
    // Values at arbitrary distinct indexes, written in arbitrary order, plus noise keys
    // that only look numbered (`InstanceId.01`, `InstanceId.+2`, `InstanceId.x`).
    let strategy = (
        prop::collection::btree_map(1u32..2000, text(), 0..10),
        prop::collection::vec(
            prop::sample::select(vec!["01", "+2", "x", "", "1a", "-1"]),
            0..3,
        ),
        any::<prop::sample::Index>(),
    );
    check(runner(512).run(&strategy, |(items, noise, rotate)| {
        let mut pairs: Vec<(String, String)> = items
            .iter()
            .map(|(i, v)| (format!("InstanceId.{i}"), v.clone()))
            .chain(
                noise
                    .iter()
                    .map(|n| (format!("InstanceId.{n}"), "noise".to_string())),
            )
            .collect();
        if !pairs.is_empty() {
            let by = rotate.index(pairs.len());
            pairs.rotate_left(by);
        }
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|a, b| a.0 == b.0);
        let mut form = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &pairs {
            form.append_pair(k, v);
        }
        let encoded = form.finish();
        let p = Params::parse(encoded.as_bytes()).map_err(|e| fail(e.to_string()))?;
        let want: Vec<String> = items.values().cloned().collect();
        prop_assert_eq!(p.list("InstanceId"), want, "{}", encoded);
        prop_assert_eq!(
            p.indexes("InstanceId"),
            items.keys().copied().collect::<Vec<_>>()
        );
        // Tags: every numbered entry that has a key is read, none is missed.
        let mut form = form_urlencoded::Serializer::new(String::new());
        for (i, v) in &items {
            form.append_pair(&format!("Tag.{i}.Key"), &format!("k{i}"));
            form.append_pair(&format!("Tag.{i}.Value"), v);
        }
        let p = Params::parse(form.finish().as_bytes()).map_err(|e| fail(e.to_string()))?;
        let tags = p.tags("Tag").map_err(|e| fail(e.to_string()))?;
        prop_assert_eq!(tags.len(), items.len());
        Ok(())
    }));
}

#[test]
fn wildcards_agree_with_equality_and_stars() {
    let strategy = ("[ab?*]{0,8}", "[ab]{0,8}", any::<prop::sample::Index>());
    check(runner(1024).run(&strategy, |(pattern, value, at)| {
        // Literal patterns match exactly themselves.
        if !pattern.contains(['*', '?']) {
            prop_assert_eq!(wildcard_match(&pattern, &value), pattern == value);
        }
        prop_assert!(wildcard_match("*", &value));
        prop_assert!(wildcard_match(&value, &value));
        // Replacing one character by `?`, or a suffix by `*`, still matches.
        if !value.is_empty() {
            let i = at.index(value.len());
            let q = format!("{}?{}", &value[..i], &value[i + 1..]);
            prop_assert!(wildcard_match(&q, &value), "{} {}", q, value);
            let star = format!("{}*", &value[..i]);
            prop_assert!(wildcard_match(&star, &value), "{} {}", star, value);
        }
        Ok(())
    }));
}

// ---------------------------------------------------------------------------------------
// xml.rs

#[test]
fn escaped_text_is_always_a_well_formed_document() {
    // Any chars at all, controls and non-characters included (`any::<String>()` has none).
    let chars = prop::collection::vec(any::<char>(), 0..24)
        .prop_map(|cs| cs.into_iter().collect::<String>());
    check(runner(512).run(&chars, |s| {
        let doc = format!("<a>{}</a>", escape(&s));
        well_formed(&doc).map_err(|e| fail(format!("{s:?}: {e}")))?;
        // Text XML can carry comes back unchanged.
        if s.chars().all(is_xml_char) && !s.contains('\r') {
            let mut reader = quick_xml::Reader::from_str(&doc);
            let mut got = String::new();
            loop {
                match reader.read_event().map_err(|e| fail(e.to_string()))? {
                    quick_xml::events::Event::Text(t) => {
                        got.push_str(&t.decode().map_err(|e| fail(e.to_string()))?);
                    }
                    quick_xml::events::Event::GeneralRef(r) => {
                        let name = r.decode().map_err(|e| fail(e.to_string()))?;
                        got.push_str(match name.as_ref() {
                            "amp" => "&",
                            "lt" => "<",
                            "gt" => ">",
                            "quot" => "\"",
                            "apos" => "'",
                            other => return Err(fail(format!("entity {other}"))),
                        });
                    }
                    quick_xml::events::Event::Eof => break,
                    _ => {}
                }
            }
            prop_assert_eq!(got, s);
        }
        Ok(())
    }));
}

// ---------------------------------------------------------------------------------------
// sigv4.rs: an independent reference signer, anchored on the AWS documentation's example.

/// The AWS SigV4 unreserved set, uppercase hex (sigv4 docs "Create a canonical request").
fn aws_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn mac(key: &[u8], data: &str) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
        .as_ref()
        .to_vec()
}

/// A request as a client would put it on the wire.
#[derive(Debug, Clone)]
struct Wire {
    method: Method,
    /// Path and query, already encoded.
    path: String,
    query: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    authorization: String,
}

impl Wire {
    fn uri(&self) -> Result<Uri, TestCaseError> {
        let s = if self.query.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{}", self.path, self.query)
        };
        s.parse().map_err(|e| fail(format!("{s}: {e}")))
    }

    fn header_map(&self) -> Result<HeaderMap, TestCaseError> {
        let mut h = HeaderMap::new();
        for (k, v) in &self.headers {
            let name: axum::http::HeaderName = k.parse().map_err(|e| fail(format!("{k}: {e}")))?;
            let value = HeaderValue::from_str(v).map_err(|e| fail(format!("{v:?}: {e}")))?;
            h.append(name, value);
        }
        let auth = HeaderValue::from_str(&self.authorization).map_err(|e| fail(e.to_string()))?;
        h.insert("authorization", auth);
        Ok(h)
    }

    fn verify(
        &self,
        secret: &'static str,
    ) -> Result<Result<sigv4::Authorization, SigV4Error>, TestCaseError> {
        let (uri, headers) = (self.uri()?, self.header_map()?);
        Ok(sigv4::verify(
            &self.method,
            &uri,
            &headers,
            &self.body,
            |k| (k == "AKIDEXAMPLE").then(|| secret.to_string()),
        ))
    }
}

/// Signs like an SDK: every header given is signed (names lowercased, sorted; values
/// trimmed, inner runs of spaces collapsed), the path's segments encoded once more, the
/// query's pairs encoded and sorted.
#[allow(clippy::too_many_arguments)]
fn reference_sign(
    secret: &str,
    method: Method,
    segments: &[String],
    query: &[(String, String)],
    mut headers: Vec<(String, String)>,
    body: Vec<u8>,
    amz_date: &str,
    scope: (&str, &str),
) -> Wire {
    let path = format!(
        "/{}",
        segments
            .iter()
            .map(|s| aws_encode(s))
            .collect::<Vec<_>>()
            .join("/")
    );
    let canonical_path = format!(
        "/{}",
        segments
            .iter()
            .map(|s| aws_encode(&aws_encode(s)))
            .collect::<Vec<_>>()
            .join("/")
    );
    let mut encoded: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (aws_encode(k), aws_encode(v)))
        .collect();
    let wire_query = encoded
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    encoded.sort();
    let canonical_query = encoded
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    headers.push(("x-amz-date".into(), amz_date.into()));
    let mut canon: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.to_ascii_lowercase(),
                v.split(' ')
                    .filter(|w| !w.is_empty())
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        })
        .collect();
    canon.sort();
    let signed = canon
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let canonical_headers: String = canon.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let payload = hex(digest::digest(&digest::SHA256, &body).as_ref());
    let request = format!(
        "{}\n{canonical_path}\n{canonical_query}\n{canonical_headers}\n{signed}\n{payload}",
        method.as_str()
    );
    let day = &amz_date[..8];
    let (region, service) = scope;
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{day}/{region}/{service}/aws4_request\n{}",
        hex(digest::digest(&digest::SHA256, request.as_bytes()).as_ref())
    );
    let mut key = mac(format!("AWS4{secret}").as_bytes(), day);
    for part in [region, service, "aws4_request"] {
        key = mac(&key, part);
    }
    let signature = hex(&mac(&key, &string_to_sign));
    Wire {
        method,
        path,
        query: wire_query,
        headers,
        body,
        authorization: format!(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{day}/{region}/{service}/aws4_request, SignedHeaders={signed}, Signature={signature}"
        ),
    }
}

const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

#[test]
fn reference_signer_reproduces_the_documented_example() {
    let wire = reference_sign(
        SECRET,
        Method::GET,
        &[String::new()],
        &[
            ("Action".into(), "ListUsers".into()),
            ("Version".into(), "2010-05-08".into()),
        ],
        vec![
            (
                "content-type".into(),
                "application/x-www-form-urlencoded; charset=utf-8".into(),
            ),
            ("host".into(), "iam.amazonaws.com".into()),
        ],
        Vec::new(),
        "20150830T123600Z",
        ("us-east-1", "iam"),
    );
    assert!(
        wire.authorization.ends_with(
            "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
        ),
        "{}",
        wire.authorization
    );
}

/// Path segments (no `.`/`..`: SigV4 normalizes those and clients never send them),
/// query pairs, one extra signed header with spaces to fold, and a body.
fn signed_request() -> impl Strategy<Value = Wire> {
    let segment = "[^/]{1,6}".prop_filter("no dot segments", |s| s != "." && s != "..");
    let shape = (
        prop::sample::select(vec![Method::GET, Method::POST]),
        prop::collection::vec(segment, 0..3),
        prop::collection::vec((text(), text()), 0..5),
        "[ -~]{0,20}",
        prop::collection::vec(any::<u8>(), 0..64),
    );
    let scope = (
        prop::sample::select(vec!["us-west-2", "eu-central-1"]),
        prop::sample::select(vec!["ec2", "elasticloadbalancing"]),
        any::<bool>(),
    );
    (shape, scope).prop_map(
        |((method, mut segments, query, extra, body), (region, service, declare_hash))| {
            if segments.is_empty() {
                segments.push(String::new());
            }
            let mut headers = vec![
                ("host".to_string(), "127.0.0.1:4566".to_string()),
                ("X-Amz-Meta-Note".to_string(), extra),
            ];
            // Some SDKs also send (and sign) the payload hash.
            if declare_hash {
                headers.push((
                    "x-amz-content-sha256".into(),
                    hex(digest::digest(&digest::SHA256, &body).as_ref()),
                ));
            }
            reference_sign(
                SECRET,
                method,
                &segments,
                &query,
                headers,
                body,
                "20261122T084000Z",
                (region, service),
            )
        },
    )
}

#[test]
fn reference_signed_requests_verify() {
    check(
        runner(512).run(&signed_request(), |wire| match wire.verify(SECRET)? {
            Ok(auth) => {
                prop_assert_eq!(auth.access_key_id, "AKIDEXAMPLE");
                Ok(())
            }
            Err(e) => Err(fail(format!("{wire:?}: {e}"))),
        }),
    );
}

/// Byte positions of `s` that are not inside a `%XX` escape (changing a hex digit's case
/// there names the same character, which is no change at all).
fn free_positions(s: &str) -> Vec<usize> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            i += 3;
        } else {
            out.push(i);
            i += 1;
        }
    }
    out
}

/// `s` with the byte at `i` replaced by a different printable, non-space ASCII byte
/// (whitespace may legitimately fold), or `None` when that is not valid UTF-8.
fn replace_byte(s: &str, i: usize, with: u8) -> Option<String> {
    let mut b = s.as_bytes().to_vec();
    let old = *b.get(i)?;
    let mut new = b'!' + (with % 94);
    if new == old {
        new = if old == b'~' { b'!' } else { old + 1 };
    }
    b[i] = new;
    String::from_utf8(b).ok()
}

#[test]
fn any_single_byte_change_breaks_the_signature() {
    let strategy = (
        signed_request(),
        0usize..5,
        any::<prop::sample::Index>(),
        any::<u8>(),
    );
    check(runner(1024).run(&strategy, |(mut wire, part, at, with)| {
        let original = format!("{wire:?}");
        let changed = match part {
            0 if !wire.body.is_empty() => {
                let i = at.index(wire.body.len());
                wire.body[i] ^= with.max(1);
                true
            }
            1 => {
                let i = at.index(wire.authorization.len());
                match replace_byte(&wire.authorization, i, with) {
                    Some(s) => {
                        wire.authorization = s;
                        true
                    }
                    None => false,
                }
            }
            2 => {
                // The x-amz-date header (last header).
                let Some((_, date)) = wire.headers.last_mut() else {
                    return Ok(());
                };
                let i = at.index(date.len());
                match replace_byte(date, i, with) {
                    Some(s) => {
                        *date = s;
                        true
                    }
                    None => false,
                }
            }
            3 | 4 => {
                let target = if part == 3 {
                    &mut wire.query
                } else {
                    &mut wire.path
                };
                let free: Vec<usize> = free_positions(target)
                    .into_iter()
                    .filter(|i| target.as_bytes()[*i].is_ascii_alphanumeric())
                    .collect();
                if free.is_empty() {
                    false
                } else {
                    let i = free[at.index(free.len())];
                    let b = target.as_bytes()[i];
                    let new = if b == b'z' {
                        b'a'
                    } else if b == b'9' {
                        b'0'
                    } else {
                        b + 1
                    };
                    let new = if new.is_ascii_alphanumeric() {
                        new
                    } else {
                        b'a'
                    };
                    let mut bytes = target.clone().into_bytes();
                    bytes[i] = new;
                    *target = String::from_utf8(bytes).map_err(|e| fail(e.to_string()))?;
                    true
                }
            }
            _ => false,
        };
        if !changed {
            return Ok(());
        }
        // A changed request may no longer be valid HTTP at all; that is a refusal too.
        let (Ok(uri), Ok(headers)) = (wire.uri(), wire.header_map()) else {
            return Ok(());
        };
        let verdict = sigv4::verify(&wire.method, &uri, &headers, &wire.body, |k| {
            (k == "AKIDEXAMPLE").then(|| SECRET.to_string())
        });
        prop_assert!(
            verdict.is_err(),
            "part {} changed and still verifies:\n{:?}\nfrom\n{}",
            part,
            wire,
            original
        );
        Ok(())
    }));
}

#[test]
fn authorization_parser_never_panics() {
    let strategy = prop_oneof![
        any::<String>(),
        ("[A-Za-z0-9/_ -]{0,40}", "[a-z;-]{0,20}", "[0-9a-f]{0,64}").prop_map(
            |(c, s, sig)| format!(
                "AWS4-HMAC-SHA256 Credential={c}, SignedHeaders={s}, Signature={sig}"
            )
        ),
    ];
    check(runner(1024).run(&strategy, |s| {
        match sigv4::parse_authorization(&s) {
            Ok(a) => {
                prop_assert!(s.starts_with("AWS4-HMAC-SHA256"));
                prop_assert!(!a.signed_headers.is_empty());
            }
            Err(SigV4Error::Malformed(_)) => {}
            Err(e) => return Err(fail(format!("{s:?}: unexpected {e:?}"))),
        }
        // Verifying with it as the header never panics either.
        if let Ok(v) = HeaderValue::from_str(&s) {
            let mut h = HeaderMap::new();
            h.insert("authorization", v);
            h.insert("x-amz-date", HeaderValue::from_static("20261122T084000Z"));
            let _ = sigv4::verify(&Method::POST, &Uri::from_static("/"), &h, b"", |_| {
                Some(SECRET.to_string())
            });
        }
        Ok(())
    }));
}

// ---------------------------------------------------------------------------------------
// The endpoint: arbitrary bytes, and every action with arbitrary parameters.

fn is_error_envelope(body: &str) -> bool {
    let ec2 = body.contains("<Response><Errors><Error><Code>");
    let elb = body.contains("<ErrorResponse xmlns=") && body.contains("<Error><Type>");
    (ec2 || elb)
        && !Reply {
            status: StatusCode::OK,
            body: body.to_string(),
        }
        .code()
        .is_empty()
}

#[test]
fn arbitrary_bodies_get_an_error_envelope_never_a_5xx() {
    let rt = rt();
    let m = Mock::seeded(1);
    let strategy = (
        prop::sample::select(vec![Method::POST, Method::GET, Method::PUT]),
        prop::sample::select(vec![
            "",
            "Version=2016-11-15&Action=DescribeInstances&",
            "Version=2012-06-01&Action=DescribeLoadBalancers&",
            "Version=2015-12-01&",
        ]),
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..128),
            prop::collection::vec((text(), text()), 0..6).prop_map(|pairs| {
                let mut f = form_urlencoded::Serializer::new(String::new());
                for (k, v) in pairs {
                    f.append_pair(&k, &v);
                }
                f.finish().into_bytes()
            }),
        ],
    );
    check(runner(256).run(&strategy, |(method, prefix, tail)| {
        let mut form = prefix.as_bytes().to_vec();
        form.extend_from_slice(&tail);
        let mut req = Request::builder().method(method.clone());
        let (body, sent) = if method == Method::GET {
            // The same bytes as a query string: bytes a URI cannot carry percent-encoded,
            // the rest (`&`, `=`, `%`, `+`) as they are.
            let q: String = form
                .iter()
                .map(|b| match b {
                    b'!'..=b'~' if *b != b'#' => (*b as char).to_string(),
                    _ => format!("%{b:02X}"),
                })
                .collect();
            req = req.uri(format!("/?{q}"));
            (Body::empty(), q.into_bytes())
        } else {
            req = req
                .uri("/")
                .header("content-type", "application/x-www-form-urlencoded");
            (Body::from(form.clone()), form.clone())
        };
        let Ok(req) = req.body(body) else {
            return Ok(());
        };
        let r = rt.block_on(m.raw(req));
        well_formed(&r.body).map_err(|e| fail(format!("{e}: {}", r.body)))?;
        prop_assert!(is_error_envelope(&r.body), "{}", r.body);
        // The refusal AWS gives for what was sent (nothing here is signed).
        let want = if method == Method::PUT {
            (StatusCode::METHOD_NOT_ALLOWED, "UnsupportedProtocol")
        } else {
            match Params::parse(&sent) {
                Err(_) => (StatusCode::BAD_REQUEST, "MalformedQueryString"),
                Ok(p) => match p.get("Version") {
                    None => (StatusCode::BAD_REQUEST, "MissingParameter"),
                    Some("2012-06-01" | "2015-12-01") => {
                        (StatusCode::FORBIDDEN, "MissingAuthenticationToken")
                    }
                    Some(_) => (StatusCode::UNAUTHORIZED, "AuthFailure"),
                },
            }
        };
        prop_assert_eq!(
            (r.status, r.code()),
            (want.0, want.1.to_string()),
            "{:?}",
            form
        );
        Ok(())
    }));
}

const KEYS: &[&str] = &[
    "InstanceId.1",
    "InstanceId.2",
    "Filter.1.Name",
    "Filter.1.Value.1",
    "MaxResults",
    "NextToken",
    "DryRun",
    "GroupId",
    "GroupName",
    "GroupDescription",
    "IpPermissions.1.IpProtocol",
    "IpPermissions.1.FromPort",
    "IpPermissions.1.ToPort",
    "IpPermissions.1.IpRanges.1.CidrIp",
    "ResourceId.1",
    "Tag.1.Key",
    "Tag.1.Value",
    "RouteTableId",
    "DestinationCidrBlock",
    "SourceDestCheck.Value",
    "ImageId",
    "MinCount",
    "MaxCount",
    "LoadBalancerName",
    "LoadBalancerNames.member.1",
    "Listeners.member.1.Protocol",
    "Listeners.member.1.LoadBalancerPort",
    "Listeners.member.1.InstancePort",
    "LoadBalancerPorts.member.1",
    "Instances.member.1.InstanceId",
    "HealthCheck.Target",
    "HealthCheck.Interval",
    "HealthCheck.Timeout",
    "HealthCheck.HealthyThreshold",
    "HealthCheck.UnhealthyThreshold",
    "Subnets.member.1",
    "SecurityGroups.member.1",
    "AvailabilityZones.member.1",
    "Tags.member.1.Key",
    "Tags.member.1.Value",
    "Name",
    "Names.member.1",
    "Type",
    "Scheme",
    "Protocol",
    "Port",
    "VpcId",
    "TargetGroupArn",
    "TargetGroupArns.member.1",
    "LoadBalancerArn",
    "LoadBalancerArns.member.1",
    "ListenerArn",
    "ResourceArns.member.1",
    "Targets.member.1.Id",
    "Targets.member.1.Port",
    "DefaultActions.member.1.Type",
    "DefaultActions.member.1.TargetGroupArn",
    "HealthCheckProtocol",
    "HealthCheckPort",
    "HealthCheckPath",
    "Attributes.member.1.Key",
    "Attributes.member.1.Value",
    "Marker",
    "PageSize",
];

fn param_value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "",
            "0",
            "1",
            "-1",
            "65536",
            "99999999999999999999",
            "true",
            "nope",
            "TCP",
            "UDP",
            "TCP_UDP",
            "HTTP",
            "network",
            "instance-id",
            "tag:Name",
            "0.0.0.0/0",
            "127.40.0.10",
            "TCP:80",
            "HTTP:80/x",
            "forward",
            "a1",
            "k8s-tg",
            "traffic-port",
            "\u{1}\u{0}<&>",
        ])
        .prop_map(str::to_string),
        text(),
    ]
}

#[test]
fn every_action_with_arbitrary_params_answers_in_its_envelope() {
    let rt = rt();
    let m = Mock::seeded(2);
    let admin = m.admin();
    let (instance, subnet, vpc) = {
        let c = m.shared.cloud();
        (
            c.instances[0].id.clone(),
            c.subnets[0].id.clone(),
            c.vpcs[0].id.clone(),
        )
    };
    let actions: Vec<(&str, &str)> = crate::ec2::ACTIONS
        .iter()
        .map(|a| (EC2, *a))
        .chain(crate::elb::ACTIONS.iter().map(|a| (ELB, *a)))
        .chain(crate::elbv2::ACTIONS.iter().map(|a| (ELBV2, *a)))
        .collect();
    let real = prop::sample::select(vec![instance, subnet, vpc]);
    let strategy = (
        prop::sample::select(actions),
        prop::collection::vec(
            (
                prop::sample::select(KEYS),
                prop_oneof![param_value(), real.clone()],
            ),
            0..6,
        ),
    );
    check(runner(512).run(&strategy, |((version, action), params)| {
        let mut unique: BTreeMap<&str, String> = BTreeMap::new();
        for (k, v) in params {
            unique.insert(k, v);
        }
        let pairs: Vec<(&str, &str)> = unique.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let before = admin.leaks();
        let r = rt.block_on(m.call(version, action, &pairs));
        prop_assert!(
            !r.status.is_server_error(),
            "{action} {pairs:?} -> {} {}",
            r.status,
            r.body
        );
        well_formed(&r.body).map_err(|e| fail(format!("{action} {pairs:?}: {e}: {}", r.body)))?;
        if r.status.is_client_error() {
            prop_assert!(is_error_envelope(&r.body), "{action}: {}", r.body);
            prop_assert_eq!(
                admin.leaks(),
                before,
                "refused {} {:?} still changed state: {}",
                action,
                pairs,
                r.body
            );
        }
        // Keep the state small: start from the seed every few cases.
        if admin.leaks().len() > 20 {
            admin.reset();
        }
        Ok(())
    }));
}

// ---------------------------------------------------------------------------------------
// imds.rs and the health-check target.

#[test]
fn imds_paths_and_headers_never_5xx() {
    let rt = rt();
    let m = Mock::with(Config {
        nodes: 1,
        ..Config::default()
    });
    let id = m.shared.cloud().instances[0].id.clone();
    m.shared.imds.set_instance(Some(id));
    let router = crate::imds::router(m.shared.clone());
    let call = |req: Request<Body>| {
        let router = router.clone();
        async move {
            use http_body_util::BodyExt;
            use tower::ServiceExt;
            let resp = router.oneshot(req).await.expect("infallible");
            let status = resp.status();
            let body = resp.into_body().collect().await.expect("body").to_bytes();
            (status, String::from_utf8_lossy(&body).to_string())
        }
    };
    let token = rt.block_on(call(
        Request::put("/latest/api/token")
            .header("x-aws-ec2-metadata-token-ttl-seconds", "60")
            .body(Body::empty())
            .expect("request"),
    ));
    assert_eq!(token.0, StatusCode::OK);
    let issued = token.1;
    let strategy = (
        prop::collection::vec("[a-zA-Z0-9._~%-]{0,10}", 0..4),
        prop_oneof![
            Just(None),
            Just(Some(issued.clone())),
            "[ -~]{0,40}".prop_map(Some)
        ],
        "[ -~]{0,12}",
    );
    check(runner(512).run(&strategy, |(segments, token, ttl)| {
        let path = format!("/latest/meta-data/{}", segments.join("/"));
        let mut get = Request::get(&path);
        if let Some(t) = &token {
            get = get.header("x-aws-ec2-metadata-token", t.as_str());
        }
        let Ok(req) = get.body(Body::empty()) else {
            return Ok(());
        };
        let (status, body) = rt.block_on(call(req));
        prop_assert!(!status.is_server_error(), "{path}: {status} {body}");
        if token.as_deref() != Some(issued.as_str()) {
            prop_assert_eq!(status, StatusCode::UNAUTHORIZED, "{}", path);
        }
        let Ok(put) = Request::put("/latest/api/token")
            .header("x-aws-ec2-metadata-token-ttl-seconds", ttl.as_str())
            .body(Body::empty())
        else {
            return Ok(());
        };
        let (status, _) = rt.block_on(call(put));
        let good = ttl
            .trim()
            .parse::<u64>()
            .is_ok_and(|t| (1..=21_600).contains(&t));
        prop_assert_eq!(
            status == StatusCode::OK,
            good,
            "ttl {:?} -> {}",
            ttl,
            status
        );
        prop_assert!(status == StatusCode::OK || status == StatusCode::BAD_REQUEST);
        Ok(())
    }));
}

#[test]
fn health_check_targets_never_panic() {
    check(runner(1024).run(&"\\PC{0,24}", |s| {
        if let Some((_, port)) = crate::dataplane::health_of(&s) {
            prop_assert!(s.contains(&port.to_string()));
        }
        Ok(())
    }));
}
