//! The API server of a case's cluster: the embedded one (`mock-kube-apiserver`, the
//! default) or a real etcd + kube-apiserver (`--apiserver real`, crate
//! `ccm-control-plane`). Cases see one interface: a kubeconfig, the audit log of writes,
//! a user with a client certificate whose rights can be narrowed, a restart.
//!
//! Why a real one at all: the embedded server is only right where it answers as
//! kube-apiserver does, so the suites can run on the real one and a verdict that differs
//! between the two points at the embedded server. The harness's few hooks into the server
//! map onto what a real cluster has:
//! - the write log is kube-apiserver's audit log (`ccm_control_plane::AUDIT_POLICY`:
//!   writes at `Metadata`), read as it grows;
//! - a denial is RBAC, on both servers (the embedded one enforces RBAC for identities
//!   outside `system:masters`, as kube-apiserver does): the user gets a ClusterRole that
//!   names every resource of discovery with every verb, minus the denied verb on the
//!   denied resource (RBAC only grants, so "all but one" has to be spelled out), which is
//!   exactly "a ClusterRole missing that rule" ([`crate::Environment::deny`]);
//! - a restart kills kube-apiserver and starts it on the same port against the same etcd.
//!
//! `ccm-conformance cluster` serves one of these too, for as long as it runs
//! ([`crate::env::standalone`]): the same two servers, with the embedded one's serving
//! options ([`ServeOptions`]) left to its flags.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ccm_control_plane::{Binaries, ControlPlane};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, Patch, PatchParams};
use mock_kube_apiserver::audit::AUDIT_CAPACITY;
use mock_kube_apiserver::{ApiServer, AuditEntry, Config as ApiConfig};
use serde_json::{Value, json};

use crate::error::CaseError;
use crate::settings::{ApiServerChoice, Settings};

/// Every verb RBAC knows for resources (a denial removes one of them).
const VERBS: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// The API server of a cluster: the embedded one or a real control plane.
pub struct ClusterApi {
    server: Server,
    /// Users of [`ClusterApi::kubeconfig_for_user`] and the (verb, resource) pairs denied
    /// to each.
    users: Mutex<BTreeMap<String, BTreeSet<(String, String)>>>,
}

// One per cluster, made once and never copied about: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum Server {
    Embedded {
        api: ApiServer,
        /// Audit entries of runs before the last restart (the embedded server starts a
        /// new log; [`ClusterApi::audit`] numbers the new one on from these).
        before_restart: Vec<AuditEntry>,
    },
    Real {
        plane: ControlPlane,
        audit: Mutex<AuditTail>,
    },
}

/// How the embedded API server serves. A case's always serves HTTPS with a per-environment
/// CA and a bearer token, and RBAC for everyone but the admin, as a real control plane
/// does ([`ServeOptions::case`]): the CCM under test must trust the CA from its kubeconfig,
/// and one running as its own user gets the 403s its ClusterRole leaves it. `cluster`
/// chooses by its flags. A real control plane always serves HTTPS with RBAC and keeps its
/// data in its own directory.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// HTTPS (a CA generated at start, in the kubeconfig); off: plain HTTP.
    pub tls: bool,
    /// RBAC for identities outside `system:masters`.
    pub rbac: bool,
    /// Keep the objects in this directory, to serve them again after a restart.
    pub data_dir: Option<PathBuf>,
}

impl ServeOptions {
    /// How every case's embedded API server serves.
    pub fn case() -> Self {
        Self {
            tls: true,
            rbac: true,
            data_dir: None,
        }
    }
}

impl ClusterApi {
    /// Starts the API server `settings` asks for, as a case's; a real one keeps its data,
    /// certificates, logs and audit log in `dir`.
    pub(crate) async fn start(settings: &Settings, dir: &Path) -> Result<Self, CaseError> {
        Self::start_with(settings, &ServeOptions::case(), dir).await
    }

