"""The Azure SDK for Python against the mock: what a client we did not write does.

Usage: azure_sdk_judge.py READY_JSON
Prints one JSON object (the observations) as the last line of stdout; the Rust test
(tests/azure/python.rs) compares it with what it expects. Needs azure-identity,
azure-mgmt-compute and azure-mgmt-network, and REQUESTS_CA_BUNDLE set to the mock's CA.
"""

import json
import os
import sys

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.identity import ClientSecretCredential, ManagedIdentityCredential
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.network import NetworkManagementClient

AUDIENCE = "https://management.core.windows.net/"


def main():
    ready = json.load(open(sys.argv[1]))
    endpoint = ready["endpoint"]
    rg = ready["resource_group"]
    sub = ready["subscription_id"]
    out = {}

    credential = ClientSecretCredential(
        ready["tenant_id"],
        ready["client_id"],
        ready["client_secret"],
        authority=endpoint,
        disable_instance_discovery=True,
    )
    scopes = [AUDIENCE + ".default"]
    compute = ComputeManagementClient(credential, sub, base_url=endpoint, credential_scopes=scopes)
    network = NetworkManagementClient(credential, sub, base_url=endpoint, credential_scopes=scopes)

    vm = compute.virtual_machines.get(rg, "node-0", expand="instanceView")
    out["vm.name"] = vm.name
    out["vm.zones"] = vm.zones
    out["vm.size"] = vm.hardware_profile.vm_size
    out["vm.statuses"] = [s.code for s in vm.instance_view.statuses]
    out["vm.nic_primary"] = vm.network_profile.network_interfaces[0].primary
    nic_id = vm.network_profile.network_interfaces[0].id
    nic = network.network_interfaces.get(rg, nic_id.rsplit("/", 1)[1])
    out["nic.ip_prefix"] = nic.ip_configurations[0].private_ip_address.rsplit(".", 1)[0]

    names = [v.name for v in compute.virtual_machines.list(rg)]
    out["list.count"] = len(names)
    out["list.sorted"] = names == sorted(names, key=lambda n: int(n.split("-")[1]))

    pip = network.public_ip_addresses.begin_create_or_update(
        rg,
        "judge-pip",
        {
            "location": ready["location"],
            "sku": {"name": "Standard"},
            "properties": {"publicIPAllocationMethod": "Static"},
            "tags": {"k8s-azure-service": "default/judge"},
        },
    ).result()
    out["pip.state"] = pip.provisioning_state
    out["pip.ip_prefix"] = pip.ip_address.rsplit(".", 1)[0]
    out["pip.tags"] = pip.tags

    lb_id = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/loadBalancers/judge"
    # Plain dicts go on the wire as they are (the SDK's models are typespec-based), so
    # this is ARM's JSON shape.
    lb_body = {
        "location": ready["location"],
        "sku": {"name": "Standard"},
        "properties": {
            "frontendIPConfigurations": [{"name": "fe", "properties": {"publicIPAddress": {"id": pip.id}}}],
            "backendAddressPools": [{"name": "judge"}],
            "probes": [{"name": "p", "properties": {"protocol": "Tcp", "port": 30080, "intervalInSeconds": 5}}],
            "loadBalancingRules": [
                {
                    "name": "r",
                    "properties": {
                        "protocol": "Tcp",
                        "frontendPort": 80,
                        "backendPort": 80,
                        "enableFloatingIP": True,
                        "frontendIPConfiguration": {"id": lb_id + "/frontendIPConfigurations/fe"},
                        "backendAddressPool": {"id": lb_id + "/backendAddressPools/judge"},
                        "probe": {"id": lb_id + "/probes/p"},
                    },
                }
            ],
        },
    }
    lb = network.load_balancers.begin_create_or_update(rg, "judge", lb_body).result()
    out["lb.state"] = lb.provisioning_state
    out["lb.frontend_pip"] = lb.frontend_ip_configurations[0].public_ip_address.id == pip.id
    # The network SDK has no if_match parameter on load balancers; the CCM's Go client sends
    # the header, so send it the generic way.
    lb = network.load_balancers.begin_create_or_update(
        rg, "judge", lb_body, headers={"If-Match": lb.etag}
    ).result()
    out["lb.update_with_etag"] = lb.provisioning_state
    try:
        network.load_balancers.begin_create_or_update(
            rg, "judge", lb_body, headers={"If-Match": 'W/"00000000-0000-0000-0000-000000000000"'}
        ).result()
        out["lb.stale_etag"] = "accepted"
    except HttpResponseError as e:
        out["lb.stale_etag"] = [e.status_code, e.error.code if e.error else None]

    try:
        network.public_ip_addresses.begin_delete(rg, "judge-pip").result()
        out["pip.delete_in_use"] = "accepted"
    except HttpResponseError as e:
        out["pip.delete_in_use"] = e.error.code if e.error else e.status_code

    network.load_balancers.begin_delete(rg, "judge").result()
    network.public_ip_addresses.begin_delete(rg, "judge-pip").result()
    try:
        network.load_balancers.get(rg, "judge")
        out["lb.after_delete"] = "found"
    except ResourceNotFoundError as e:
        out["lb.after_delete"] = e.status_code

    route = network.routes.begin_create_or_update(
        rg,
        ready["route_table_name"],
        "node-0",
        {
            "properties": {
                "addressPrefix": "10.244.0.0/24",
                "nextHopType": "VirtualAppliance",
                "nextHopIpAddress": "127.60.0.10",
            }
        },
    ).result()
    out["route.state"] = route.provisioning_state
    out["routes.listed"] = [r.name for r in network.routes.list(rg, ready["route_table_name"])]
    network.routes.begin_delete(rg, ready["route_table_name"], "node-0").result()

    # ADFS: tenant "adfs" makes MSAL skip instance discovery and read the ADFS metadata.
    adfs = ClientSecretCredential("adfs", ready["client_id"], ready["client_secret"], authority=endpoint)
    out["adfs.token"] = bool(adfs.get_token(AUDIENCE + ".default").token)

    # App Service managed identity (IDENTITY_ENDPOINT + IDENTITY_HEADER).
    os.environ["IDENTITY_ENDPOINT"] = ready["identity_endpoint"]
    os.environ["IDENTITY_HEADER"] = ready["identity_header"]
    msi = ManagedIdentityCredential()
    compute_msi = ComputeManagementClient(msi, sub, base_url=endpoint, credential_scopes=scopes)
    out["msi.vm"] = compute_msi.virtual_machines.get(rg, "node-1").name

    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
