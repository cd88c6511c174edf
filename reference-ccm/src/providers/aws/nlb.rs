//! AWS `LoadBalancer` with an NLB (ELBv2 `Type=network`), chosen by
//! `service.beta.kubernetes.io/aws-load-balancer-type: nlb`.
//!
//! Mirrors `kubernetes/cloud-provider-aws` `pkg/providers/v1/aws_loadbalancer.go`
//! `ensureLoadBalancerv2`: the load balancer is named like ELB classic ones; one target
//! group per Service port, `TargetType=instance` on the node port, named
//! `k8s-<ns8>-<svc8>-<hash10>` (the hash over what makes a group immutable, so a change
//! creates a new group and the listener is switched to it); one listener per port in the
//! port's protocol (`TCP`, `UDP`, or `TCP_UDP` where a Service has both on one port)
//! forwarding to its group; targets registered and deregistered to match the nodes; TCP
//! health checks on the traffic port, or `HTTP <healthCheckNodePort> /healthz` for
//! `externalTrafficPolicy: Local`. The ingress hostname is the `DNSName`; after a create
//! the provider waits (bounded) for `provisioning` to become `active`, and reports the
//! hostname either way, as upstream does. Deleting removes listeners, the load balancer,
//! then its target groups.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};
use ring::digest;

use super::Aws;
use super::client::{Api, ClientError, list_params};
use super::instances::CLUSTER_TAG_PREFIX;
use super::loadbalancer::{instance_ids, load_balancer_name};
use crate::cloud::LbError;
use crate::providers::xml::Element;
use crate::providers::{lookup_before_create, skip_lookup_before_create};

/// How long an ensure waits for a new NLB to leave `provisioning`.
const ACTIVE_TIMEOUT: Duration = Duration::from_secs(30);
const ACTIVE_POLL: Duration = Duration::from_millis(200);

fn kv(k: impl Into<String>, v: impl Into<String>) -> (String, String) {
    (k.into(), v.into())
}

/// One Service port as a listener + target group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    pub port: i32,
    pub node_port: i32,
    /// Listener and target-group protocol: `TCP`, `UDP` or `TCP_UDP`.
    pub protocol: String,
    /// `TCP` or `HTTP`.
    pub health_protocol: String,
    /// `traffic-port` or the healthCheckNodePort.
    pub health_port: String,
    pub health_path: Option<String>,
}

/// Validates the Service for an NLB: TCP and UDP ports with node ports. A TCP and a UDP
/// port with the same number and node port become one `TCP_UDP` listener, as upstream
/// merges them (cloud-provider-aws `pkg/providers/v1/aws.go`, NLB port mappings); health
/// checks stay TCP on the traffic port (HTTP on the health-check node port for
/// `externalTrafficPolicy: Local`), since ELBv2 has no UDP health check.
pub fn nlb_ports(service: &Service) -> Result<Vec<PortSpec>, String> {
    let spec = service.spec.clone().unwrap_or_default();
    let local = spec.external_traffic_policy.as_deref() == Some("Local");
    let hc = spec.health_check_node_port.filter(|p| *p > 0 && local);
    let mut out: Vec<PortSpec> = Vec::new();
    for p in spec.ports.unwrap_or_default() {
        let proto = p.protocol.clone().unwrap_or_else(|| "TCP".into());
        if proto != "TCP" && proto != "UDP" {
            return Err(format!(
                "Protocol {proto} is not supported by NLBs; only TCP and UDP"
            ));
        }
        let node_port = p.node_port.unwrap_or(0);
        if node_port == 0 {
            return Err(format!("port {} has no nodePort yet", p.port));
        }
        if let Some(same) = out.iter_mut().find(|o| o.port == p.port) {
            if same.protocol == proto || same.node_port != node_port {
                return Err(format!(
                    "port {} is listed twice and cannot be merged into TCP_UDP \
                     (a TCP and a UDP port with the same nodePort can)",
                    p.port
                ));
            }
            same.protocol = "TCP_UDP".into();
            continue;
        }
        out.push(PortSpec {
            port: p.port,
            node_port,
            protocol: proto,
            health_protocol: if hc.is_some() { "HTTP" } else { "TCP" }.into(),
            health_port: hc.map_or_else(|| "traffic-port".to_owned(), |p| p.to_string()),
            health_path: hc.map(|_| "/healthz".to_owned()),
        });
    }
    if out.is_empty() {
        return Err("requested load balancer with no ports".into());
    }
    Ok(out)
}

