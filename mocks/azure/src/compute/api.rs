//! Compute's ARM surface: `virtualMachines` (GET, list, `$expand=instanceView`,
//! `…/instanceView`), `virtualMachineScaleSets` with their instances and NICs (reads
//! only, [`crate::compute::vmss`]), and the provider registration documents the CCM
//! reads at start.
//!
//! Provider registration: cloud-provider-azure reads
//! `GET /subscriptions/{sub}/providers/Microsoft.Compute` at start
//! (`pkg/provider/azure_zones.go` `syncRegionZonesMap`, through `pkg/azclient/providerclient`)
//! and takes `resourceTypes[resourceType=virtualMachines].zoneMappings[location].zones`
//! for the region's zones, comparing locations with spaces removed and lowercased.

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::Shared;
use crate::arm::ArmError;
use crate::arm::path::{self, ArmPath};
use crate::arm::request::{ArmRequest, method_not_allowed};

/// A display name ARM uses for a location (`eastus` -> `East US`); unknown ones as given.
fn display_location(location: &str) -> String {
    match location {
        "eastus" => "East US".into(),
        "eastus2" => "East US 2".into(),
        "westus" => "West US".into(),
        "westus2" => "West US 2".into(),
        "westeurope" => "West Europe".into(),
        "northeurope" => "North Europe".into(),
        other => other.to_string(),
    }
}

/// `GET /subscriptions/{sub}/providers/{namespace}`.
pub fn provider(s: &Shared, namespace: &str) -> Result<Response, ArmError> {
    let location = display_location(&s.config.location);
    let zones = &s.config.zones;
    let types: &[&str] = if namespace.eq_ignore_ascii_case("Microsoft.Compute") {
        &[
            "virtualMachines",
            "virtualMachineScaleSets",
            "disks",
            "availabilitySets",
        ]
    } else if namespace.eq_ignore_ascii_case("Microsoft.Network") {
        &[
            "loadBalancers",
            "publicIPAddresses",
            "networkInterfaces",
            "networkSecurityGroups",
            "routeTables",
            "virtualNetworks",
        ]
    } else {
        return Err(ArmError::new(
            StatusCode::NOT_FOUND,
            "InvalidResourceNamespace",
            format!("The resource namespace '{namespace}' is invalid."),
        ));
    };
    let canonical = if namespace.eq_ignore_ascii_case("Microsoft.Compute") {
        "Microsoft.Compute"
    } else {
        "Microsoft.Network"
    };
    let resource_types: Vec<Value> = types
        .iter()
        .map(|t| {
            let mut rt = json!({
                "resourceType": t,
                "locations": [location],
                "apiVersions": ["2025-05-01", "2025-04-01", "2024-07-01", "2024-03-01", "2023-09-01"],
                "capabilities": "SupportsTags, SupportsLocation",
            });
            if !zones.is_empty() {
                rt["zoneMappings"] = json!([{"location": location, "zones": zones}]);
                rt["locationMappings"] = json!([]);
            }
            rt
        })
        .collect();
    Ok(axum::Json(json!({
        "id": format!("/subscriptions/{}/providers/{canonical}", s.config.subscription_id),
        "namespace": canonical,
        "registrationState": "Registered",
        "registrationPolicy": "RegistrationRequired",
        "resourceTypes": resource_types,
    }))
    .into_response())
}

