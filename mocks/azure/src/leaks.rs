//! The leak report: what the ARM API created that still exists, by type. A conformance
//! case ends with its Service deleted; whatever the CCM made for it (load balancers,
//! public IPs, NSG rules, routes, NICs it created) must be gone. The seed's resources
//! and what the admin API made (VMs' NICs and public IPs, out-of-band routes) are the
//! baseline and never count.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::arm::path;
use crate::state::Cloud;

/// One leaked resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeakedResource {
    pub id: String,
    pub name: String,
}

/// The report: `{"total": N, "by_type": {"loadBalancers": [...], "securityRules": [...]}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Leaks {
    pub total: usize,
    pub by_type: BTreeMap<String, Vec<LeakedResource>>,
}

impl Leaks {
    fn add(&mut self, ty: &str, v: &Value) {
        let id = v
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let name = v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        self.by_type
            .entry(ty.to_string())
            .or_default()
            .push(LeakedResource { id, name });
        self.total += 1;
    }
}

pub fn find(cloud: &Cloud) -> Leaks {
    let mut leaks = Leaks::default();
    for ty in [
        path::LB,
        path::PIP,
        path::NIC,
        path::NSG,
        path::RT,
        path::VNET,
    ] {
        let info = path::type_info(ty).expect("known");
        for (key, doc) in cloud.docs_of(info) {
            if !cloud.baseline.contains(key) {
                leaks.add(path::segment(info), &doc.value);
            }
        }
    }
    for (ty, coll) in [(path::NSG, "securityRules"), (path::RT, "routes")] {
        let info = path::type_info(ty).expect("known");
        for (_, doc) in cloud.docs_of(info) {
            for item in doc.value["properties"][coll]
                .as_array()
                .into_iter()
                .flatten()
            {
                let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
                if !cloud.baseline.contains(&path::resource_key(id)) {
                    leaks.add(coll, item);
                }
            }
        }
    }
    leaks
}