/// `k8s-<ns8>-<svc8>-<hash10>` (upstream `buildTargetGroupName`).
pub fn target_group_name(service: &Service, p: &PortSpec) -> String {
    let ns = service.metadata.namespace.as_deref().unwrap_or("default");
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let key = format!(
        "{ns}/{name}/{}/{}/{}/instance/{}/{}/{}",
        p.port,
        p.node_port,
        p.protocol,
        p.health_protocol,
        p.health_port,
        p.health_path.as_deref().unwrap_or("")
    );
    let hash: String = digest::digest(&digest::SHA256, key.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let short = |s: &str| {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(8)
            .collect::<String>()
    };
    format!("k8s-{}-{}-{}", short(ns), short(name), &hash[..10])
}

/// An NLB as `DescribeLoadBalancers` shows it.
#[derive(Debug, Clone)]
struct NlbState {
    arn: String,
    dns_name: String,
    state: String,
}

fn nlb_of(e: &Element) -> NlbState {
    NlbState {
        arn: e.text_at(&["LoadBalancerArn"]).to_owned(),
        dns_name: e.text_at(&["DNSName"]).to_owned(),
        state: e.text_at(&["State", "Code"]).to_owned(),
    }
}

fn status(hostname: &str) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            hostname: Some(hostname.to_owned()),
            ..Default::default()
        }]),
    }
}

