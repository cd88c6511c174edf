//! Request paths resolved against the resource table, and the verb a request is.
//!
//! Why this exists: Kubernetes paths do not fit a fixed route table (`/api/v1/namespaces/x`
//! is a namespace, `/api/v1/namespaces/x/leases` is not), so every request's path is
//! classified here once ([`classify`]) and both the authorization filter and the handlers
//! read the result. Pure functions of the path, method and query.

use axum::http::Method;

use crate::resources::{self, ResourceDesc};

/// A request path, resolved against the resource table.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Version,
    Health,
    Api,
    Apis,
    Group(String),
    GroupVersion(String, String),
    /// `/openapi/v3`.
    OpenApiIndex,
    /// `/openapi/v3/<group version path>`.
    OpenApi(String),
    /// `/openapi/v2`.
    OpenApiV2,
    Resource(ResourcePath),
    Unknown,
}

/// A resource request: collection, object, or object subresource.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourcePath {
    pub desc: &'static ResourceDesc,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// Reached through the deprecated `/api/v1/watch/...` or `/apis/<g>/<v>/watch/...`
    /// prefix, which kube-apiserver still serves: a watch, of one object when named
    /// (apiserver pkg/endpoints/installer.go, the `WATCH` and `WATCHLIST` actions).
    pub watch_prefix: bool,
}

/// Resolve a URL path. Segments are percent-decoded first, as Go's URL parsing does
/// before the apiserver splits the path: the Python client sends the colon of an RBAC
/// name such as `system:cloud-controller-manager` as `%3A`.
pub fn classify(path: &str) -> Target {
    let decoded: Vec<std::borrow::Cow<'_, str>> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = decoded.iter().map(|s| s.as_ref()).collect();
    match segs.as_slice() {
        ["version"] => Target::Version,
        [h, ..] if matches!(*h, "healthz" | "readyz" | "livez") => Target::Health,
        ["api"] => Target::Api,
        ["apis"] => Target::Apis,
        ["openapi", "v2"] => Target::OpenApiV2,
        ["openapi", "v3"] => Target::OpenApiIndex,
        ["openapi", "v3", rest @ ..] => Target::OpenApi(rest.join("/")),
        ["api", "v1"] => Target::GroupVersion(String::new(), "v1".into()),
        ["apis", g] => Target::Group((*g).into()),
        ["apis", g, v] => Target::GroupVersion((*g).into(), (*v).into()),
        ["api", "v1", "watch", rest @ ..] => watch_prefixed(classify_resource("", "v1", rest)),
        ["apis", g, v, "watch", rest @ ..] => watch_prefixed(classify_resource(g, v, rest)),
        ["api", "v1", rest @ ..] => classify_resource("", "v1", rest),
        ["apis", g, v, rest @ ..] => classify_resource(g, v, rest),
        _ => Target::Unknown,
    }
}

/// `%XX` escapes decoded; a segment with a malformed escape or that does not decode to
/// UTF-8 is kept as it is.
fn percent_decode(segment: &str) -> std::borrow::Cow<'_, str> {
    if !segment.contains('%') {
        return segment.into();
    }
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b'%', _, _) => return segment.into(),
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_or_else(|_| segment.into(), Into::into)
}

/// A resource path under the `watch/` prefix; subresources and the review APIs have none.
fn watch_prefixed(target: Target) -> Target {
    match target {
        Target::Resource(mut rp) if rp.subresource.is_none() && !rp.desc.create_only => {
            rp.watch_prefix = true;
            Target::Resource(rp)
        }
        _ => Target::Unknown,
    }
}

