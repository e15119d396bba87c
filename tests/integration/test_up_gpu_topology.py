"""Issue 13 end to end on ``lahar up``'s own stack (LocalStack: the emulator, cache, scheduler,
binder and controller as processes): a 2-tier HyperNode tree with ``mode: hard,
highestTierAllowed: 1`` keeps a gang inside one leaf, and two pods sharing one GPU by memory land
on one card (``volcano.sh/gpu-index`` on both)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.e2e.workload import ensure_queues

from .services import poll, small_up_stack

pytestmark = pytest.mark.asyncio

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: deviceshare
    arguments: {deviceshare.GPUSharingEnable: true}
  - name: network-topology-aware
"""
GPU = "volcano.sh/gpu-memory=16000,volcano.sh/gpu-number=2"
# Two leaves of two nodes, and one node with two GPU cards of 8000 (outside the tree).
NODES = ("2:cpu=8,memory=16Gi,name=la", "2:cpu=8,memory=16Gi,name=lb", f"1:cpu=8,memory=16Gi,{GPU},name=gpu")


def hypernode(name: str, tier: int, kind: str, members: list[str]) -> dict[str, Any]:
    selectors = [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": selectors},
    }


def group(name: str, n: int, topology: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": n, "queue": "default"}
    if topology:
        spec["networkTopology"] = topology
    meta = {"name": name, "namespace": "default"}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": meta, "spec": spec}


def pod(name: str, pg: str, limits: dict[str, str]) -> dict[str, Any]:
    meta = {"name": name, "namespace": "default", "annotations": {"scheduling.k8s.io/group-name": pg}}
    resources = {"requests": dict(limits), "limits": dict(limits)}
    spec = {"schedulerName": "volcano", "containers": [{"name": "c", "image": "x", "resources": resources}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


async def test_hard_gang_in_one_leaf_and_two_pods_on_one_card(tmp_path: Path, lahar_infra: Any) -> None:
    stack = small_up_stack(tmp_path, lahar_infra, "upgputopo", NODES, CONF)
    kube = KubeClient(KubeConfig.load(stack.kubeconfig))
    try:
        await ensure_queues(kube, {"default": 1})
        for hn in (
            hypernode("leaf-a", 1, "Node", ["la-0001", "la-0002"]),
            hypernode("leaf-b", 1, "Node", ["lb-0001", "lb-0002"]),
            hypernode("spine", 2, "HyperNode", ["leaf-a", "leaf-b"]),
        ):
            await kube.create("hypernodes", "", hn)
        # A 6-cpu task per node: the gang needs both nodes of one leaf, and no leaf may be mixed.
        await kube.create("podgroups", "default", group("gang", 2, {"mode": "hard", "highestTierAllowed": 1}))
        for i in range(2):
            await kube.create("pods", "default", pod(f"gang-{i}", "gang", {"cpu": "6", "memory": "1Gi"}))
        await kube.create("podgroups", "default", group("share", 2))
        slice_ = {"cpu": "1", "memory": "1Gi", "volcano.sh/gpu-memory": "4000"}
        for i in range(2):
            await kube.create("pods", "default", pod(f"share-{i}", "share", slice_))

        async def placed() -> dict[str, dict[str, Any]] | None:
            out = {}
            for name in ("gang-0", "gang-1", "share-0", "share-1"):
                got = json.loads(await kube.get("pods", "default", name))
                if not got["spec"].get("nodeName"):
                    return None
                out[name] = got
            return out

        pods = await poll(placed, 90, interval=0.2)
    finally:
        await kube.close()
        stack.stop()
    gang_nodes = {pods[f"gang-{i}"]["spec"]["nodeName"] for i in range(2)}
    assert len(gang_nodes) == 2 and len({n.split("-")[0] for n in gang_nodes}) == 1, gang_nodes
    share = [pods[f"share-{i}"] for i in range(2)]
    assert share[0]["spec"]["nodeName"] == share[1]["spec"]["nodeName"] == "gpu-0001"
    cards = [p["metadata"].get("annotations", {}).get("volcano.sh/gpu-index") for p in share]
    assert cards[0] is not None and cards[0] == cards[1], cards
