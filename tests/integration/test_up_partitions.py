"""Sub-group policies end to end on ``lahar up``'s own stack (the emulator, cache, scheduler,
binder and controller as processes): a Volcano Job whose task has a ``partitionPolicy`` with a
hard tier-1 ``networkTopology`` is rendered by the controller into a PodGroup ``subGroupPolicy``
keyed by ``volcano.sh/partition-id``, and the scheduler places each partition whole inside one
leaf HyperNode (Volcano allocate_test.go TestAllocateWithPartitionPolicyNetworkTopology
"podgroup hard network topology constrain and subGroup hard network topology constrain, can
allocate job when multi hyperNodes are available")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.e2e.workload import ensure_queues

from .services import poll, small_up_stack
from .test_up_gpu_topology import hypernode

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
  - name: network-topology-aware
"""
# Two leaves of two nodes and a leaf of one: 6-cpu pods take a node each, so a partition of two
# fits only a two-node leaf, and two partitions need both.
NODES = ("2:cpu=8,memory=16Gi,name=la", "2:cpu=8,memory=16Gi,name=lb", "1:cpu=8,memory=16Gi,name=lc")
PARTITION = "volcano.sh/partition-id"


def partitioned_job() -> dict[str, Any]:
    resources = {"requests": {"cpu": "6", "memory": "1Gi"}}
    template = {"spec": {"containers": [{"name": "c", "image": "x", "resources": resources}]}}
    task = {
        "name": "worker",
        "replicas": 4,
        "template": template,
        "partitionPolicy": {
            "totalPartitions": 2,
            "partitionSize": 2,
            "minPartitions": 2,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        },
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"schedulerName": "volcano", "minAvailable": 4, "queue": "default", "tasks": [task]},
    }


async def test_each_partition_lands_inside_one_leaf(tmp_path: Path, lahar_infra: Any) -> None:
    stack = small_up_stack(tmp_path, lahar_infra, "uppartitions", NODES, CONF)
    kube = KubeClient(KubeConfig.load(stack.kubeconfig))
    try:
        await ensure_queues(kube, {"default": 1})
        for hn in (
            hypernode("leaf-a", 1, "Node", ["la-0001", "la-0002"]),
            hypernode("leaf-b", 1, "Node", ["lb-0001", "lb-0002"]),
            hypernode("leaf-c", 1, "Node", ["lc-0001"]),
            hypernode("spine", 2, "HyperNode", ["leaf-a", "leaf-b", "leaf-c"]),
        ):
            await kube.create("hypernodes", "", hn)
        await kube.create("jobs", "default", partitioned_job())

        async def placed() -> list[dict[str, Any]] | None:
            items, _ = await kube.list("pods")
            pods = [json.loads(i.raw) for i in items if i.meta.namespace == "default"]
            mine = [p for p in pods if p["metadata"]["name"].startswith("train-worker-")]
            if len(mine) < 4 or not all(p["spec"].get("nodeName") for p in mine):
                return None
            return mine

        pods = await poll(placed, 90, interval=0.2)
        pg_items, _ = await kube.list("podgroups")
        groups = [json.loads(i.raw) for i in pg_items if i.meta.namespace == "default"]
    finally:
        await kube.close()
        stack.stop()
    policies = [p for g in groups for p in g["spec"].get("subGroupPolicy", [])]
    assert [(p["subGroupSize"], p["minSubGroups"], p["matchLabelKeys"]) for p in policies] == [(2, 2, [PARTITION])]
    leaves: dict[str, set[str]] = {}
    for p in pods:
        leaves.setdefault(p["metadata"]["labels"][PARTITION], set()).add(p["spec"]["nodeName"].split("-")[0])
    assert sorted(leaves) == ["0", "1"]
    assert all(len(v) == 1 for v in leaves.values()) and leaves["0"] != leaves["1"], leaves
    assert "lc" not in leaves["0"] | leaves["1"]
