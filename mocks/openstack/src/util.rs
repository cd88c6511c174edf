//! Small helpers the service modules share: query pairs, link building, timestamps.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Percent-encodes a query component (everything but RFC 3986 unreserved characters).
pub(crate) fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `k=v&k=v`, encoded.
pub(crate) fn encode_query(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode_component(k), encode_component(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// All values of `key`, in order.
pub(crate) fn values<'a>(pairs: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    pairs
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// The last value of `key` (later ones win, as in webob's `params.get`).
pub(crate) fn last<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Nova's and Neutron's timestamp format, `2026-01-02T03:04:05Z`.
pub(crate) fn iso_seconds(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Nova's `OS-SRV-USG:launched_at` / `terminated_at`: a naive UTC datetime with
/// microseconds and no zone, `2026-01-02T03:04:05.000000` (oslo.serialization's
/// `PERFECT_TIME_FORMAT`; the compute API reference's samples). gophercloud parses these
/// two fields with `RFC3339MilliNoZ` and rejects a trailing `Z`.
pub(crate) fn iso_naive_micros(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

/// Octavia's `created_at` / `updated_at`: a naive UTC datetime to the second, no zone,
/// `2026-01-02T03:04:05` (WSME's `datetime.isoformat()` of the database value; the
/// load-balancer API reference's samples).
pub(crate) fn iso_naive_seconds(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S").to_string()
}

/// Keystone's, with microseconds: `2026-01-02T03:04:05.000000Z`.
pub(crate) fn iso_micros(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

pub(crate) fn json(status: StatusCode, body: serde_json::Value) -> Response {
    (status, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_regex_names() {
        assert_eq!(encode_component("^node-1$"), "%5Enode-1%24");
        assert_eq!(encode_query(&[("name".into(), "a b".into())]), "name=a%20b");
    }

    #[test]
    fn formats_timestamps() {
        let t: jiff::Timestamp = "2026-01-02T03:04:05.5Z".parse().expect("ts");
        assert_eq!(iso_seconds(t), "2026-01-02T03:04:05Z");
        assert_eq!(iso_micros(t), "2026-01-02T03:04:05.500000Z");
        assert_eq!(iso_naive_micros(t), "2026-01-02T03:04:05.500000");
        assert_eq!(iso_naive_seconds(t), "2026-01-02T03:04:05");
    }
}
