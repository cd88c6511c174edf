//! The conformance cases, one module per suite. Cases speak only the harness's language
//! (environment, cloud control, waits): no transport, no particular mock, so each case runs
//! for every provider. Identifiers (NI-01, NA-01, ...) are those of
//! `shared/reference/ccm-behaviour.md` §4, which also cites the upstream behaviour checked.
#![forbid(unsafe_code)]

pub mod addresses;
pub mod chaos;
mod common;
pub mod lifecycle;
pub mod load_balancers;
pub mod node_init;
pub mod process;
pub mod routes;
pub mod upgrade;

use ccm_harness::Case;

/// Every case of every suite, in a stable order.
pub fn all() -> Vec<Case> {
    let mut cases = node_init::cases();
    cases.extend(addresses::cases());
    cases.extend(lifecycle::cases());
    cases.extend(load_balancers::cases());
    cases.extend(routes::cases());
    cases.extend(upgrade::cases());
    cases.extend(process::cases());
    cases.extend(chaos::cases());
    cases
}

#[cfg(test)]
mod tests {
    use super::*;
    use ccm_harness::Provider;

    #[test]
    fn case_ids_and_names_are_unique() {
        let cases = all();
        let mut ids: Vec<_> = cases.iter().map(|c| c.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), cases.len());
        let names: std::collections::BTreeSet<_> = cases
            .iter()
            .map(|c| c.full_name(Provider::all()[0]))
            .collect();
        assert_eq!(names.len(), cases.len());
        assert!(
            names
                .iter()
                .all(|n| n.starts_with("[sig-cloud-provider] [openstack] "))
        );
    }
}
