//! The NIC-based backend pool of the cluster's Azure load balancer: which nodes are
//! members (control-plane nodes are not), adding a node by PUTting its NIC, taking the
//! pool off NICs of nodes gone or excluded, and the members' private IPs.
//!
//! Exists apart from the load balancer's frontends, rules and public IPs because the pool
//! is written through other resources (NICs, each with its own etag) and keeps its own
//! cache of the nodes' IP configurations (`Azure::ip_configs`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use super::shared::{INTERNAL_SUFFIX, etag, lb_err, name_of, str_at};
use crate::cloud::{CloudError, LbError};
use crate::providers::azure::Azure;
use crate::providers::azure::client::{ArmError, NETWORK_API};
use crate::providers::azure::instances::{self, last_segment};

const CONTROL_PLANE_LABELS: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
];

/// The node's first InternalIP address.
fn internal_ip(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

/// Whether `node` is a control-plane node (`isControlPlaneNode`).
pub fn is_control_plane(node: &Node) -> bool {
    let Some(labels) = node.metadata.labels.as_ref() else {
        return false;
    };
    CONTROL_PLANE_LABELS.iter().any(|l| labels.contains_key(*l))
        || labels
            .get("kubernetes.io/role")
            .is_some_and(|v| v == "master")
}

impl Azure {
    /// `EnsureHostsInPool` plus removal of members whose node is gone or excluded; the
    /// private IPs of the members.
    pub(super) async fn reconcile_backend_hosts(
        &self,
        lb: &Value,
        pool_id: &str,
        nodes: &[Node],
    ) -> Result<Vec<String>, LbError> {
        let eligible: Vec<&Node> = nodes.iter().filter(|n| !is_control_plane(n)).collect();
        let names: BTreeSet<String> = eligible
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .map(|n| n.to_ascii_lowercase())
            .collect();
        let lb_base = |id: &str| -> String {
            let lower = id.to_ascii_lowercase();
            let name = lower
                .split("/loadbalancers/")
                .nth(1)
                .and_then(|r| r.split('/').next())
                .unwrap_or_default()
                .to_owned();
            name.strip_suffix(INTERNAL_SUFFIX)
                .map(str::to_owned)
                .unwrap_or(name)
        };
        // The pool's members as ARM reports them (`backendIPConfigurations`).
        let members: Vec<String> = lb["properties"]["backendAddressPools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| {
                str_at(p, "/id").is_some_and(|id| id.eq_ignore_ascii_case(pool_id))
                    || name_of(p).eq_ignore_ascii_case(last_segment(pool_id))
            })
            .flat_map(|p| {
                p["properties"]["backendIPConfigurations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_owned))
            .collect();
        let member_keys: BTreeSet<String> =
            members.iter().map(|m| m.to_ascii_lowercase()).collect();
        let known = self
            .ip_configs
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default();
        let mut ips = Vec::new();
        // IP configurations of eligible nodes (lowercased): members to keep.
        let mut kept: BTreeSet<String> = BTreeSet::new();
        for node in &eligible {
            let node_name = node.metadata.name.clone().unwrap_or_default();
            let key = node_name.to_ascii_lowercase();
            // Already a member: its IP as upstream takes a member's, from the Node's
            // addresses (`azure_loadbalancer_backendpool.go` `GetBackendPrivateIPs` reads
            // `nodePrivateIPs`, which `azure.go` `updateNodeCaches` fills from Nodes).
            if let Some(config) = known.get(&key).filter(|c| member_keys.contains(*c))
                && let Some(ip) = internal_ip(node)
            {
                kept.insert(config.clone());
                ips.push(ip);
                continue;
            }
            let vm = match self.get_vm(&node_name).await {
                Ok(vm) => vm,
                Err(CloudError::InstanceNotFound) => {
                    if let Ok(mut m) = self.ip_configs.lock() {
                        m.remove(&key);
                    }
                    tracing::warn!(node = %node_name, "no VM for node; left out of the backend pool");
                    continue;
                }
                Err(e) => return Err(lb_err(e)),
            };
            for attempt in 0..3 {
                let mut nic = self.primary_nic(&vm).await.map_err(lb_err)?;
                if str_at(&nic, "/properties/provisioningState") == Some("Failed") {
                    break;
                }
                let i = instances::primary_ip_config_index(&nic).map_err(lb_err)?;
                if attempt == 0
                    && let Some(ip) = str_at(
                        &nic["properties"]["ipConfigurations"][i],
                        "/properties/privateIPAddress",
                    )
                {
                    ips.push(ip.to_owned());
                }
                if let Some(id) = str_at(&nic["properties"]["ipConfigurations"][i], "/id") {
                    let id = id.to_ascii_lowercase();
                    kept.insert(id.clone());
                    if let Ok(mut m) = self.ip_configs.lock() {
                        m.insert(key.clone(), id);
                    }
                }
                let config = &mut nic["properties"]["ipConfigurations"][i];
                let pools: Vec<String> = config
                    .pointer("/properties/loadBalancerBackendAddressPools")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|p| p.get("id").and_then(Value::as_str))
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                if pools.iter().any(|p| p.eq_ignore_ascii_case(pool_id)) {
                    break;
                }
                if pools.iter().any(|p| lb_base(p) != lb_base(pool_id)) {
                    tracing::info!(node = %node_name, "node already in another load balancer's pool; omitted");
                    break;
                }
                let mut refs: Vec<Value> = pools.iter().map(|p| json!({"id": p})).collect();
                refs.push(json!({"id": pool_id}));
                config["properties"]["loadBalancerBackendAddressPools"] = json!(refs);
                match self.put_nic(&nic).await {
                    Ok(()) => break,
                    Err(e) if e.is_precondition_failed() && attempt < 2 => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        // Members of nodes no longer eligible (an eligible node's own configuration is
        // kept without reading its NIC).
        for ip_config_id in members
            .iter()
            .filter(|m| !kept.contains(&m.to_ascii_lowercase()))
        {
            let Some(nic_path) = nic_path_of(ip_config_id) else {
                continue;
            };
            let Some(nic) = self.client.get_opt(&nic_path, NETWORK_API, &[]).await? else {
                continue;
            };
            let vm_name = str_at(&nic, "/properties/virtualMachine/id")
                .map(last_segment)
                .unwrap_or_default()
                .to_ascii_lowercase();
            // A NIC attached to no VM is not a node's: left alone.
            if vm_name.is_empty() || names.contains(&vm_name) {
                continue;
            }
            self.remove_pool_from_nic(&nic_path, pool_id).await?;
        }
        Ok(ips)
    }

    async fn put_nic(&self, nic: &Value) -> Result<(), ArmError> {
        let id = nic.get("id").and_then(Value::as_str).unwrap_or_default();
        let path = if id.is_empty() {
            self.network_path("networkInterfaces", name_of(nic))
        } else {
            id.to_owned()
        };
        self.client
            .put(&path, NETWORK_API, nic, etag(nic).as_deref())
            .await
            .map(|_| ())
    }

    /// Takes `pool_id` out of every IP configuration of the NIC (re-read on 412).
    pub(super) async fn remove_pool_from_nic(
        &self,
        nic_path: &str,
        pool_id: &str,
    ) -> Result<(), LbError> {
        for attempt in 0..3 {
            let Some(mut nic) = self.client.get_opt(nic_path, NETWORK_API, &[]).await? else {
                return Ok(());
            };
            let mut changed = false;
            for config in nic["properties"]["ipConfigurations"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                if let Some(pools) = config
                    .pointer_mut("/properties/loadBalancerBackendAddressPools")
                    .and_then(Value::as_array_mut)
                {
                    let before = pools.len();
                    pools.retain(|p| {
                        !p.get("id")
                            .and_then(Value::as_str)
                            .is_some_and(|id| id.eq_ignore_ascii_case(pool_id))
                    });
                    changed |= pools.len() != before;
                }
            }
            if !changed {
                return Ok(());
            }
            match self
                .client
                .put(nic_path, NETWORK_API, &nic, etag(&nic).as_deref())
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if e.is_precondition_failed() && attempt < 2 => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Private IPs of an LB's pool members (`GetBackendPrivateIPs`).
    pub(super) async fn pool_member_ips(&self, lb: &Value) -> Result<Vec<String>, LbError> {
        let mut out = Vec::new();
        for pool in lb["properties"]["backendAddressPools"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for c in pool["properties"]["backendIPConfigurations"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let Some(id) = c.get("id").and_then(Value::as_str) else {
                    continue;
                };
                let Some(nic_path) = nic_path_of(id) else {
                    continue;
                };
                if let Some(nic) = self.client.get_opt(&nic_path, NETWORK_API, &[]).await? {
                    for config in nic["properties"]["ipConfigurations"]
                        .as_array()
                        .into_iter()
                        .flatten()
                    {
                        if str_at(config, "/id").is_some_and(|cid| cid.eq_ignore_ascii_case(id))
                            && let Some(ip) = str_at(config, "/properties/privateIPAddress")
                        {
                            out.push(ip.to_owned());
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The NIC path of an IP configuration ID (`.../networkInterfaces/<nic>/ipConfigurations/<c>`).
pub fn nic_path_of(ip_config_id: &str) -> Option<String> {
    let lower = ip_config_id.to_ascii_lowercase();
    let i = lower.find("/ipconfigurations/")?;
    Some(ip_config_id[..i].to_owned())
}
