"""Drive the official Python `kubernetes` client against the embedded API server.

Run by tests/kube_apiserver/python_client.rs with the path of a kubeconfig; prints one JSON document
with what the client saw, which the Rust test checks. Exercises list, watch (replay from
a resourceVersion and a fresh watch with initial ADDED events) and the three patch types
the client picks by body shape (strategic merge for dicts, JSON patch for lists), on
nodes (+status) and services; then a ClusterRole by a name with a colon, and a
Deployment's defaults.
"""

import json
import sys

from kubernetes import client, config, watch


def main(kubeconfig):
    config.load_kube_config(config_file=kubeconfig)
    v1 = client.CoreV1Api()
    out = {}

    nodes = v1.list_node()
    out["nodes"] = sorted(n.metadata.name for n in nodes.items)
    start_rv = nodes.metadata.resource_version
    out["selected"] = [
        n.metadata.name for n in v1.list_node(label_selector="role=worker").items
    ]

    services = v1.list_namespaced_service("default")
    out["services"] = sorted(s.metadata.name for s in services.items)

    patched = v1.patch_node("py-n1", {"metadata": {"labels": {"patched-by": "python"}}})
    out["node_labels"] = patched.metadata.labels
    status = v1.patch_node_status(
        "py-n1",
        {"status": {"addresses": [{"type": "InternalIP", "address": "10.1.2.3"}]}},
    )
    out["node_addresses"] = [a.address for a in status.status.addresses]

    svc = v1.patch_namespaced_service(
        "py-svc",
        "default",
        [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}],
    )
    out["service_annotations"] = svc.metadata.annotations
    out["service_cluster_ip"] = svc.spec.cluster_ip

    # Replay everything since the first list: the label patch and the status patch.
    replay = []
    w = watch.Watch()
    for ev in w.stream(v1.list_node, resource_version=start_rv, timeout_seconds=10):
        replay.append([ev["type"], ev["object"].metadata.name])
        if len(replay) == 2:
            w.stop()
    out["replay"] = replay

    # A fresh watch starts with ADDED for every existing service.
    fresh = []
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_service, "default", timeout_seconds=10):
        fresh.append([ev["type"], ev["object"].metadata.name])
        if ev["object"].metadata.name == "py-svc":
            w.stop()
    out["fresh"] = fresh

    # RBAC names carry a colon, which this client sends percent-encoded in the path.
    rbac = client.RbacAuthorizationV1Api()
    rbac.create_cluster_role(
        client.V1ClusterRole(
            metadata=client.V1ObjectMeta(name="system:py-ccm"),
            rules=[client.V1PolicyRule(api_groups=[""], resources=["nodes"], verbs=["get"])],
        )
    )
    out["cluster_role_verbs"] = rbac.read_cluster_role("system:py-ccm").rules[0].verbs
    deleted = rbac.delete_cluster_role("system:py-ccm")  # a V1Status, as a dict here
    out["cluster_role_deleted"] = (
        deleted["status"] if isinstance(deleted, dict) else deleted.status
    )

    # A workload: server-side defaults and generation come back typed.
    apps = client.AppsV1Api()
    dep = apps.create_namespaced_deployment(
        "default",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "py-web"},
            "spec": {
                "selector": {"matchLabels": {"app": "py-web"}},
                "template": {
                    "metadata": {"labels": {"app": "py-web"}},
                    "spec": {"containers": [{"name": "web", "image": "web:1"}]},
                },
            },
        },
    )
    out["deployment"] = [dep.metadata.generation, dep.spec.replicas, dep.spec.strategy.type]

    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
