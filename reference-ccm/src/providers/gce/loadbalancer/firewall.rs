//! The firewalls of a Service's load balancer: `k8s-fw-<lb>` letting the Service's ports
//! in from its source ranges to the LB IP (`ensureAllowNodeFirewall`,
//! `firewallNeedsUpdate`), and the health-check firewall from GCE's checkers
//! (`ensureHTTPHealthCheckFirewall`), both aimed at the nodes' tags (`GetNodeTags`).
//!
//! Exists apart from the pool, the rule and the address because firewalls are global
//! resources compared field by field, with their own node-tag cache.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

use super::{
    HEALTH_CHECK_SOURCE_RANGES, HealthCheck, Host, cidr_set, firewall_description, firewall_name,
    health_check_firewall_name, int_field, lb_err, port_ranges, service_name, str_field, str_list,
};
use crate::cloud::LbError;
use crate::providers::gce::Gce;

const FIREWALL_PRIORITY: i64 = 1000;

impl Gce {
    /// `GetNodeTags`: `node-tags` from the config, else the longest tag of each
    /// instance that prefixes its name (`computeHostTags`), cached per node-name set.
    fn node_tags_for(&self, hosts: &[Host]) -> Result<Vec<String>, LbError> {
        if !self.config.node_tags.is_empty() {
            return Ok(self.config.node_tags.clone());
        }
        let names: BTreeSet<String> = hosts.iter().map(|h| h.name.clone()).collect();
        let mut cache = self.node_tags.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((known, tags)) = cache.as_ref()
            && *known == names
        {
            return Ok(tags.clone());
        }
        let mut tags = BTreeSet::new();
        for h in hosts {
            let longest = h
                .tags
                .iter()
                .filter(|t| h.name.starts_with(t.as_str()))
                .max_by_key(|t| t.len())
                .ok_or_else(|| {
                    LbError::Other(format!(
                        "no node tags supplied and also failed to parse the given lists of hosts for tags: could not find any tag that is a prefix of instance name for instance {}",
                        h.name
                    ))
                })?;
            tags.insert(longest.clone());
        }
        let tags: Vec<String> = tags.into_iter().collect();
        *cache = Some((names, tags.clone()));
        Ok(tags)
    }

    /// `firewallObject`.
    #[allow(clippy::too_many_arguments)]
    fn firewall_object(
        &self,
        name: &str,
        description: &str,
        destination_ip: &str,
        source_ranges: &[String],
        protocol: &str,
        ports: &[i32],
        hosts: &[Host],
    ) -> Result<Value, LbError> {
        let mut fw = json!({
            "name": name,
            "description": description,
            "network": self.config.network_url,
            "sourceRanges": source_ranges,
            "targetTags": self.node_tags_for(hosts)?,
            "allowed": [{"IPProtocol": protocol.to_ascii_lowercase(), "ports": port_ranges(ports)}],
            "priority": FIREWALL_PRIORITY,
        });
        if !destination_ip.is_empty() {
            fw["destinationRanges"] = json!([destination_ip]);
        }
        Ok(fw)
    }

    /// Creates (409 tolerated) or patches a firewall.
    async fn write_firewall(&self, fw: &Value, exists: bool) -> Result<(), LbError> {
        let name = str_field(fw, "name");
        let result = if exists {
            self.client
                .patch(&self.global_path("firewalls", name), fw)
                .await
        } else {
            match self
                .client
                .insert(&format!("{}/global/firewalls", self.config.project_id), fw)
                .await
            {
                Err(e) if e.is_already_exists() => Ok(()),
                other => other,
            }
        };
        result.map_err(lb_err)
    }

    /// `ensureAllowNodeFirewall` + `firewallNeedsUpdate`.
    pub(super) async fn ensure_node_firewall(
        &self,
        service: &Service,
        lb: &str,
        ip: &str,
        protocol: &str,
        ports: &[i32],
        hosts: &[Host],
    ) -> Result<(), LbError> {
        let svc_name = service_name(service);
        let mut ranges = crate::providers::service_ranges::source_ranges(service);
        if ranges.is_empty() {
            ranges.push("0.0.0.0/0".to_owned());
        }
        let wanted_ranges = cidr_set(&ranges).map_err(|e| {
            LbError::Other(format!("service {svc_name}: loadBalancerSourceRanges: {e}"))
        })?;
        let desc = firewall_description(&svc_name, ip);
        let name = firewall_name(lb);
        let existing = self
            .client
            .get_opt(&self.global_path("firewalls", &name))
            .await
            .map_err(lb_err)?;
        if let Some(fw) = &existing {
            let allowed = fw
                .get("allowed")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let port_nums: BTreeSet<String> = ports.iter().map(|p| p.to_string()).collect();
            let ranges_now: BTreeSet<String> = port_ranges(ports).into_iter().collect();
            let fw_ports: BTreeSet<String> = allowed
                .first()
                .map(|a| str_list(a, "ports").into_iter().collect())
                .unwrap_or_default();
            let up_to_date = str_field(fw, "description") == desc
                && allowed.len() == 1
                && matches!(str_field(&allowed[0], "IPProtocol"), "tcp" | "udp")
                && str_field(&allowed[0], "IPProtocol") == protocol.to_ascii_lowercase()
                && (fw_ports == port_nums || fw_ports == ranges_now)
                && cidr_set(&str_list(fw, "sourceRanges")).ok().as_ref() == Some(&wanted_ranges)
                && str_list(fw, "destinationRanges") == vec![ip.to_owned()]
                && int_field(fw, "priority") == FIREWALL_PRIORITY;
            if up_to_date {
                return Ok(());
            }
        }
        let source: Vec<String> = wanted_ranges.into_iter().collect();
        let fw = self.firewall_object(&name, &desc, ip, &source, protocol, ports, hosts)?;
        self.write_firewall(&fw, existing.is_some()).await
    }

    /// `ensureHTTPHealthCheckFirewall`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn ensure_health_check_firewall(
        &self,
        service: &Service,
        ip: &str,
        cluster_id: &str,
        hosts: &[Host],
        hc: &HealthCheck,
        nodes: bool,
    ) -> Result<(), LbError> {
        let desc = if nodes {
            format!(r#"{{"kubernetes.io/cluster-id":"{cluster_id}"}}"#)
        } else {
            firewall_description(&service_name(service), ip)
        };
        let ranges: Vec<String> = HEALTH_CHECK_SOURCE_RANGES
            .iter()
            .map(|s| s.to_string())
            .collect();
        let port = i32::try_from(hc.port).unwrap_or_default();
        let name = health_check_firewall_name(cluster_id, &hc.name, nodes);
        let existing = self
            .client
            .get_opt(&self.global_path("firewalls", &name))
            .await
            .map_err(lb_err)?;
        if let Some(fw) = &existing {
            let allowed = fw
                .get("allowed")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let up_to_date = str_field(fw, "description") == desc
                && allowed.len() == 1
                && str_field(&allowed[0], "IPProtocol") == "tcp"
                && str_list(&allowed[0], "ports") == vec![hc.port.to_string()]
                && cidr_set(&str_list(fw, "sourceRanges")).ok() == cidr_set(&ranges).ok()
                && int_field(fw, "priority") == FIREWALL_PRIORITY;
            if up_to_date {
                return Ok(());
            }
        }
        let fw = self.firewall_object(&name, &desc, ip, &ranges, "tcp", &[port], hosts)?;
        self.write_firewall(&fw, existing.is_some()).await
    }
}
