"""Garbage collection by ownerReferences and Table output, as the API server and its
controller manager do them (tests/kube/test_fidelity.py compares them with the real ones)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def family(core: client.CoreV1Api, ns: str, parent: str, children: int = 1, block: bool = False) -> str:
    made = core.create_namespaced_config_map(ns, {"metadata": {"name": parent}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": parent, "uid": made.metadata.uid}
    if block:
        ref["blockOwnerDeletion"] = True
    for i in range(children):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"{parent}-{i}", "ownerReferences": [ref]}})
    return str(made.metadata.uid)


def exists(core: client.CoreV1Api, ns: str, name: str) -> bool:
    try:
        core.read_namespaced_config_map(name, ns)
    except ApiException as exc:
        assert exc.status == 404
        return False
    return True


def test_background_deletion_removes_dependents(core: client.CoreV1Api, ns: str, wait_for: Any) -> None:
    family(core, ns, "bg", children=2)
    core.delete_namespaced_config_map("bg", ns, propagation_policy="Background")
    assert not exists(core, ns, "bg")
    wait_for(lambda: not exists(core, ns, "bg-0") and not exists(core, ns, "bg-1"), what="dependents gone")


def test_a_dependent_with_another_owner_only_loses_the_reference(
    core: client.CoreV1Api, ns: str, wait_for: Any
) -> None:
    first = core.create_namespaced_config_map(ns, {"metadata": {"name": "o1"}}).metadata.uid
    second = core.create_namespaced_config_map(ns, {"metadata": {"name": "o2"}}).metadata.uid
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": u} for n, u in (("o1", first), ("o2", second))]
    core.create_namespaced_config_map(ns, {"metadata": {"name": "shared", "ownerReferences": refs}})
    core.delete_namespaced_config_map("o1", ns)

    def only_second() -> bool:
        owners = core.read_namespaced_config_map("shared", ns).metadata.owner_references or []
        return [o.uid for o in owners] == [second]

    wait_for(only_second, what="the dangling reference removed")


def test_foreground_deletion_waits_for_blocking_dependents(core: client.CoreV1Api, ns: str, wait_for: Any) -> None:
    family(core, ns, "fg", block=True)
    # A finalizer on the dependent holds it, so the owner must wait in foreground deletion.
    core.patch_namespaced_config_map("fg-0", ns, {"metadata": {"finalizers": ["test.lahar.io/hold"]}})
    core.delete_namespaced_config_map("fg", ns, propagation_policy="Foreground")
    owner = core.read_namespaced_config_map("fg", ns)
    assert owner.metadata.deletion_timestamp and owner.metadata.finalizers == ["foregroundDeletion"]
    wait_for(lambda: core.read_namespaced_config_map("fg-0", ns).metadata.deletion_timestamp, what="dependent deleted")
    assert exists(core, ns, "fg")
    core.patch_namespaced_config_map("fg-0", ns, {"metadata": {"finalizers": None}})
    wait_for(lambda: not exists(core, ns, "fg-0") and not exists(core, ns, "fg"), what="both gone")


def test_orphan_deletion_keeps_dependents(core: client.CoreV1Api, ns: str, wait_for: Any) -> None:
    family(core, ns, "or")
    core.delete_namespaced_config_map("or", ns, propagation_policy="Orphan")
    wait_for(lambda: not exists(core, ns, "or"), what="owner gone")
    assert core.read_namespaced_config_map("or-0", ns).metadata.owner_references is None


def test_pods_of_a_deleted_owner_go_too(core: client.CoreV1Api, ns: str, pod: Any, wait_for: Any) -> None:
    uid = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}}).metadata.uid
    manifest = pod("owned")
    manifest["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]
    core.create_namespaced_pod(ns, manifest)
    core.delete_namespaced_config_map("owner", ns)
    wait_for(lambda: not core.list_namespaced_pod(ns).items, what="the pod collected")


def test_unsupported_propagation_policy_is_invalid(core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "c"}})
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_config_map("c", ns, propagation_policy="Sometimes")
    assert err.value.status == 422
    assert "propagationPolicy" in str(err.value.body)


def test_table_of_pods_and_custom_resources(sim: Any, core: client.CoreV1Api, ns: str, pod: Any) -> None:
    core.create_namespaced_pod(ns, pod("p"))
    with httpx.Client(base_url=sim.url, headers={"Accept": TABLE}) as http:
        pods = http.get(f"/api/v1/namespaces/{ns}/pods").json()
        groups = http.get(f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups").json()
        one = http.get(f"/api/v1/namespaces/{ns}/pods/p", params={"includeObject": "Object"}).json()
    assert pods["kind"] == "Table" and pods["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in pods["columnDefinitions"]][:3] == ["Name", "Ready", "Status"]
    assert pods["rows"][0]["cells"][:3] == ["p", "0/1", "Pending"]
    assert pods["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert [c["name"] for c in groups["columnDefinitions"]] == [
        "Name",
        "STATUS",
        "minMember",
        "RUNNINGS",
        "AGE",
        "QUEUE",
    ]
    assert one["rows"][0]["object"]["kind"] == "Pod"
