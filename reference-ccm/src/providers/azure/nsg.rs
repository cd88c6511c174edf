//! Network security group rules for load-balancer Services, as current upstream writes
//! them.
//!
//! Exists because `loadBalancerSourceRanges` is enforced by the NSG on Azure, and another
//! CCM must find and keep our rules: cloud-provider-azure `pkg/provider/securitygroup`
//! (`securitygroup.go` `RuleHelper`, `securityrule.go`) and `pkg/provider/loadbalancer/
//! accesscontrol.go` (`AccessControl`), driven from `azure_loadbalancer.go`
//! `reconcileSecurityGroup`:
//! - allow rules are shared between Services: one per (protocol, sources, ports), named
//!   `k8s-azure-lb_allow_IPv4_<md5("<Protocol>_<sorted sources>_<sorted ports>")>`, whose
//!   destinations are the frontend IPs (or, with floating IP disabled, the backend node
//!   IPs) of every Service with those settings; priorities from 500 upwards;
//! - sources: `spec.loadBalancerSourceRanges` (else the
//!   `service.beta.kubernetes.io/load-balancer-source-ranges` annotation), the
//!   `azure-allowed-ip-ranges` and `azure-allowed-service-tags` annotations; with none of
//!   them (or an allow-all range) the service tag `Internet`;
//! - `k8s-azure-lb_deny-all_IPv4` (priority from 4095 downwards) when
//!   `azure-deny-all-except-load-balancer-source-ranges` is true with ranges, or a range is
//!   invalid;
//! - a reconcile first removes the Service's destinations from every managed rule of its
//!   protocols, then adds them back where wanted; rules left without destination are
//!   dropped; the NSG is written only if its rules differ from what was read, compared
//!   sorted by priority (`makeSecurityGroupSnapshot`).
//!
//! Not modelled: IPv6 rules, shared-IP port retention (`listSharedIPPortMapping`),
//! `RetainSecurityGroup` (cleanup of destinations no LB owns any more), prefix merging
//! beyond removing duplicates and contained ranges.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

use super::md5;

pub const RULE_PREFIX: &str = "k8s-azure-lb";
pub const MIN_PRIORITY: i64 = 500;
pub const MAX_PRIORITY: i64 = 4096;
pub const SERVICE_TAG_INTERNET: &str = "Internet";
pub const ANNOTATION_ALLOWED_SERVICE_TAGS: &str =
    "service.beta.kubernetes.io/azure-allowed-service-tags";
pub const ANNOTATION_ALLOWED_IP_RANGES: &str = "service.beta.kubernetes.io/azure-allowed-ip-ranges";
pub const ANNOTATION_DENY_ALL_EXCEPT: &str =
    "service.beta.kubernetes.io/azure-deny-all-except-load-balancer-source-ranges";
pub const ANNOTATION_SOURCE_RANGES: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";
pub const ANNOTATION_DISABLE_NSG_RULE: &str =
    "service.beta.kubernetes.io/azure-disable-load-balancer-nsg-rule";

/// `GenerateAllowSecurityRuleName`.
pub fn allow_rule_name(protocol: &str, sources: &[String], ports: &[i32]) -> String {
    let mut sources = sources.to_vec();
    sources.sort();
    let mut ports: Vec<String> = ports.iter().map(i32::to_string).collect();
    ports.sort();
    let id = md5::hex(format!("{protocol}_{}_{}", sources.join(","), ports.join(",")).as_bytes());
    format!("{RULE_PREFIX}_allow_IPv4_{id}")
}

/// `GenerateDenyAllSecurityRuleName`.
pub fn deny_all_rule_name() -> String {
    format!("{RULE_PREFIX}_deny-all_IPv4")
}

