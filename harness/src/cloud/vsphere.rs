//! The mock vCenter (`mock-vsphere`) behind [`super::CloudControl`]: the harness's nodes
//! are VMs whose BIOS UUID is the Node's SystemUUID, whose `guest.hostName` is the node's
//! name and whose guest IPs are the node's addresses, so the vSphere CCM finds and
//! describes them as it would in a real vCenter.
//!
//! Why a module of its own: vSphere differs from the other clouds in ways the case
//! vocabulary (internal/external IPs, zones by name, per-instance faults) has to be
//! translated into, and that translation lives here:
//! - vSphere has no internal/external split of its own: cloud-provider-vsphere picks, per
//!   IP family, one guest IP as InternalIP and one as ExternalIP by the `nodes` subnets of
//!   vsphere.conf (pkg/cloudprovider/vsphere/nodemanager.go `discoverIPs`), else the
//!   family's first IP as both. The harness's vsphere.conf sets [`INTERNAL_SUBNETS`] and
//!   [`EXTERNAL_SUBNETS`]; a case's internal and external IPs become the VM's guest IPs
//!   (internal first; an instance gets one IP of each kind unless the case says otherwise),
//!   and the [`Instance`] lists what that selection makes of them ([`split_addresses`]).
//! - Zones and regions are tags (`labels.zone` / `labels.region` categories in
//!   vsphere.conf): the region tag is on the datacenter, a zone tag on the host the VM
//!   runs on. Each zone a case names gets a host of its own; one host carries no zone tag
//!   (for an instance without a zone).
//! - An instance's id is its BIOS UUID (the providerID is `vsphere://<uuid>`).
//! - A VM "without any address" is one whose VMware Tools report nothing: no guest IP and
//!   no guest hostName.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};

use futures::future::BoxFuture;
use mock_cloud::{Journal, JournalEntry};
use mock_vsphere::{AdminError, PowerState, VmInfo, VmPatch, VmSpec, VsphereMock};

use super::descriptor::{CloudDescriptor, MockEntry, MockTls, UpstreamEntry};
use super::standalone;
use super::{
    Backend, FaultControl, FaultSpec, Feature, Instance, InstanceControl, InstancePatch,
    InstanceSpec, JournalControl, Offers, RefsReader,
};
use crate::error::CaseError;
use ccm_upstream::{Siblings, Upstream};

/// vSphere in the registry of clouds.
pub(crate) static CLOUD: CloudDescriptor = CloudDescriptor {
    name: "vsphere",
    aliases: &[],
    cloud_provider: "vsphere",
    // Always HTTPS (pyvmomi and govc expect it); the ready file names the generated CA in
    // `ca_file`. Nodes are VMs the cases create: the mock seeds none.
    mock: Some(MockEntry {
        start: start_backend,
        serve: standalone::serve::<VsphereMock>,
        tls: MockTls::Always,
        imds: false,
    }),
    // v1.36.0: on 2026-11-26 the proxy refused to list the versions, and by exact version
    // refused v1.35.0–v1.37.1 (v1.35.1's go.mod failed checksum verification).
    upstream: Some(UpstreamEntry {
        ccm: Upstream {
            name: "vsphere",
            module: "k8s.io/cloud-provider-vsphere",
            package: "cmd/vsphere-cloud-controller-manager",
            binary: "vsphere-cloud-controller-manager",
            default_version: "v1.36.0",
            siblings: Siblings::Refuse,
            version_packages: &[],
            main: None,
        },
        node_manager: None,
    }),
};

fn start_backend(
    _nodes: usize,
    block: u8,
) -> BoxFuture<'static, Result<Box<dyn Backend>, CaseError>> {
    Box::pin(async move { Ok(Box::new(VsphereCloud::start(block).await?) as Box<dyn Backend>) })
}

