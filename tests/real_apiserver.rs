//! The embedded API server beside a real one (etcd + kube-apiserver from `apiserver build`),
//! both started by `cluster`: the requests of `tests/differential/corpus.json` get the same
//! status, reason and compared data from both (or a difference the corpus lists with its
//! reason), and a SIGKILLed `cluster --apiserver real` takes etcd and kube-apiserver with
//! it. The binaries are built (or found in the cache) by the test itself; `.ci/run` builds
//! them first so that the minutes of a cold Go build show as a step of their own.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

mod support;
use support::{Running, children_of, proc_stat};

const BIN: &str = env!("CARGO_BIN_EXE_ccm-conformance");

struct Server {
    url: String,
    token: String,
    readonly_token: String,
    client: reqwest::Client,
    process: Running,
}

fn build_control_plane() {
    let out = Command::new(BIN)
        .args(["apiserver", "build"])
        .output()
        .expect("running apiserver build");
    assert!(
        out.status.success(),
        "apiserver build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn start(kind: &str, dir: &Path) -> Server {
    let ready = dir.join(format!("{kind}.json"));
    let mut process = Running(
        // `--rbac`: the embedded server authorizes service-account tokens by the RBAC
        // objects the corpus creates, as the real one always does.
        // TMPDIR inside the test's directory: the SIGKILLed real cluster cannot remove its
        // work directory (etcd's data, about 120 MB), the test's TempDir does.
        Command::new(BIN)
            .args(["cluster", "--apiserver", kind, "--rbac", "--ready-file"])
            .arg(&ready)
            .env("TMPDIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawning ccm-conformance cluster"),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let info: Value = loop {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            break serde_json::from_str(&text).expect("ready file is JSON");
        }
        if let Ok(Some(status)) = process.0.try_wait() {
            panic!("cluster --apiserver {kind} exited before it was ready: {status}");
        }
        assert!(Instant::now() < deadline, "no ready file from {kind}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let kubeconfig: Value = serde_json::from_str(
        &std::fs::read_to_string(info["kubeconfig"].as_str().expect("kubeconfig"))
            .expect("reading the kubeconfig"),
    )
    .expect("the kubeconfig is JSON");
    let ca = base64::engine::general_purpose::STANDARD
        .decode(
            kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]
                .as_str()
                .expect("a CA in the kubeconfig"),
        )
        .expect("base64 CA");
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("PEM CA"))
        .timeout(Duration::from_secs(20))
        .build()
        .expect("HTTP client");
    let text = |k: &str| info[k].as_str().expect(k).to_string();
    Server {
        url: text("server"),
        token: text("token"),
        readonly_token: text("readonly_token"),
        client,
        process,
    }
}

/// The corpus: `tests/differential/corpus.json`, a list of requests sent in order to both
/// servers (later ones build on what earlier ones created, in the corpus's own namespace).
/// Each entry: `name`, `method`, `path` (with query; `{{var}}` is replaced by what an earlier
/// entry saved from the same server), optional `body` (JSON) or `raw` (text; `{{pad}}` becomes
/// `pad` bytes of `x`) with `content_type`, `accept`, `token` (admin, readonly, none, wrong,
/// or `var:NAME` for a token an earlier entry saved, e.g. from a TokenRequest),
/// and what is compared besides the status code and the Status `reason`:
/// - `compare`: JSON pointers into the normalized answer (`*` maps over an array; `""` is
///   the whole answer);
/// - `ignore`: pointers removed from the normalized answer before comparing (with a sibling
///   entry that compares, or lists as a known difference, what was removed);
/// - `present`: pointers whose presence (non-empty) is compared, not their value;
/// - `subset`: `{pointer: [key, fields...]}` for a list of which the real server may hold more:
///   only the elements whose `key` the embedded server lists are compared, by key;
/// - `watch: true`: the answer is a watch stream, compared as `{events: [{type, name}]}`;
/// - `save`: `{var: pointer}` kept per server for later paths;
/// - `known_difference`: why the servers may answer this one differently (reported, not failed).
const CORPUS: &str = include_str!("differential/corpus.json");

fn text<'a>(entry: &'a Value, key: &str) -> Option<&'a str> {
    entry.get(key).and_then(Value::as_str)
}

fn strings(entry: &Value, key: &str) -> Vec<String> {
    entry
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn substitute(template: &str, vars: &std::collections::HashMap<String, String>) -> String {
    let mut out = template.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("{{{{{k}}}}}"), v);
    }
    out
}

