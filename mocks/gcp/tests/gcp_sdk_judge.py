"""Google's Compute client for Python (google-cloud-compute, REST transport) against the
mock: what a client we did not write does.

Usage: gcp_sdk_judge.py READY_JSON
Prints one JSON object (the observations) as the last line of stdout; the Rust test
(tests/gcp/python.rs) compares it with what it expects. Needs google-cloud-compute
(scripts/setup.sh pins it). The token comes from the mock's token endpoint, as an OAuth
client gets one, and goes on every call as `Authorization: Bearer`.

The Rust test makes target pools' operations answer PENDING for two reads (the mock's
lifecycle modes) so that `.result()` really polls, and makes any operation on a resource
named `judge-broken` fail.

One thing of the SDK's own is worked around, not judged: a client's `ExtendedOperation`
polls through an operations client that the transport builds with the credentials only
(google-cloud-compute 1.57.0, `services/*/transports/base.py`
`_region_operations_client`), so it ignores `client_options.api_endpoint` and would poll
compute.googleapis.com. `at_mock` puts operations clients built with the same options in
the transport's own cache of them (`_extended_operations_services`) first.
"""

import json
import sys
import urllib.parse
import urllib.request

from google.api_core import exceptions
from google.cloud import compute_v1
from google.oauth2.credentials import Credentials


