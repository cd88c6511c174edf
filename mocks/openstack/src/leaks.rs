//! The leak report: everything created through the cloud APIs since the seed that still
//! exists (load balancers and their children, floating IPs, security groups and rules,
//! extra routes), by type. Every conformance case ends with "nothing leaked" (DESIGN.md
//! "How a case runs"), and a list of what is left says which cleanup the CCM missed.
//! Servers are not included: cases create those through the admin API, not the CCM.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::state::Cloud;

/// One leftover resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeakedResource {
    pub id: String,
    /// Name, or for an extra route `destination via nexthop`.
    pub name: String,
    /// Where it hangs (the load balancer of a child, the group of a rule, the router of
    /// a route); `None` for top-level resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// What `GET /admin/leaks` answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leaks {
    pub total: usize,
    /// Resource type (`loadbalancers`, `listeners`, `pools`, `members`, `healthmonitors`,
    /// `floatingips`, `security_groups`, `security_group_rules`, `extra_routes`) -> leftovers.
    /// Types with nothing left are absent.
    pub by_type: BTreeMap<String, Vec<LeakedResource>>,
}

impl Leaks {
    fn add(&mut self, kind: &str, leak: LeakedResource) {
        self.total += 1;
        self.by_type.entry(kind.to_string()).or_default().push(leak);
    }
}

fn name_of(attrs: &serde_json::Map<String, serde_json::Value>) -> String {
    attrs
        .get("name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_string()
}

pub(crate) fn find(seed: &Cloud, now: &Cloud) -> Leaks {
    let mut leaks = Leaks::default();
    for lb in now.lbaas.lbs_sorted() {
        if !seed.lbaas.lbs.contains_key(&lb.id) {
            leaks.add(
                "loadbalancers",
                LeakedResource {
                    id: lb.id.clone(),
                    name: name_of(&lb.attrs),
                    parent: None,
                },
            );
        }
    }
    let mut children: Vec<_> = now
        .lbaas
        .children
        .values()
        .filter(|c| !seed.lbaas.children.contains_key(&c.id))
        .collect();
    children.sort_by_key(|c| c.seq);
    for c in children {
        leaks.add(
            c.kind.collection(),
            LeakedResource {
                id: c.id.clone(),
                name: name_of(&c.attrs),
                parent: Some(c.lb_id.clone()),
            },
        );
    }
    for f in now.l3.floatingips.values() {
        if !seed.l3.floatingips.contains_key(&f.id) {
            leaks.add(
                "floatingips",
                LeakedResource {
                    id: f.id.clone(),
                    name: f.address.to_string(),
                    parent: None,
                },
            );
        }
    }
    for g in now.secgroups.groups.values() {
        if !seed.secgroups.groups.contains_key(&g.id) {
            leaks.add(
                "security_groups",
                LeakedResource {
                    id: g.id.clone(),
                    name: g.name.clone(),
                    parent: None,
                },
            );
        }
    }
    for r in now.secgroups.rules.values() {
        if !seed.secgroups.rules.contains_key(&r.id) {
            leaks.add(
                "security_group_rules",
                LeakedResource {
                    id: r.id.clone(),
                    name: format!(
                        "{} {} {}",
                        r.direction,
                        r.ethertype,
                        r.protocol.as_deref().unwrap_or("any")
                    ),
                    parent: Some(r.group_id.clone()),
                },
            );
        }
    }
    for router in now.l3.routers.values() {
        let seeded = seed.l3.routers.get(&router.id).map(|r| &r.routes);
        for route in &router.routes {
            if !seeded.is_some_and(|s| s.contains(route)) {
                let name = format!("{} via {}", route.destination, route.nexthop);
                leaks.add(
                    "extra_routes",
                    LeakedResource {
                        id: format!("{}:{name}", router.id),
                        name,
                        parent: Some(router.id.clone()),
                    },
                );
            }
        }
    }
    leaks
}
