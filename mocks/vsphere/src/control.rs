//! The control side of a running mock ([`Admin`]): VMs and their guest restarts, tag
//! categories, tags and attachments, power-task lifecycle modes, sessions, leaks and
//! reset. The HTTP admin API (`admin_api`) is a thin layer over it.

use std::sync::Arc;

use mock_cloud::lifecycle::Policies;
use mock_cloud::{Faults, Journal};

use crate::state::{self, AdminError, Category, REBOOT_SECONDS, Tag, VmInfo, VmPatch, VmSpec};
use crate::{LIFECYCLE_TYPES, Shared};

/// The control side of a running mock: same operations as the HTTP admin API.
#[derive(Clone)]
pub struct Admin {
    pub(crate) shared: Arc<Shared>,
}

impl Admin {
    /// All VMs, by MoRef id.
    pub fn vms(&self) -> Vec<VmInfo> {
        let inv = self.shared.inventory();
        let mut ids: Vec<&String> = inv.vms().map(|(o, _)| &o.id).collect();
        ids.sort_by_key(|id| {
            id.trim_start_matches("vm-")
                .parse::<u64>()
                .unwrap_or(u64::MAX)
        });
        ids.into_iter().filter_map(|id| inv.vm_info(id)).collect()
    }

    pub fn vm(&self, id: &str) -> Option<VmInfo> {
        self.shared.inventory().vm_info(id)
    }

    /// The oldest VM with this inventory name.
    pub fn vm_by_name(&self, name: &str) -> Option<VmInfo> {
        self.vms().into_iter().find(|v| v.name == name)
    }

    pub fn create_vm(&self, spec: VmSpec) -> Result<VmInfo, AdminError> {
        let mut inv = self.shared.inventory();
        let id = inv.create_vm(spec)?;
        // For `not_found_after_create` rules: reads of this VM may miss for a while.
        self.shared.faults.note_created(&id);
        inv.vm_info(&id).ok_or(AdminError::NotFound(id))
    }

    pub fn update_vm(&self, id: &str, patch: VmPatch) -> Result<VmInfo, AdminError> {
        let mut inv = self.shared.inventory();
        inv.update_vm(id, patch)?;
        inv.vm_info(id)
            .ok_or_else(|| AdminError::NotFound(id.to_string()))
    }

    /// Restarts a powered-on VM's guest as `RebootGuest` does (VMware Tools down,
    /// `guest.net` empty, power state unchanged); `hold` keeps it restarting until
    /// [`Self::finish_reboot`], else it ends after [`REBOOT_SECONDS`] as through the API.
    pub fn reboot_vm(&self, id: &str, hold: bool) -> Result<VmInfo, AdminError> {
        let mode = if hold {
            mock_cloud::Mode::Stuck
        } else {
            mock_cloud::Mode::Seconds { t: REBOOT_SECONDS }
        };
        let mut inv = self.shared.inventory();
        inv.restart_guest(id, mode)?;
        inv.vm_info(id)
            .ok_or_else(|| AdminError::NotFound(id.to_string()))
    }

    /// Ends a VM's guest restart now: Tools report its NICs again.
    pub fn finish_reboot(&self, id: &str) -> Result<VmInfo, AdminError> {
        let mut inv = self.shared.inventory();
        inv.set_restart_mode(id, mock_cloud::Mode::Immediate)?;
        inv.vm_info(id)
            .ok_or_else(|| AdminError::NotFound(id.to_string()))
    }

    /// Removes the VM: lookups then miss and reads get `ManagedObjectNotFound`.
    pub fn delete_vm(&self, id: &str) -> Result<(), AdminError> {
        self.shared.inventory().delete_vm(id)
    }

    /// Creates a tag category (`cardinality` `SINGLE` or `MULTIPLE`); returns its id.
    pub fn create_category(
        &self,
        name: &str,
        cardinality: &str,
        associable_types: Vec<String>,
    ) -> Result<String, AdminError> {
        if !matches!(cardinality, "SINGLE" | "MULTIPLE") {
            return Err(AdminError::Invalid {
                field: "cardinality",
                reason: format!("{cardinality:?} is not SINGLE or MULTIPLE"),
            });
        }
        self.shared
            .inventory()
            .add_category(name, cardinality, associable_types)
    }