/// An IPv4 CIDR in canonical form (`netip.Prefix.Masked().String()`).
pub fn parse_cidr(s: &str) -> Option<(Ipv4Addr, u8)> {
    let (ip, len) = s.trim().split_once('/')?;
    let ip: Ipv4Addr = ip.parse().ok()?;
    let len: u8 = len.parse().ok()?;
    if len > 32 {
        return None;
    }
    let mask = if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    };
    Some((Ipv4Addr::from(u32::from(ip) & mask), len))
}

fn contains(outer: (Ipv4Addr, u8), inner: (Ipv4Addr, u8)) -> bool {
    if outer.1 > inner.1 {
        return false;
    }
    let mask = if outer.1 == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(outer.1))
    };
    u32::from(inner.0) & mask == u32::from(outer.0)
}

/// What the Service asks of the NSG.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AccessControl {
    pub source_ranges: Vec<(Ipv4Addr, u8)>,
    pub allowed_ip_ranges: Vec<(Ipv4Addr, u8)>,
    pub service_tags: Vec<String>,
    pub invalid: Vec<String>,
    pub deny_all_annotation: bool,
    pub internal: bool,
    pub disabled: bool,
}

fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

impl AccessControl {
    pub fn of(service: &Service, internal: bool) -> Self {
        let annotations = service.metadata.annotations.clone().unwrap_or_default();
        let ann = |k: &str| annotations.get(k).cloned().unwrap_or_default();
        let spec_ranges = service
            .spec
            .as_ref()
            .and_then(|s| s.load_balancer_source_ranges.clone())
            .unwrap_or_default();
        let raw_ranges = if spec_ranges.is_empty() {
            split_list(&ann(ANNOTATION_SOURCE_RANGES))
        } else {
            spec_ranges
        };
        let mut ac = AccessControl {
            service_tags: split_list(&ann(ANNOTATION_ALLOWED_SERVICE_TAGS)),
            deny_all_annotation: ann(ANNOTATION_DENY_ALL_EXCEPT).eq_ignore_ascii_case("true"),
            disabled: ann(ANNOTATION_DISABLE_NSG_RULE).eq_ignore_ascii_case("true"),
            internal,
            ..Default::default()
        };
        for r in raw_ranges {
            match parse_cidr(&r) {
                Some(p) => ac.source_ranges.push(p),
                None => ac.invalid.push(r),
            }
        }
        for r in split_list(&ann(ANNOTATION_ALLOWED_IP_RANGES)) {
            match parse_cidr(&r) {
                Some(p) => ac.allowed_ip_ranges.push(p),
                None => ac.invalid.push(r),
            }
        }
        ac
    }

    fn allow_all(ranges: &[(Ipv4Addr, u8)]) -> bool {
        ranges.iter().any(|r| r.1 == 0)
    }

    /// `IsAllowFromInternet`.
    pub fn allow_from_internet(&self) -> bool {
        if !self.service_tags.is_empty() || !self.invalid.is_empty() {
            return false;
        }
        if !self.source_ranges.is_empty() && !Self::allow_all(&self.source_ranges) {
            return false;
        }
        if !self.allowed_ip_ranges.is_empty() && !Self::allow_all(&self.allowed_ip_ranges) {
            return false;
        }
        !self.internal || !self.allowed_ip_ranges.is_empty() || !self.source_ranges.is_empty()
    }

    /// `DenyAllExceptSourceRanges`.
    pub fn deny_all(&self) -> bool {
        (self.deny_all_annotation
            && (!self.source_ranges.is_empty() || !self.allowed_ip_ranges.is_empty()))
            || !self.invalid.is_empty()
    }

    /// The allowed ranges, de-duplicated and without ranges inside others, as strings.
    pub fn ranges(&self) -> Vec<String> {
        let mut all: Vec<(Ipv4Addr, u8)> = self
            .source_ranges
            .iter()
            .chain(&self.allowed_ip_ranges)
            .copied()
            .collect();
        all.sort();
        all.dedup();
        let kept: Vec<(Ipv4Addr, u8)> = all
            .iter()
            .copied()
            .filter(|r| !all.iter().any(|o| o != r && contains(*o, *r)))
            .collect();
        kept.iter().map(|(ip, len)| format!("{ip}/{len}")).collect()
    }

