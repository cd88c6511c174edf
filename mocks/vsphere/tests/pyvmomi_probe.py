#!/usr/bin/env python3
"""Drives a vCenter (our mock or vcsim) with pyvmomi the way the vSphere CCM's calls
look (CPV pkg/common/vclib, reference/cloud-apis.md 3.2), and prints one JSON document:
a normalized dump (ids and UUIDs replaced by their role) plus per-step checks.

usage: pyvmomi_probe.py URL USER PASSWORD CA_FILE|insecure [--repeat N] [--timings]

With --timings it runs the sequence N times and prints the wall time of each run
instead of the dump (for the benchmark).
"""
import json
import ssl
import sys
import time
from urllib.parse import urlparse

from pyVim.connect import Disconnect, SmartConnect
from pyVim.task import WaitForTask
from pyVmomi import vim, vmodl
from pyVmomi.VmomiSupport import DataObject, ManagedObject

VM_PATHS = [
    "name",
    "parent",
    "config.uuid",
    "config.instanceUuid",
    "summary.config.numCpu",
    "summary.config.memorySizeMB",
    "summary.runtime.powerState",
    "guest.hostName",
    "guest.ipAddress",
    "guest.net",
    "runtime.host",
    "runtime.powerState",
    "resourcePool",
]


def connect(url, user, password, ca):
    u = urlparse(url)
    kwargs = {}
    if ca == "insecure":
        kwargs["disableSslCertValidation"] = True
    else:
        ctx = ssl.create_default_context(cafile=ca)
        kwargs["sslContext"] = ctx
    return SmartConnect(host=u.hostname, port=u.port or 443, user=user, pwd=password, **kwargs)


def kind(v):
    """A value's shape, independent of ids and UUIDs."""
    if isinstance(v, ManagedObject):
        return "moref:" + v._wsdlName
    if isinstance(v, (list, tuple)):
        return ["list"] + sorted({json.dumps(kind(x)) for x in v})
    if isinstance(v, DataObject):
        return "data:" + v._wsdlName
    return type(v).__name__


def dump_vms(si):
    content = si.RetrieveContent()
    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    traversal = vmodl.query.PropertyCollector.TraversalSpec(
        name="traverseEntities", path="view", skip=False, type=vim.view.ContainerView)
    obj_spec = vmodl.query.PropertyCollector.ObjectSpec(obj=view, skip=True, selectSet=[traversal])
    prop_spec = vmodl.query.PropertyCollector.PropertySpec(type=vim.VirtualMachine, pathSet=VM_PATHS)
    spec = vmodl.query.PropertyCollector.FilterSpec(objectSet=[obj_spec], propSet=[prop_spec])
    opts = vmodl.query.PropertyCollector.RetrieveOptions(maxObjects=1)
    result = content.propertyCollector.RetrievePropertiesEx([spec], opts)
    objects = list(result.objects)
    pages = 1
    while result.token:
        result = content.propertyCollector.ContinueRetrievePropertiesEx(result.token)
        objects.extend(result.objects)
        pages += 1
    view.Destroy()
    vms = []
    for oc in objects:
        props = {p.name: p.val for p in oc.propSet}
        vms.append((oc.obj, props))
    return vms, pages


def get(pc, obj, path):
    """One property through the PropertyCollector (works on every server version;
    attribute access uses Fetch, which older vcsim lacks)."""
    spec = vmodl.query.PropertyCollector.FilterSpec(
        objectSet=[vmodl.query.PropertyCollector.ObjectSpec(obj=obj)],
        propSet=[vmodl.query.PropertyCollector.PropertySpec(type=type(obj), pathSet=[path])])
    for oc in pc.RetrieveContents([spec]):
        for p in oc.propSet:
            if p.name == path:
                return p.val
    return None