    /// [`Self::start`] with the embedded server serving as `options` say. A real one needs
    /// its binaries resolved first ([`Settings::resolve_control_plane`]).
    pub async fn start_with(
        settings: &Settings,
        options: &ServeOptions,
        dir: &Path,
    ) -> Result<Self, CaseError> {
        let server = match settings.apiserver {
            ApiServerChoice::Embedded => ApiServer::start(ApiConfig {
                tls: options.tls,
                rbac: options.rbac,
                data_dir: options.data_dir.clone(),
                event_ttl: settings.event_ttl,
                ..ApiConfig::default()
            })
            .await
            .map(|api| Server::Embedded {
                api,
                before_restart: Vec::new(),
            })
            .map_err(|e| CaseError::infra("starting the embedded API server", e))?,
            ApiServerChoice::Real => {
                let bins: &Binaries = settings.control_plane.as_ref().ok_or_else(|| {
                    CaseError::infra(
                        "starting a real API server",
                        "kube-apiserver and etcd were not resolved before the run",
                    )
                })?;
                let plane = ControlPlane::start(bins, dir)
                    .await
                    .map_err(|e| CaseError::infra("starting etcd and kube-apiserver", e))?;
                let audit = Mutex::new(AuditTail::new(plane.audit_log_path()));
                Server::Real { plane, audit }
            }
        };
        Ok(Self {
            server,
            users: Mutex::new(BTreeMap::new()),
        })
    }

