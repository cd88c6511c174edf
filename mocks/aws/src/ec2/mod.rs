//! The EC2 query API ("ec2" protocol, `Version=2016-11-15`): the calls the AWS CCM makes
//! for nodes, routes and classic-LB security groups (cloud-apis.md §4.2, §4.3, §4.5), and
//! Run/Stop/Start/Terminate/RebootInstances to shape the cloud from tests. Responses follow the
//! EC2 wire shapes (`<item>` lists, camelCase names), filters support `*`/`?` wildcards
//! as EC2 does (moto does not), and unknown filters are refused as EC2 refuses them.
//!
//! The resources themselves are the shared cloud state (`crate::state`); `state` holds
//! EC2's operations on them, `api` validates the query parameters, calls `state` and
//! renders the XML answer.

mod api;
pub(crate) mod state;

pub(crate) use api::{ACTIONS, handle, invalid_action};
pub(crate) use state::mac_of;