def token(url):
    form = urllib.parse.urlencode({"grant_type": "client_credentials"}).encode()
    req = urllib.request.Request(
        url, data=form, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        body = json.load(resp)
    return body["access_token"], body["expires_in"], body["token_type"]


def at_mock(client, opts):
    """`client`, with its extended operations polled at the mock (see the module doc)."""
    cache = client._transport._extended_operations_services
    cache["region_operations"] = compute_v1.RegionOperationsClient(**opts)
    cache["zone_operations"] = compute_v1.ZoneOperationsClient(**opts)
    cache["global_operations"] = compute_v1.GlobalOperationsClient(**opts)
    return client


def reason(e):
    """GCE's `error.errors[0].reason` as google.api_core exposes it."""
    return e.errors[0].get("reason") if e.errors and isinstance(e.errors[0], dict) else None


def last(link):
    return link.rsplit("/", 1)[-1] if link else link


def main():
    ready = json.load(open(sys.argv[1]))
    project, region, zone = ready["project_id"], ready["region"], ready["zone"]
    # The API root: the client appends /compute/v1/projects/...
    root = ready["endpoint"].split("/compute/", 1)[0]
    out = {}

    access_token, expires_in, token_type = token(ready["token_url"])
    out["token.type"] = token_type
    out["token.expires"] = expires_in > 0
    creds = Credentials(token=access_token)
    opts = {"client_options": {"api_endpoint": root}, "transport": "rest", "credentials": creds}
    instances = compute_v1.InstancesClient(**opts)
    addresses = at_mock(compute_v1.AddressesClient(**opts), opts)
    pools = at_mock(compute_v1.TargetPoolsClient(**opts), opts)
    rules = at_mock(compute_v1.ForwardingRulesClient(**opts), opts)
    zones = compute_v1.ZonesClient(**opts)

    # One instance, every field a CCM reads.
    vm = instances.get(project=project, zone=zone, instance="node-0")
    nic = vm.network_interfaces[0]
    out["vm.name"] = vm.name
    out["vm.id"] = vm.id > 0
    out["vm.status"] = vm.status
    out["vm.zone"] = last(vm.zone)
    out["vm.machine_type"] = last(vm.machine_type)
    out["vm.tags"] = list(vm.tags.items)
    out["vm.network"] = last(nic.network)
    out["vm.network_ip_prefix"] = nic.network_i_p.rsplit(".", 1)[0]
    out["vm.nat_ip_prefix"] = nic.access_configs[0].nat_i_p.rsplit(".", 1)[0]
    out["vm.self_link"] = vm.self_link.startswith(root + "/compute/v1/projects/" + project + "/zones/")

    # A paged list: two per page, so the pager follows nextPageToken.
    pager = instances.list(
        request=compute_v1.ListInstancesRequest(project=project, zone=zone, max_results=2)
    )
    pages = list(pager.pages)
    names = [i.name for p in pages for i in p.items]
    out["list.pages"] = len(pages)
    out["list.names"] = names
    filtered = instances.list(
        request=compute_v1.ListInstancesRequest(project=project, zone=zone, filter='name = "node-1"')
    )
    out["list.filtered"] = [i.name for i in filtered]
    out["zones"] = sorted(z.name for z in zones.list(project=project))

    # 404 and 409 as the client's own exception types.
    try:
        instances.get(project=project, zone=zone, instance="judge-missing")
        out["vm.missing"] = "found"
    except exceptions.NotFound as e:
        out["vm.missing"] = [e.code, reason(e)]
    # A token the mock never issued: the 401 makes google-auth refresh through the token
    # endpoint (grant_type=refresh_token) and send the call again with the new token.
    stale = Credentials(
        token="ya29.not-issued-here",
        refresh_token="judge-refresh-token",
        token_uri=ready["token_url"],
        client_id="judge",
        client_secret="judge-secret",
    )
    again = compute_v1.InstancesClient(**dict(opts, credentials=stale))
    out["stale_token.refreshed"] = again.get(project=project, zone=zone, instance="node-1").name
    out["stale_token.new"] = stale.token != "ya29.not-issued-here"

    # An address, a target pool with a member, a forwarding rule: the CCM's load balancer.
    op = addresses.insert(
        project=project,
        region=region,
        address_resource=compute_v1.Address(name="judge-ip", description="judge"),
    )
    op.result(timeout=60)
    out["address.op_done"] = op.done()
    out["address.op_error"] = op.error_code
    ip = addresses.get(project=project, region=region, address="judge-ip")
    out["address.status"] = ip.status
    out["address.type"] = ip.address_type
    out["address.ip_prefix"] = ip.address.rsplit(".", 1)[0]
    # GCE refuses a duplicate name on the insert itself (409 alreadyExists), not later in
    # the operation.
    try:
        addresses.insert(
            project=project, region=region, address_resource=compute_v1.Address(name="judge-ip")
        )
        out["address.duplicate"] = "accepted"
    except exceptions.Conflict as e:
        out["address.duplicate"] = [e.code, reason(e)]
    # An operation that ends in ERROR: `.result()` raises what its error says, and the
    # address was never made.
    op = addresses.insert(
        project=project, region=region, address_resource=compute_v1.Address(name="judge-broken")
    )
    try:
        op.result(timeout=60)
        out["address.failed_op"] = "succeeded"
    except exceptions.GoogleAPICallError as e:
        out["address.failed_op"] = [type(e).__name__, e.code, op.error_code]
    try:
        addresses.get(project=project, region=region, address="judge-broken")
        out["address.failed_left"] = "found"
    except exceptions.NotFound as e:
        out["address.failed_left"] = e.code

    op = pools.insert(
        project=project,
        region=region,
        target_pool_resource=compute_v1.TargetPool(name="judge-pool", session_affinity="NONE"),
    )
    # PENDING when answered (the Rust test's lifecycle mode), DONE after polling.
    out["pool.op_pending"] = op.status == compute_v1.Operation.Status.PENDING
    op.result(timeout=60)
    out["pool.op_done"] = op.done()
    vm_link = vm.self_link
    pools.add_instance(
        project=project,
        region=region,
        target_pool="judge-pool",
        target_pools_add_instance_request_resource=compute_v1.TargetPoolsAddInstanceRequest(
            instances=[compute_v1.InstanceReference(instance=vm_link)]
        ),
    ).result(timeout=60)
    pool = pools.get(project=project, region=region, target_pool="judge-pool")
    out["pool.instances"] = [last(i) for i in pool.instances]
    out["pool.affinity"] = pool.session_affinity

    rules.insert(
        project=project,
        region=region,
        forwarding_rule_resource=compute_v1.ForwardingRule(
            name="judge-rule",
            I_p_address=ip.address,
            I_p_protocol="TCP",
            port_range="18080-18080",
            target=pool.self_link,
            load_balancing_scheme="EXTERNAL",
        ),
    ).result(timeout=60)
    rule = rules.get(project=project, region=region, forwarding_rule="judge-rule")
    out["rule.ip_matches"] = rule.I_p_address == ip.address
    out["rule.protocol"] = rule.I_p_protocol
    out["rule.port_range"] = rule.port_range
    out["rule.target"] = last(rule.target)
    out["address.in_use"] = addresses.get(project=project, region=region, address="judge-ip").status

    # Deletes, each waited on, in the order the CCM tears a load balancer down.
    rules.delete(project=project, region=region, forwarding_rule="judge-rule").result(timeout=60)
    pools.delete(project=project, region=region, target_pool="judge-pool").result(timeout=60)
    addresses.delete(project=project, region=region, address="judge-ip").result(timeout=60)
    gone = []
    for what, call in [
        ("rule", lambda: rules.get(project=project, region=region, forwarding_rule="judge-rule")),
        ("pool", lambda: pools.get(project=project, region=region, target_pool="judge-pool")),
        ("address", lambda: addresses.get(project=project, region=region, address="judge-ip")),
    ]:
        try:
            call()
        except exceptions.NotFound:
            gone.append(what)
    out["deleted"] = gone
    try:
        addresses.delete(project=project, region=region, address="judge-ip").result(timeout=60)
        out["address.delete_again"] = "accepted"
    except exceptions.NotFound as e:
        out["address.delete_again"] = e.code

    # The mock's own account of what is left.
    with urllib.request.urlopen(ready["admin_url"] + "/leaks", timeout=30) as resp:
        out["leaks"] = json.load(resp)["total"]

    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