    pub fn create_tag(&self, category_id: &str, name: &str) -> Result<String, AdminError> {
        self.shared.inventory().add_tag(category_id, name)
    }

    /// Attaches a tag to any inventory object by MoRef id (VM, host, cluster, datacenter).
    pub fn attach_tag(&self, tag_id: &str, object_id: &str) -> Result<(), AdminError> {
        self.shared.inventory().attach(tag_id, object_id)
    }

    pub fn categories(&self) -> Vec<Category> {
        self.shared.inventory().categories.clone()
    }

    pub fn tags(&self) -> Vec<Tag> {
        self.shared.inventory().tags.clone()
    }

    /// Tag ids attached to an object.
    pub fn attached_tags(&self, object_id: &str) -> Vec<String> {
        self.shared.inventory().attached(object_id)
    }

    /// MoRef ids of the datacenters and of their hosts, in order: `(datacenter, hosts)`.
    pub fn datacenters(&self) -> Vec<(String, Vec<String>)> {
        self.shared
            .inventory()
            .datacenters
            .iter()
            .map(|d| (d.id.clone(), d.hosts.clone()))
            .collect()
    }

    /// What exists now and did not at the seed, as `"<kind> <id>"` lines: VMs, tags,
    /// categories, tag attachments, open container views and property filters.
    pub fn leaks(&self) -> Vec<String> {
        let inv = self.shared.inventory();
        let seed = &self.shared.seed;
        let mut out = Vec::new();
        for (o, _) in inv.vms() {
            if seed.get(&o.id).is_none() {
                out.push(format!("vm {}", o.id));
            }
        }
        for o in inv.objects.values() {
            if o.kind == state::Kind::ContainerView {
                out.push(format!("container-view {}", o.id));
            }
        }
        out.extend(
            self.shared
                .sessions()
                .filters
                .keys()
                .map(|f| format!("property-filter {f}")),
        );
        for c in &inv.categories {
            if !seed.categories.contains(c) {
                out.push(format!("category {}", c.id));
            }
        }
        for t in &inv.tags {
            if !seed.tags.contains(t) {
                out.push(format!("tag {}", t.id));
            }
        }
        for a in &inv.attachments {
            if !seed.attachments.contains(a) {
                out.push(format!("tag-association {} {}", a.0, a.2));
            }
        }
        out
    }

    pub fn journal(&self) -> Journal {
        self.shared.journal.clone()
    }

    pub fn faults(&self) -> Faults {
        self.shared.faults.clone()
    }

    /// Drops every SOAP and vAPI session (clients then get `NotAuthenticated` / 401).
    pub fn expire_sessions(&self) {
        let mut s = self.shared.sessions();
        s.soap.clear();
        s.vapi.clear();
        s.pages.clear();
    }

    /// Clears the journal, fault rules and sessions, and puts the inventory back to the seed.
    pub fn reset(&self) {
        self.shared.faults.clear();
        self.shared.journal.clear();
        self.reset_cloud();
    }

    /// Sets how power tasks started from now on end (by VM id, then by type: `poweron`,
    /// `poweroff`, `task`, then the default); tasks already running keep their mode.
    pub fn set_task_policies(&self, policies: Policies) {
        *self.shared.policies() = policies;
    }

    /// The power-task lifecycle modes in force.
    pub fn task_policies(&self) -> Policies {
        self.shared.policies().clone()
    }

    pub(crate) fn reset_cloud(&self) {
        *self.shared.inventory() = self.shared.seed.clone();
        self.expire_sessions();
        let seed = &self.shared.config.seed;
        // Both were checked at start, so neither can fail here.
        match seed.lifecycle.policies(LIFECYCLE_TYPES) {
            Ok(p) => *self.shared.policies() = p,
            Err(e) => tracing::warn!(error = %e, "re-applying the seed's lifecycle modes"),
        }
        if let Err(e) = seed.apply_faults(&self.shared.faults) {
            tracing::warn!(error = %e, "re-applying the seed's fault rules");
        }
    }
}
