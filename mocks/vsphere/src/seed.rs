//! The vSphere `state` of a seed file (`mock_cloud::seed` has the format): VMs beyond the
//! `nodes` ones, tag categories, tags and attachments, so a scenario such as "a VM in
//! zone-c whose hostname is unset" is one JSON file given to
//! `ccm-conformance mock vsphere --seed FILE`. Reset restores it.
//!
//! ```json
//! { "state": {
//!     "vms": [ { "name": "node-x", "ips": ["198.18.0.50"] } ],
//!     "categories": [ { "name": "team", "cardinality": "MULTIPLE" } ],
//!     "tags": [ { "category": "team", "name": "blue" } ],
//!     "attachments": [ { "category": "team", "tag": "blue", "object": "node-x" } ] },
//!   "lifecycle": { "types": { "poweroff": { "mode": "seconds", "t": 1 } } } }
//! ```
//!
//! Objects are named by MoRef id (`vm-12`, `host-5`) or by inventory name (the oldest
//! object with that name). Lifecycle types are [`LIFECYCLE_TYPES`]; `ids` name the VM.

use serde::{Deserialize, Serialize};

use crate::state::{AdminError, Inventory, VmSpec};

/// Lifecycle type names a seed may use: power tasks by operation, or all tasks.
pub const LIFECYCLE_TYPES: &[&str] = &["poweron", "poweroff", "task"];

/// The vSphere `state` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VsphereState {
    /// Created after the `nodes` VMs, in order.
    #[serde(default)]
    pub vms: Vec<VmSpec>,
    #[serde(default)]
    pub categories: Vec<CategorySeed>,
    #[serde(default)]
    pub tags: Vec<TagSeed>,
    #[serde(default)]
    pub attachments: Vec<AttachmentSeed>,
}

/// A tag category; `cardinality` `SINGLE` (default) or `MULTIPLE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CategorySeed {
    pub name: String,
    #[serde(default = "single")]
    pub cardinality: String,
    #[serde(default)]
    pub associable_types: Vec<String>,
}

fn single() -> String {
    "SINGLE".into()
}

/// A tag in a category named in this seed or by the zone seeding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TagSeed {
    pub category: String,
    pub name: String,
}

/// Tag `category`/`tag` attached to `object` (MoRef id or inventory name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachmentSeed {
    pub category: String,
    pub tag: String,
    pub object: String,
}

/// A seed file for this mock.
pub type SeedFile = mock_cloud::SeedFile<VsphereState>;

/// Adds the seed's state to the inventory; the first failure names the entry.
pub(crate) fn apply(inv: &mut Inventory, state: &VsphereState) -> Result<(), (String, AdminError)> {
    for spec in &state.vms {
        inv.create_vm(spec.clone())
            .map_err(|e| (format!("vm {:?}", spec.name), e))?;
    }
    for c in &state.categories {
        if !matches!(c.cardinality.as_str(), "SINGLE" | "MULTIPLE") {
            let e = AdminError::Invalid {
                field: "cardinality",
                reason: format!("{:?} is not SINGLE or MULTIPLE", c.cardinality),
            };
            return Err((format!("category {:?}", c.name), e));
        }
        inv.add_category(&c.name, &c.cardinality, c.associable_types.clone())
            .map_err(|e| (format!("category {:?}", c.name), e))?;
    }
    for t in &state.tags {
        let what = || format!("tag {:?}/{:?}", t.category, t.name);
        let category = category_id(inv, &t.category).map_err(|e| (what(), e))?;
        inv.add_tag(&category, &t.name).map_err(|e| (what(), e))?;
    }
    for a in &state.attachments {
        let what = || format!("attachment {:?}/{:?} -> {:?}", a.category, a.tag, a.object);
        let category = category_id(inv, &a.category).map_err(|e| (what(), e))?;
        let tag = inv
            .tags
            .iter()
            .find(|t| t.category_id == category && t.name == a.tag)
            .map(|t| t.id.clone())
            .ok_or_else(|| (what(), AdminError::NotFound(a.tag.clone())))?;
        let object = object_id(inv, &a.object)
            .ok_or_else(|| (what(), AdminError::NotFound(a.object.clone())))?;
        inv.attach(&tag, &object).map_err(|e| (what(), e))?;
    }
    Ok(())
}

fn category_id(inv: &Inventory, name: &str) -> Result<String, AdminError> {
    inv.categories
        .iter()
        .find(|c| c.name == name)
        .map(|c| c.id.clone())
        .ok_or_else(|| AdminError::NotFound(format!("category {name:?}")))
}

/// A MoRef id as is, else the object with that inventory name and the lowest id number.
fn object_id(inv: &Inventory, object: &str) -> Option<String> {
    if inv.get(object).is_some() {
        return Some(object.to_string());
    }
    inv.objects
        .values()
        .filter(|o| o.name == object)
        .min_by_key(|o| {
            o.id.rsplit('-')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(u64::MAX)
        })
        .map(|o| o.id.clone())
}