/// Tag category for zones, as `labels.zone` in the harness's vsphere.conf.
pub const ZONE_CATEGORY: &str = "k8s-zone";
/// Tag category for regions, as `labels.region` in the harness's vsphere.conf.
pub const REGION_CATEGORY: &str = "k8s-region";
/// `nodes.internalNetworkSubnetCidr` of the harness's vsphere.conf: the guest IPs the
/// harness hands out as internal (`198.18.<block>.<n>`) and the IPv6 ones cases use.
///
/// Not 127/8 as on the other clouds: upstream's vSphere CCM drops loopback, link-local
/// and unspecified guest IPs (cloud-provider-vsphere `nodemanager.go`
/// `excludeLocalhostIPs`, `util.go` `ErrOnLocalOnlyIPAddr`), and vSphere has no load
/// balancers whose data plane would need the addresses bound on this machine. The
/// benchmarking range (RFC 2544, 198.18.0.0/15) is never routed and nothing here sends
/// traffic to it.
pub const INTERNAL_SUBNETS: &[&str] = &["198.18.0.0/16", "fd00::/8"];
/// `nodes.externalNetworkSubnetCidr`: the external IPs the harness hands out
/// (`198.19.<block>.<n>`).
pub const EXTERNAL_SUBNETS: &[&str] = &["198.19.0.0/16"];
/// The environment variable that lets upstream's vSphere CCM take more than one `ipFamily`
/// (cloud-provider-vsphere pkg/cloudprovider/vsphere/cloud.go `dualStackFeatureGateEnv`).
pub const DUAL_STACK_ENV: &str = "ENABLE_ALPHA_DUAL_STACK";
/// The region tag on the (one) datacenter.
pub const REGION: &str = "region-a";
/// The zone of an instance whose case names none.
pub const DEFAULT_ZONE: &str = "zone-a";
const DATACENTER: &str = "DC0";
/// Host 0 is in [`DEFAULT_ZONE`], host 1 in no zone, the others get the zones cases name.
const HOSTS: usize = 8;
/// `guestId` the mock reports for every VM; the CCM's instance type ends with it.
/// The OS name in the instance type of every mock VM: mock-vSphere reports the guest ID
/// `otherLinux64Guest`, which upstream's `GuestOSLookup` names `linux`.
const GUEST_OS_NAME: &str = "linux";
const MEMORY_MB: u64 = 4096;

/// The mock vCenter with what the harness keeps beside it.
pub(crate) struct VsphereCloud {
    mock: VsphereMock,
    address_block: u8,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Next host octet of `198.18.<block>.<n>` (internal) to hand out.
    next_ip: u16,
    /// Next host octet of `198.19.<block>.<n>` (external) to hand out.
    next_external_ip: u16,
    /// By BIOS UUID: how the case named the VM's addresses and its CPU count.
    vms: BTreeMap<String, Tracked>,
    /// Zone name ("" = none) -> host MoRef id.
    zone_hosts: BTreeMap<String, String>,
    /// Hosts with no zone assigned yet.
    free_hosts: Vec<String>,
    zone_category: String,
    /// Case instance-type name -> CPU count that makes the CCM's type distinct.
    types: BTreeMap<String, u32>,
}

#[derive(Clone, Default)]
struct Tracked {
    internal: Vec<String>,
    external: Vec<String>,
    num_cpu: u32,
}

fn admin_err(what: &str) -> impl FnOnce(AdminError) -> CaseError + '_ {
    move |e| CaseError::infra(&format!("{what} in mock vSphere"), e)
}

