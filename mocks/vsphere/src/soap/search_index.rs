//! The `SearchIndex`: `FindByUuid`, `FindByDnsName`, `FindByIp` and their `FindAll*`
//! forms, which is how a CCM maps a node to its VM.

use axum::response::Response;

use super::envelope::{Call, Fault, mo, ok};
use crate::Shared;
use crate::state::Kind;

/// `SearchIndex.Find*`: scoped to the `datacenter` argument when given, as vCenter does
/// (vcsim ignores it, `govmomi:simulator/search_index.go`); `vmSearch=false` searches hosts.
pub(super) fn search(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    let hits = search_hits(shared, call)?;
    let inner: String = hits
        .iter()
        .map(|(id, ty)| format!("<returnval {}</returnval>", mo(ty, id)))
        .collect();
    Ok(ok(call.method, inner))
}

/// What a `Find*` call finds: `(id, type)`, creation-ordered, at most one for `FindBy*`.
pub(crate) fn search_hits(
    shared: &Shared,
    call: &Call<'_>,
) -> Result<Vec<(String, &'static str)>, Fault> {
    let m = call.method;
    let inv = shared.inventory();
    let dc = match call.el.child("datacenter") {
        Some(d) => {
            let id = d.text.trim();
            if inv.get(id).is_none_or(|o| o.kind != Kind::Datacenter) {
                return Err(Fault::not_found("Datacenter", id));
            }
            Some(id.to_string())
        }
        None => None,
    };
    let vm_search = call.el.child_bool("vmSearch").unwrap_or(false);
    let instance_uuid = call.el.child_bool("instanceUuid").unwrap_or(false);
    let (arg, key) = if m.ends_with("ByUuid") {
        ("uuid", "uuid")
    } else if m.ends_with("ByDnsName") {
        ("dnsName", "dns")
    } else {
        ("ip", "ip")
    };
    let needle = call
        .el
        .child_text(arg)
        .ok_or_else(|| Fault::invalid_argument(arg))?
        .to_string();
    if needle.is_empty() {
        return Err(Fault::invalid_argument(arg));
    }
    let mut hits: Vec<(String, &'static str)> = Vec::new();
    for o in inv.objects.values() {
        let hit = match (vm_search, &o.vm, key) {
            (true, Some(v), "uuid") => {
                let u = if instance_uuid {
                    &v.instance_uuid
                } else {
                    &v.uuid
                };
                u.eq_ignore_ascii_case(&needle)
            }
            (true, Some(v), "dns") => v
                .host_name
                .as_deref()
                .is_some_and(|h| h.eq_ignore_ascii_case(&needle)),
            // IPs come from VMware Tools: none while the guest restarts.
            (true, Some(v), _) => v
                .guest_nics()
                .iter()
                .flat_map(|n| &n.ip_addresses)
                .any(|ip| *ip == needle),
            (false, None, "uuid") => o
                .host_uuid
                .as_deref()
                .is_some_and(|u| u.eq_ignore_ascii_case(&needle)),
            (false, None, "dns") => {
                o.kind == Kind::HostSystem && o.name.eq_ignore_ascii_case(&needle)
            }
            _ => false,
        };
        // The datacenter scope is checked for matches only (it walks up the parents).
        let in_scope = || {
            dc.as_deref()
                .is_none_or(|d| inv.datacenter_of(&o.id) == Some(d))
        };
        if hit && in_scope() {
            hits.push((o.id.clone(), o.kind.type_name()));
        }
    }
    // Stable, creation-ordered answers (ids sort by number within a kind).
    hits.sort_by_key(|(id, _)| id_number(id));
    if !m.starts_with("FindAll") {
        hits.truncate(1);
    }
    Ok(hits)
}

fn id_number(id: &str) -> u64 {
    id.rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}
