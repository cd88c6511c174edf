//! Managed object properties as typed vim25 values, and their XML.
//!
//! Every value carries its vim25 type, so it can be written with the right `xsi:type`
//! wherever it lands: as a top-level `propSet/val` (arrays wrapped in `ArrayOf*`),
//! nested inside a data object (arrays as repeated elements), or reached by a dotted
//! `pathSet` entry such as `summary.config.uuid`.

use std::fmt::Write as _;

use crate::state::{Inventory, Kind, Obj};
use crate::xml::esc;

/// A typed vim25 value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Val {
    /// A primitive with its XSD type (`xsd:string`, `xsd:int`, `xsd:long`, `xsd:boolean`,
    /// `xsd:dateTime`).
    Prim(&'static str, String),
    /// An enum value (`VirtualMachinePowerState`...).
    Enum(&'static str, String),
    MoRef(&'static str, String),
    /// A data object: its type and fields in schema order.
    Obj(&'static str, Vec<(&'static str, Val)>),
    /// An array: the `ArrayOf*` wrapper type, the item type and the items.
    Arr(&'static str, &'static str, Vec<Val>),
    /// A data object already written as XML fields (the service content).
    Raw(&'static str, String),
}

pub fn s(v: impl Into<String>) -> Val {
    Val::Prim("xsd:string", v.into())
}

fn int(v: impl ToString) -> Val {
    Val::Prim("xsd:int", v.to_string())
}

fn long(v: impl ToString) -> Val {
    Val::Prim("xsd:long", v.to_string())
}

fn boolean(v: bool) -> Val {
    Val::Prim("xsd:boolean", v.to_string())
}

pub fn moref(inv: &Inventory, id: &str) -> Val {
    let ty = inv.get(id).map_or("ManagedEntity", |o| o.kind.type_name());
    Val::MoRef(ty, id.to_string())
}

fn morefs(inv: &Inventory, ids: &[String]) -> Val {
    Val::Arr(
        "ArrayOfManagedObjectReference",
        "ManagedObjectReference",
        ids.iter().map(|i| moref(inv, i)).collect(),
    )
}

impl Val {
    /// Follows a dotted path below this value (`config.uuid` below `summary`).
    pub fn get(&self, path: &[&str]) -> Option<&Val> {
        let Some((first, rest)) = path.split_first() else {
            return Some(self);
        };
        match self {
            Val::Obj(_, fields) => fields
                .iter()
                .find(|(n, _)| n == first)
                .and_then(|(_, v)| v.get(rest)),
            _ => None,
        }
    }

    /// Writes a method result: arrays as one `returnval` per item (as vim25 returns
    /// arrays from methods), anything else as one typed `returnval`.
    pub fn write_result(&self, out: &mut String) {
        match self {
            Val::Arr(_, _, items) => {
                for v in items {
                    v.write(out, "returnval", true);
                }
            }
            v => v.write(out, "returnval", true),
        }
    }

    /// Writes `<tag xsi:type=...>...</tag>` as a top-level value (arrays wrapped).
    pub fn write_top(&self, out: &mut String, tag: &str) {
        match self {
            Val::Arr(wrapper, item, items) => {
                let _ = write!(out, "<{tag} xsi:type=\"{wrapper}\">");
                for v in items {
                    v.write(out, item, !matches!(v, Val::Prim(..)));
                }
                let _ = write!(out, "</{tag}>");
            }
            v => v.write(out, tag, true),
        }
    }

    /// Writes the value as element `tag`; nested arrays are repeated elements.
    pub fn write(&self, out: &mut String, tag: &str, typed: bool) {
        match self {
            Val::Arr(_, _, items) => {
                for v in items {
                    v.write(out, tag, typed);
                }
            }
            Val::MoRef(ty, id) => {
                let xsi = if typed {
                    " xsi:type=\"ManagedObjectReference\""
                } else {
                    ""
                };
                let _ = write!(out, "<{tag} type=\"{ty}\"{xsi}>{}</{tag}>", esc(id));
            }
            Val::Prim(ty, v) | Val::Enum(ty, v) => {
                if typed {
                    let _ = write!(out, "<{tag} xsi:type=\"{ty}\">{}</{tag}>", esc(v));
                } else {
                    let _ = write!(out, "<{tag}>{}</{tag}>", esc(v));
                }
            }
            Val::Raw(ty, xml) => {
                let _ = write!(out, "<{tag} xsi:type=\"{ty}\">{xml}</{tag}>");
            }
            Val::Obj(ty, fields) => {
                if typed {
                    let _ = write!(out, "<{tag} xsi:type=\"{ty}\">");
                } else {
                    let _ = write!(out, "<{tag}>");
                }
                for (name, v) in fields {
                    v.write(out, name, false);
                }
                let _ = write!(out, "</{tag}>");
            }
        }
    }
}

/// An object field list builder that skips unset optional values.
struct Fields(Vec<(&'static str, Val)>);

impl Fields {
    fn new() -> Self {
        Fields(Vec::new())
    }
    fn put(mut self, name: &'static str, v: Val) -> Self {
        self.0.push((name, v));
        self
    }
    fn opt(self, name: &'static str, v: Option<Val>) -> Self {
        match v {
            Some(v) => self.put(name, v),
            None => self,
        }
    }
    fn obj(self, ty: &'static str) -> Val {
        Val::Obj(ty, self.0)
    }
}

/// `TaskInfo.name`: the vim25 method that started the task (a `MethodName`, which pyvmomi
/// resolves by its WSDL name, `pyVmomi/VmomiSupport.py` GetWsdlMethod; pyVim's
/// `WaitForTask` reads `info.name.info.name` while a task runs).
fn task_method(description_id: &str) -> &str {
    match description_id {
        "VirtualMachine.powerOn" => "PowerOnVM_Task",
        "VirtualMachine.powerOff" => "PowerOffVM_Task",
        other => other.rsplit('.').next().unwrap_or(other),
    }
}

/// The top-level properties of an object, in a stable order (what `all=true` returns).
pub fn properties(inv: &Inventory, o: &Obj) -> Vec<(&'static str, Val)> {
    let mut props: Vec<(&'static str, Val)> = Vec::new();
    if o.kind == Kind::Task {
        if let Some(t) = &o.task {
            let mut info = Fields::new()
                .put("key", s(&o.id))
                .put("task", Val::MoRef("Task", o.id.clone()))
                .put("name", s(task_method(&t.description_id)))
                .put("descriptionId", s(&t.description_id))
                .put("entity", moref(inv, &t.entity))
                .put("entityName", s(&t.entity_name))
                .put("state", Val::Enum("TaskInfoState", t.state.to_string()))
                .put("cancelled", boolean(false))
                .put("cancelable", boolean(false));
            if let Some((fault, msg)) = &t.error {
                let fault_ty: &'static str = match fault.as_str() {
                    "InvalidPowerState" => "InvalidPowerState",
                    _ => "SystemError",
                };
                let fault_fields = match fault_ty {
                    "InvalidPowerState" => format!(
                        "<existingState>{0}</existingState><requestedState>{0}</requestedState>",
                        inv.get(&t.entity)
                            .and_then(|e| e.vm.as_ref())
                            .map_or("poweredOff", |v| v.power.as_str())
                    ),
                    _ => "<reason>task failed</reason>".to_string(),
                };
                info = info.put(
                    "error",
                    Fields::new()
                        .put("fault", Val::Raw(fault_ty, fault_fields))
                        .put("localizedMessage", s(msg))
                        .obj("LocalizedMethodFault"),
                );
            }
            let info = info
                .put("queueTime", Val::Prim("xsd:dateTime", t.time.clone()))
                .put("startTime", Val::Prim("xsd:dateTime", t.time.clone()))
                .opt(
                    "completeTime",
                    t.complete_time
                        .as_ref()
                        .map(|c| Val::Prim("xsd:dateTime", c.clone())),
                )
                .put("eventChainId", int(0))
                .obj("TaskInfo");
            props.push(("info", info));
        }
        return props;
    }
    if o.kind == Kind::ContainerView {
        props.push((
            "container",
            morefs(inv, o.refs("container")).first_or_empty(),
        ));
        props.push(("type", Val::Arr("ArrayOfString", "string", vec![])));
        props.push(("view", morefs(inv, o.refs("view"))));
        return props;
    }
    props.push(("name", s(&o.name)));
    if let Some(p) = &o.parent {
        props.push(("parent", moref(inv, p)));
    }
    props.push((
        "overallStatus",
        Val::Enum("ManagedEntityStatus", "green".into()),
    ));
    match o.kind {
        Kind::Folder => {
            props.push(("childEntity", morefs(inv, o.refs("childEntity"))));
            let types: Vec<Val> = folder_types(o).iter().map(|t| s(*t)).collect();
            props.push(("childType", Val::Arr("ArrayOfString", "string", types)));
        }
        Kind::Datacenter => {
            for prop in ["vmFolder", "hostFolder", "datastoreFolder", "networkFolder"] {
                if let Some(id) = o.refs(prop).first() {
                    props.push((prop, moref(inv, id)));
                }
            }
            props.push(("datastore", morefs(inv, o.refs("datastore"))));
            props.push(("network", morefs(inv, o.refs("network"))));
        }
        Kind::ClusterComputeResource => {
            props.push(("host", morefs(inv, o.refs("host"))));
            if let Some(rp) = o.refs("resourcePool").first() {
                props.push(("resourcePool", moref(inv, rp)));
            }
            props.push(("datastore", morefs(inv, o.refs("datastore"))));
            props.push(("network", morefs(inv, o.refs("network"))));
        }
        Kind::ResourcePool => {
            props.push(("vm", morefs(inv, o.refs("vm"))));
            props.push((
                "owner",
                o.parent.as_deref().map_or(s(""), |p| moref(inv, p)),
            ));
        }
        Kind::HostSystem => {
            props.push(("vm", morefs(inv, o.refs("vm"))));
            props.push(("datastore", morefs(inv, o.refs("datastore"))));
            props.push(("network", morefs(inv, o.refs("network"))));
            let hw = Fields::new()
                .opt("uuid", o.host_uuid.as_deref().map(s))
                .obj("HostHardwareSummary");
            let runtime = Fields::new()
                .put(
                    "connectionState",
                    Val::Enum("HostSystemConnectionState", "connected".into()),
                )
                .put(
                    "powerState",
                    Val::Enum("HostSystemPowerState", "poweredOn".into()),
                )
                .put("inMaintenanceMode", boolean(false))
                .obj("HostRuntimeInfo");
            props.push((
                "summary",
                Fields::new()
                    .put("host", moref(inv, &o.id))
                    .put("hardware", hw)
                    .put("runtime", runtime.clone())
                    .put(
                        "overallStatus",
                        Val::Enum("ManagedEntityStatus", "green".into()),
                    )
                    .obj("HostListSummary"),
            ));
            props.push(("runtime", runtime));
        }
        Kind::Datastore => {
            props.push((
                "summary",
                Fields::new()
                    .put("datastore", moref(inv, &o.id))
                    .put("name", s(&o.name))
                    .put("url", s(format!("ds:///vmfs/volumes/{}/", o.id)))
                    .put("capacity", long(1u64 << 40))
                    .put("freeSpace", long(1u64 << 39))
                    .put("accessible", boolean(true))
                    .put("type", s("VMFS"))
                    .obj("DatastoreSummary"),
            ));
        }
        Kind::Network => {
            props.push((
                "summary",
                Fields::new()
                    .put("network", moref(inv, &o.id))
                    .put("name", s(&o.name))
                    .put("accessible", boolean(true))
                    .obj("NetworkSummary"),
            ));
        }
        Kind::VirtualMachine => vm_properties(inv, o, &mut props),
        Kind::Task | Kind::ContainerView => {}
    }
    props
}

impl Val {
    fn first_or_empty(self) -> Val {
        match self {
            Val::Arr(_, _, mut items) if !items.is_empty() => items.remove(0),
            _ => s(""),
        }
    }
}

fn folder_types(o: &Obj) -> &'static [&'static str] {
    match o.name.as_str() {
        "Datacenters" => &["Folder", "Datacenter"],
        "vm" => &["Folder", "VirtualMachine", "VirtualApp"],
        "host" => &["Folder", "ComputeResource"],
        "datastore" => &["Folder", "Datastore", "StoragePod"],
        "network" => &["Folder", "Network", "DistributedVirtualSwitch"],
        _ => &["Folder"],
    }
}

fn vm_properties(inv: &Inventory, o: &Obj, props: &mut Vec<(&'static str, Val)>) {
    let Some(vm) = &o.vm else { return };
    let power = Val::Enum("VirtualMachinePowerState", vm.power.as_str().to_string());
    let running = vm.power == crate::state::PowerState::PoweredOn;
    // Tools run while the VM is on, except while its guest restarts (see
    // `state::GuestRestart`); the power state does not change for a restart.
    let tools = running && !vm.restarting();
    let guest_id = "otherLinux64Guest";
    let nets: Vec<Val> = vm
        .guest_nics()
        .iter()
        .enumerate()
        .map(|(i, n)| {
            Fields::new()
                .put("network", s(&n.network))
                .put(
                    "ipAddress",
                    Val::Arr(
                        "ArrayOfString",
                        "string",
                        n.ip_addresses.iter().map(s).collect(),
                    ),
                )
                .put("macAddress", s(&n.mac_address))
                .put("connected", boolean(n.connected))
                .put("deviceConfigId", int(4000 + i))
                .obj("GuestNicInfo")
        })
        .collect();
    let ip = vm.ip_address().map(s);
    let guest = Fields::new()
        .put(
            "toolsStatus",
            Val::Enum(
                "VirtualMachineToolsStatus",
                if tools { "toolsOk" } else { "toolsNotRunning" }.into(),
            ),
        )
        .put(
            "toolsRunningStatus",
            s(if tools {
                "guestToolsRunning"
            } else {
                "guestToolsNotRunning"
            }),
        )
        .put("guestId", s(guest_id))
        .opt("hostName", vm.host_name.as_deref().map(s))
        .opt("ipAddress", ip.clone())
        .put("net", Val::Arr("ArrayOfGuestNicInfo", "GuestNicInfo", nets))
        .put(
            "guestState",
            s(if tools { "running" } else { "notRunning" }),
        )
        .obj("GuestInfo");
    let runtime = Fields::new()
        .put("host", moref(inv, &vm.host))
        .put(
            "connectionState",
            Val::Enum("VirtualMachineConnectionState", "connected".into()),
        )
        .put("powerState", power.clone())
        .obj("VirtualMachineRuntimeInfo");
    let hardware = Fields::new()
        .put("numCPU", int(vm.num_cpu))
        .put("memoryMB", int(vm.memory_mb))
        .obj("VirtualHardware");
    let config = Fields::new()
        .put("changeVersion", s(""))
        .put(
            "modified",
            Val::Prim("xsd:dateTime", "1970-01-01T00:00:00Z".into()),
        )
        .put("name", s(&o.name))
        .put("guestFullName", s("Other Linux (64-bit)"))
        .put("version", s("vmx-19"))
        .put("uuid", s(&vm.uuid))
        .put("instanceUuid", s(&vm.instance_uuid))
        .put("template", boolean(false))
        .put("guestId", s(guest_id))
        .put("hardware", hardware)
        .obj("VirtualMachineConfigInfo");
    let summary_config = Fields::new()
        .put("name", s(&o.name))
        .put("template", boolean(false))
        .put("vmPathName", s(format!("[LocalDS_0] {0}/{0}.vmx", o.name)))
        .put("memorySizeMB", int(vm.memory_mb))
        .put("numCpu", int(vm.num_cpu))
        .put("uuid", s(&vm.uuid))
        .put("instanceUuid", s(&vm.instance_uuid))
        .put("guestId", s(guest_id))
        .put("guestFullName", s("Other Linux (64-bit)"))
        .obj("VirtualMachineConfigSummary");
    let summary_guest = Fields::new()
        .put("guestId", s(guest_id))
        .opt("hostName", vm.host_name.as_deref().map(s))
        .opt("ipAddress", ip)
        .obj("VirtualMachineGuestSummary");
    let summary = Fields::new()
        .put("vm", moref(inv, &o.id))
        .put("runtime", runtime.clone())
        .put("guest", summary_guest)
        .put("config", summary_config)
        .put(
            "overallStatus",
            Val::Enum("ManagedEntityStatus", "green".into()),
        )
        .obj("VirtualMachineSummary");
    props.push(("config", config));
    props.push(("summary", summary));
    props.push(("guest", guest));
    props.push(("runtime", runtime));
    props.push(("resourcePool", moref(inv, &vm.resource_pool)));
    props.push(("datastore", morefs(inv, o.refs("datastore"))));
    props.push(("network", morefs(inv, o.refs("network"))));
}

/// The value at a dotted path, `Ok(None)` when the path is valid but unset, `Err` when
/// the type has no such property.
pub fn lookup(props: &[(&'static str, Val)], kind: Kind, path: &str) -> Result<Option<Val>, ()> {
    let parts: Vec<&str> = path.split('.').collect();
    let Some((first, rest)) = parts.split_first() else {
        return Err(());
    };
    match props.iter().find(|(n, _)| n == first) {
        Some((_, v)) => Ok(v.get(rest).cloned()),
        None if known_unset(kind, path) => Ok(None),
        None => Err(()),
    }
}

/// Properties the type has but the mock never sets (so asking is not an error).
fn known_unset(kind: Kind, path: &str) -> bool {
    let first = path.split('.').next().unwrap_or("");
    matches!(
        first,
        "parent"
            | "customValue"
            | "tag"
            | "alarmActionsEnabled"
            | "configStatus"
            | "effectiveRole"
            | "permission"
            | "recentTask"
            | "declaredAlarmState"
            | "triggeredAlarmState"
            | "availableField"
            | "value"
            | "disabledMethod"
    ) || (kind == Kind::VirtualMachine
        && matches!(
            first,
            "layout"
                | "layoutEx"
                | "storage"
                | "environmentBrowser"
                | "snapshot"
                | "rootSnapshot"
                | "parentVApp"
                | "capability"
                | "guestHeartbeatStatus"
                | "resourceConfig"
        ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::VmSpec;

    #[test]
    fn vm_paths_and_xml() {
        let mut inv = Inventory::new(&["DC0".into()], 1);
        let id = inv
            .create_vm(VmSpec {
                name: "n<0>".into(),
                uuid: Some("4213C7A2-0000-0000-0000-000000000001".into()),
                host_name: Some("n0".into()),
                ips: vec!["10.0.0.1".into(), "fd00::1".into()],
                ..Default::default()
            })
            .expect("vm");
        let o = inv.get(&id).expect("obj").clone();
        let props = properties(&inv, &o);
        let uuid = lookup(&props, o.kind, "summary.config.uuid").expect("valid");
        assert_eq!(uuid, Some(s("4213c7a2-0000-0000-0000-000000000001")));
        assert_eq!(
            lookup(&props, o.kind, "guest.ipAddress"),
            Ok(Some(s("10.0.0.1")))
        );
        assert_eq!(lookup(&props, o.kind, "bogus"), Err(()));
        let mut out = String::new();
        lookup(&props, o.kind, "guest.net")
            .expect("ok")
            .expect("set")
            .write_top(&mut out, "val");
        assert!(out.starts_with("<val xsi:type=\"ArrayOfGuestNicInfo\"><GuestNicInfo xsi:type=\"GuestNicInfo\"><network>VM Network</network><ipAddress>10.0.0.1</ipAddress><ipAddress>fd00::1</ipAddress>"), "{out}");
        let mut out = String::new();
        lookup(&props, o.kind, "name")
            .expect("ok")
            .expect("set")
            .write_top(&mut out, "val");
        assert_eq!(out, "<val xsi:type=\"xsd:string\">n&lt;0&gt;</val>");
        let mut out = String::new();
        lookup(&props, o.kind, "runtime.host")
            .expect("ok")
            .expect("set")
            .write_top(&mut out, "val");
        assert!(
            out.starts_with("<val type=\"HostSystem\" xsi:type=\"ManagedObjectReference\">host-"),
            "{out}"
        );
    }
}