    /// The service tags rules are made for (`PatchSecurityGroup`).
    pub fn tags(&self) -> Vec<String> {
        let mut tags = self.service_tags.clone();
        if self.allow_from_internet()
            && !Self::allow_all(&self.allowed_ip_ranges)
            && !Self::allow_all(&self.source_ranges)
        {
            tags.push(SERVICE_TAG_INTERNET.to_owned());
        }
        tags
    }
}

fn strs(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// `ListDestinationPrefixes`.
pub fn destinations(rule: &Value) -> Vec<String> {
    let p = &rule["properties"];
    let mut out = strs(p.get("destinationAddressPrefix"));
    out.extend(strs(p.get("destinationAddressPrefixes")));
    out
}

/// `ListSourcePrefixes`.
pub fn sources(rule: &Value) -> Vec<String> {
    let p = &rule["properties"];
    let mut out = strs(p.get("sourceAddressPrefix"));
    out.extend(strs(p.get("sourceAddressPrefixes")));
    out
}

/// `ListDestinationPortRanges`; `None` for `*` or ranges (never made by the CCM).
pub fn ports(rule: &Value) -> Option<Vec<i32>> {
    let p = &rule["properties"];
    let mut all = strs(p.get("destinationPortRange"));
    all.extend(strs(p.get("destinationPortRanges")));
    all.iter().map(|s| s.parse().ok()).collect()
}

/// `SetDestinationPrefixes`: sorted, de-duplicated; one goes to the singular field.
fn set_destinations(rule: &mut Value, prefixes: Vec<String>) {
    let set: BTreeSet<String> = prefixes.into_iter().collect();
    let list: Vec<String> = set.into_iter().collect();
    let props = &mut rule["properties"];
    if let Some(o) = props.as_object_mut() {
        o.remove("destinationAddressPrefix");
        o.remove("destinationAddressPrefixes");
        if list.len() == 1 {
            o.insert("destinationAddressPrefix".into(), json!(list[0]));
        } else {
            o.insert("destinationAddressPrefixes".into(), json!(list));
        }
    }
}

fn priority(rule: &Value) -> i64 {
    rule.pointer("/properties/priority")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

fn name(rule: &Value) -> &str {
    rule.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// `IsManagedSecurityRule`.
pub fn is_managed(rule: &Value) -> bool {
    name(rule).starts_with(RULE_PREFIX) && (MIN_PRIORITY..=MAX_PRIORITY).contains(&priority(rule))
}

/// The NSG's rules while they are changed.
#[derive(Debug, Clone)]
pub struct RuleSet {
    rules: Vec<Value>,
    before: Vec<Value>,
}

/// What is compared to decide whether the NSG changed: each rule's own settings, without
/// what ARM adds (ids, etags, provisioning state), sorted by priority.
fn snapshot(rules: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = rules
        .iter()
        .filter(|r| !destinations(r).is_empty())
        .map(|r| {
            let p = &r["properties"];
            let mut dst = destinations(r);
            dst.sort();
            let mut src = sources(r);
            src.sort();
            let mut ports = strs(p.get("destinationPortRange"));
            ports.extend(strs(p.get("destinationPortRanges")));
            ports.sort();
            json!({
                "name": name(r), "priority": priority(r),
                "protocol": p.get("protocol"), "access": p.get("access"),
                "direction": p.get("direction"), "src": src, "dst": dst, "ports": ports,
                "srcPort": p.get("sourcePortRange"),
            })
        })
        .collect();
    out.sort_by_key(|r| r["priority"].as_i64().unwrap_or(0));
    out
}

impl RuleSet {
    pub fn new(nsg: &Value) -> Self {
        let rules = nsg
            .pointer("/properties/securityRules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        Self {
            before: snapshot(&rules),
            rules,
        }
    }

    fn next_priority(&self, from_end: bool) -> Result<i64, String> {
        let used: BTreeSet<i64> = self.rules.iter().map(priority).collect();
        let found = if from_end {
            (MIN_PRIORITY..MAX_PRIORITY)
                .rev()
                .find(|p| !used.contains(p))
        } else {
            (MIN_PRIORITY..MAX_PRIORITY).find(|p| !used.contains(p))
        };
        found.ok_or_else(|| "security rule priority exhausted".to_owned())
    }

    fn get_or_create(&mut self, rule_name: &str, from_end: bool) -> Result<usize, String> {
        if let Some(i) = self.rules.iter().position(|r| name(r) == rule_name) {
            return Ok(i);
        }
        let p = self.next_priority(from_end)?;
        self.rules
            .push(json!({"name": rule_name, "properties": {"priority": p}}));
        Ok(self.rules.len() - 1)
    }

    /// `addAllowRule`.
    pub fn add_allow(
        &mut self,
        protocol: &str,
        srcs: &[String],
        dsts: &[String],
        dst_ports: &[i32],
    ) -> Result<(), String> {
        let i = self.get_or_create(&allow_rule_name(protocol, srcs, dst_ports), false)?;
        let rule = &mut self.rules[i];
        let mut port_strings: Vec<String> = dst_ports.iter().map(i32::to_string).collect();
        port_strings.sort();
        {
            let p = &mut rule["properties"];
            p["protocol"] = json!(protocol);
            p["access"] = json!("Allow");
            p["direction"] = json!("Inbound");
            if srcs.len() == 1 {
                p["sourceAddressPrefix"] = json!(srcs[0]);
            } else {
                p["sourceAddressPrefixes"] = json!(srcs);
            }
            p["sourcePortRange"] = json!("*");
            if let Some(o) = p.as_object_mut() {
                o.remove("destinationPortRange");
            }
            p["destinationPortRanges"] = json!(port_strings);
        }
        let mut all = destinations(rule);
        all.extend(dsts.iter().cloned());
        set_destinations(rule, all);
        Ok(())
    }

    /// `AddRuleForDenyAll`.
    pub fn add_deny_all(&mut self, dsts: &[String]) -> Result<(), String> {
        let i = self.get_or_create(&deny_all_rule_name(), true)?;
        let rule = &mut self.rules[i];
        {
            let p = &mut rule["properties"];
            p["protocol"] = json!("*");
            p["access"] = json!("Deny");
            p["direction"] = json!("Inbound");
            p["sourceAddressPrefix"] = json!("*");
            p["sourcePortRange"] = json!("*");
            if let Some(o) = p.as_object_mut() {
                o.remove("destinationPortRanges");
            }
            p["destinationPortRange"] = json!("*");
        }
        let mut all = dsts.to_vec();
        all.extend(destinations(rule));
        set_destinations(rule, all);
        Ok(())
    }

    /// `RemoveDestinationFromRules` for one protocol (no ports retained).
    pub fn remove_destinations(&mut self, protocol: &str, dsts: &[String]) {
        for rule in self.rules.iter_mut() {
            if !is_managed(rule)
                || rule.pointer("/properties/protocol").and_then(Value::as_str) != Some(protocol)
            {
                continue;
            }
            let current = destinations(rule);
            let keep: Vec<String> = current
                .iter()
                .filter(|d| !dsts.contains(d))
                .cloned()
                .collect();
            let is_deny =
                rule.pointer("/properties/access").and_then(Value::as_str) == Some("Deny");
            if is_deny {
                set_destinations(rule, keep);
                continue;
            }
            let Some(current_ports) = ports(rule) else {
                continue;
            };
            if keep.len() == current.len() || current_ports.is_empty() {
                continue;
            }
            set_destinations(rule, keep);
        }
    }

    /// The rules to write (rules without destinations dropped, sorted by priority) when
    /// they differ from what was read.
    pub fn changed_rules(&self) -> Option<Vec<Value>> {
        if snapshot(&self.rules) == self.before {
            return None;
        }
        let mut rules: Vec<Value> = self
            .rules
            .iter()
            .filter(|r| !destinations(r).is_empty())
            .cloned()
            .collect();
        rules.sort_by_key(priority);
        Some(rules)
    }
}

/// Destination ports by NSG protocol (`SecurityRuleDestinationPortsByProtocol`): the
/// service port, or the node port with floating IP disabled. SCTP is `*`.
pub fn ports_by_protocol(
    service: &Service,
    floating_ip_disabled: bool,
) -> BTreeMap<String, Vec<i32>> {
    let mut out: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for p in service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default()
    {
        let protocol = match p.protocol.as_deref().unwrap_or("TCP") {
            "UDP" => "Udp",
            "SCTP" => "*",
            _ => "Tcp",
        };
        let port = if floating_ip_disabled {
            p.node_port.unwrap_or(0)
        } else {
            p.port
        };
        out.entry(protocol.to_owned()).or_default().push(port);
    }
    out
}

/// The protocols upstream walks, in its order.
pub const PROTOCOLS: [&str; 3] = ["Tcp", "Udp", "*"];

/// One Service's whole NSG reconcile (`reconcileSecurityGroup`): clean its destinations,
/// add them back if `want`; the rules to write if anything changed.
pub fn reconcile(
    nsg: &Value,
    service: &Service,
    internal: bool,
    dsts: &[String],
    floating_ip_disabled: bool,
    want: bool,
) -> Result<Option<Vec<Value>>, String> {
    let mut set = RuleSet::new(nsg);
    for protocol in PROTOCOLS {
        set.remove_destinations(protocol, dsts);
    }
    let ac = AccessControl::of(service, internal);
    if want && !ac.disabled && !dsts.is_empty() {
        let by_protocol = ports_by_protocol(service, floating_ip_disabled);
        let tags = ac.tags();
        let ranges = ac.ranges();
        for protocol in PROTOCOLS {
            let Some(ports) = by_protocol.get(protocol) else {
                continue;
            };
            for tag in &tags {
                set.add_allow(protocol, std::slice::from_ref(tag), dsts, ports)?;
            }
            if !ranges.is_empty() {
                set.add_allow(protocol, &ranges, dsts, ports)?;
            }
        }
        if ac.deny_all() {
            set.add_deny_all(dsts)?;
        }
    }
    Ok(set.changed_rules())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(annotations: Value, ranges: Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u", "annotations": annotations},
            "spec": {"type": "LoadBalancer", "loadBalancerSourceRanges": ranges,
                     "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"},
                               {"port": 53, "nodePort": 30053, "protocol": "UDP"}]}
        }))
        .unwrap_or_default()
    }

    fn nsg(rules: Value) -> Value {
        json!({"name": "nsg", "etag": "W/\"1\"", "properties": {"securityRules": rules}})
    }

    #[test]
    fn rule_names_follow_upstream() {
        // md5("Tcp_Internet_80")
        assert_eq!(
            allow_rule_name("Tcp", &["Internet".into()], &[80]),
            format!("k8s-azure-lb_allow_IPv4_{}", md5::hex(b"Tcp_Internet_80"))
        );
        // Sources and ports are sorted (as strings) before hashing.
        assert_eq!(
            allow_rule_name("Tcp", &["b".into(), "a".into()], &[443, 80]),
            allow_rule_name("Tcp", &["a".into(), "b".into()], &[80, 443])
        );
        assert!(md5::hex(b"Tcp_a,b_443,80").len() == 32);
        assert_eq!(deny_all_rule_name(), "k8s-azure-lb_deny-all_IPv4");
    }

    #[test]
    fn internet_rules_then_idempotent() {
        let s = svc(json!({}), json!(null));
        let dst = vec!["127.61.0.10".to_owned()];
        let rules = reconcile(&nsg(json!([])), &s, false, &dst, false, true)
            .expect("ok")
            .expect("changed");
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0]["properties"]["priority"], 500);
        assert_eq!(rules[0]["properties"]["sourceAddressPrefix"], "Internet");
        assert_eq!(
            rules[0]["properties"]["destinationAddressPrefix"],
            "127.61.0.10"
        );
        assert_eq!(
            rules[0]["properties"]["destinationPortRanges"],
            json!(["80"])
        );
        assert_eq!(rules[1]["properties"]["protocol"], "Udp");
        // What ARM answers back (with ids and states) is unchanged by a second reconcile.
        let mut stored = rules.clone();
        for r in stored.iter_mut() {
            r["id"] = json!("/x");
            r["properties"]["provisioningState"] = json!("Succeeded");
        }
        assert_eq!(
            reconcile(&nsg(json!(stored)), &s, false, &dst, false, true),
            Ok(None)
        );
        // Deleting removes the destination and with it both rules.
        let gone = reconcile(&nsg(json!(stored)), &s, false, &dst, false, false)
            .expect("ok")
            .expect("changed");
        assert!(gone.is_empty());
    }

    #[test]
    fn source_ranges_share_rules_and_deny_all() {
        let s = svc(
            json!({ANNOTATION_DENY_ALL_EXCEPT: "true"}),
            json!(["10.0.0.0/8", "10.1.0.0/16", "192.168.1.7/24"]),
        );
        let ac = AccessControl::of(&s, false);
        assert!(!ac.allow_from_internet());
        assert_eq!(ac.ranges(), vec!["10.0.0.0/8", "192.168.1.0/24"]);
        let rules = reconcile(
            &nsg(json!([])),
            &s,
            false,
            &["1.1.1.1".to_owned()],
            false,
            true,
        )
        .expect("ok")
        .expect("changed");
        let deny = rules.last().expect("deny");
        assert_eq!(deny["name"], "k8s-azure-lb_deny-all_IPv4");
        assert_eq!(deny["properties"]["priority"], 4095);
        assert_eq!(
            rules[0]["properties"]["sourceAddressPrefixes"],
            json!(["10.0.0.0/8", "192.168.1.0/24"])
        );
        // A second Service with the same settings joins the same rules.
        let again = reconcile(
            &nsg(json!(rules)),
            &s,
            false,
            &["2.2.2.2".to_owned()],
            false,
            true,
        )
        .expect("ok")
        .expect("changed");
        assert_eq!(again.len(), 3);
        assert_eq!(
            again[0]["properties"]["destinationAddressPrefixes"],
            json!(["1.1.1.1", "2.2.2.2"])
        );
        // An invalid range denies all and allows nothing from the Internet.
        let bad = AccessControl::of(&svc(json!({}), json!(["nope"])), false);
        assert!(bad.deny_all() && !bad.allow_from_internet());
        // Internal services are not opened to the Internet without ranges.
        assert!(
            AccessControl::of(&svc(json!({}), json!(null)), true)
                .tags()
                .is_empty()
        );
    }

    #[test]
    fn unmanaged_rules_are_kept() {
        let seeded = json!([{"name": "allow-ssh", "properties": {"priority": 100, "protocol": "Tcp",
            "access": "Allow", "direction": "Inbound", "sourceAddressPrefix": "*",
            "destinationAddressPrefix": "127.61.0.10", "destinationPortRange": "22"}}]);
        let s = svc(json!({}), json!(null));
        let rules = reconcile(
            &nsg(seeded),
            &s,
            false,
            &["127.61.0.10".to_owned()],
            false,
            false,
        )
        .expect("ok");
        assert_eq!(rules, None, "unmanaged rule untouched, nothing to write");
    }
}