def wait(pc, task, deadline=10.0):
    """Polls task.info.state until it leaves queued/running."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        info = get(pc, task, "info")
        if info.state in ("success", "error"):
            return info
        time.sleep(0.01)
    raise TimeoutError("task did not finish")


def run(url, user, password, ca):
    checks = {}
    si = connect(url, user, password, ca)
    content = si.RetrieveContent()
    pc = content.propertyCollector
    checks["about.apiType"] = content.about.apiType
    session = get(pc, content.sessionManager, "currentSession")
    checks["session.user_matches"] = session.userName.split("\\")[-1] == user.split("\\")[-1]
    dcs = [e for e in get(pc, content.rootFolder, "childEntity") if isinstance(e, vim.Datacenter)]
    checks["datacenters"] = len(dcs) >= 1
    dc = dcs[0]
    vm_folder = get(pc, dc, "vmFolder")
    checks["dc.vmFolder"] = kind(vm_folder)
    checks["dc.hostFolder.childEntity"] = kind(get(pc, get(pc, dc, "hostFolder"), "childEntity"))
    vms, pages = dump_vms(si)
    checks["vm_count_ge_2"] = len(vms) >= 2
    shapes = {}
    for _, props in vms:
        for k, v in props.items():
            shapes.setdefault(k, set()).add(json.dumps(kind(v)))
    dump = {k: sorted(v) for k, v in sorted(shapes.items())}

    # A VM of the first datacenter; give it a hostName/IP if the server has none
    # (vcsim: ReconfigVM extraConfig SET.guest.*, its documented way).
    target, props = next((o, p) for o, p in vms if p.get("parent") == vm_folder)
    if not props.get("guest.hostName"):
        spec = vim.vm.ConfigSpec(extraConfig=[
            vim.option.OptionValue(key="SET.guest.hostName", value="probe-node"),
            vim.option.OptionValue(key="SET.guest.ipAddress", value="10.99.0.7"),
        ])
        wait(pc, target.ReconfigVM_Task(spec))
    host_name = get(pc, target, "guest.hostName")
    ip = get(pc, target, "guest.ipAddress")
    uuid = get(pc, target, "config.uuid")
    idx = content.searchIndex
    checks["FindByUuid.bios"] = idx.FindByUuid(dc, uuid, True, False) == target
    checks["FindByUuid.bios_upper"] = idx.FindByUuid(dc, uuid.upper(), True, False) == target
    checks["FindByUuid.instance"] = idx.FindByUuid(dc, get(pc, target, "config.instanceUuid"), True, True) == target
    checks["FindByUuid.missing"] = idx.FindByUuid(dc, "00000000-0000-0000-0000-000000000000", True, False) is None
    checks["FindAllByDnsName"] = target in idx.FindAllByDnsName(dc, host_name, True)
    checks["FindByIp"] = idx.FindByIp(dc, ip, True) == target
    checks["FindByIp.missing"] = idx.FindByIp(dc, "192.0.2.250", True) is None

    checks["PowerOff.task"] = wait(pc, target.PowerOffVM_Task()).state
    checks["PowerOff.state"] = get(pc, target, "runtime.powerState")
    info = wait(pc, target.PowerOffVM_Task())
    checks["PowerOff.again"] = info.state + ":" + (type(info.error).__name__ if info.error else "")
    checks["PowerOn.task"] = wait(pc, target.PowerOnVM_Task()).state
    checks["PowerOn.state"] = get(pc, target, "runtime.powerState")
    try:
        get(pc, vim.VirtualMachine("vm-999999", si._stub), "name")
        checks["missing_vm"] = "no error"
    except vmodl.fault.ManagedObjectNotFound:
        checks["missing_vm"] = "ManagedObjectNotFound"

    # Attribute access and pyVim's WaitForTask, as most pyvmomi code is written: both go
    # through Fetch (pyvmomi >= 8) and CreateFilter/WaitForUpdates.
    # Each attribute on its own: vcsim 0.53 answers Fetch("runtime") with an empty
    # `faultToleranceState` enum that pyvmomi cannot decode (AttributeError), where
    # vCenter sends `notConfigured`.
    def attr(read):
        try:
            return read()
        except AttributeError:
            return "undecodable"

    try:
        attrs = {
            "rootFolder.name": attr(lambda: content.rootFolder.name),
            "rootFolder.childEntity": attr(lambda: kind(content.rootFolder.childEntity)),
            "dc.datastore": attr(lambda: kind(dc.datastore)),
            "vm.guest.hostName": attr(lambda: target.guest.hostName == host_name),
            "vm.runtime.host": attr(lambda: kind(target.runtime.host)),
            "vm.guest.net": attr(lambda: kind(target.guest.net)),
        }
        WaitForTask(target.PowerOffVM_Task())
        attrs["WaitForTask.state"] = attr(lambda: target.runtime.powerState)
        WaitForTask(target.PowerOnVM_Task())
        checks["attributes"] = attrs
    except vmodl.fault.MethodNotFound as e:
        checks["attributes"] = "MethodNotFound " + e.method
    content.sessionManager.Logout()
    try:
        get(pc, content.rootFolder, "name")
        checks["after_logout"] = "no error"
    except vim.fault.NotAuthenticated:
        checks["after_logout"] = "NotAuthenticated"
    try:
        connect(url, user, password + "-wrong", ca)
        checks["bad_login"] = "no error"
    except vim.fault.InvalidLogin:
        checks["bad_login"] = "InvalidLogin"
    return {"checks": checks, "vm_property_shapes": dump, "pages": pages}


def main():
    args = sys.argv[1:]
    repeat, timings = 1, False
    if "--repeat" in args:
        i = args.index("--repeat")
        repeat = int(args[i + 1])
        del args[i:i + 2]
    if "--timings" in args:
        args.remove("--timings")
        timings = True
    url, user, password, ca = args
    if timings:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            run(url, user, password, ca)
            times.append(time.perf_counter() - start)
        print(json.dumps({"seconds": times}))
    else:
        print(json.dumps(run(url, user, password, ca), indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
