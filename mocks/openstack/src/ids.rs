//! Resource ids (UUIDs, as Nova, Neutron and Octavia make them). Its own leaf so the
//! services' records that `state::Cloud` holds (Neutron L3 and security groups, Octavia)
//! can make ids without importing `state.rs`, which imports those records.

pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
