"""Dynamic resource allocation on a running system: the cluster serves resource.k8s.io/v1
DeviceClasses, ResourceSlices and ResourceClaims; the cache mirrors them; the scheduler (predicates
with ``predicate.DynamicResourceAllocationEnable``) allocates a pod's claim from the devices of a
node's slice; the binder writes the allocation and the pod in ``reservedFor`` before the bind, as
kube-scheduler's DRA plugin does.  A second pod whose claim no free device can satisfy waits,
and its PodGroup says why; once the first pod is deleted its claim is deallocated (the
resourceclaim controller's part) and the second pod gets the device."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lahar.adapters.kube import RESOURCES

from .backends import Cluster
from .services import poll, stack
from .test_distributed import ensure_queue, node_of, podgroup

pytestmark = pytest.mark.asyncio

CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: true
"""
DRIVER = "gpu.example.com"


def device_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
    }


def resource_slice(node: str, model: str) -> dict[str, Any]:
    attributes = {"model": {"string": model}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": attributes}],
        },
    }


def claim(ns: str, name: str, cls: str, model: str) -> dict[str, Any]:
    selector = {"cel": {"expression": f"device.attributes['{DRIVER}'].model == '{model}'"}}
    request = {"name": "gpu", "exactly": {"deviceClassName": cls, "selectors": [selector]}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"devices": {"requests": [request]}},
    }


def claiming_pod(ns: str, name: str, group: str, claim_name: str) -> dict[str, Any]:
    amounts = {"cpu": "100m", "memory": "128Mi"}
    container = {"name": "main", "image": "busybox", "resources": {"requests": amounts, "claims": [{"name": "gpu"}]}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {
            "schedulerName": "volcano",
            "containers": [container],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
        },
    }


async def test_a_claim_is_allocated_from_a_node_slice_and_written_before_the_bind(
    cluster: Cluster, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, tmp_path: Any
) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(CONF)
    kube, ns = cluster.admin, cluster.ns
    # Two nodes of this test, each publishing one GPU: only node "a" has the model the claims ask for.
    [node_a] = await cluster.add_nodes(f"1:cpu=4,memory=8Gi,name={ns}-a")
    [node_b] = await cluster.add_nodes(f"1:cpu=4,memory=8Gi,name={ns}-b")
    cls = f"{ns}.{DRIVER}"
    await kube.create("deviceclasses", "", device_class(cls))
    await kube.create("resourceslices", "", resource_slice(node_b, "t4"))
    await kube.create("resourceslices", "", resource_slice(node_a, "a100"))
    try:
        async with stack(cluster.client, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
            await ensure_queue(kube, "default")
            await s.cache()
            await s.scheduler(conf=str(conf), period=0.2)
            await s.binder()
            await kube.create("resourceclaims", ns, claim(ns, "first", cls, "a100"))
            await kube.create("podgroups", ns, podgroup(ns, "one", 1))
            await kube.create("pods", ns, claiming_pod(ns, "p-1", "one", "first"))

            async def bound() -> str:
                return await node_of(kube, ns, "p-1")

            # volcano pkg/scheduler/actions/allocate/allocate_test.go TestAllocateWithDRA
            # "Allocate normal resourceClaim successfully": the pod binds where the device is.
            assert await poll(bound, timeout=20.0) == node_a
            got = json.loads(await kube.get("resourceclaims", ns, "first"))
            pod_uid = json.loads(await kube.get("pods", ns, "p-1"))["metadata"]["uid"]
            # What kube-scheduler's bindClaim writes: the finalizer, the allocation (the device,
            # and a node selector naming the node, since the slice is node-local) and the pod.
            assert "resource.kubernetes.io/delete-protection" in got["metadata"]["finalizers"]
            allocation = got["status"]["allocation"]
            assert allocation["devices"]["results"] == [
                {"request": "gpu", "driver": DRIVER, "pool": node_a, "device": "gpu-0"}
            ]
            terms = allocation["nodeSelector"]["nodeSelectorTerms"]
            assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_a]}]}]
            assert got["status"]["reservedFor"] == [{"resource": "pods", "name": "p-1", "uid": pod_uid}]

            # The only a100 is taken: a second claim for one cannot be satisfied anywhere.
            await kube.create("resourceclaims", ns, claim(ns, "second", cls, "a100"))
            await kube.create("podgroups", ns, podgroup(ns, "two", 1))
            await kube.create("pods", ns, claiming_pod(ns, "p-2", "two", "second"))

            async def unschedulable() -> str:
                pg = json.loads(await kube.get("podgroups", ns, "two"))
                conds = pg.get("status", {}).get("conditions", [])
                return next((c["message"] for c in conds if c["type"] == "Unschedulable"), "")

            message = await poll(unschedulable, timeout=20.0)
            assert "cannot allocate all claims" in message
            assert not await node_of(kube, ns, "p-2")
            second = json.loads(await kube.get("resourceclaims", ns, "second"))
            assert not second.get("status", {}).get("allocation")

            # The first pod goes: the resourceclaim controller takes it out of reservedFor and
            # deallocates the claim, and the waiting pod gets the device.
            now = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
            await kube._request("DELETE", RESOURCES["pods"].path(ns, "p-1"), json=now)

            async def second_bound() -> str:
                return await node_of(kube, ns, "p-2")

            assert await poll(second_bound, timeout=30.0) == node_a

            async def released() -> bool:
                # The controller's status update, then its update taking the finalizer off.
                first = json.loads(await kube.get("resourceclaims", ns, "first"))
                return not first.get("status", {}).get("allocation") and "finalizers" not in first["metadata"]

            await poll(released, timeout=10.0)
            second = json.loads(await kube.get("resourceclaims", ns, "second"))
            assert [r["device"] for r in second["status"]["allocation"]["devices"]["results"]] == ["gpu-0"]
    finally:
        for node in (node_a, node_b):
            await kube.delete("resourceslices", "", f"{node}-{DRIVER}")
        await kube.delete("deviceclasses", "", cls)


