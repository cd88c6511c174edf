//! The schema of discovery.k8s.io/v1 `EndpointSlice` and the types it nests.
//!
//! Why this exists: one table per API group; `schema` looks types up across all of them.

use super::def::{META, TypeDef, kind, ty};

// Field lists of top-level kinds match k8s.io/api (k8s-openapi v1_34 structs).
pub(super) static DISCOVERY_V1: &[TypeDef] = &[
    kind(
        "discovery.v1.EndpointSlice",
        ("discovery.k8s.io", "v1", "EndpointSlice"),
        "A subset of the endpoints of a service.",
        &[
            ("addressType", "string", "IPv4, IPv6 or FQDN."),
            ("endpoints", "[]discovery.v1.Endpoint", "The endpoints."),
            META,
            (
                "ports",
                "[]discovery.v1.EndpointPort",
                "Ports of every endpoint.",
            ),
        ],
    ),
    ty(
        "discovery.v1.Endpoint",
        "One endpoint.",
        &[
            ("addresses", "[]string", "Addresses of the endpoint."),
            (
                "conditions",
                "object",
                "Ready, serving and terminating flags.",
            ),
            ("hostname", "string", "Hostname of the endpoint."),
            ("nodeName", "string", "Node hosting the endpoint."),
            (
                "targetRef",
                "core.v1.ObjectReference",
                "Object backing the endpoint.",
            ),
            ("zone", "string", "Zone of the endpoint."),
        ],
    ),
    ty(
        "discovery.v1.EndpointPort",
        "One port of an endpoint slice.",
        &[
            ("appProtocol", "string", "Application protocol."),
            ("name", "string", "Name of the port."),
            ("port", "integer", "Port number."),
            ("protocol", "string", "TCP, UDP or SCTP."),
        ],
    ),
];
