//! The shape of an ARM path. ARM paths are case-insensitive in every fixed segment
//! (`resourceGroups`, `providers`, namespaces, type names); names keep their case in
//! answers but compare case-insensitively, so the store keys resources by the lowercased
//! id (`resource_key`) and answers with the canonical casing of [`TypeInfo`].

/// One resource type this mock knows, with its canonical casing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeInfo {
    /// `microsoft.network/routetables/routes`, lowercase.
    pub key: &'static str,
    /// `Microsoft.Network/routeTables/routes`, what `type` says in answers.
    pub arm_type: &'static str,
    /// `Microsoft.Network` or `Microsoft.Compute`.
    pub namespace: &'static str,
    /// For a child resource: the parent's key and the parent's `properties` array that
    /// holds it (routes live in `routeTable.properties.routes`, as ARM shows them).
    pub parent: Option<(&'static str, &'static str)>,
    /// The lifecycle type name (admin API and seed files).
    pub lifecycle: &'static str,
}

pub const VM: &str = "microsoft.compute/virtualmachines";
pub const VMSS: &str = "microsoft.compute/virtualmachinescalesets";
pub const NIC: &str = "microsoft.network/networkinterfaces";
pub const PIP: &str = "microsoft.network/publicipaddresses";
pub const LB: &str = "microsoft.network/loadbalancers";
pub const NSG: &str = "microsoft.network/networksecuritygroups";
pub const RT: &str = "microsoft.network/routetables";
pub const ROUTE: &str = "microsoft.network/routetables/routes";
pub const VNET: &str = "microsoft.network/virtualnetworks";
pub const SUBNET: &str = "microsoft.network/virtualnetworks/subnets";

const fn t(
    key: &'static str,
    arm_type: &'static str,
    namespace: &'static str,
    parent: Option<(&'static str, &'static str)>,
    lifecycle: &'static str,
) -> TypeInfo {
    TypeInfo {
        key,
        arm_type,
        namespace,
        parent,
        lifecycle,
    }
}

/// Every type served.
pub const TYPES: &[TypeInfo] = &[
    t(
        VM,
        "Microsoft.Compute/virtualMachines",
        "Microsoft.Compute",
        None,
        "virtualmachines",
    ),
    t(
        VMSS,
        "Microsoft.Compute/virtualMachineScaleSets",
        "Microsoft.Compute",
        None,
        "virtualmachinescalesets",
    ),
    t(
        NIC,
        "Microsoft.Network/networkInterfaces",
        "Microsoft.Network",
        None,
        "networkinterfaces",
    ),
    t(
        PIP,
        "Microsoft.Network/publicIPAddresses",
        "Microsoft.Network",
        None,
        "publicipaddresses",
    ),
    t(
        LB,
        "Microsoft.Network/loadBalancers",
        "Microsoft.Network",
        None,
        "loadbalancers",
    ),
    t(
        NSG,
        "Microsoft.Network/networkSecurityGroups",
        "Microsoft.Network",
        None,
        "networksecuritygroups",
    ),
    t(
        RT,
        "Microsoft.Network/routeTables",
        "Microsoft.Network",
        None,
        "routetables",
    ),
    t(
        ROUTE,
        "Microsoft.Network/routeTables/routes",
        "Microsoft.Network",
        Some((RT, "routes")),
        "routes",
    ),
    t(
        VNET,
        "Microsoft.Network/virtualNetworks",
        "Microsoft.Network",
        None,
        "virtualnetworks",
    ),
    t(
        SUBNET,
        "Microsoft.Network/virtualNetworks/subnets",
        "Microsoft.Network",
        Some((VNET, "subnets")),
        "subnets",
    ),
];

/// Lifecycle type names (admin API, seed files).
pub const LIFECYCLE_TYPES: &[&str] = &[
    "networkinterfaces",
    "publicipaddresses",
    "loadbalancers",
    "networksecuritygroups",
    "routetables",
    "routes",
    "virtualnetworks",
    "subnets",
];