    /// Writes an admin kubeconfig (with the CA, over HTTPS) that kubectl and kube-rs use.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), CaseError> {
        match &self.server {
            Server::Embedded { api, .. } => api.write_kubeconfig(path).map_err(|e| e.to_string()),
            Server::Real { plane, .. } => plane.write_kubeconfig(path).map_err(|e| e.to_string()),
        }
        .map_err(|e| CaseError::infra("writing kubeconfig", e))
    }

    /// Every write so far, in order of completion, `seq` increasing across restarts.
    /// (The embedded server logs reads too; callers filter by verb.)
    pub(crate) fn audit(&self) -> Vec<AuditEntry> {
        match &self.server {
            Server::Embedded {
                api,
                before_restart,
            } => embedded_audit(api, before_restart),
            Server::Real { audit, .. } => {
                let mut tail = audit.lock().unwrap_or_else(|p| p.into_inner());
                tail.read_new();
                tail.entries.clone()
            }
        }
    }

    /// The entries of [`Self::audit`] after `mark`, without copying the rest.
    pub(crate) fn audit_since(&self, mark: u64) -> Vec<AuditEntry> {
        match &self.server {
            Server::Embedded {
                api,
                before_restart,
            } => {
                let offset = before_restart.last().map_or(0, |e| e.seq);
                let start = before_restart.partition_point(|e| e.seq <= mark);
                let mut out = before_restart[start..].to_vec();
                out.extend(
                    api.audit_since(mark.saturating_sub(offset))
                        .into_iter()
                        .map(|mut e| {
                            e.seq += offset;
                            e
                        }),
                );
                out
            }
            Server::Real { audit, .. } => {
                let mut tail = audit.lock().unwrap_or_else(|p| p.into_inner());
                tail.read_new();
                let start = tail.entries.partition_point(|e| e.seq <= mark);
                tail.entries[start..].to_vec()
            }
        }
    }

    /// The `seq` of the newest entry of [`Self::audit`] (0 when none).
    pub(crate) fn audit_last_seq(&self) -> u64 {
        match &self.server {
            Server::Embedded {
                api,
                before_restart,
            } => before_restart.last().map_or(0, |e| e.seq) + api.audit_last_seq(),
            Server::Real { audit, .. } => {
                let mut tail = audit.lock().unwrap_or_else(|p| p.into_inner());
                tail.read_new();
                tail.entries.last().map_or(0, |e| e.seq)
            }
        }
    }

    /// A kubeconfig (YAML) for `user` with a client certificate in group
    /// `system:serviceaccounts` (not `system:masters`), allowed everything by a
    /// ClusterRole of its own until [`Self::deny`] narrows it.
    pub(crate) async fn kubeconfig_for_user(
        &self,
        admin: &kube::Client,
        user: &str,
    ) -> Result<String, CaseError> {
        const GROUP: &str = "system:serviceaccounts";
        let yaml = match &self.server {
            Server::Embedded { api, .. } => api
                .kubeconfig_for_cert(user, &[GROUP])
                .map_err(|e| e.to_string()),
            Server::Real { plane, .. } => plane
                .kubeconfig_for_cert(user, &[GROUP])
                .map_err(|e| e.to_string()),
        }
        .map_err(|e| CaseError::infra("minting a client certificate", e))?;
        self.lock_users().entry(user.to_string()).or_default();
        self.apply_role(admin, user).await?;
        Ok(yaml)
    }

    /// Takes `verb` on core `resource` away from `user`: the 403 an RBAC denial gives.
    pub(crate) async fn deny(
        &self,
        admin: &kube::Client,
        user: &str,
        verb: &str,
        resource: &str,
    ) -> Result<(), CaseError> {
        self.lock_users()
            .entry(user.to_string())
            .or_default()
            .insert((verb.to_string(), resource.to_string()));
        self.apply_role(admin, user).await
    }

    /// Lifts every [`Self::deny`].
    pub(crate) async fn clear_denials(&self, admin: &kube::Client) -> Result<(), CaseError> {
        let users: Vec<String> = {
            let mut users = self.lock_users();
            users.values_mut().for_each(BTreeSet::clear);
            users.keys().cloned().collect()
        };
        for user in users {
            self.apply_role(admin, &user).await?;
        }
        Ok(())
    }

    /// Restarts the server with the same address, credentials and objects.
    pub(crate) async fn restart(self) -> Result<Self, CaseError> {
        let server = match self.server {
            Server::Embedded {
                api,
                before_restart,
            } => {
                let carried = embedded_audit(&api, &before_restart);
                let api = api
                    .restart()
                    .await
                    .map_err(|e| CaseError::infra("restarting the embedded API server", e))?;
                Server::Embedded {
                    api,
                    before_restart: carried,
                }
            }
            Server::Real { mut plane, audit } => {
                plane
                    .restart_apiserver()
                    .await
                    .map_err(|e| CaseError::infra("restarting kube-apiserver", e))?;
                Server::Real { plane, audit }
            }
        };
        Ok(Self {
            server,
            users: self.users,
        })
    }

    /// What a client needs besides a kubeconfig, as `cluster`'s ready file names it:
    /// `{"server", "token", "readonly_token"}`.
    pub fn ready(&self) -> Value {
        let (server, token, readonly) = match &self.server {
            Server::Embedded { api, .. } => (api.url(), api.token(), api.readonly_token()),
            Server::Real { plane, .. } => (
                plane.url().to_string(),
                plane.token(),
                plane.readonly_token(),
            ),
        };
        json!({"server": server, "token": token, "readonly_token": readonly})
    }

    pub async fn shutdown(self) {
        match self.server {
            Server::Embedded { api, .. } => {
                let _ =
                    tokio::time::timeout(std::time::Duration::from_secs(5), api.shutdown()).await;
            }
            Server::Real { plane, .. } => plane.shutdown().await,
        }
    }

    fn lock_users(
        &self,
    ) -> std::sync::MutexGuard<'_, BTreeMap<String, BTreeSet<(String, String)>>> {
        self.users.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `user`'s ClusterRole (everything discovery lists, minus the denials) and its
    /// binding. Server-side apply, so a second call replaces the rules in place.
    async fn apply_role(&self, admin: &kube::Client, user: &str) -> Result<(), CaseError> {
        let denied = self.lock_users().get(user).cloned().unwrap_or_default();
        let resources = discovered_resources(admin).await?;
        let name = format!("ccm-conformance:user:{user}");
        let role = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules_without(&resources, &denied),
        });
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        });
        let pp = PatchParams::apply("ccm-conformance-harness").force();
        Api::<ClusterRole>::all(admin.clone())
            .patch(&name, &pp, &Patch::Apply(&role))
            .await
            .map_err(|e| CaseError::infra("applying the user's ClusterRole", e))?;
        Api::<ClusterRoleBinding>::all(admin.clone())
            .patch(&name, &pp, &Patch::Apply(&binding))
            .await
            .map_err(|e| CaseError::infra("applying the user's ClusterRoleBinding", e))?;
        Ok(())
    }
}