/// Compute resources.
pub fn handle(s: &Shared, key: &str, req: &ArmRequest) -> Result<Response, ArmError> {
    let ArmPath::Resource { types, rg, .. } = &req.path else {
        return Err(ArmError::bad_request(
            "InvalidRequestUri",
            "Not a resource path.",
        ));
    };
    match key {
        path::VM => {
            if req.method != Method::GET {
                return Err(ArmError::new(
                    StatusCode::CONFLICT,
                    "OperationNotAllowed",
                    format!(
                        "{} on virtual machines is not served by this mock: VMs are made and changed through its admin API.",
                        req.method
                    ),
                ));
            }
            let expand = req.expand_instance_view();
            let cloud = s.cloud();
            match types.first().and_then(|(_, n)| n.as_deref()) {
                None => {
                    let mut vms: Vec<_> = cloud.vms.values().collect();
                    vms.sort_by_key(|v| v.seq);
                    let items = vms
                        .iter()
                        .map(|vm| vm.to_json(&cloud.ctx.location, expand))
                        .collect();
                    let page = crate::arm::page(
                        items,
                        &req.query,
                        &format!("{}{}", s.base, req.raw_path),
                        s.config.page_size,
                    )?;
                    Ok(axum::Json(page).into_response())
                }
                Some(name) => {
                    let vm = cloud.vms.get(&name.to_ascii_lowercase()).ok_or_else(|| {
                        ArmError::not_found("Microsoft.Compute/virtualMachines", name, rg)
                    })?;
                    Ok(axum::Json(vm.to_json(&cloud.ctx.location, expand)).into_response())
                }
            }
        }
        "microsoft.compute/virtualmachines/instanceview" => {
            if req.method != Method::GET {
                return Err(method_not_allowed(&req.method));
            }
            let name = types
                .first()
                .and_then(|(_, n)| n.as_deref())
                .unwrap_or_default();
            let cloud = s.cloud();
            let vm = cloud.vms.get(&name.to_ascii_lowercase()).ok_or_else(|| {
                ArmError::not_found("Microsoft.Compute/virtualMachines", name, rg)
            })?;
            Ok(axum::Json(vm.instance_view()).into_response())
        }
        k if k == path::VMSS || k.starts_with("microsoft.compute/virtualmachinescalesets/") => {
            scale_sets(s, k, types, rg, req)
        }
        other => Err(ArmError::new(
            StatusCode::NOT_FOUND,
            "InvalidResourceType",
            format!(
                "The resource type '{}' could not be found in the namespace 'Microsoft.Compute' for api version '{}'.",
                other.split_once('/').map_or(other, |(_, t)| t),
                req.api_version
            ),
        )),
    }
}

