//! VM operations that answer with a `Task` (or a fault): power on and off, guest reboot
//! and reset. Tasks run through a lifecycle mode set on the admin API; their state lives
//! in the inventory (`Inventory::settle_tasks`).

use axum::response::Response;
use mock_cloud::lifecycle::{Lifecycle, Mode};

use super::envelope::{Call, Fault, mo, ok};
use crate::Shared;
use crate::state::{PowerState, REBOOT_SECONDS};

/// Power operations: `InvalidPowerState` (a task in `error`) when the VM is already in the
/// requested state; else, in lifecycle mode `immediate` (the default) the task is
/// `success` before the call returns, in any other mode it is `running` until the mode
/// ends it (`seconds`, `reads` of the task, `error`, `stuck`), see `Inventory::settle_tasks`.
pub(super) fn power(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    let (ty, id) = call.this;
    let mut inv = shared.inventory();
    let current = inv
        .get(id)
        .filter(|_| ty == "VirtualMachine")
        .and_then(|o| o.vm.as_ref())
        .map(|v| v.power)
        .ok_or_else(|| Fault::not_found(ty, id))?;
    let (target, desc) = if call.method == "PowerOnVM_Task" {
        (PowerState::PoweredOn, "VirtualMachine.powerOn")
    } else {
        (PowerState::PoweredOff, "VirtualMachine.powerOff")
    };
    let op = if target == PowerState::PoweredOn {
        "poweron"
    } else {
        "poweroff"
    };
    let mode = shared.policies().mode_for(&[op, "task"], id);
    let task = if current == target {
        let error = (
            "InvalidPowerState".to_string(),
            "The attempted operation cannot be performed in the current state.".to_string(),
        );
        inv.add_task(desc, id, Some(error))
    } else if mode == Mode::Immediate {
        if let Some(v) = inv.objects.get_mut(id).and_then(|o| o.vm.as_mut()) {
            v.power = target;
        }
        inv.add_task(desc, id, None)
    } else {
        inv.add_running_task(desc, id, target, Lifecycle::begin(mode))
    };
    Ok(ok(
        call.method,
        format!("<returnval {}</returnval>", mo("Task", &task)),
    ))
}

/// Guest restarts: `RebootGuest` asks VMware Tools to reboot the guest OS (no task; a
/// `ToolsUnavailable` fault when Tools are not running, `InvalidPowerState` when the VM is
/// not on), `ResetVM_Task` resets the VM (a task, in `error` with `InvalidPowerState`
/// when it is not on). Either way the VM stays `poweredOn` and its guest restarts for
/// [`REBOOT_SECONDS`] (see `state::GuestRestart` for what clients then see).
pub(super) fn reboot(shared: &Shared, call: &Call<'_>) -> Result<Response, Fault> {
    let (ty, id) = call.this;
    let mut inv = shared.inventory();
    let (power, restarting) = inv
        .get(id)
        .filter(|_| ty == "VirtualMachine")
        .and_then(|o| o.vm.as_ref())
        .map(|v| (v.power, v.restarting()))
        .ok_or_else(|| Fault::not_found(ty, id))?;
    let mode = Mode::Seconds { t: REBOOT_SECONDS };
    let invalid_power = (
        "InvalidPowerState".to_string(),
        "The attempted operation cannot be performed in the current state.".to_string(),
    );
    if call.method == "RebootGuest" {
        if power != PowerState::PoweredOn {
            return Err(
                Fault::new("InvalidPowerState", invalid_power.1).with(format!(
                    "<requestedState>poweredOn</requestedState><existingState>{}</existingState>",
                    power.as_str()
                )),
            );
        }
        if restarting {
            return Err(Fault::new(
                "ToolsUnavailable",
                "Cannot complete operation because VMware Tools is not running in this virtual machine.",
            ));
        }
        inv.restart_guest(id, mode)
            .map_err(|e| Fault::invalid_request(e.to_string()))?;
        return Ok(ok(call.method, String::new()));
    }
    let task = if power != PowerState::PoweredOn {
        inv.add_task("VirtualMachine.reset", id, Some(invalid_power))
    } else {
        inv.restart_guest(id, mode)
            .map_err(|e| Fault::invalid_request(e.to_string()))?;
        inv.add_task("VirtualMachine.reset", id, None)
    };
    Ok(ok(
        call.method,
        format!("<returnval {}</returnval>", mo("Task", &task)),
    ))
}