/// The embedded server's log after `before_restart`, numbered on from it; at most the
/// server's own capacity ([`AUDIT_CAPACITY`]) of the newest entries, so restarts do not
/// make it grow without bound.
fn embedded_audit(api: &ApiServer, before_restart: &[AuditEntry]) -> Vec<AuditEntry> {
    let offset = before_restart.last().map(|e| e.seq).unwrap_or(0);
    let mut all = before_restart.to_vec();
    all.extend(api.audit().into_iter().map(|mut e| {
        e.seq += offset;
        e
    }));
    let excess = all.len().saturating_sub(AUDIT_CAPACITY);
    all.drain(..excess);
    all
}

/// Every resource name (subresources included, `nodes/status`) per API group ("" = core),
/// from discovery.
async fn discovered_resources(
    client: &kube::Client,
) -> Result<BTreeMap<String, BTreeSet<String>>, CaseError> {
    let fail = |e| CaseError::infra("reading discovery", e);
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let core = client.list_core_api_resources("v1").await.map_err(fail)?;
    out.entry(String::new())
        .or_default()
        .extend(core.resources.into_iter().map(|r| r.name));
    for group in client.list_api_groups().await.map_err(fail)?.groups {
        for version in &group.versions {
            let list = client
                .list_api_group_resources(&version.group_version)
                .await
                .map_err(fail)?;
            out.entry(group.name.clone())
                .or_default()
                .extend(list.resources.into_iter().map(|r| r.name));
        }
    }
    Ok(out)
}

/// RBAC rules granting every verb on every resource of `resources` except the `denied`
/// (verb, core resource) pairs, plus every non-resource URL. A denied resource keeps the
/// other verbs, and its subresources (`nodes/status`) stay whole, as RBAC names them apart.
fn rules_without(
    resources: &BTreeMap<String, BTreeSet<String>>,
    denied: &BTreeSet<(String, String)>,
) -> Vec<Value> {
    let narrowed: BTreeSet<&str> = denied.iter().map(|(_, r)| r.as_str()).collect();
    let mut rules = Vec::new();
    for (group, names) in resources {
        let whole: Vec<&String> = names
            .iter()
            .filter(|n| !(group.is_empty() && narrowed.contains(n.as_str())))
            .collect();
        if !whole.is_empty() {
            rules.push(json!({"apiGroups": [group], "resources": whole, "verbs": ["*"]}));
        }
    }
    for resource in narrowed {
        let verbs: Vec<&str> = VERBS
            .into_iter()
            .filter(|v| !denied.contains(&(v.to_string(), resource.to_string())))
            .collect();
        rules.push(json!({"apiGroups": [""], "resources": [resource], "verbs": verbs}));
    }
    rules.push(json!({"nonResourceURLs": ["*"], "verbs": ["*"]}));
    rules
}

/// kube-apiserver's audit log, read as it grows (complete lines only), as
/// [`AuditEntry`]s numbered from 1 in the order the server wrote them.
struct AuditTail {
    path: PathBuf,
    offset: u64,
    entries: Vec<AuditEntry>,
}

impl AuditTail {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            offset: 0,
            entries: Vec::new(),
        }
    }

    fn read_new(&mut self) {
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return; // nothing written yet
        };
        let mut text = String::new();
        if file.seek(SeekFrom::Start(self.offset)).is_err()
            || file.read_to_string(&mut text).is_err()
        {
            return;
        }
        let complete = text.rfind('\n').map_or(0, |i| i + 1);
        for line in text[..complete].lines() {
            let seq = self.entries.len() as u64 + 1;
            if let Some(entry) = parse_audit_event(line, seq) {
                self.entries.push(entry);
            }
        }
        self.offset += complete as u64;
    }
}

