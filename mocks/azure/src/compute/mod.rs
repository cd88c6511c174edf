//! Microsoft.Compute: virtual machines (read through ARM, made and changed through the
//! admin API) and the provider registration document.

pub mod api;
pub mod state;