pub fn type_info(key: &str) -> Option<&'static TypeInfo> {
    TYPES.iter().find(|t| t.key == key)
}

/// The last segment of a canonical type (`routes`, `loadBalancers`).
pub fn segment(info: &TypeInfo) -> &'static str {
    info.arm_type.rsplit('/').next().unwrap_or(info.arm_type)
}

/// What an ARM path asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArmPath {
    /// `/subscriptions/{sub}`
    Subscription { sub: String },
    /// `/subscriptions/{sub}/providers/{namespace}`: provider registration.
    Provider { sub: String, namespace: String },
    /// `/subscriptions/{sub}/providers/{namespace}/locations/{loc}/{operations|operationResults}/{id}`
    Operation {
        sub: String,
        namespace: String,
        location: String,
        /// `operationResults` (the `Location` header's URL) rather than `operations`.
        result: bool,
        id: String,
    },
    /// `/subscriptions/{sub}/resourceGroups/{rg}`
    ResourceGroup { sub: String, rg: String },
    /// `/subscriptions/{sub}/resourceGroups/{rg}/providers/{ns}/{type}[/{name}[/{child}[/{name}]]]`,
    /// plus the `…/virtualMachines/{name}/instanceView` action.
    Resource {
        sub: String,
        rg: String,
        /// As in the request.
        namespace: String,
        /// `(type, name)` pairs as in the request; the last name may be absent (a list).
        types: Vec<(String, Option<String>)>,
    },
}

impl ArmPath {
    /// The resource type key of a [`ArmPath::Resource`] (`microsoft.network/routetables/routes`).
    pub fn type_key(&self) -> Option<String> {
        match self {
            ArmPath::Resource {
                namespace, types, ..
            } => {
                let mut key = namespace.to_ascii_lowercase();
                for (t, _) in types {
                    key.push('/');
                    key.push_str(&t.to_ascii_lowercase());
                }
                Some(key)
            }
            _ => None,
        }
    }

    /// The name of the innermost named resource.
    pub fn name(&self) -> Option<&str> {
        match self {
            ArmPath::Resource { types, .. } => types.iter().rev().find_map(|(_, n)| n.as_deref()),
            _ => None,
        }
    }
}

/// Why a path is not an ARM path this mock serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotArm;

/// Parses an ARM path (already percent-decoded or not: names here never need escaping).
pub fn parse(path: &str) -> Result<ArmPath, NotArm> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let eq = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    if segs.len() < 2 || !eq(segs[0], "subscriptions") {
        return Err(NotArm);
    }
    let sub = segs[1].to_string();
    let rest = &segs[2..];
    match rest {
        [] => Ok(ArmPath::Subscription { sub }),
        [p, ns] if eq(p, "providers") => Ok(ArmPath::Provider {
            sub,
            namespace: ns.to_string(),
        }),
        [p, ns, l, loc, kind, id]
            if eq(p, "providers")
                && eq(l, "locations")
                && (eq(kind, "operations") || eq(kind, "operationResults")) =>
        {
            Ok(ArmPath::Operation {
                sub,
                namespace: ns.to_string(),
                location: loc.to_string(),
                result: eq(kind, "operationResults"),
                id: id.to_string(),
            })
        }
        [r, rg] if eq(r, "resourceGroups") => Ok(ArmPath::ResourceGroup {
            sub,
            rg: rg.to_string(),
        }),
        [r, rg, p, ns, tail @ ..] if eq(r, "resourceGroups") && eq(p, "providers") => {
            if tail.is_empty() || tail.len() > 6 {
                return Err(NotArm);
            }
            let types = tail
                .chunks(2)
                .map(|c| (c[0].to_string(), c.get(1).map(|n| n.to_string())))
                .collect();
            Ok(ArmPath::Resource {
                sub,
                rg: rg.to_string(),
                namespace: ns.to_string(),
                types,
            })
        }
        _ => Err(NotArm),
    }
}

