//! The vCenter inventory the mock serves: managed objects by MoRef id with the links
//! the PropertyCollector traverses (rootFolder -> Datacenter -> vmFolder/hostFolder/...),
//! virtual machines with first-class guest identity (hostName, IPs, BIOS UUID matching the
//! simulated node's SystemUUID), tasks, and vAPI tags and categories for zones/regions.
//!
//! Ids follow vCenter's shapes (`group-d1`, `datacenter-2`, `vm-17`, `host-9`,
//! `domain-c7`, `resgroup-8`, `task-30`) so clients that pattern-match them keep working.

use std::collections::BTreeMap;

use mock_cloud::lifecycle::{Lifecycle, Mode, Phase};
use serde::{Deserialize, Serialize};

/// Managed object types the inventory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Kind {
    Folder,
    Datacenter,
    ClusterComputeResource,
    HostSystem,
    ResourcePool,
    Datastore,
    Network,
    VirtualMachine,
    Task,
    ContainerView,
}

impl Kind {
    pub fn type_name(self) -> &'static str {
        match self {
            Kind::Folder => "Folder",
            Kind::Datacenter => "Datacenter",
            Kind::ClusterComputeResource => "ClusterComputeResource",
            Kind::HostSystem => "HostSystem",
            Kind::ResourcePool => "ResourcePool",
            Kind::Datastore => "Datastore",
            Kind::Network => "Network",
            Kind::VirtualMachine => "VirtualMachine",
            Kind::Task => "Task",
            Kind::ContainerView => "ContainerView",
        }
    }

    /// Whether an object of this kind is an instance of the vim25 type `ty` (subtypes
    /// included: a cluster is a `ComputeResource`, everything in the tree a `ManagedEntity`).
    pub fn is_a(self, ty: &str) -> bool {
        if ty == self.type_name() || ty == "ManagedObject" {
            return true;
        }
        let entity = !matches!(self, Kind::Task | Kind::ContainerView);
        match ty {
            "ManagedEntity" | "ExtensibleManagedObject" => entity || self == Kind::Task,
            "ComputeResource" => self == Kind::ClusterComputeResource,
            "View" | "ManagedObjectView" => self == Kind::ContainerView,
            _ => false,
        }
    }
}

/// `runtime.powerState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PowerState {
    #[default]
    PoweredOn,
    PoweredOff,
    Suspended,
}

impl PowerState {
    pub fn as_str(self) -> &'static str {
        match self {
            PowerState::PoweredOn => "poweredOn",
            PowerState::PoweredOff => "poweredOff",
            PowerState::Suspended => "suspended",
        }
    }
}

/// One guest NIC (`guest.net[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nic {
    /// Port group name (`VM Network` by default).
    #[serde(default = "default_network")]
    pub network: String,
    #[serde(default)]
    pub ip_addresses: Vec<String>,
    #[serde(default)]
    pub mac_address: String,
    #[serde(default = "yes")]
    pub connected: bool,
}

fn default_network() -> String {
    "VM Network".to_string()
}

fn yes() -> bool {
    true
}

/// A VM as the admin API creates it. Unset fields get generated values.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmSpec {
    pub name: String,
    /// BIOS UUID (`config.uuid`); the node's SystemUUID.
    #[serde(default)]
    pub uuid: Option<String>,
    #[serde(default)]
    pub instance_uuid: Option<String>,
    /// `guest.hostName`.
    #[serde(default)]
    pub host_name: Option<String>,
    /// IPs of the first NIC; the first is `guest.ipAddress`.
    #[serde(default)]
    pub ips: Vec<String>,
    /// Replaces the single NIC built from `ips` when non-empty.
    #[serde(default)]
    pub nics: Vec<Nic>,
    #[serde(default)]
    pub power_state: Option<PowerState>,
    /// Datacenter name; the first one when unset.
    #[serde(default)]
    pub datacenter: Option<String>,
    /// Host name (inventory name) the VM runs on; round robin when unset.
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub num_cpu: Option<u32>,
    #[serde(default)]
    pub memory_mb: Option<u64>,
}