/// A JSON pointer where a `*` token maps the rest of the pointer over an array.
fn pointer(value: &Value, ptr: &str) -> Value {
    fn walk(value: &Value, tokens: &[String]) -> Value {
        let Some((first, rest)) = tokens.split_first() else {
            return value.clone();
        };
        match (first.as_str(), value) {
            ("*", Value::Array(items)) => {
                Value::Array(items.iter().map(|i| walk(i, rest)).collect())
            }
            (key, Value::Object(map)) => map.get(key).map_or(Value::Null, |v| walk(v, rest)),
            (index, Value::Array(items)) => index
                .parse::<usize>()
                .ok()
                .and_then(|i| items.get(i))
                .map_or(Value::Null, |v| walk(v, rest)),
            _ => Value::Null,
        }
    }
    if ptr.is_empty() {
        return value.clone();
    }
    let tokens: Vec<String> = ptr
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    walk(value, &tokens)
}

/// Removes what always differs between two servers from every object in an answer: uid,
/// resourceVersion, creationTimestamp, continue tokens and managedFields times; a set
/// deletionTimestamp becomes `<set>` and a generated name `<generateName><suffix>`.
fn normalize(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
        Value::Object(map) => {
            let mut out: serde_json::Map<String, Value> =
                map.iter().map(|(k, v)| (k.clone(), normalize(v))).collect();
            if let Some(Value::Object(md)) = out.get_mut("metadata") {
                for key in [
                    "uid",
                    "resourceVersion",
                    "creationTimestamp",
                    "continue",
                    "selfLink",
                ] {
                    md.remove(key);
                }
                if md.contains_key("deletionTimestamp") {
                    md.insert("deletionTimestamp".into(), json!("<set>"));
                }
                if let Some(Value::Array(fields)) = md.get_mut("managedFields") {
                    for f in fields.iter_mut().filter_map(Value::as_object_mut) {
                        f.remove("time");
                    }
                }
                if let (Some(Value::String(prefix)), Some(Value::String(name))) =
                    (md.get("generateName"), md.get("name"))
                    && name.starts_with(prefix.as_str())
                {
                    let generated = format!("{prefix}<suffix>");
                    md.insert("name".into(), json!(generated));
                }
            }
            if let Some(Value::Object(details)) = out.get_mut("details") {
                details.remove("uid");
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn present(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    }
}

/// What is compared of an answer: the status code, the Status `reason` and the entry's
/// pointers; a transport failure (a connection closed before an answer) is an answer too.
async fn answer(
    server: &Server,
    entry: &Value,
    vars: &mut std::collections::HashMap<String, String>,
) -> Value {
    let path = substitute(text(entry, "path").expect("every entry has a path"), vars);
    let method = reqwest::Method::from_bytes(text(entry, "method").unwrap_or("GET").as_bytes())
        .expect("an HTTP method");
    let mut req = server
        .client
        .request(method, format!("{}{path}", server.url));
    match text(entry, "token").unwrap_or("admin") {
        "admin" => req = req.bearer_auth(&server.token),
        "readonly" => req = req.bearer_auth(&server.readonly_token),
        "wrong" => req = req.bearer_auth("not-a-token"),
        other => {
            if let Some(token) = other.strip_prefix("var:").and_then(|v| vars.get(v)) {
                req = req.bearer_auth(token);
            }
        }
    }
    if let Some(body) = entry.get("body") {
        req = req.body(substitute(&body.to_string(), vars));
    }
    if let Some(raw) = text(entry, "raw") {
        let pad = entry.get("pad").and_then(Value::as_u64).unwrap_or(0) as usize;
        req = req.body(raw.replace("{{pad}}", &"x".repeat(pad)));
    }
    // One Content-Type: the entry's, or JSON for a JSON body.
    match (text(entry, "content_type"), entry.get("body")) {
        (Some(ct), _) => req = req.header("Content-Type", ct),
        (None, Some(_)) => req = req.header("Content-Type", "application/json"),
        (None, None) => {}
    }
    if let Some(accept) = text(entry, "accept") {
        req = req.header("Accept", accept);
    }
    let resp = match req.send().await {
        Ok(resp) => resp,
        Err(e) => return json!({"transport error": e.to_string().split(':').next()}),
    };
    let code = resp.status().as_u16();
    let bytes = resp.bytes().await.unwrap_or_default();
    let body: Value = if entry.get("watch").and_then(Value::as_bool) == Some(true) {
        let events: Vec<Value> = String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|ev| normalize(&ev))
            .map(|ev| json!({"type": ev["type"], "name": pointer(&ev, "/object/metadata/name")}))
            .collect();
        json!({ "events": events })
    } else {
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    };
    if let Some(Value::Object(save)) = entry.get("save") {
        for (var, ptr) in save {
            let v = pointer(&body, ptr.as_str().unwrap_or(""));
            vars.insert(
                var.clone(),
                v.as_str().map_or_else(|| v.to_string(), str::to_string),
            );
        }
    }
    let mut normalized = normalize(&body);
    for ptr in strings(entry, "ignore") {
        if let Some((parent, key)) = ptr.rsplit_once('/')
            && let Some(Value::Object(map)) = normalized.pointer_mut(parent)
        {
            map.remove(key);
        }
    }
    let mut out = json!({"code": code, "reason": body.get("reason")});
    for ptr in strings(entry, "compare") {
        let label = if ptr.is_empty() {
            "(whole)".to_string()
        } else {
            ptr.clone()
        };
        out[label] = pointer(&normalized, &ptr);
    }
    for ptr in strings(entry, "present") {
        out[format!("present {ptr}")] = json!(present(&pointer(&body, &ptr)));
    }
    if let Some(Value::Object(subset)) = entry.get("subset") {
        for (ptr, keys) in subset {
            let keys: Vec<&str> = keys
                .as_array()
                .map(|k| k.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let items = pointer(&body, ptr);
            let mut picked: Vec<Value> = items
                .as_array()
                .into_iter()
                .flatten()
                .map(|item| {
                    Value::Object(
                        keys.iter()
                            .map(|k| (k.to_string(), item[*k].clone()))
                            .collect(),
                    )
                })
                .collect();
            picked.sort_by_key(|v| v[keys[0]].to_string());
            out[format!("subset {ptr}")] = Value::Array(picked);
        }
    }
    out
}

/// Keeps, of the real server's `subset` lists, only what the embedded server lists.
fn restrict_to_embedded(entry: &Value, ours: &Value, theirs: &mut Value) {
    let Some(Value::Object(subset)) = entry.get("subset") else {
        return;
    };
    for (ptr, keys) in subset {
        let key = keys[0].as_str().unwrap_or("name");
        let label = format!("subset {ptr}");
        let served: Vec<Value> = ours[&label]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| v[key].clone())
            .collect();
        if let Some(items) = theirs[&label].as_array_mut() {
            items.retain(|v| served.contains(&v[key]));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_and_real_answer_alike_and_real_dies_with_its_parent() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    build_control_plane();
    let dir = tempfile::tempdir().expect("tempdir");
    let embedded = start("embedded", dir.path());
    let real = start("real", dir.path());
    let corpus: Value = serde_json::from_str(CORPUS).expect("the corpus is JSON");
    let entries = corpus["requests"].as_array().expect("a requests list");
    let (mut ours_vars, mut theirs_vars) = Default::default();
    let (mut differences, mut known, mut now_alike) = (Vec::new(), Vec::new(), Vec::new());
    for entry in entries {
        let name = text(entry, "name").expect("every entry has a name");
        let ours = answer(&embedded, entry, &mut ours_vars).await;
        let mut theirs = answer(&real, entry, &mut theirs_vars).await;
        restrict_to_embedded(entry, &ours, &mut theirs);
        let reason = text(entry, "known_difference");
        if ours == theirs {
            if let Some(reason) = reason {
                now_alike.push(format!("{name} (listed as: {reason})"));
            }
            continue;
        }
        let report = format!("{name}:\n  embedded {ours}\n  real     {theirs}");
        match reason {
            Some(reason) => known.push(format!("{report}\n  known:   {reason}")),
            None => differences.push(report),
        }
    }
    eprintln!(
        "{} requests: {} alike, {} known differences, {} new differences",
        entries.len(),
        entries.len() - known.len() - differences.len(),
        known.len(),
        differences.len()
    );
    for k in &known {
        eprintln!("known difference: {k}");
    }
    for a in &now_alike {
        eprintln!("listed as a known difference but now alike, remove the listing: {a}");
    }
    assert!(
        differences.is_empty(),
        "the servers differ:\n{}",
        differences.join("\n")
    );

    // SIGKILL runs no destructor: etcd and kube-apiserver must die by their death signal.
    let mut real = real;
    let pid = real.process.0.id();
    let children = children_of(pid);
    assert_eq!(children.len(), 2, "etcd and kube-apiserver: {children:?}");
    let _ = real.process.0.kill();
    let _ = real.process.0.wait();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let alive: Vec<u32> = children
            .iter()
            .copied()
            .filter(|&c| proc_stat(c).is_some_and(|(s, _)| s != 'Z'))
            .collect();
        if alive.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still running after the parent was SIGKILLed: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
