mod api;

pub(crate) use api::*;
