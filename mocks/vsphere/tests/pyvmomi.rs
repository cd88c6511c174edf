//! pyvmomi, a client nobody here wrote, against the mock; and the same probe against
//! vcsim (govmomi v0.53.0's simulator, the version vsphere-cloud-controller-manager
//! v1.36.0 pins, built from the Go module proxy by `support::build_vcsim`) with the
//! normalized outputs diffed. Both skip with a printed reason when pyvmomi / Go are
//! missing.
//!
//! Intended differences from vcsim v0.53.0 (each one is vcsim being laxer or thinner than
//! vCenter, or our inventory being smaller; see `INTENDED` below):
//! - `FindByUuid.bios_upper`: we match BIOS UUIDs case-insensitively; vcsim compares
//!   strings exactly.
//! - `after_logout`: we answer `NotAuthenticated` after `Logout`, as vCenter does; vcsim
//!   still serves the PropertyCollector.
//! - `bad_login`: we check the password (`InvalidLogin`); vcsim accepts any by default.
//! - `dc.hostFolder.childEntity`: vcsim's VPX model also has a standalone host
//!   (`ComputeResource`); ours has clusters only.
//! - `pages`: we honour `RetrievePropertiesEx` `maxObjects` (one page per VM); vcsim
//!   pages its larger inventory (4 VMs) the same way, so the counts differ.
//! - `guest.hostName`/`guest.ipAddress` shapes: our VMs carry guest identity from the
//!   start; vcsim's are unset until the probe sets them with ReconfigVM extraConfig.
//! - `attributes.vm.runtime.host`, `attributes.WaitForTask.state`: attribute access goes
//!   through `Fetch`; vcsim answers `Fetch("runtime")` with an empty
//!   `faultToleranceState` enum element that pyvmomi cannot decode (vCenter sends
//!   `notConfigured`; the mock leaves the element out).

mod support;

use std::collections::BTreeSet;

use mock_vsphere::{Config, VsphereMock};
use serde_json::Value;

/// Paths (`checks.X`, `vm_property_shapes.Y`, `pages`) allowed to differ.
const INTENDED: &[&str] = &[
    "checks.FindByUuid.bios_upper",
    "checks.attributes.WaitForTask.state",
    "checks.attributes.vm.runtime.host",
    "checks.after_logout",
    "checks.bad_login",
    "checks.dc.hostFolder.childEntity",
    "pages",
    "vm_property_shapes.guest.hostName",
    "vm_property_shapes.guest.ipAddress",
];

async fn start_mock() -> anyhow::Result<VsphereMock> {
    Ok(VsphereMock::start(Config {
        nodes: 3,
        ..Default::default()
    })
    .await?)
}