impl VsphereCloud {
    /// Starts the mock with one datacenter of [`HOSTS`] hosts, no VMs, the region tag on
    /// the datacenter and [`DEFAULT_ZONE`] on the first host.
    pub(crate) async fn start(address_block: u8) -> Result<Self, CaseError> {
        let config = mock_vsphere::Config {
            datacenters: vec![DATACENTER.into()],
            hosts: HOSTS,
            nodes: 0,
            address_block,
            zones: None,
            ..Default::default()
        };
        let mock = VsphereMock::start(config)
            .await
            .map_err(|e| CaseError::infra("starting mock vSphere", e))?;
        let admin = mock.admin();
        let (dc, hosts) = admin
            .datacenters()
            .into_iter()
            .next()
            .ok_or_else(|| CaseError::failed("the mock vSphere has no datacenter"))?;
        let region_cat = admin
            .create_category(REGION_CATEGORY, "SINGLE", vec!["Datacenter".into()])
            .map_err(admin_err("creating the region category"))?;
        let zone_cat = admin
            .create_category(
                ZONE_CATEGORY,
                "SINGLE",
                vec!["HostSystem".into(), "ClusterComputeResource".into()],
            )
            .map_err(admin_err("creating the zone category"))?;
        let region = admin
            .create_tag(&region_cat, REGION)
            .map_err(admin_err("creating the region tag"))?;
        admin
            .attach_tag(&region, &dc)
            .map_err(admin_err("tagging the datacenter"))?;
        let mut state = State {
            next_ip: 10,
            next_external_ip: 10,
            zone_category: zone_cat,
            free_hosts: hosts,
            ..Default::default()
        };
        state.free_hosts.reverse();
        let cloud = Self {
            mock,
            address_block,
            state: Mutex::new(state),
        };
        {
            let mut st = cloud.state();
            cloud.host_for(&mut st, DEFAULT_ZONE)?;
            cloud.host_for(&mut st, "")?;
        }
        Ok(cloud)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The host for a zone ("" = a host without zone tag), tagging a free host on first use.
    fn host_for(&self, st: &mut State, zone: &str) -> Result<String, CaseError> {
        if let Some(h) = st.zone_hosts.get(zone) {
            return Ok(h.clone());
        }
        let host = st.free_hosts.pop().ok_or_else(|| {
            CaseError::failed(format!(
                "the mock vSphere has {HOSTS} hosts, too few for zone {zone:?}"
            ))
        })?;
        if !zone.is_empty() {
            let admin = self.mock.admin();
            let tag = admin
                .create_tag(&st.zone_category, zone)
                .map_err(admin_err("creating a zone tag"))?;
            admin
                .attach_tag(&tag, &host)
                .map_err(admin_err("tagging a host with its zone"))?;
        }
        st.zone_hosts.insert(zone.to_string(), host.clone());
        Ok(host)
    }

    /// The zone of a host ("" when untagged).
    fn zone_of(&self, host: &str) -> String {
        self.state()
            .zone_hosts
            .iter()
            .find(|(_, h)| h.as_str() == host)
            .map(|(z, _)| z.clone())
            .unwrap_or_default()
    }

    fn allocate_ips(&self, n: usize) -> Vec<String> {
        let mut st = self.state();
        (0..n)
            .map(|_| {
                let i = st.next_ip;
                st.next_ip += 1;
                format!("198.18.{}.{}", self.address_block, 10 + (i - 10) % 240)
            })
            .collect()
    }

    fn allocate_external_ips(&self, n: usize) -> Vec<String> {
        let mut st = self.state();
        (0..n)
            .map(|_| {
                let i = st.next_external_ip;
                st.next_external_ip += 1;
                format!("198.19.{}.{}", self.address_block, 10 + (i - 10) % 240)
            })
            .collect()
    }

    /// Fresh guest IPs (never handed out before).
    fn spare_internal_ips(&self, n: usize) -> Vec<String> {
        self.allocate_ips(n)
    }

    /// Fresh external guest IPs (never handed out before).
    fn spare_external_ips(&self, n: usize) -> Vec<String> {
        self.allocate_external_ips(n)
    }

    /// The harness's vsphere.conf in upstream's YAML format (cloud-provider-vsphere
    /// pkg/common/config/types_yaml.go): credentials, port and CA file in `global` (no
    /// `ipFamily`: upstream's default, IPv4 only; see [`Self::dual_stack_cloud_config`]),
    /// the mock as the one `vcenter` entry scoped to its datacenter, the tag categories, and
    /// the `nodes` subnets that tell internal from external guest IPs.
    fn cloud_config(&self) -> String {
        let r = self.mock.ready_info();
        self.config_yaml(&format!(
            "  user: \"{}\"\n  password: \"{}\"\n",
            r.username, r.password
        ))
    }

    /// vsphere.conf for a dual-stack cluster: `ipFamily: [ipv4, ipv6]`, which upstream
    /// accepts only with the environment variable [`DUAL_STACK_ENV`] set (cloud.go
    /// `validateDualStack`) and which then needs an address of each family on every VM
    /// (nodemanager.go `DiscoverNode`), so the harness uses it only where a case asks.
    fn dual_stack_cloud_config(&self) -> String {
        self.cloud_config()
            .replacen("global:\n", "global:\n  ipFamily: [ipv4, ipv6]\n", 1)
    }

    /// vsphere.conf that names a Secret instead of holding credentials (`global.secretName`
    /// / `secretNamespace`), and that Secret's data: `<server>.username` and
    /// `<server>.password`, `<server>` being the vcenter's `server` (cloud-provider-vsphere
    /// pkg/common/credentialmanager/credentialmanager.go `parseSecret`).
    fn secret_cloud_config(
        &self,
        namespace: &str,
        name: &str,
    ) -> (String, BTreeMap<String, String>) {
        let r = self.mock.ready_info();
        let server = self.mock.local_addr().ip().to_string();
        let config = self.config_yaml(&format!(
            "  secretName: \"{name}\"\n  secretNamespace: \"{namespace}\"\n"
        ));
        let data = [
            (format!("{server}.username"), r.username),
            (format!("{server}.password"), r.password),
        ]
        .into();
        (config, data)
    }

    /// The config with `credentials` (YAML lines under `global`).
    fn config_yaml(&self, credentials: &str) -> String {
        let r = self.mock.ready_info();
        let addr = self.mock.local_addr();
        format!(
            "global:\n{credentials}  port: {port}\n  insecureFlag: false\n  caFile: \"{ca}\"\nvcenter:\n  mock:\n    server: \"{host}\"\n    datacenters:\n      - {DATACENTER}\nlabels:\n  zone: {ZONE_CATEGORY}\n  region: {REGION_CATEGORY}\nnodes:\n  internalNetworkSubnetCidr: \"{internal}\"\n  externalNetworkSubnetCidr: \"{external}\"\n",
            internal = INTERNAL_SUBNETS.join(","),
            external = EXTERNAL_SUBNETS.join(","),
            port = addr.port(),
            ca = r.ca_file.unwrap_or_default(),
            host = addr.ip(),
        )
    }

    fn create_instance(&self, spec: InstanceSpec) -> Result<Instance, CaseError> {
        let internal = match spec.internal_ips {
            Some(ips) => ips,
            None => self.allocate_ips(1),
        };
        // One external IP by default, as an OpenStack server's floating IP or an EC2
        // instance's public IP: the `nodes` subnets make it the ExternalIP.
        let external = match spec.external_ips {
            Some(ips) => ips,
            None => self.allocate_external_ips(1),
        };
        let zone = spec.zone.unwrap_or_else(|| DEFAULT_ZONE.to_string());
        let (host, num_cpu) = {
            let mut st = self.state();
            let host = self.host_for(&mut st, &zone)?;
            let num_cpu = match spec.instance_type {
                None => 2,
                Some(t) => {
                    let next = 4 + 2 * st.types.len() as u32;
                    *st.types.entry(t).or_insert(next)
                }
            };
            (host, num_cpu)
        };
        let ips: Vec<String> = internal.iter().chain(&external).cloned().collect();
        let info = self
            .mock
            .admin()
            .create_vm(VmSpec {
                name: spec.name.clone(),
                // The mock draws a BIOS UUID, as vCenter does for a new VM.
                // VMware Tools report the guest's hostname; nodes are named after it.
                host_name: (!ips.is_empty()).then(|| spec.name.clone()),
                ips,
                host: Some(host),
                num_cpu: Some(num_cpu),
                memory_mb: Some(MEMORY_MB),
                ..Default::default()
            })
            .map_err(admin_err("creating a VM"))?;
        self.state().vms.insert(
            info.uuid.clone(),
            Tracked {
                internal,
                external,
                num_cpu,
            },
        );
        Ok(self.instance(info))
    }

    fn update_instance(&self, id: &str, patch: InstancePatch) -> Result<Instance, CaseError> {
        if patch.zone.is_some() {
            return Err(CaseError::failed(
                "a VM changes zone only by migrating to a host of another zone, which the harness does not do on vSphere",
            ));
        }
        let vm = self.vm(id)?;
        let mut vm_patch = VmPatch {
            power_state: patch.running.map(|r| {
                if r {
                    PowerState::PoweredOn
                } else {
                    PowerState::PoweredOff
                }
            }),
            ..Default::default()
        };
        if patch.internal_ips.is_some() || patch.external_ips.is_some() {
            let mut st = self.state();
            let tracked = st.vms.entry(vm.uuid.clone()).or_default();
            if let Some(i) = patch.internal_ips {
                tracked.internal = i;
            }
            if let Some(e) = patch.external_ips {
                tracked.external = e;
            }
            let ips: Vec<String> = tracked
                .internal
                .iter()
                .chain(&tracked.external)
                .cloned()
                .collect();
            // Tools that report no IP report no hostname either (see the module docs).
            vm_patch.host_name = Some((!ips.is_empty()).then(|| vm.name.clone()));
            vm_patch.ips = Some(ips);
        }
        let info = self
            .mock
            .admin()
            .update_vm(&vm.id, vm_patch)
            .map_err(admin_err("updating a VM"))?;
        Ok(self.instance(info))
    }

    fn delete_instance(&self, id: &str) -> Result<(), CaseError> {
        let vm = self.vm(id)?;
        self.widen_faults_of(&vm.id);
        self.mock
            .admin()
            .delete_vm(&vm.id)
            .map_err(admin_err("deleting a VM"))?;
        self.state().vms.remove(&vm.uuid);
        Ok(())
    }

    /// Restarts the VM's guest and holds it down (see [`super::CloudControl::begin_reboot`]).
    fn begin_reboot(&self, id: &str) -> Result<(), CaseError> {
        let vm = self.vm(id)?;
        self.mock
            .admin()
            .reboot_vm(&vm.id, true)
            .map(|_| ())
            .map_err(admin_err("rebooting a VM"))
    }

    fn finish_reboot(&self, id: &str) -> Result<(), CaseError> {
        let vm = self.vm(id)?;
        self.mock
            .admin()
            .finish_reboot(&vm.id)
            .map(|_| ())
            .map_err(admin_err("finishing a VM reboot"))
    }

    fn rebooting(&self, id: &str) -> bool {
        self.vm(id).is_ok_and(|v| v.guest_restarting)
    }

    fn instance_by_name(&self, name: &str) -> Option<Instance> {
        self.mock.admin().vm_by_name(name).map(|v| self.instance(v))
    }

    fn instances(&self) -> Vec<Instance> {
        self.mock
            .admin()
            .vms()
            .into_iter()
            .map(|v| self.instance(v))
            .collect()
    }

    /// The VM with this BIOS UUID (an instance id), else this MoRef id.
    fn vm(&self, id: &str) -> Result<VmInfo, CaseError> {
        let admin = self.mock.admin();
        admin
            .vms()
            .into_iter()
            .find(|v| v.uuid.eq_ignore_ascii_case(id))
            .or_else(|| admin.vm(id))
            .ok_or_else(|| CaseError::failed(format!("no VM {id} in mock vSphere")))
    }

    fn instance(&self, v: VmInfo) -> Instance {
        let num_cpu = self
            .state()
            .vms
            .get(&v.uuid)
            .map(|t| t.num_cpu)
            .unwrap_or(2);
        let ips: Vec<String> = v
            .nics
            .iter()
            .filter(|n| n.connected)
            .flat_map(|n| n.ip_addresses.iter().cloned())
            .collect();
        let (internal_ips, external_ips) = split_addresses(&ips);
        Instance {
            provider_id: format!("vsphere://{}", v.uuid),
            id: v.uuid.clone(),
            name: v.name,
            zone: self.zone_of(&v.host),
            region: REGION.to_string(),
            // cloud-provider-vsphere instances.go: vsphere-vm.cpu-N.mem-Ggb.os-<guest>.
            instance_type: format!(
                "vsphere-vm.cpu-{num_cpu}.mem-{}gb.os-{GUEST_OS_NAME}",
                MEMORY_MB / 1024
            ),
            internal_ips,
            external_ips,
            dns_addresses: Vec::new(),
            system_uuid: v.uuid,
        }
    }

    /// Instance lookups are SearchIndex finds. For one instance the rule is scoped to the
    /// VM the find hits (the mock's fault engine names a search's resource by what it
    /// finds); a 500 answers a vim25 `SystemError` fault.
    fn inject(&self, fault: FaultSpec) -> u64 {
        let (path, resource, status, count) = match fault {
            FaultSpec::InstanceLookup {
                instance_id,
                status,
                count,
            } => {
                let resource = instance_id.and_then(|id| self.vm(&id).ok()).map(|v| v.id);
                (lookup_path(), resource, status, count)
            }
            // No routes and no load balancers on vSphere: the rule matches nothing the
            // CCM calls (cases needing them skip through `require`).
            FaultSpec::RouteWrite { status, count } => {
                ("^/sdk/NoRoutes$".to_string(), None, status, count)
            }
            FaultSpec::LoadBalancerWrite { status, count, .. } => {
                ("^/sdk/NoLoadBalancers$".to_string(), None, status, count)
            }
        };
        let rule = mock_cloud::Fault::error(status)
            .service("vim")
            .path(path)
            .count(count);
        let rule = rule.message("injected by ccm-conformance");
        self.mock.admin().faults().add(match resource {
            Some(resource) => rule.resource(resource),
            None => rule,
        })
    }

    /// A deleted VM is found by no search, so a lookup fault scoped to it would never
    /// fire again; it becomes a fault of every lookup (with what is left of its count),
    /// which is what "lookups of the deleted instance fail" means for a CCM that searches
    /// by UUID.
    fn widen_faults_of(&self, moref: &str) {
        let faults = self.mock.admin().faults();
        for f in faults.list() {
            if f.rule.when().resource.as_deref() == Some(moref) {
                let _ = faults.remove(f.id);
                let mut rule = f.rule.clone();
                rule.when_mut().resource = None;
                let _ = faults.try_add(rule);
            }
        }
    }

    /// What the CCM left open: container views and property filters. VMs, tags and
    /// categories are the harness's own.
    fn leaks(&self) -> Vec<String> {
        self.mock
            .admin()
            .leaks()
            .into_iter()
            .filter(|l| l.starts_with("container-view ") || l.starts_with("property-filter "))
            .collect()
    }
}

impl Backend for VsphereCloud {
    fn supports(&self, feature: Feature) -> Result<(), String> {
        match feature {
            // kubernetes/cloud-provider-vsphere pkg/cloudprovider/vsphere/cloud.go: without
            // NSX-T (not modelled here) LoadBalancer() and Routes() return false.
            Feature::LoadBalancers
            | Feature::UdpLoadBalancers
            | Feature::LocalTrafficHealthChecks
            | Feature::ImplementedElsewhere
            | Feature::UpdateFailsForMissingLoadBalancer
            | Feature::LoadBalancersSurviveClusterRename => Err(
                "the vSphere cloud provider implements no load balancer (cloud-provider-vsphere returns false from LoadBalancer())".into(),
            ),
            Feature::Routes | Feature::DualStackRoutes => Err(
                "the vSphere cloud provider implements no routes (cloud-provider-vsphere returns false from Routes())".into(),
            ),
            // A host without zone tag; a VM whose Tools report nothing; guest IPv6
            // addresses; an external IP apart from the internal ones (the harness's
            // vsphere.conf sets `nodes` internal/external subnets,
            // pkg/cloudprovider/vsphere/nodemanager.go).
            Feature::NoZone
            | Feature::NoAddresses
            | Feature::DualStackAddresses
            | Feature::SeparateExternalAddresses => Ok(()),
            // A new VM has a new BIOS UUID, and the providerID is made of it.
            Feature::ReplacementGetsNewProviderId => Ok(()),
            // The VM's power state (pkg/cloudprovider/vsphere/instances.go
            // InstanceShutdownByProviderID).
            Feature::ShutdownDetection => Ok(()),
        }
    }