/// A change to a VM; `None` leaves a field alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmPatch {
    /// `Some(None)` (JSON `null`) clears `guest.hostName`.
    #[serde(default, with = "double_option")]
    pub host_name: Option<Option<String>>,
    /// Replaces the IPs of the first NIC (and `guest.ipAddress`).
    #[serde(default)]
    pub ips: Option<Vec<String>>,
    #[serde(default)]
    pub nics: Option<Vec<Nic>>,
    #[serde(default)]
    pub power_state: Option<PowerState>,
}

mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Option<String>>, s: S) -> Result<S::Ok, S::Error> {
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<String>>, D::Error> {
        Option::<String>::deserialize(d).map(Some)
    }
}

/// A VM as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmInfo {
    /// MoRef id (`vm-17`).
    pub id: String,
    pub name: String,
    pub uuid: String,
    pub instance_uuid: String,
    pub host_name: Option<String>,
    pub ip_address: Option<String>,
    pub nics: Vec<Nic>,
    pub power_state: PowerState,
    pub datacenter: String,
    /// MoRef id of the host.
    pub host: String,
    /// A guest restart is in progress: VMware Tools are down, `guest.net` is empty.
    #[serde(default)]
    pub guest_restarting: bool,
}

/// How long a guest restart asked for through the API (`RebootGuest`, `ResetVM_Task`)
/// keeps VMware Tools down (a real guest takes tens of seconds; the admin API can hold
/// it).
pub const REBOOT_SECONDS: f64 = 2.0;

/// A guest restart in progress (`RebootGuest`, `ResetVM_Task`). While it lasts VMware
/// Tools are not running, so vCenter reports no `guest.net` and no `guest.ipAddress`,
/// `toolsRunningStatus` `guestToolsNotRunning`, while `runtime.powerState` stays
/// `poweredOn` and `guest.hostName` keeps its last value (cloud-provider-vsphere#536
/// shows nodes with a hostname and no IP). A CCM that trusts that empty `guest.net`
/// blanks the node's addresses (cloud-provider-vsphere#479, #576).
#[derive(Debug, Clone)]
pub struct GuestRestart {
    pub lifecycle: Lifecycle,
}

/// Restarts compare equal: a lifecycle's progress is not inventory state.
impl PartialEq for GuestRestart {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for GuestRestart {}

/// Admin operation errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    #[error("no object {0:?}")]
    NotFound(String),
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("{0} already exists")]
    Conflict(String),
}

/// Guest and runtime state of a VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmState {
    pub uuid: String,
    pub instance_uuid: String,
    pub host_name: Option<String>,
    pub nics: Vec<Nic>,
    pub power: PowerState,
    pub host: String,
    pub resource_pool: String,
    pub datacenter: String,
    pub num_cpu: u32,
    pub memory_mb: u64,
    /// A guest restart in progress, if any.
    pub restart: Option<GuestRestart>,
}

impl VmState {
    /// Whether a guest restart is under way (VMware Tools down).
    pub fn restarting(&self) -> bool {
        self.restart
            .as_ref()
            .is_some_and(|r| r.lifecycle.clone().peek() == Phase::Pending)
    }

    /// The NICs as VMware Tools report them in `guest.net`: none while the guest restarts.
    pub fn guest_nics(&self) -> &[Nic] {
        if self.restarting() { &[] } else { &self.nics }
    }

    /// `guest.ipAddress`: the first IP of the first connected NIC Tools report.
    pub fn ip_address(&self) -> Option<&str> {
        self.guest_nics()
            .iter()
            .filter(|n| n.connected)
            .flat_map(|n| n.ip_addresses.iter())
            .next()
            .map(String::as_str)
    }
}