/// Scale sets, their instances and the instances' NICs: reads only (see
/// [`crate::compute::vmss`]).
fn scale_sets(
    s: &Shared,
    key: &str,
    types: &[(String, Option<String>)],
    rg: &str,
    req: &ArmRequest,
) -> Result<Response, ArmError> {
    if req.method != Method::GET {
        return Err(ArmError::new(
            StatusCode::CONFLICT,
            "OperationNotAllowed",
            format!(
                "{} on virtual machine scale sets is not served by this mock: scale sets are made through its admin API and read-only through ARM.",
                req.method
            ),
        ));
    }
    let cloud = s.cloud();
    let location = cloud.ctx.location.clone();
    let name = |i: usize| types.get(i).and_then(|(_, n)| n.as_deref());
    let page = |items: Vec<Value>| -> Result<Response, ArmError> {
        let page = crate::arm::page(
            items,
            &req.query,
            &format!("{}{}", s.base, req.raw_path),
            s.config.page_size,
        )?;
        Ok(axum::Json(page).into_response())
    };
    let Some(ss_name) = name(0) else {
        let mut sets: Vec<_> = cloud.scale_sets.values().collect();
        sets.sort_by_key(|x| x.seq);
        return page(sets.iter().map(|x| x.to_json(&location)).collect());
    };
    let ss = cloud
        .scale_sets
        .get(&ss_name.to_ascii_lowercase())
        .ok_or_else(|| {
            ArmError::not_found("Microsoft.Compute/virtualMachineScaleSets", ss_name, rg)
        })?;
    let expand = req.expand_instance_view();
    let instance = |id: &str| {
        ss.instance(id).ok_or_else(|| {
            ArmError::not_found(
                "Microsoft.Compute/virtualMachineScaleSets/virtualMachines",
                &format!("{ss_name}/{id}"),
                rg,
            )
        })
    };
    match key {
        path::VMSS => Ok(axum::Json(ss.to_json(&location)).into_response()),
        "microsoft.compute/virtualmachinescalesets/virtualmachines" => match name(1) {
            None => page(
                ss.instances
                    .iter()
                    .map(|i| ss.instance_json(i, &location, expand))
                    .collect(),
            ),
            Some(id) => {
                Ok(axum::Json(ss.instance_json(instance(id)?, &location, expand)).into_response())
            }
        },
        "microsoft.compute/virtualmachinescalesets/virtualmachines/instanceview" => {
            let i = instance(name(1).unwrap_or_default())?;
            Ok(axum::Json(ss.instance_view(i)).into_response())
        }
        "microsoft.compute/virtualmachinescalesets/virtualmachines/networkinterfaces" => {
            let i = instance(name(1).unwrap_or_default())?;
            let nic = ss.nic_json(i);
            match name(2) {
                None => page(vec![nic]),
                Some(n)
                    if nic["name"]
                        .as_str()
                        .is_some_and(|x| x.eq_ignore_ascii_case(n)) =>
                {
                    Ok(axum::Json(nic).into_response())
                }
                Some(n) => Err(ArmError::not_found(
                    "Microsoft.Network/networkInterfaces",
                    n,
                    rg,
                )),
            }
        }
        "microsoft.compute/virtualmachinescalesets/networkinterfaces" => {
            page(ss.instances.iter().map(|i| ss.nic_json(i)).collect())
        }
        other => Err(ArmError::new(
            StatusCode::NOT_FOUND,
            "InvalidResourceType",
            format!("The resource type '{other}' is not served by this mock."),
        )),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::Value;

    use crate::testing::Mock;

    /// A VM's public address changing is a new public IP resource (a static one keeps its
    /// address for life); an address kept keeps its resource.
    #[tokio::test]
    async fn a_new_public_address_is_a_new_public_ip_resource() {
        let m = Mock::seeded(1);
        let t = m.token().await;
        async fn nic_pip(m: &Mock, t: String) -> String {
            let path = m.rg_path("Microsoft.Network/networkInterfaces/node-0-nic");
            let nic = m.arm("GET", &path, &t, None).await.body;
            nic["properties"]["ipConfigurations"][0]["properties"]["publicIPAddress"]["id"]
                .as_str()
                .map(|id| id.rsplit('/').next().unwrap_or_default().to_string())
                .unwrap_or_default()
        }
        let before = nic_pip(&m, t.clone()).await;
        assert_eq!(before, "node-0-pip");
        let moved = m
            .admin()
            .update_vm(
                "node-0",
                crate::VmPatch {
                    public_ips: Some(vec!["198.18.0.200".into()]),
                    ..Default::default()
                },
            )
            .expect("update");
        assert_eq!(moved.public_ips, vec!["198.18.0.200".to_string()]);
        let after = nic_pip(&m, t.clone()).await;
        assert_ne!(after, before);
        let old = m
            .arm(
                "GET",
                &m.rg_path(&format!("Microsoft.Network/publicIPAddresses/{before}")),
                &t,
                None,
            )
            .await;
        assert_eq!(old.status, StatusCode::NOT_FOUND);
        // A change that keeps the address keeps the resource.
        m.admin()
            .update_vm(
                "node-0",
                crate::VmPatch {
                    private_ips: Some(vec!["127.60.0.99".into()]),
                    ..Default::default()
                },
            )
            .expect("update");
        assert_eq!(nic_pip(&m, t.clone()).await, after);
    }

    #[tokio::test]
    async fn vm_get_with_instance_view_zones_and_fault_domains() {
        let m = Mock::new(crate::Config {
            nodes: 2,
            zones: Vec::new(),
            ..crate::Config::default()
        });
        m.admin()
            .create_vm(crate::VmSpec {
                name: "zonal".into(),
                zone: Some("2".into()),
                ..Default::default()
            })
            .expect("vm");
        let t = m.token().await;
        let r = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Compute/virtualMachines/node-1?$expand=instanceView"),
                &t,
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        assert_eq!(r.body["name"], "node-1");
        assert!(r.body.get("zones").is_none());
        let view = &r.body["properties"]["instanceView"];
        assert_eq!(view["platformFaultDomain"], 1);
        assert_eq!(view["statuses"][0]["code"], "ProvisioningState/succeeded");
        assert_eq!(view["statuses"][1]["code"], "PowerState/running");
        let nic = r.body["properties"]["networkProfile"]["networkInterfaces"][0]["id"]
            .as_str()
            .expect("nic");
        let nic = m.arm("GET", nic, &t, None).await;
        assert_eq!(nic.status, StatusCode::OK);
        assert!(
            nic.body["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
                .as_str()
                .is_some_and(|ip| ip.starts_with("127.60.0."))
        );
        // Without the expansion there is no instance view; names are case-insensitive.
        let r = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Compute/virtualMachines/ZONAL"),
                &t,
                None,
            )
            .await;
        assert_eq!(r.body["zones"], serde_json::json!(["2"]));
        assert!(r.body["properties"].get("instanceView").is_none());
        m.admin()
            .update_vm(
                "zonal",
                crate::VmPatch {
                    running: Some(false),
                    ..Default::default()
                },
            )
            .expect("stop");
        let r = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Compute/virtualMachines/zonal/instanceView"),
                &t,
                None,
            )
            .await;
        assert_eq!(r.body["statuses"][1]["code"], "PowerState/stopped");
        let r = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Compute/virtualMachines/gone"),
                &t,
                None,
            )
            .await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (StatusCode::NOT_FOUND, Some("ResourceNotFound"))
        );
        let journal = m.shared.journal.entries();
        let op = journal
            .iter()
            .rev()
            .find(|e| e.service == "compute")
            .expect("entry");
        assert_eq!(
            (op.operation.as_deref(), op.resource.as_deref()),
            (Some("GET Microsoft.Compute/virtualMachines"), Some("gone"))
        );
    }

    #[tokio::test]
    async fn vm_list_pages_with_next_link() {
        let m = Mock::seeded(7);
        let t = m.token().await;
        let mut uri = m.rg_path("Microsoft.Compute/virtualMachines");
        let mut names = Vec::new();
        let mut pages = 0;
        loop {
            let r = m.arm("GET", &uri, &t, None).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            pages += 1;
            names.extend(
                r.body["value"]
                    .as_array()
                    .expect("value")
                    .iter()
                    .map(|v| v["name"].as_str().unwrap_or_default().to_string()),
            );
            match r.body.get("nextLink").and_then(Value::as_str) {
                Some(next) => {
                    uri = next
                        .strip_prefix(crate::testing::BASE)
                        .expect("same host")
                        .to_string()
                }
                None => break,
            }
        }
        assert_eq!(pages, 2);
        assert_eq!(
            names,
            (0..7).map(|i| format!("node-{i}")).collect::<Vec<_>>()
        );
    }

    #[tokio::test]
    async fn provider_registration_and_scale_sets() {
        let m = Mock::seeded(1);
        let t = m.token().await;
        let sub = m.shared.config.subscription_id.clone();
        let r = m
            .arm(
                "GET",
                &format!("/subscriptions/{sub}/providers/Microsoft.Compute"),
                &t,
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body["registrationState"], "Registered");
        let vms = &r.body["resourceTypes"][0];
        assert_eq!(vms["resourceType"], "virtualMachines");
        assert_eq!(vms["zoneMappings"][0]["location"], "East US");
        assert_eq!(
            vms["zoneMappings"][0]["zones"],
            serde_json::json!(["1", "2", "3"])
        );
        let r = m
            .arm(
                "GET",
                &format!("/subscriptions/{sub}/providers/Microsoft.Network"),
                &t,
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK);
        let r = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Compute/virtualMachineScaleSets"),
                &t,
                None,
            )
            .await;
        assert_eq!(r.body["value"], serde_json::json!([]));
        let r = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines"),
                &t,
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        let r = m
            .arm(
                "PUT",
                &m.rg_path("Microsoft.Compute/virtualMachines/node-0"),
                &t,
                Some(serde_json::json!({})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CONFLICT);
        let r = m.arm("GET", &format!("/subscriptions/{sub}/resourceGroups/other/providers/Microsoft.Compute/virtualMachines"), &t, None).await;
        assert_eq!(r.body["error"]["code"], "ResourceGroupNotFound");
        let r = m
            .arm(
                "GET",
                "/subscriptions/nope/providers/Microsoft.Compute",
                &t,
                None,
            )
            .await;
        assert_eq!(r.body["error"]["code"], "SubscriptionNotFound");
    }

    #[tokio::test]
    async fn scale_sets_are_readable_with_instances_and_nics() {
        let m = Mock::seeded(0);
        let info = m
            .admin()
            .create_scale_set(crate::ScaleSetSpec {
                name: "pool".into(),
                capacity: 2,
                zones: vec!["1".into(), "2".into()],
                vm_size: None,
            })
            .expect("scale set");
        assert_eq!(info.instances[1].name, "pool000001");
        assert!(
            info.instances[1]
                .provider_id
                .ends_with("/virtualMachineScaleSets/pool/virtualMachines/1")
        );
        let t = m.token().await;
        let r = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Compute/virtualMachineScaleSets"),
                &t,
                None,
            )
            .await;
        assert_eq!(r.body["value"][0]["sku"]["capacity"], 2);
        let r = m
            .arm("GET", &m.rg_path("Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines?$expand=instanceView"), &t, None)
            .await;
        let vms = r.body["value"].as_array().expect("instances");
        assert_eq!(vms.len(), 2);
        assert_eq!(vms[1]["instanceId"], "1");
        assert_eq!(vms[1]["zones"], serde_json::json!(["2"]));
        assert_eq!(
            vms[1]["properties"]["osProfile"]["computerName"],
            "pool000001"
        );
        assert_eq!(
            vms[1]["properties"]["instanceView"]["statuses"][1]["code"],
            "PowerState/running"
        );
        let nic_id = vms[0]["properties"]["networkProfile"]["networkInterfaces"][0]["id"]
            .as_str()
            .expect("nic");
        let nic = m.arm("GET", nic_id, &t, None).await;
        assert_eq!(nic.status, StatusCode::OK, "{}", nic.body);
        assert_eq!(
            nic.body["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"],
            info.instances[0].private_ips[0].as_str()
        );
        m.admin()
            .set_instance_power("pool", "0", crate::PowerState::Deallocated)
            .expect("power");
        let r = m
            .arm(
                "GET",
                &m.rg_path(
                    "Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines/0/instanceView",
                ),
                &t,
                None,
            )
            .await;
        assert_eq!(r.body["statuses"][1]["code"], "PowerState/deallocated");
        let r = m
            .arm(
                "GET",
                &m.rg_path("Microsoft.Compute/virtualMachineScaleSets/pool/virtualMachines/9"),
                &t,
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
        let r = m
            .arm(
                "PUT",
                &m.rg_path("Microsoft.Compute/virtualMachineScaleSets/pool"),
                &t,
                Some(serde_json::json!({})),
            )
            .await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (StatusCode::CONFLICT, Some("OperationNotAllowed"))
        );
        let e = m
            .shared
            .journal
            .entries()
            .into_iter()
            .rev()
            .nth(2)
            .expect("entry");
        assert_eq!(
            e.operation.as_deref(),
            Some("GET Microsoft.Compute/virtualMachineScaleSets/virtualMachines/instanceView")
        );
        assert!(
            m.admin()
                .create_scale_set(crate::ScaleSetSpec {
                    name: "toolongname".into(),
                    capacity: 1,
                    ..Default::default()
                })
                .is_err()
        );
    }
}