    fn ready_info(&self) -> serde_json::Value {
        serde_json::to_value(self.mock.ready_info()).unwrap_or_default()
    }

    fn cloud_config(&self) -> String {
        VsphereCloud::cloud_config(self)
    }

    /// vSphere reports one IP family unless told both (`ipFamily`, behind
    /// ENABLE_ALPHA_DUAL_STACK).
    fn dual_stack_deployment(&self) -> Option<(String, Vec<(String, String)>)> {
        Some((
            self.dual_stack_cloud_config(),
            vec![(DUAL_STACK_ENV.to_owned(), "true".to_owned())],
        ))
    }

    fn secret_credentials_config(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(String, BTreeMap<String, String>), String> {
        Ok(self.secret_cloud_config(namespace, name))
    }

    fn region(&self) -> String {
        REGION.to_string()
    }

    /// cloud-provider-vsphere returns its `--node-labels` as AdditionalLabels
    /// (pkg/cloudprovider/vsphere/options/flags.go, instances_v2.go).
    fn additional_labels_flag(&self, labels: &[String]) -> Option<String> {
        Some(format!("--node-labels={}", labels.join(",")))
    }

    fn leaks(&self) -> Vec<String> {
        VsphereCloud::leaks(self)
    }

    fn shutdown(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(self.mock.shutdown())
    }

    // No load balancers or routes: cloud-provider-vsphere has neither.
    fn offers(&self) -> Offers<'_> {
        Offers {
            instances: Some(self),
            faults: Some(self),
            journal: Some(self),
            ..Offers::default()
        }
    }
}

impl InstanceControl for VsphereCloud {
    fn spare_internal_ips(&self, n: usize) -> Result<Vec<String>, CaseError> {
        Ok(VsphereCloud::spare_internal_ips(self, n))
    }