/// `info` of a Task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskState {
    pub description_id: String,
    pub entity: String,
    pub entity_name: String,
    /// `running`, `success` or `error`.
    pub state: &'static str,
    /// The fault when `state` is `error`: (type, message, requested, existing power state).
    pub error: Option<(String, String)>,
    pub time: String,
    /// When it finished (unset while running).
    pub complete_time: Option<String>,
    /// A running power task: how it ends and the power state it sets when it succeeds.
    pub pending: Option<PendingPower>,
}

/// A power task still running under the shared lifecycle engine (`mock_cloud::lifecycle`).
#[derive(Debug, Clone)]
pub struct PendingPower {
    pub lifecycle: Lifecycle,
    pub target: PowerState,
}

/// Running tasks compare by target only: a lifecycle's progress is not inventory state.
impl PartialEq for PendingPower {
    fn eq(&self, other: &Self) -> bool {
        self.target == other.target
    }
}
impl Eq for PendingPower {}

/// One managed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Obj {
    pub id: String,
    pub kind: Kind,
    pub name: String,
    pub parent: Option<String>,
    /// Reference-valued properties: `childEntity`, `vmFolder`, `host`, `vm`, `view`, ...
    pub refs: BTreeMap<&'static str, Vec<String>>,
    pub vm: Option<VmState>,
    pub task: Option<TaskState>,
    /// Hardware UUID of a host.
    pub host_uuid: Option<String>,
}

impl Obj {
    fn new(id: String, kind: Kind, name: &str, parent: Option<&str>) -> Obj {
        Obj {
            id,
            kind,
            name: name.to_string(),
            parent: parent.map(str::to_string),
            refs: BTreeMap::new(),
            vm: None,
            task: None,
            host_uuid: None,
        }
    }

    pub fn refs(&self, prop: &str) -> &[String] {
        self.refs.get(prop).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// A vAPI tag category.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Category {
    pub id: String,
    pub name: String,
    pub description: String,
    /// `SINGLE` or `MULTIPLE`.
    pub cardinality: String,
    pub associable_types: Vec<String>,
}

/// A vAPI tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tag {
    pub id: String,
    pub category_id: String,
    pub name: String,
    pub description: String,
}

/// A datacenter's well-known children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcLinks {
    pub id: String,
    pub vm_folder: String,
    pub hosts: Vec<String>,
    pub pool: String,
    pub network: String,
    pub datastore: String,
}

/// The whole cloud state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    pub objects: BTreeMap<String, Obj>,
    pub root: String,
    pub datacenters: Vec<DcLinks>,
    pub categories: Vec<Category>,
    pub tags: Vec<Tag>,
    /// (tag id, object type, object id).
    pub attachments: Vec<(String, String, String)>,
    next_id: u64,
    next_host: usize,
    /// Ids of tasks still `running` (with a lifecycle), so settling them on every call
    /// does not scan the whole inventory.
    running: Vec<String>,
}