/// A resource's id with canonical casing: `/subscriptions/{sub}/resourceGroups/{rg}/providers/
/// {Namespace}/{type}/{name}[/{child}/{name}]`.
pub fn resource_id(sub: &str, rg: &str, info: &TypeInfo, names: &[&str]) -> String {
    let mut id = format!(
        "/subscriptions/{sub}/resourceGroups/{rg}/providers/{}",
        info.namespace
    );
    let types: Vec<&str> = info.arm_type.split('/').skip(2).collect();
    let first = info.arm_type.split('/').nth(1).unwrap_or_default();
    let all: Vec<&str> = std::iter::once(first).chain(types).collect();
    for (t, n) in all.iter().zip(names) {
        id.push('/');
        id.push_str(t);
        id.push('/');
        id.push_str(n);
    }
    id
}

/// The store's key for an id: lowercased, no trailing slash.
pub fn resource_key(id: &str) -> String {
    id.trim_end_matches('/').to_ascii_lowercase()
}

/// The key of the resource an id names, with the type it is of, if it is a resource id
/// this mock knows (`/subscriptions/…/providers/Microsoft.Network/publicIPAddresses/x`).
pub fn key_of_id(id: &str) -> Option<(String, &'static TypeInfo)> {
    let parsed = parse(id).ok()?;
    let key = parsed.type_key()?;
    let info = type_info(&key)?;
    match &parsed {
        ArmPath::Resource { types, .. } if types.iter().all(|(_, n)| n.is_some()) => {
            Some((resource_key(id), info))
        }
        _ => None,
    }
}

/// Splits a sub-resource id (`{lb id}/frontendIPConfigurations/{name}`) into the parent
/// resource key, the collection and the name (all lowercased).
pub fn split_sub_resource(id: &str) -> Option<(String, String, String)> {
    let key = resource_key(id);
    let mut parts = key.rsplitn(3, '/');
    let name = parts.next()?.to_string();
    let collection = parts.next()?.to_string();
    let parent = parts.next()?.to_string();
    if name.is_empty() || collection.is_empty() || parent.is_empty() {
        return None;
    }
    Some((parent, collection, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_shape() {
        assert_eq!(
            parse("/subscriptions/s/providers/Microsoft.Compute"),
            Ok(ArmPath::Provider {
                sub: "s".into(),
                namespace: "Microsoft.Compute".into()
            })
        );
        let op =
            parse("/subscriptions/s/providers/Microsoft.Network/locations/eastus/operations/abc")
                .expect("op");
        assert!(matches!(op, ArmPath::Operation { result: false, .. }));
        let p = parse(
            "/subscriptions/s/resourceGroups/RG/providers/Microsoft.Network/routeTables/rt/routes/r1",
        )
        .expect("route");
        assert_eq!(p.type_key().as_deref(), Some(ROUTE));
        assert_eq!(p.name(), Some("r1"));
        let p =
            parse("/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualMachines")
                .expect("list");
        assert_eq!(p.type_key().as_deref(), Some(VM));
        assert_eq!(p.name(), None);
        assert!(parse("/metadata/endpoints").is_err());
        assert!(parse("/subscriptions").is_err());
        assert!(parse("/subscriptions/s/resourceGroups/rg/providers").is_err());
    }

    #[test]
    fn ids_have_canonical_casing() {
        let info = type_info(ROUTE).expect("route");
        let id = resource_id("s", "rg", info, &["rt", "r1"]);
        assert_eq!(
            id,
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/routeTables/rt/routes/r1"
        );
        let (key, t) = key_of_id(&id.to_uppercase()).expect("known");
        assert_eq!(key, id.to_ascii_lowercase());
        assert_eq!(t.key, ROUTE);
        assert!(
            key_of_id("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/routeTables")
                .is_none()
        );
        let (parent, coll, name) = split_sub_resource(&format!(
            "{}/frontendIPConfigurations/FE",
            resource_id("s", "rg", type_info(LB).expect("lb"), &["k"])
        ))
        .expect("split");
        assert!(parent.ends_with("/loadbalancers/k"));
        assert_eq!(
            (coll.as_str(), name.as_str()),
            ("frontendipconfigurations", "fe")
        );
    }
}