async def test_a_claim_from_a_template_is_made_allocated_and_reserved(
    cluster: Cluster, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, tmp_path: Any
) -> None:
    """A pod whose claim names a ResourceClaimTemplate: the resourceclaim controller makes the
    claim and records it in the pod's status; the scheduler waits for that (volcano
    pkg/scheduler/cache/cache_dra_test.go TestBuildTaskDRAResreq "Unresolved
    ResourceClaimTemplate returns pending error"), then allocates the made claim and the binder
    writes it before the bind."""
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(CONF)
    kube, ns = cluster.admin, cluster.ns
    [node] = await cluster.add_nodes(f"1:cpu=4,memory=8Gi,name={ns}-t")
    cls = f"{ns}.{DRIVER}"
    await kube.create("deviceclasses", "", device_class(cls))
    await kube.create("resourceslices", "", resource_slice(node, "a100"))
    try:
        async with stack(cluster.client, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
            await ensure_queue(kube, "default")
            await s.cache()
            await s.scheduler(conf=str(conf), period=0.2)
            await s.binder()
            spec = claim(ns, "unused", cls, "a100")["spec"]
            template = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "gpu-template", "namespace": ns},
                "spec": {"spec": spec},
            }
            await kube.create("resourceclaimtemplates", ns, template)
            await kube.create("podgroups", ns, podgroup(ns, "tpl", 1))
            body = claiming_pod(ns, "t-1", "tpl", "")
            body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]
            await kube.create("pods", ns, body)

            async def bound() -> str:
                return await node_of(kube, ns, "t-1")

            assert await poll(bound, timeout=30.0) == node
            got = json.loads(await kube.get("pods", ns, "t-1"))
            [made] = got["status"]["resourceClaimStatuses"]
            assert made["name"] == "gpu" and made["resourceClaimName"].startswith("t-1-gpu-")
            claimed = json.loads(await kube.get("resourceclaims", ns, made["resourceClaimName"]))
            assert [r["device"] for r in claimed["status"]["allocation"]["devices"]["results"]] == ["gpu-0"]
            assert claimed["status"]["reservedFor"] == [
                {"resource": "pods", "name": "t-1", "uid": got["metadata"]["uid"]}
            ]
    finally:
        await kube.delete("resourceslices", "", f"{node}-{DRIVER}")
        await kube.delete("deviceclasses", "", cls)


async def test_explain_reads_claims_from_the_mirror(
    make_sim: Any,
    nats_url: str,
    nats_ca: str,
    redis_url: str,
    lahar_prefix: str,
    redis_client: Any,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``lahar explain`` on the live mirror sees the DRA objects the cache mirrors: a pod whose
    claim asks for a model no slice offers is refused on every node for its claim; one whose
    claim asks for the model a slice offers would be placed."""
    from lahar.adapters.mirror import Mirror

    from .services import kube_for
    from .test_explain_live import lahar

    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(CONF)
    sim = make_sim(nodes=["2:name=g,cpu=8,memory=32Gi"])
    kube = kube_for(sim.url)
    ns = "dra"
    async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await ensure_queue(kube, "default")
        await s.cache()
        await kube.create("deviceclasses", "", device_class(DRIVER))
        await kube.create("resourceslices", "", resource_slice("g-0001", "t4"))
        await kube.create("resourceclaims", ns, claim(ns, "want", DRIVER, "a100"))
        await kube.create("resourceclaims", ns, claim(ns, "fits", DRIVER, "t4"))
        await kube.create("podgroups", ns, podgroup(ns, "pg2", 1))
        await kube.create("pods", ns, claiming_pod(ns, "q", "pg2", "fits"))
        await kube.create("podgroups", ns, podgroup(ns, "pg", 1))
        await kube.create("pods", ns, claiming_pod(ns, "p", "pg", "want"))
        mirror = Mirror(redis_client, s.names.redis_prefix)
        await poll(lambda: mirror.get("pods", ns, "p"), timeout=10)
        await poll(lambda: mirror.get("resourceslices", "", f"g-0001-{DRIVER}"), timeout=10)
        capsys.readouterr()
        monkeypatch.setenv("LAHAR_REDIS_URL", redis_url)
        monkeypatch.setenv("LAHAR_PREFIX", lahar_prefix)
        assert await lahar("explain", "pod", "p", "-n", ns, "--conf", str(conf)) == 0
        assert await lahar("explain", "pod", "q", "-n", ns, "--conf", str(conf)) == 0
    await kube.close()
    out = capsys.readouterr().out
    assert "pod dra/p: Pending, in PodGroup dra/pg" in out
    assert "why: task p fits none of 2 node(s): 2 cannot allocate all claims" in out, out
    # q's claim asks for the t4 the mirrored slice offers: it would be placed.
    assert "PodGroup dra/pg2 (queue default, minMember 1): Inqueue; not waiting (1 pods bound this session)" in out