async fn probe_mock(mock: &VsphereMock) -> anyhow::Result<Value> {
    let r = mock.ready_info();
    let ca = r.ca_file.clone().unwrap_or_else(|| "insecure".into());
    support::run_probe(&r.url, &r.username, &r.password, &ca, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyvmomi_probe_against_mock() -> anyhow::Result<()> {
    if let Err(reason) = support::pyvmomi_available() {
        println!("SKIP pyvmomi_probe_against_mock: {reason}");
        return Ok(());
    }
    let mock = start_mock().await?;
    let out = probe_mock(&mock).await?;
    let c = &out["checks"];
    for key in [
        "FindAllByDnsName",
        "FindByIp",
        "FindByIp.missing",
        "FindByUuid.bios",
        "FindByUuid.bios_upper",
        "FindByUuid.instance",
        "FindByUuid.missing",
        "datacenters",
        "session.user_matches",
        "vm_count_ge_2",
    ] {
        assert_eq!(c[key], true, "{key}: {out:#}");
    }
    assert_eq!(c["PowerOff.task"], "success", "{out:#}");
    assert_eq!(c["PowerOff.state"], "poweredOff");
    assert_eq!(c["PowerOff.again"], "error:vim.fault.InvalidPowerState");
    assert_eq!(c["PowerOn.state"], "poweredOn");
    assert_eq!(c["missing_vm"], "ManagedObjectNotFound");
    assert_eq!(c["after_logout"], "NotAuthenticated");
    assert_eq!(c["bad_login"], "InvalidLogin");
    assert_eq!(
        c["attributes"]["WaitForTask.state"], "poweredOff",
        "{out:#}"
    );
    assert_eq!(c["attributes"]["rootFolder.name"], "Datacenters");
    assert_eq!(out["pages"], 3, "maxObjects=1 over 3 VMs");
    let shapes = &out["vm_property_shapes"];
    assert_eq!(shapes["guest.hostName"][0], "\"str\"");
    assert_eq!(shapes["runtime.host"][0], "\"moref:HostSystem\"");
    // The journal saw the calls the probe made, by method.
    let journal = mock.admin().journal();
    assert!(journal.count(|e| e.path == "/sdk/FindByUuid") >= 4);
    assert!(journal.count(|e| e.path == "/sdk/Login" && e.status == 200) >= 1);
    assert!(journal.count(|e| e.path == "/sdk/Login" && e.status == 500) >= 1);
    // The probe destroyed its container view and property filters.
    assert_eq!(mock.admin().leaks(), Vec::<String>::new());
    mock.shutdown().await;
    Ok(())
}

/// `{"a": {"b": 1}}` -> `{"a.b": 1}`, down to the keys the probe writes.
fn flatten(v: &Value) -> std::collections::BTreeMap<String, Value> {
    let mut out = std::collections::BTreeMap::new();
    if let Some(checks) = v["checks"].as_object() {
        for (k, v) in checks {
            // `attributes` is a map of its own: one key per attribute read.
            match v.as_object() {
                Some(attrs) if k == "attributes" => {
                    for (a, v) in attrs {
                        out.insert(format!("checks.attributes.{a}"), v.clone());
                    }
                }
                _ => {
                    out.insert(format!("checks.{k}"), v.clone());
                }
            }
        }
    }
    if let Some(shapes) = v["vm_property_shapes"].as_object() {
        for (k, v) in shapes {
            out.insert(format!("vm_property_shapes.{k}"), v.clone());
        }
    }
    out.insert("pages".into(), v["pages"].clone());
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyvmomi_side_by_side_with_vcsim() -> anyhow::Result<()> {
    if let Err(reason) = support::pyvmomi_available() {
        println!("SKIP pyvmomi_side_by_side_with_vcsim: {reason}");
        return Ok(());
    }
    let bin = match support::build_vcsim() {
        Ok(b) => b,
        Err(reason) => {
            println!("SKIP pyvmomi_side_by_side_with_vcsim: {reason}");
            return Ok(());
        }
    };
    let vcsim = support::Vcsim::start(&bin).await?;
    let mock = start_mock().await?;
    let ours = flatten(&probe_mock(&mock).await?);
    let theirs = flatten(&support::run_probe(&vcsim.url, "user", "pass", "insecure", &[]).await?);
    let keys: BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
    let mut differ = Vec::new();
    for k in keys {
        let (a, b) = (ours.get(k), theirs.get(k));
        if a != b {
            println!("differs {k}: mock={} vcsim={}", json(a), json(b));
            differ.push(k.clone());
        }
    }
    let unexpected: Vec<&String> = differ
        .iter()
        .filter(|k| !INTENDED.contains(&k.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "unintended differences from vcsim: {unexpected:?}"
    );
    // The comparison is not vacuous: both answered the bulk of the probe alike.
    assert!(
        ours.len() - differ.len() >= 20,
        "only {} keys agree",
        ours.len() - differ.len()
    );
    mock.shutdown().await;
    Ok(())
}

fn json(v: Option<&Value>) -> String {
    v.map_or("<absent>".into(), Value::to_string)
}

/// pyVim's `WaitForTask` on a power task that runs for 0.5 s (seed lifecycle mode
/// `seconds`): it must block in `WaitForUpdates` and return once the task succeeds,
/// with the VM then powered off. The task's first look is `running`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyvmomi_waits_for_a_running_task() -> anyhow::Result<()> {
    if let Err(reason) = support::pyvmomi_available() {
        println!("SKIP pyvmomi_waits_for_a_running_task: {reason}");
        return Ok(());
    }
    let seed = mock_vsphere::SeedFile::parse(
        br#"{"lifecycle": {"types": {"poweroff": {"mode": "seconds", "t": 0.5}}}}"#,
        std::path::Path::new("seed.json"),
    )?;
    let mock = VsphereMock::start(Config {
        seed,
        ..Default::default()
    })
    .await?;
    let r = mock.ready_info();
    let script = r#"
import sys, time
from pyVim.connect import SmartConnect
from pyVim.task import WaitForTask
from pyVmomi import vim
from urllib.parse import urlparse
u = urlparse(sys.argv[1])
si = SmartConnect(host=u.hostname, port=u.port, user=sys.argv[2], pwd=sys.argv[3], disableSslCertValidation=True)
content = si.RetrieveContent()
view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
vm = [v for v in view.view if v.name == "node-0"][0]
task = vm.PowerOffVM_Task()
first = task.info.state
start = time.monotonic()
WaitForTask(task)
print(first, task.info.state, vm.runtime.powerState, round(time.monotonic() - start, 2))
"#;
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::process::Command::new("python3")
            .args(["-c", script, &r.url, &r.username, &r.password])
            .kill_on_drop(true)
            .output(),
    )
    .await??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let words: Vec<&str> = stdout.split_whitespace().collect();
    assert_eq!(
        words.get(..3),
        Some(&["running", "success", "poweredOff"][..]),
        "{stdout}"
    );
    mock.shutdown().await;
    Ok(())
}