fn classify_resource(group: &str, version: &str, rest: &[&str]) -> Target {
    let build = |desc, namespace: Option<&str>, tail: &[&str]| {
        Target::Resource(ResourcePath {
            desc,
            namespace: namespace.map(str::to_string),
            name: tail.first().map(|s| s.to_string()),
            subresource: tail.get(1).map(|s| s.to_string()),
            watch_prefix: false,
        })
    };
    if let ["namespaces", ns, plural, tail @ ..] = rest
        && let Some(desc) = resources::lookup(group, version, plural).filter(|d| d.namespaced)
    {
        if tail.len() <= 2 {
            return build(desc, Some(ns), tail);
        }
        return Target::Unknown;
    }
    if let [plural, tail @ ..] = rest
        && let Some(desc) = resources::lookup(group, version, plural)
    {
        // A namespaced resource is listable across namespaces, not addressable.
        if tail.len() <= 2 && (tail.is_empty() || !desc.namespaced) {
            return build(desc, None, tail);
        }
    }
    Target::Unknown
}

/// The audit verb of a request.
pub(super) fn verb_of(method: &Method, target: &Target, query: &str) -> String {
    let Target::Resource(rp) = target else {
        return method.as_str().to_ascii_lowercase();
    };
    let has_name = rp.name.is_some();
    match *method {
        Method::GET if rp.watch_prefix => "watch".into(),
        // `watch=true` makes a watch of a collection only (requestinfo.go); an object URL
        // is a get either way.
        Method::GET if has_name => "get".into(),
        Method::GET if is_watch(query) => "watch".into(),
        Method::GET => "list".into(),
        Method::POST => "create".into(),
        Method::PUT => "update".into(),
        Method::PATCH => "patch".into(),
        Method::DELETE if has_name => "delete".into(),
        Method::DELETE => "deletecollection".into(),
        _ => method.as_str().to_ascii_lowercase(),
    }
}

fn is_watch(query: &str) -> bool {
    query.split('&').any(|kv| {
        kv.split_once('=')
            .is_some_and(|(k, v)| k == "watch" && parse_bool(v) == Some(true))
    })
}

/// Go's `strconv.ParseBool`.
pub(super) fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(path: &str) -> ResourcePath {
        match classify(path) {
            Target::Resource(rp) => rp,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn classify_paths() {
        assert_eq!(classify("/version"), Target::Version);
        assert_eq!(classify("/healthz/ping"), Target::Health);
        assert_eq!(
            classify("/api/v1"),
            Target::GroupVersion(String::new(), "v1".into())
        );
        let ns = resource("/api/v1/namespaces/kube-system");
        assert_eq!(
            (ns.desc.plural, ns.name.as_deref()),
            ("namespaces", Some("kube-system"))
        );
        let leases = resource("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1");
        assert_eq!(leases.desc.plural, "leases");
        assert_eq!(leases.namespace.as_deref(), Some("kube-node-lease"));
        assert_eq!(leases.name.as_deref(), Some("n1"));
        let status = resource("/api/v1/nodes/n1/status");
        assert_eq!(status.subresource.as_deref(), Some("status"));
        let all_events = resource("/api/v1/events");
        assert!(all_events.namespace.is_none() && all_events.name.is_none());
        assert_eq!(classify("/api/v1/events/x"), Target::Unknown);
        assert_eq!(classify("/api/v1/widgets"), Target::Unknown);
        let role = resource("/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Accm");
        assert_eq!(role.name.as_deref(), Some("system:ccm"));
        assert_eq!(percent_decode("a%zz"), "a%zz");
        assert_eq!(percent_decode("a%"), "a%");
        assert_eq!(percent_decode("%ff"), "%ff");
        // Parsed as a (non-existent) subresource of namespace x; answered with 404.
        assert_eq!(
            resource("/api/v1/namespaces/x/nodes")
                .subresource
                .as_deref(),
            Some("nodes")
        );
    }

    #[test]
    fn verbs() {
        let nodes = classify("/api/v1/nodes");
        assert_eq!(verb_of(&Method::GET, &nodes, "watch=1&x=y"), "watch");
        assert_eq!(verb_of(&Method::GET, &nodes, "limit=500"), "list");
        assert_eq!(
            verb_of(&Method::GET, &classify("/api/v1/nodes/a"), ""),
            "get"
        );
        assert_eq!(verb_of(&Method::GET, &classify("/version"), ""), "get");
    }
}