    fn spare_external_ips(&self, n: usize) -> Vec<String> {
        VsphereCloud::spare_external_ips(self, n)
    }

    /// The BIOS UUID in upper case: cloud-provider-vsphere compares UUIDs without case, and
    /// `vsphere://<region>/...` is not a vSphere providerID.
    fn alternate_provider_id(&self, instance: &Instance) -> Option<String> {
        Some(format!(
            "vsphere://{}",
            instance.system_uuid.to_ascii_uppercase()
        ))
    }

    fn create_instance(&self, spec: InstanceSpec) -> Result<Instance, CaseError> {
        VsphereCloud::create_instance(self, spec)
    }

    fn update_instance(&self, id: &str, patch: InstancePatch) -> Result<Instance, CaseError> {
        VsphereCloud::update_instance(self, id, patch)
    }

    fn delete_instance(&self, id: &str) -> Result<(), CaseError> {
        VsphereCloud::delete_instance(self, id)
    }

    /// `RebootGuest`: VMware Tools down so `guest.net` is empty while the VM stays
    /// `poweredOn` (what cloud-provider-vsphere#479 was about).
    fn begin_reboot(&self, id: &str) -> Result<(), CaseError> {
        VsphereCloud::begin_reboot(self, id)
    }

    fn finish_reboot(&self, id: &str) -> Result<(), CaseError> {
        VsphereCloud::finish_reboot(self, id)
    }