impl Aws {
    async fn describe_nlb(&self, name: &str) -> Result<Option<NlbState>, ClientError> {
        match self
            .client
            .call(
                Api::Elbv2,
                "DescribeLoadBalancers",
                &list_params("Names.member", &[name.to_owned()]),
            )
            .await
        {
            Ok(root) => Ok(root
                .items(&["DescribeLoadBalancersResult", "LoadBalancers"])
                .next()
                .map(nlb_of)),
            Err(e) if e.code() == Some("LoadBalancerNotFound") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Listeners as port -> (listener arn, target group arn).
    async fn nlb_listeners(
        &self,
        lb_arn: &str,
    ) -> Result<BTreeMap<i32, (String, String)>, ClientError> {
        let root = self
            .client
            .call(
                Api::Elbv2,
                "DescribeListeners",
                &[kv("LoadBalancerArn", lb_arn)],
            )
            .await?;
        Ok(root
            .items(&["DescribeListenersResult", "Listeners"])
            .filter_map(|l| {
                let port = l.text_at(&["Port"]).parse().ok()?;
                let tg = l
                    .items(&["DefaultActions"])
                    .map(|a| a.text_at(&["TargetGroupArn"]).to_owned())
                    .next()
                    .unwrap_or_default();
                Some((port, (l.text_at(&["ListenerArn"]).to_owned(), tg)))
            })
            .collect())
    }

    async fn target_group_names(
        &self,
        arns: &[String],
    ) -> Result<BTreeMap<String, String>, ClientError> {
        if arns.is_empty() {
            return Ok(BTreeMap::new());
        }
        let root = self
            .client
            .call(
                Api::Elbv2,
                "DescribeTargetGroups",
                &list_params("TargetGroupArns.member", arns),
            )
            .await?;
        Ok(root
            .items(&["DescribeTargetGroupsResult", "TargetGroups"])
            .map(|t| {
                (
                    t.text_at(&["TargetGroupArn"]).to_owned(),
                    t.text_at(&["TargetGroupName"]).to_owned(),
                )
            })
            .collect())
    }

    async fn create_target_group(
        &self,
        name: &str,
        p: &PortSpec,
        vpc: &str,
    ) -> Result<String, LbError> {
        let mut params = vec![
            kv("Name", name),
            kv("Protocol", p.protocol.clone()),
            kv("Port", p.node_port.to_string()),
            kv("VpcId", vpc),
            kv("TargetType", "instance"),
            kv("HealthCheckProtocol", p.health_protocol.clone()),
            kv("HealthCheckPort", p.health_port.clone()),
        ];
        if let Some(path) = &p.health_path {
            params.push(kv("HealthCheckPath", path.clone()));
        }
        let root = self
            .client
            .call(Api::Elbv2, "CreateTargetGroup", &params)
            .await?;
        root.items(&["CreateTargetGroupResult", "TargetGroups"])
            .next()
            .map(|t| t.text_at(&["TargetGroupArn"]).to_owned())
            .filter(|a| !a.is_empty())
            .ok_or_else(|| LbError::Other("CreateTargetGroup returned no ARN".into()))
    }

    async fn sync_targets(
        &self,
        tg_arn: &str,
        port: i32,
        wanted: &BTreeSet<String>,
    ) -> Result<(), LbError> {
        let root = self
            .client
            .call(
                Api::Elbv2,
                "DescribeTargetHealth",
                &[kv("TargetGroupArn", tg_arn)],
            )
            .await?;
        let current: BTreeSet<String> = root
            .items(&["DescribeTargetHealthResult", "TargetHealthDescriptions"])
            .map(|d| d.text_at(&["Target", "Id"]).to_owned())
            .collect();
        for (action, ids) in [
            (
                "RegisterTargets",
                wanted.difference(&current).cloned().collect::<Vec<_>>(),
            ),
            (
                "DeregisterTargets",
                current.difference(wanted).cloned().collect(),
            ),
        ] {
            if ids.is_empty() {
                continue;
            }
            let mut params = vec![kv("TargetGroupArn", tg_arn)];
            for (i, id) in ids.iter().enumerate() {
                params.push(kv(format!("Targets.member.{}.Id", i + 1), id.clone()));
                params.push(kv(
                    format!("Targets.member.{}.Port", i + 1),
                    port.to_string(),
                ));
            }
            self.client.call(Api::Elbv2, action, &params).await?;
        }
        Ok(())
    }

    pub(crate) async fn get_nlb(
        &self,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>, LbError> {
        Ok(self
            .describe_nlb(&load_balancer_name(service))
            .await?
            .map(|lb| status(&lb.dns_name)))
    }

    /// EnsureLoadBalancer's create-or-update lookup of an NLB: `DescribeLoadBalancers`, or
    /// always `None` with `skip` (TEST ONLY `--testing-break=skip-lookup-before-create`:
    /// `CreateLoadBalancer` again, `DuplicateLoadBalancerName` when the settings differ).
    async fn nlb_for_ensure(
        &self,
        skip: bool,
        name: &str,
    ) -> Result<Option<NlbState>, ClientError> {
        lookup_before_create(skip, self.describe_nlb(name)).await
    }

    pub(crate) async fn ensure_nlb(
        &self,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, LbError> {
        let ports = nlb_ports(service).map_err(LbError::Other)?;
        let name = load_balancer_name(service);
        let vpc = self.vpc_id_for_lb().await?;
        let created;
        let lb = match self
            .nlb_for_ensure(skip_lookup_before_create(), &name)
            .await?
        {
            Some(lb) => {
                created = false;
                lb
            }
            None => {
                created = true;
                let subnets = self.subnets_for_lb().await?;
                let mut params = vec![kv("Name", name.clone()), kv("Type", "network")];
                params.extend(list_params("Subnets.member", &subnets));
                params.push(kv("Tags.member.1.Key", "kubernetes.io/service-name"));
                params.push(kv(
                    "Tags.member.1.Value",
                    format!(
                        "{}/{}",
                        service.metadata.namespace.as_deref().unwrap_or("default"),
                        service.metadata.name.as_deref().unwrap_or_default()
                    ),
                ));
                if !self.config.cluster_id.is_empty() {
                    params.push(kv(
                        "Tags.member.2.Key",
                        format!("{CLUSTER_TAG_PREFIX}{}", self.config.cluster_id),
                    ));
                    params.push(kv("Tags.member.2.Value", "owned"));
                }
                let root = self
                    .client
                    .call(Api::Elbv2, "CreateLoadBalancer", &params)
                    .await?;
                root.items(&["CreateLoadBalancerResult", "LoadBalancers"])
                    .next()
                    .map(nlb_of)
                    .ok_or_else(|| LbError::Other("CreateLoadBalancer returned nothing".into()))?
            }
        };
        let listeners = self.nlb_listeners(&lb.arn).await?;
        let tg_arns: Vec<String> = listeners.values().map(|(_, tg)| tg.clone()).collect();
        let tg_names = self.target_group_names(&tg_arns).await?;
        let wanted_ids = instance_ids(nodes);
        let mut retired: Vec<String> = Vec::new();
        for p in &ports {
            let tg_name = target_group_name(service, p);
            let existing = listeners.get(&p.port);
            let tg_arn = match existing {
                Some((_, tg)) if tg_names.get(tg).is_some_and(|n| *n == tg_name) => tg.clone(),
                _ => {
                    let tg = self.create_target_group(&tg_name, p, &vpc).await?;
                    let action = [
                        kv("DefaultActions.member.1.Type", "forward"),
                        kv("DefaultActions.member.1.TargetGroupArn", tg.clone()),
                    ];
                    match existing {
                        Some((listener, old_tg)) => {
                            let mut params = vec![kv("ListenerArn", listener.clone())];
                            params.extend(action);
                            self.client
                                .call(Api::Elbv2, "ModifyListener", &params)
                                .await?;
                            retired.push(old_tg.clone());
                        }
                        None => {
                            let mut params = vec![
                                kv("LoadBalancerArn", lb.arn.clone()),
                                kv("Protocol", p.protocol.clone()),
                                kv("Port", p.port.to_string()),
                            ];
                            params.extend(action);
                            self.client
                                .call(Api::Elbv2, "CreateListener", &params)
                                .await?;
                        }
                    }
                    tg
                }
            };
            self.sync_targets(&tg_arn, p.node_port, &wanted_ids).await?;
        }
        let wanted_ports: BTreeSet<i32> = ports.iter().map(|p| p.port).collect();
        for (port, (listener, tg)) in &listeners {
            if !wanted_ports.contains(port) {
                self.client
                    .call(
                        Api::Elbv2,
                        "DeleteListener",
                        &[kv("ListenerArn", listener.clone())],
                    )
                    .await?;
                retired.push(tg.clone());
            }
        }
        for tg in retired.into_iter().filter(|t| !t.is_empty()) {
            self.delete_target_group(&tg).await?;
        }
        if created || lb.state == "provisioning" {
            self.wait_active(&name).await?;
        }
        Ok(status(&lb.dns_name))
    }

    async fn delete_target_group(&self, arn: &str) -> Result<(), LbError> {
        match self
            .client
            .call(
                Api::Elbv2,
                "DeleteTargetGroup",
                &[kv("TargetGroupArn", arn)],
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some("TargetGroupNotFound") => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Polls until `active` (bounded); `failed` is an error, a timeout is not (upstream
    /// reports the hostname while provisioning).
    async fn wait_active(&self, name: &str) -> Result<(), LbError> {
        let deadline = tokio::time::Instant::now() + ACTIVE_TIMEOUT;
        loop {
            match self.describe_nlb(name).await? {
                Some(lb) if lb.state == "active" => return Ok(()),
                Some(lb) if lb.state == "failed" => {
                    return Err(LbError::Other(format!("load balancer {name} failed")));
                }
                None => return Err(LbError::Other(format!("load balancer {name} vanished"))),
                Some(_) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    name,
                    "load balancer still provisioning; reporting its hostname"
                );
                return Ok(());
            }
            tokio::time::sleep(ACTIVE_POLL).await;
        }
    }

    pub(crate) async fn update_nlb(
        &self,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), LbError> {
        let name = load_balancer_name(service);
        let Some(lb) = self.describe_nlb(&name).await? else {
            return Err(LbError::Other(format!("load balancer {name} not found")));
        };
        let ports = nlb_ports(service).map_err(LbError::Other)?;
        let listeners = self.nlb_listeners(&lb.arn).await?;
        let wanted = instance_ids(nodes);
        for p in &ports {
            if let Some((_, tg)) = listeners.get(&p.port) {
                self.sync_targets(tg, p.node_port, &wanted).await?;
            }
        }
        Ok(())
    }

    pub(crate) async fn delete_nlb(&self, service: &Service) -> Result<(), LbError> {
        let name = load_balancer_name(service);
        let Some(lb) = self.describe_nlb(&name).await? else {
            return Ok(());
        };
        let listeners = self.nlb_listeners(&lb.arn).await?;
        for (listener, _) in listeners.values() {
            self.client
                .call(
                    Api::Elbv2,
                    "DeleteListener",
                    &[kv("ListenerArn", listener.clone())],
                )
                .await?;
        }
        let root = self
            .client
            .call(
                Api::Elbv2,
                "DescribeTargetGroups",
                &[kv("LoadBalancerArn", lb.arn.clone())],
            )
            .await?;
        let mut groups: BTreeSet<String> = root
            .items(&["DescribeTargetGroupsResult", "TargetGroups"])
            .map(|t| t.text_at(&["TargetGroupArn"]).to_owned())
            .collect();
        groups.extend(listeners.into_values().map(|(_, tg)| tg));
        self.client
            .call(
                Api::Elbv2,
                "DeleteLoadBalancer",
                &[kv("LoadBalancerArn", lb.arn)],
            )
            .await?;
        for tg in groups.into_iter().filter(|t| !t.is_empty()) {
            self.delete_target_group(&tg).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(spec: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web-frontend", "namespace": "production", "uid": "u-1"},
            "spec": spec,
        }))
        .unwrap_or_default()
    }

    #[test]
    fn target_group_names_are_short_and_change_with_the_port() {
        let s = svc(json!({"ports": [{"port": 80, "nodePort": 30080}]}));
        let ports = nlb_ports(&s).expect("valid");
        let name = target_group_name(&s, &ports[0]);
        assert!(name.starts_with("k8s-producti-webfront-"), "{name}");
        assert!(name.len() <= 32, "{name}");
        let mut moved = ports[0].clone();
        moved.node_port = 30081;
        assert_ne!(target_group_name(&s, &moved), name);
        assert_eq!(target_group_name(&s, &ports[0]), name);
    }

    #[test]
    fn local_policy_checks_the_health_node_port() {
        let s = svc(json!({"ports": [{"port": 80, "nodePort": 30080}],
            "externalTrafficPolicy": "Local", "healthCheckNodePort": 31000}));
        let p = &nlb_ports(&s).expect("valid")[0];
        assert_eq!(p.health_protocol, "HTTP");
        assert_eq!(p.health_port, "31000");
        assert_eq!(p.health_path.as_deref(), Some("/healthz"));
    }

    #[test]
    fn udp_ports_keep_their_protocol_and_merge_with_tcp_on_one_port() {
        let udp = nlb_ports(&svc(
            json!({"ports": [{"port": 53, "nodePort": 30053, "protocol": "UDP"}]}),
        ))
        .expect("UDP is valid on an NLB");
        assert_eq!(udp[0].protocol, "UDP");
        assert_eq!(udp[0].health_protocol, "TCP");
        let both = nlb_ports(&svc(json!({"ports": [
            {"name": "t", "port": 53, "nodePort": 30053, "protocol": "TCP"},
            {"name": "u", "port": 53, "nodePort": 30053, "protocol": "UDP"}]})))
        .expect("TCP and UDP on one port merge");
        assert_eq!(both.len(), 1);
        assert_eq!(both[0].protocol, "TCP_UDP");
        let s = svc(json!({"ports": [{"port": 53, "nodePort": 30053}]}));
        assert_ne!(
            target_group_name(&s, &both[0]),
            target_group_name(&s, &nlb_ports(&s).expect("valid")[0]),
            "a protocol change makes a new target group"
        );
        for bad in [
            json!({"ports": [{"port": 80, "nodePort": 30080, "protocol": "SCTP"}]}),
            json!({"ports": [{"port": 53, "nodePort": 30053, "protocol": "TCP"},
                {"port": 53, "nodePort": 30054, "protocol": "UDP"}]}),
        ] {
            assert!(nlb_ports(&svc(bad.clone())).is_err(), "{bad}");
        }
    }
}
