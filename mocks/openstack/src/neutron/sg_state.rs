//! Neutron's security groups and rules as `state::Cloud` holds them, and the seed's
//! `default` group. Split from `sg` (the HTTP side) as `l3_state` is from `l3`: the cloud
//! holds these records, and the handlers import the cloud, so the records must not live
//! with the handlers.

use std::collections::BTreeMap;

use crate::ids::new_id;

#[derive(Debug, Clone)]
pub(crate) struct SecurityGroup {
    pub id: String,
    pub name: String,
    pub description: String,
    pub stateful: bool,
    pub created: jiff::Timestamp,
    pub updated: jiff::Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    pub id: String,
    pub group_id: String,
    pub direction: String,
    pub ethertype: String,
    pub protocol: Option<String>,
    pub port_min: Option<u16>,
    pub port_max: Option<u16>,
    pub remote_ip_prefix: Option<String>,
    pub remote_group_id: Option<String>,
    pub description: String,
    pub created: jiff::Timestamp,
}

impl Rule {
    /// What makes two rules the same (Neutron's duplicate check ignores id/description).
    pub(super) fn key(&self) -> impl PartialEq + '_ {
        (
            &self.group_id,
            &self.direction,
            &self.ethertype,
            &self.protocol,
            self.port_min,
            self.port_max,
            &self.remote_ip_prefix,
            &self.remote_group_id,
        )
    }
}

/// Security groups and their rules, inside `state::Cloud`.
#[derive(Debug, Clone, Default)]
pub(crate) struct SecGroups {
    pub groups: BTreeMap<String, SecurityGroup>,
    pub rules: BTreeMap<String, Rule>,
}

fn rule(group: &str, direction: &str, ethertype: &str, remote_group: Option<&str>) -> Rule {
    Rule {
        id: new_id(),
        group_id: group.to_string(),
        direction: direction.to_string(),
        ethertype: ethertype.to_string(),
        protocol: None,
        port_min: None,
        port_max: None,
        remote_ip_prefix: None,
        remote_group_id: remote_group.map(str::to_string),
        description: String::new(),
        created: jiff::Timestamp::now(),
    }
}

impl SecGroups {
    /// The project's `default` group with its four rules.
    pub fn seeded() -> Self {
        let mut sg = SecGroups::default();
        let id = sg.add_group("default", "Default security group");
        for ethertype in ["IPv4", "IPv6"] {
            let r = rule(&id, "ingress", ethertype, Some(&id));
            sg.rules.insert(r.id.clone(), r);
        }
        sg
    }

    /// A new group with Neutron's two default egress rules.
    pub(super) fn add_group(&mut self, name: &str, description: &str) -> String {
        let now = jiff::Timestamp::now();
        let id = new_id();
        self.groups.insert(
            id.clone(),
            SecurityGroup {
                id: id.clone(),
                name: name.to_string(),
                description: description.to_string(),
                stateful: true,
                created: now,
                updated: now,
            },
        );
        for ethertype in ["IPv4", "IPv6"] {
            let r = rule(&id, "egress", ethertype, None);
            self.rules.insert(r.id.clone(), r);
        }
        id
    }
}