pub fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn is_uuid(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok()
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

impl Inventory {
    /// The root folder, datacenters each with a cluster of `hosts` hosts, one resource
    /// pool, one datastore and the `VM Network` port group.
    pub fn new(datacenters: &[String], hosts: usize) -> Inventory {
        let mut inv = Inventory {
            objects: BTreeMap::new(),
            root: "group-d1".to_string(),
            datacenters: Vec::new(),
            categories: Vec::new(),
            tags: Vec::new(),
            attachments: Vec::new(),
            next_id: 1,
            next_host: 0,
            running: Vec::new(),
        };
        inv.insert(Obj::new(
            "group-d1".into(),
            Kind::Folder,
            "Datacenters",
            None,
        ));
        for dc_name in datacenters {
            inv.add_datacenter(dc_name, hosts.max(1));
        }
        inv
    }

    fn next(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{}", self.next_id)
    }

    fn insert(&mut self, obj: Obj) {
        self.objects.insert(obj.id.clone(), obj);
    }

    fn link(&mut self, from: &str, prop: &'static str, to: &str) {
        if let Some(o) = self.objects.get_mut(from) {
            o.refs.entry(prop).or_default().push(to.to_string());
        }
    }

    fn add_datacenter(&mut self, name: &str, hosts: usize) {
        let root = self.root.clone();
        let dc = self.next("datacenter-");
        self.insert(Obj::new(dc.clone(), Kind::Datacenter, name, Some(&root)));
        self.link(&root, "childEntity", &dc);
        let mut folders = Vec::new();
        for (prop, prefix, fname) in [
            ("vmFolder", "group-v", "vm"),
            ("hostFolder", "group-h", "host"),
            ("datastoreFolder", "group-s", "datastore"),
            ("networkFolder", "group-n", "network"),
        ] {
            let f = self.next(prefix);
            self.insert(Obj::new(f.clone(), Kind::Folder, fname, Some(&dc)));
            self.link(&dc, prop, &f);
            folders.push(f);
        }
        let ds = self.next("datastore-");
        self.insert(Obj::new(
            ds.clone(),
            Kind::Datastore,
            "LocalDS_0",
            Some(&folders[2]),
        ));
        self.link(&folders[2], "childEntity", &ds);
        self.link(&dc, "datastore", &ds);
        let net = self.next("network-");
        self.insert(Obj::new(
            net.clone(),
            Kind::Network,
            "VM Network",
            Some(&folders[3]),
        ));
        self.link(&folders[3], "childEntity", &net);
        self.link(&dc, "network", &net);
        let cluster = self.next("domain-c");
        let cluster_name = format!("{name}_C0");
        self.insert(Obj::new(
            cluster.clone(),
            Kind::ClusterComputeResource,
            &cluster_name,
            Some(&folders[1]),
        ));
        self.link(&folders[1], "childEntity", &cluster);
        self.link(&cluster, "datastore", &ds);
        self.link(&cluster, "network", &net);
        let pool = self.next("resgroup-");
        self.insert(Obj::new(
            pool.clone(),
            Kind::ResourcePool,
            "Resources",
            Some(&cluster),
        ));
        self.link(&cluster, "resourcePool", &pool);
        let mut host_ids = Vec::new();
        for i in 0..hosts {
            let h = self.next("host-");
            let mut host = Obj::new(
                h.clone(),
                Kind::HostSystem,
                &format!("{cluster_name}_H{i}"),
                Some(&cluster),
            );
            host.host_uuid = Some(new_uuid());
            self.insert(host);
            self.link(&cluster, "host", &h);
            self.link(&h, "datastore", &ds);
            self.link(&h, "network", &net);
            host_ids.push(h);
        }
        self.datacenters.push(DcLinks {
            id: dc,
            vm_folder: folders[0].clone(),
            hosts: host_ids,
            pool,
            network: net,
            datastore: ds,
        });
    }

    pub fn get(&self, id: &str) -> Option<&Obj> {
        self.objects.get(id)
    }

    pub fn vms(&self) -> impl Iterator<Item = (&Obj, &VmState)> {
        self.objects
            .values()
            .filter_map(|o| o.vm.as_ref().map(|v| (o, v)))
    }

    /// The datacenter an object lives in (following `parent`).
    pub fn datacenter_of(&self, id: &str) -> Option<&str> {
        let mut cur = self.objects.get(id)?;
        for _ in 0..64 {
            if cur.kind == Kind::Datacenter {
                return Some(&cur.id);
            }
            cur = self.objects.get(cur.parent.as_deref()?)?;
        }
        None
    }

    pub fn create_vm(&mut self, spec: VmSpec) -> Result<String, AdminError> {
        if spec.name.trim().is_empty() {
            return Err(AdminError::Invalid {
                field: "name",
                reason: "must not be empty".into(),
            });
        }
        for (field, value) in [("uuid", &spec.uuid), ("instance_uuid", &spec.instance_uuid)] {
            if let Some(v) = value
                && !is_uuid(v)
            {
                return Err(AdminError::Invalid {
                    field,
                    reason: format!("{v:?} is not a UUID"),
                });
            }
        }
        validate_ips(
            spec.ips
                .iter()
                .chain(spec.nics.iter().flat_map(|n| &n.ip_addresses)),
        )?;
        let dc = match &spec.datacenter {
            None => self.datacenters.first(),
            Some(name) => self
                .datacenters
                .iter()
                .find(|d| self.objects.get(&d.id).is_some_and(|o| &o.name == name)),
        }
        .cloned()
        .ok_or_else(|| AdminError::NotFound(spec.datacenter.clone().unwrap_or_default()))?;
        let host = match &spec.host {
            Some(name) => dc
                .hosts
                .iter()
                .find(|h| {
                    self.objects
                        .get(*h)
                        .is_some_and(|o| &o.name == name || *h == name)
                })
                .cloned()
                .ok_or_else(|| AdminError::NotFound(name.clone()))?,
            None => {
                self.next_host += 1;
                dc.hosts[(self.next_host - 1) % dc.hosts.len()].clone()
            }
        };
        let n = self.next_id + 1;
        let nics = if spec.nics.is_empty() {
            vec![Nic {
                network: "VM Network".into(),
                ip_addresses: spec.ips.clone(),
                mac_address: format!(
                    "00:50:56:{:02x}:{:02x}:{:02x}",
                    (n >> 16) & 0xff,
                    (n >> 8) & 0xff,
                    n & 0xff
                ),
                connected: true,
            }]
        } else {
            spec.nics.clone()
        };
        let id = self.next("vm-");
        let mut obj = Obj::new(
            id.clone(),
            Kind::VirtualMachine,
            &spec.name,
            Some(&dc.vm_folder),
        );
        obj.refs.insert("datastore", vec![dc.datastore.clone()]);
        obj.refs.insert("network", vec![dc.network.clone()]);
        obj.vm = Some(VmState {
            uuid: spec.uuid.unwrap_or_else(new_uuid).to_lowercase(),
            instance_uuid: spec.instance_uuid.unwrap_or_else(new_uuid).to_lowercase(),
            host_name: spec.host_name,
            nics,
            power: spec.power_state.unwrap_or_default(),
            restart: None,
            host: host.clone(),
            resource_pool: dc.pool.clone(),
            datacenter: dc.id.clone(),
            num_cpu: spec.num_cpu.unwrap_or(2),
            memory_mb: spec.memory_mb.unwrap_or(4096),
        });
        self.insert(obj);
        self.link(&dc.vm_folder, "childEntity", &id);
        self.link(&dc.pool, "vm", &id);
        self.link(&host, "vm", &id);
        Ok(id)
    }

    pub fn update_vm(&mut self, id: &str, patch: VmPatch) -> Result<(), AdminError> {
        if let Some(ips) = &patch.ips {
            validate_ips(ips.iter())?;
        }
        if let Some(nics) = &patch.nics {
            validate_ips(nics.iter().flat_map(|n| &n.ip_addresses))?;
        }
        let vm = self
            .objects
            .get_mut(id)
            .and_then(|o| o.vm.as_mut())
            .ok_or_else(|| AdminError::NotFound(id.to_string()))?;
        if let Some(h) = patch.host_name {
            vm.host_name = h;
        }
        if let Some(nics) = patch.nics {
            vm.nics = nics;
        }
        if let Some(ips) = patch.ips {
            match vm.nics.first_mut() {
                Some(n) => n.ip_addresses = ips,
                None => vm.nics.push(Nic {
                    network: default_network(),
                    ip_addresses: ips,
                    mac_address: String::new(),
                    connected: true,
                }),
            }
        }
        if let Some(p) = patch.power_state {
            vm.power = p;
            if p != PowerState::PoweredOn {
                vm.restart = None;
            }
        }
        Ok(())
    }

    pub fn delete_vm(&mut self, id: &str) -> Result<(), AdminError> {
        if self.objects.get(id).is_none_or(|o| o.vm.is_none()) {
            return Err(AdminError::NotFound(id.to_string()));
        }
        self.objects.remove(id);
        for o in self.objects.values_mut() {
            for list in o.refs.values_mut() {
                list.retain(|r| r != id);
            }
        }
        self.attachments.retain(|(_, _, obj)| obj != id);
        Ok(())
    }

    pub fn vm_info(&self, id: &str) -> Option<VmInfo> {
        let o = self.objects.get(id)?;
        let v = o.vm.as_ref()?;
        Some(VmInfo {
            id: o.id.clone(),
            name: o.name.clone(),
            uuid: v.uuid.clone(),
            instance_uuid: v.instance_uuid.clone(),
            host_name: v.host_name.clone(),
            ip_address: v.ip_address().map(str::to_string),
            nics: v.nics.clone(),
            power_state: v.power,
            datacenter: self
                .objects
                .get(&v.datacenter)
                .map(|d| d.name.clone())
                .unwrap_or_default(),
            host: v.host.clone(),
            guest_restarting: v.restarting(),
        })
    }

    /// Restarts the guest of a powered-on VM (`RebootGuest`, `ResetVM_Task`): Tools are
    /// down until `mode` ends the restart. `Invalid` when the VM is not powered on.
    pub fn restart_guest(&mut self, id: &str, mode: Mode) -> Result<(), AdminError> {
        let vm = self
            .objects
            .get_mut(id)
            .and_then(|o| o.vm.as_mut())
            .ok_or_else(|| AdminError::NotFound(id.to_string()))?;
        if vm.power != PowerState::PoweredOn {
            return Err(AdminError::Invalid {
                field: "power_state",
                reason: format!("the VM is {}, not poweredOn", vm.power.as_str()),
            });
        }
        vm.restart = Some(GuestRestart {
            lifecycle: Lifecycle::begin(mode),
        });
        Ok(())
    }

    /// Changes how a guest restart in progress ends (`Mode::Immediate` ends it now).
    pub fn set_restart_mode(&mut self, id: &str, mode: Mode) -> Result<(), AdminError> {
        let vm = self
            .objects
            .get_mut(id)
            .and_then(|o| o.vm.as_mut())
            .ok_or_else(|| AdminError::NotFound(id.to_string()))?;
        match vm.restart.as_mut() {
            Some(r) if vm_restarting(&r.lifecycle) => {
                r.lifecycle.set_mode(mode);
                Ok(())
            }
            _ => Err(AdminError::Invalid {
                field: "restart",
                reason: format!("the guest of {id} is not restarting"),
            }),
        }
    }

    /// Records a finished task and returns its id.
    pub fn add_task(
        &mut self,
        description_id: &str,
        entity: &str,
        error: Option<(String, String)>,
    ) -> String {
        let id = self.next("task-");
        let entity_name = self
            .objects
            .get(entity)
            .map(|o| o.name.clone())
            .unwrap_or_default();
        let mut obj = Obj::new(id.clone(), Kind::Task, "", None);
        obj.task = Some(TaskState {
            description_id: description_id.to_string(),
            entity: entity.to_string(),
            entity_name,
            state: if error.is_some() { "error" } else { "success" },
            error,
            time: now(),
            complete_time: Some(now()),
            pending: None,
        });
        self.insert(obj);
        id
    }

    /// Records a running power task that sets `target` on `entity` when `lifecycle` ends.
    pub fn add_running_task(
        &mut self,
        description_id: &str,
        entity: &str,
        target: PowerState,
        lifecycle: Lifecycle,
    ) -> String {
        let id = self.add_task(description_id, entity, None);
        if let Some(t) = self.objects.get_mut(&id).and_then(|o| o.task.as_mut()) {
            t.state = "running";
            t.complete_time = None;
            t.pending = Some(PendingPower { lifecycle, target });
            self.running.push(id.clone());
        }
        id
    }

    /// Lets running tasks move on: each is looked at (a client read when its id is in
    /// `reads`); one that ends sets its VM's power state (success) or fails with
    /// `SystemError`. Returns whether any task changed.
    pub fn settle_tasks(&mut self, reads: &[&str]) -> bool {
        let now_at = std::time::Instant::now();
        let mut done: Vec<(String, PowerState)> = Vec::new();
        let mut changed = false;
        if self.running.is_empty() {
            return false;
        }
        let mut still = Vec::new();
        for id in std::mem::take(&mut self.running) {
            let Some(o) = self.objects.get_mut(&id) else {
                continue;
            };
            let Some(t) = o.task.as_mut() else { continue };
            let Some(p) = t.pending.as_mut() else {
                continue;
            };
            match p
                .lifecycle
                .observe_at(now_at, reads.contains(&o.id.as_str()))
            {
                Phase::Pending => {
                    still.push(id);
                    continue;
                }
                Phase::Done => {
                    t.state = "success";
                    done.push((t.entity.clone(), p.target));
                }
                Phase::Failed => {
                    t.state = "error";
                    t.error = Some((
                        "SystemError".into(),
                        "A general system error occurred: task failed (lifecycle mode error)"
                            .into(),
                    ));
                }
            }
            t.pending = None;
            t.complete_time = Some(now());
            changed = true;
        }
        self.running = still;
        for (vm, target) in done {
            if let Some(v) = self.objects.get_mut(&vm).and_then(|o| o.vm.as_mut()) {
                v.power = target;
            }
        }
        changed
    }

    pub fn add_view(
        &mut self,
        container: &str,
        types: &[String],
        recursive: bool,
    ) -> Option<String> {
        self.objects.get(container)?;
        let mut found = Vec::new();
        let mut stack = vec![(container.to_string(), 0usize)];
        while let Some((cur, depth)) = stack.pop() {
            let Some(o) = self.objects.get(&cur) else {
                continue;
            };
            if cur != container && (types.is_empty() || types.iter().any(|t| o.kind.is_a(t))) {
                found.push(cur.clone());
            }
            if depth > 0 && !recursive {
                continue;
            }
            for prop in [
                "childEntity",
                "vmFolder",
                "hostFolder",
                "datastoreFolder",
                "networkFolder",
                "host",
                "resourcePool",
                "vm",
            ] {
                if o.kind == Kind::HostSystem && prop == "vm" {
                    continue;
                }
                for child in o.refs(prop).iter().rev() {
                    stack.push((child.clone(), depth + 1));
                }
            }
        }
        found.sort();
        found.dedup();
        let id = format!("session[{}]", new_uuid());
        let mut view = Obj::new(id.clone(), Kind::ContainerView, "", None);
        view.refs.insert("view", found);
        view.refs.insert("container", vec![container.to_string()]);
        self.insert(view);
        Some(id)
    }

    pub fn add_category(
        &mut self,
        name: &str,
        cardinality: &str,
        types: Vec<String>,
    ) -> Result<String, AdminError> {
        if self.categories.iter().any(|c| c.name == name) {
            return Err(AdminError::Conflict(format!("category {name:?}")));
        }
        let id = format!("urn:vmomi:InventoryServiceCategory:{}:GLOBAL", new_uuid());
        self.categories.push(Category {
            id: id.clone(),
            name: name.to_string(),
            description: String::new(),
            cardinality: cardinality.to_string(),
            associable_types: types,
        });
        Ok(id)
    }

    pub fn add_tag(&mut self, category_id: &str, name: &str) -> Result<String, AdminError> {
        if !self.categories.iter().any(|c| c.id == category_id) {
            return Err(AdminError::NotFound(category_id.to_string()));
        }
        if self
            .tags
            .iter()
            .any(|t| t.category_id == category_id && t.name == name)
        {
            return Err(AdminError::Conflict(format!("tag {name:?}")));
        }
        let id = format!("urn:vmomi:InventoryServiceTag:{}:GLOBAL", new_uuid());
        self.tags.push(Tag {
            id: id.clone(),
            category_id: category_id.to_string(),
            name: name.to_string(),
            description: String::new(),
        });
        Ok(id)
    }

    pub fn attach(&mut self, tag_id: &str, object: &str) -> Result<(), AdminError> {
        if !self.tags.iter().any(|t| t.id == tag_id) {
            return Err(AdminError::NotFound(tag_id.to_string()));
        }
        let kind = self
            .objects
            .get(object)
            .map(|o| o.kind.type_name().to_string())
            .ok_or_else(|| AdminError::NotFound(object.to_string()))?;
        let entry = (tag_id.to_string(), kind, object.to_string());
        if !self.attachments.contains(&entry) {
            self.attachments.push(entry);
        }
        Ok(())
    }

    /// Tag ids attached to an object.
    pub fn attached(&self, object: &str) -> Vec<String> {
        self.attachments
            .iter()
            .filter(|(_, _, o)| o == object)
            .map(|(t, _, _)| t.clone())
            .collect()
    }
}

fn vm_restarting(l: &Lifecycle) -> bool {
    l.clone().peek() == Phase::Pending
}

fn validate_ips<'a>(ips: impl Iterator<Item = &'a String>) -> Result<(), AdminError> {
    for ip in ips {
        if ip.parse::<std::net::IpAddr>().is_err() {
            return Err(AdminError::Invalid {
                field: "ips",
                reason: format!("{ip:?} is not an IP address"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inventory_links_and_vm_lifecycle() {
        let mut inv = Inventory::new(&["DC0".into(), "DC1".into()], 2);
        assert_eq!(inv.datacenters.len(), 2);
        let dc = inv.datacenters[0].clone();
        let id = inv
            .create_vm(VmSpec {
                name: "node-0".into(),
                ips: vec!["127.0.0.5".into()],
                host_name: Some("node-0".into()),
                ..Default::default()
            })
            .expect("create");
        assert_eq!(inv.datacenter_of(&id), Some(dc.id.as_str()));
        assert!(
            inv.get(&dc.vm_folder)
                .is_some_and(|f| f.refs("childEntity").contains(&id))
        );
        let info = inv.vm_info(&id).expect("info");
        assert_eq!(info.ip_address.as_deref(), Some("127.0.0.5"));
        assert_eq!(info.datacenter, "DC0");
        inv.update_vm(
            &id,
            VmPatch {
                host_name: Some(None),
                ips: Some(vec![]),
                ..Default::default()
            },
        )
        .expect("patch");
        let info = inv.vm_info(&id).expect("info");
        assert_eq!((info.host_name, info.ip_address), (None, None));
        assert!(matches!(
            inv.update_vm(
                &id,
                VmPatch {
                    ips: Some(vec!["x".into()]),
                    ..Default::default()
                }
            ),
            Err(AdminError::Invalid { .. })
        ));
        inv.delete_vm(&id).expect("delete");
        assert!(
            inv.get(&dc.vm_folder)
                .is_some_and(|f| f.refs("childEntity").is_empty())
        );
        assert_eq!(inv.delete_vm(&id), Err(AdminError::NotFound(id)));
    }

    #[test]
    fn bad_specs_are_refused() {
        let mut inv = Inventory::new(&["DC0".into()], 1);
        let bad = [
            VmSpec {
                name: " ".into(),
                ..Default::default()
            },
            VmSpec {
                name: "a".into(),
                uuid: Some("nope".into()),
                ..Default::default()
            },
            VmSpec {
                name: "a".into(),
                datacenter: Some("DCX".into()),
                ..Default::default()
            },
            VmSpec {
                name: "a".into(),
                host: Some("nohost".into()),
                ..Default::default()
            },
        ];
        for spec in bad {
            assert!(inv.create_vm(spec).is_err());
        }
        assert_eq!(inv.vms().count(), 0);
    }

    #[test]
    fn subtypes() {
        assert!(Kind::ClusterComputeResource.is_a("ComputeResource"));
        assert!(Kind::VirtualMachine.is_a("ManagedEntity"));
        assert!(!Kind::ContainerView.is_a("ManagedEntity"));
        assert!(!Kind::HostSystem.is_a("VirtualMachine"));
    }
}