    fn rebooting(&self, id: &str) -> bool {
        VsphereCloud::rebooting(self, id)
    }

    fn instance_by_name(&self, name: &str) -> Option<Instance> {
        VsphereCloud::instance_by_name(self, name)
    }

    fn instances(&self) -> Vec<Instance> {
        VsphereCloud::instances(self)
    }
}

impl FaultControl for VsphereCloud {
    fn inject(&self, fault: FaultSpec) -> u64 {
        VsphereCloud::inject(self, fault)
    }

    fn faults(&self) -> mock_cloud::Faults {
        self.mock.admin().faults()
    }
}

impl JournalControl for VsphereCloud {
    // vSphere has no load balancers for a call to name.
    fn refs_reader(&self) -> RefsReader {
        |_| Vec::new()
    }

    fn journal(&self) -> Journal {
        self.mock.admin().journal()
    }

    fn journal_line(&self, e: &JournalEntry) -> String {
        format!(
            "{} {} {} {} -> {}",
            e.seq, e.service, e.method, e.path, e.status
        )
    }
}

/// The InternalIPs and ExternalIPs cloud-provider-vsphere reports for these guest IPs with
/// the harness's `nodes` subnets (pkg/cloudprovider/vsphere/nodemanager.go `discoverIPs`,
/// per family IPv4 then IPv6): the first IP in [`INTERNAL_SUBNETS`] is the InternalIP, the
/// first in [`EXTERNAL_SUBNETS`] the ExternalIP, and when a family has neither its first IP
/// is both.
pub fn split_addresses(ips: &[String]) -> (Vec<String>, Vec<String>) {
    let parsed: Vec<IpAddr> = ips.iter().filter_map(|ip| ip.parse().ok()).collect();
    let (mut internal, mut external) = (Vec::new(), Vec::new());
    for v6 in [false, true] {
        let family: Vec<IpAddr> = parsed
            .iter()
            .copied()
            .filter(|ip| ip.is_ipv6() == v6)
            .collect();
        let first_in = |subnets: &[&str]| {
            subnets
                .iter()
                .find_map(|net| family.iter().find(|ip| in_subnet(**ip, net)))
                .copied()
        };
        match (first_in(INTERNAL_SUBNETS), first_in(EXTERNAL_SUBNETS)) {
            (None, None) => {
                if let Some(ip) = family.first() {
                    internal.push(ip.to_string());
                    external.push(ip.to_string());
                }
            }
            (i, e) => {
                internal.extend(i.map(|ip| ip.to_string()));
                external.extend(e.map(|ip| ip.to_string()));
            }
        }
    }
    (internal, external)
}

/// Whether `ip` is inside `net` (`addr/len`, same family); false for a malformed `net`.
fn in_subnet(ip: IpAddr, net: &str) -> bool {
    let Some((addr, len)) = net.split_once('/') else {
        return false;
    };
    let (Ok(addr), Ok(len)) = (addr.parse::<IpAddr>(), len.parse::<u32>()) else {
        return false;
    };
    match (ip, addr) {
        (IpAddr::V4(ip), IpAddr::V4(net)) if len <= 32 => {
            let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
            u32::from(ip) & mask == u32::from(net) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(net)) if len <= 128 => {
            let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
            u128::from(ip) & mask == u128::from(net) & mask
        }
        _ => false,
    }
}

/// The fault-rule path of every SearchIndex lookup.
fn lookup_path() -> String {
    format!("^/sdk/({})$", mock_vsphere::LOOKUPS.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn cloud() -> VsphereCloud {
        crate::install_crypto_provider();
        VsphereCloud::start(200).await.expect("mock vSphere")
    }

    #[tokio::test]
    async fn instances_are_vms_with_uuid_zone_and_guest_ips() {
        let c = cloud().await;
        let a = c.create_instance(InstanceSpec::named("node-a")).unwrap();
        assert_eq!(a.provider_id, format!("vsphere://{}", a.id));
        assert_eq!(a.system_uuid, a.id);
        assert_eq!((a.zone.as_str(), a.region.as_str()), (DEFAULT_ZONE, REGION));
        assert_eq!(a.internal_ips, vec!["198.18.200.10".to_string()]);
        assert_eq!(a.external_ips, vec!["198.19.200.10".to_string()]);
        let vm = c.mock.admin().vm_by_name("node-a").unwrap();
        let guest: Vec<String> = vm
            .nics
            .iter()
            .flat_map(|n| n.ip_addresses.clone())
            .collect();
        assert_eq!(guest, vec!["198.18.200.10", "198.19.200.10"]);
        assert_eq!(a.instance_type, "vsphere-vm.cpu-2.mem-4gb.os-linux");
        let b = c
            .create_instance(InstanceSpec {
                name: "node-b".into(),
                zone: Some("az-2".into()),
                instance_type: Some("m1.medium".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(b.zone, "az-2");
        assert_ne!(b.instance_type, a.instance_type);
        let none = c
            .create_instance(InstanceSpec {
                name: "node-c".into(),
                zone: Some(String::new()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(none.zone, "");
        let vm = c.mock.admin().vm_by_name("node-b").unwrap();
        assert_eq!(vm.uuid, b.id);
        assert_eq!(vm.host_name.as_deref(), Some("node-b"));
    }

    #[tokio::test]
    async fn address_patches_keep_the_other_kind_and_no_address_clears_the_hostname() {
        let c = cloud().await;
        let a = c.create_instance(InstanceSpec::named("node-a")).unwrap();
        let changed = c
            .update_instance(
                &a.id,
                InstancePatch {
                    external_ips: Some(vec!["198.19.9.9".into()]),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(changed.internal_ips, a.internal_ips);
        assert_eq!(changed.external_ips, vec!["198.19.9.9".to_string()]);
        c.update_instance(
            &a.id,
            InstancePatch {
                internal_ips: Some(vec![]),
                external_ips: Some(vec![]),
                running: Some(false),
                ..Default::default()
            },
        )
        .unwrap();
        let vm = c.mock.admin().vm_by_name("node-a").unwrap();
        assert_eq!(vm.host_name, None);
        assert_eq!(vm.power_state, PowerState::PoweredOff);
        assert!(
            c.update_instance(
                &a.id,
                InstancePatch {
                    zone: Some("az-9".into()),
                    ..Default::default()
                }
            )
            .is_err()
        );
    }

    #[tokio::test]
    async fn a_lookup_fault_of_a_deleted_vm_widens_to_every_lookup() {
        let c = cloud().await;
        let a = c.create_instance(InstanceSpec::named("node-a")).unwrap();
        let moref = c.mock.admin().vm_by_name("node-a").unwrap().id;
        c.inject(FaultSpec::InstanceLookup {
            instance_id: Some(a.id.clone()),
            status: 500,
            count: Some(4),
        });
        let rules = c.mock.admin().faults().list();
        assert_eq!(rules.len(), 1);
        assert_eq!(
            rules[0].rule.when().resource.as_deref(),
            Some(moref.as_str())
        );
        c.delete_instance(&a.id).unwrap();
        let rules = c.mock.admin().faults().list();
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].rule.when().resource, None);
        assert_eq!(rules[0].rule.when().count, Some(4));
        assert!(c.instances().is_empty());
        assert!(c.leaks().is_empty(), "{:?}", c.leaks());
    }

    #[tokio::test]
    async fn cloud_config_is_upstream_yaml_pointing_at_the_mock() {
        let c = cloud().await;
        let conf = c.cloud_config();
        let r = c.mock.ready_info();
        assert!(conf.contains(&format!("port: {}", c.mock.local_addr().port())));
        assert!(conf.contains(&format!("caFile: \"{}\"", r.ca_file.unwrap())));
        assert!(conf.contains("zone: k8s-zone") && conf.contains("region: k8s-region"));
        assert!(conf.contains("- DC0"));
        assert!(conf.contains("internalNetworkSubnetCidr: \"198.18.0.0/16,fd00::/8\""));
        assert!(conf.contains("externalNetworkSubnetCidr: \"198.19.0.0/16\""));
        assert!(conf.contains(&format!("user: \"{}\"", r.username)));
        assert!(!conf.contains("ipFamily"));
        let dual = c.dual_stack_cloud_config();
        assert!(dual.starts_with("global:\n  ipFamily: [ipv4, ipv6]\n"));
        let (with_secret, data) = c.secret_cloud_config("kube-system", "vsphere-creds");
        assert!(with_secret.contains("secretName: \"vsphere-creds\""));
        assert!(with_secret.contains("secretNamespace: \"kube-system\""));
        assert!(!with_secret.contains("user:") && !with_secret.contains("password:"));
        let server = c.mock.local_addr().ip();
        assert_eq!(data.get(&format!("{server}.username")), Some(&r.username));
        assert_eq!(data.get(&format!("{server}.password")), Some(&r.password));
    }

    #[test]
    fn split_addresses_follows_the_nodes_subnets() {
        let s = |l: &[&str]| l.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        // One of each kind, IPv6 internal only; a second internal IPv4 is not reported.
        assert_eq!(
            split_addresses(&s(&[
                "198.18.1.10",
                "198.18.1.11",
                "198.19.9.9",
                "fd00::9:1"
            ])),
            (s(&["198.18.1.10", "fd00::9:1"]), s(&["198.19.9.9"]))
        );
        // No external IP: no ExternalIP.
        assert_eq!(
            split_addresses(&s(&["198.18.1.10"])),
            (s(&["198.18.1.10"]), s(&[]))
        );
        // Outside every subnet: the family's first IP is both.
        assert_eq!(
            split_addresses(&s(&["10.0.0.1", "10.0.0.2"])),
            (s(&["10.0.0.1"]), s(&["10.0.0.1"]))
        );
        assert_eq!(split_addresses(&[]), (vec![], vec![]));
        assert!(in_subnet("fd00::9:1".parse().unwrap(), "fd00::/8"));
        assert!(!in_subnet("198.19.0.1".parse().unwrap(), "198.18.0.0/16"));
        assert!(!in_subnet("198.18.0.1".parse().unwrap(), "fd00::/8"));
    }

    #[test]
    fn lookup_path_names_every_search() {
        let re = regex::Regex::new(&lookup_path()).unwrap();
        assert!(re.is_match("/sdk/FindByUuid"));
        assert!(re.is_match("/sdk/FindAllByDnsName"));
        assert!(!re.is_match("/sdk/RetrievePropertiesEx"));
    }
}
