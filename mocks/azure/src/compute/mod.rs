//! Microsoft.Compute: virtual machines and scale sets (read through ARM, made and changed
//! through the admin API) and the provider registration document.

pub mod api;
pub mod state;
pub mod vmss;