/// One `audit.k8s.io/v1` Event (JSON) as an [`AuditEntry`]; `None` for a line that is
/// not one, and for kube-apiserver's own requests (user `system:apiserver`: its identity
/// lease, bootstrap RBAC and priority classes), which the embedded server has no
/// counterpart of and no client made.
fn parse_audit_event(line: &str, seq: u64) -> Option<AuditEntry> {
    let event: Value = serde_json::from_str(line).ok()?;
    if event["user"]["username"] == "system:apiserver" {
        return None;
    }
    let text = |v: &Value| v.as_str().map(str::to_string);
    let verb = text(&event["verb"])?;
    let uri = event["requestURI"].as_str().unwrap_or_default();
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let object = &event["objectRef"];
    let method = match verb.as_str() {
        "create" => "POST",
        "update" => "PUT",
        "patch" => "PATCH",
        "delete" | "deletecollection" => "DELETE",
        _ => "GET",
    };
    Some(AuditEntry {
        seq,
        time: event["stageTimestamp"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(jiff::Timestamp::now),
        verb,
        method: method.into(),
        path: path.into(),
        query: query.into(),
        resource: text(&object["resource"]).unwrap_or_default(),
        subresource: text(&object["subresource"]),
        namespace: text(&object["namespace"]),
        name: text(&object["name"]),
        user_agent: text(&event["userAgent"]).unwrap_or_default(),
        user: text(&event["user"]["username"]).unwrap_or_default(),
        status: event["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
        patch_type: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_audit_event_becomes_an_entry() {
        // The shape kube-apiserver v1.37 writes (apiserver/pkg/apis/audit/v1 Event).
        let line = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a","stage":"ResponseComplete","requestURI":"/api/v1/nodes/node-a/status?fieldManager=x","verb":"patch","user":{"username":"u"},"sourceIPs":["127.0.0.1"],"userAgent":"ccm/v1","objectRef":{"resource":"nodes","name":"node-a","apiVersion":"v1","subresource":"status"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-26T12:00:00.000000Z","stageTimestamp":"2026-11-26T12:00:00.001000Z"}"#;
        let e = parse_audit_event(line, 7).unwrap();
        assert_eq!(e.seq, 7);
        assert_eq!(e.verb, "patch");
        assert_eq!(e.method, "PATCH");
        assert_eq!(e.path, "/api/v1/nodes/node-a/status");
        assert_eq!(e.query, "fieldManager=x");
        assert_eq!(e.resource, "nodes");
        assert_eq!(e.subresource.as_deref(), Some("status"));
        assert_eq!(e.name.as_deref(), Some("node-a"));
        assert_eq!(e.namespace, None);
        assert_eq!(e.user_agent, "ccm/v1");
        assert_eq!(e.user, "u");
        assert_eq!(e.status, 200);
        assert!(parse_audit_event("not json", 1).is_none());
        let own = line.replace(r#""username":"u""#, r#""username":"system:apiserver""#);
        assert!(parse_audit_event(&own, 1).is_none());
    }

    #[test]
    fn a_tail_reads_only_complete_lines_and_numbers_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let event = |name: &str| {
            format!(
                r#"{{"verb":"create","requestURI":"/api/v1/nodes","objectRef":{{"resource":"nodes","name":"{name}"}},"responseStatus":{{"code":201}}}}"#
            )
        };
        let mut tail = AuditTail::new(path.clone());
        tail.read_new();
        assert!(tail.entries.is_empty());
        std::fs::write(&path, format!("{}\n{}", event("a"), &event("b")[..20])).unwrap();
        tail.read_new();
        assert_eq!(tail.entries.len(), 1);
        std::fs::write(&path, format!("{}\n{}\n", event("a"), event("b"))).unwrap();
        tail.read_new();
        let names: Vec<_> = tail
            .entries
            .iter()
            .map(|e| (e.seq, e.name.clone().unwrap()))
            .collect();
        assert_eq!(names, vec![(1, "a".to_string()), (2, "b".to_string())]);
    }

    #[test]
    fn a_denied_verb_is_left_out_and_everything_else_stays() {
        let resources: BTreeMap<String, BTreeSet<String>> = [
            (
                String::new(),
                ["nodes", "nodes/status", "services"]
                    .map(String::from)
                    .into(),
            ),
            ("apps".to_string(), ["deployments"].map(String::from).into()),
        ]
        .into();
        let denied = [("delete".to_string(), "nodes".to_string())].into();
        let rules = rules_without(&resources, &denied);
        assert_eq!(
            rules,
            vec![
                json!({"apiGroups": [""], "resources": ["nodes/status", "services"], "verbs": ["*"]}),
                json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}),
                json!({"apiGroups": [""], "resources": ["nodes"],
                       "verbs": ["get", "list", "watch", "create", "update", "patch", "deletecollection"]}),
                json!({"nonResourceURLs": ["*"], "verbs": ["*"]}),
            ]
        );
    }
}
