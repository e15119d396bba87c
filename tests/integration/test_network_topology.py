"""Network-topology-aware scheduling end to end on the emulator: the controller discovers a 2-tier
HyperNode tree from node labels, the cache mirrors it, the scheduler keeps a hard
``highestTierAllowed: 1`` gang inside one leaf (Volcano allocate_test.go
TestAllocateWithNetWorkTopologies "hard network topology constrain, can allocate job when multi
hyperNodes are available"), and the binder binds it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from lahar.adapters.kube import KubeError

from .backends import Cluster, Identities
from .services import poll, stack
from .test_distributed import ensure_queue, node_of, pod, podgroup

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
  - name: binpack
  - name: network-topology-aware
"""
TOR, SPINE = "lahar-test/tor", "lahar-test/spine"
TYPES = {"t": [SPINE, TOR, "kubernetes.io/hostname"]}


@pytest_asyncio.fixture
async def sim_cluster(sim_ids: Identities) -> AsyncIterator[Cluster]:
    c = Cluster("sim", sim_ids)
    try:
        await c.start()
        yield c
    finally:
        await c.close()


def pinned(obj: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    """Only the test's own nodes (their label and taint) take the pod."""
    obj["spec"]["nodeSelector"] = {key: value}
    obj["spec"]["tolerations"] = [{"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}]
    return obj


async def hypernodes(kube: Any) -> dict[str, dict[str, Any]]:
    items, _ = await kube.list("hypernodes")
    out = {}
    for item in items:
        obj = json.loads(item.raw)
        labels = obj.get("metadata", {}).get("labels", {})
        if TOR in labels or SPINE in labels:
            out[obj["metadata"]["name"]] = obj
    return out


async def test_hard_gang_stays_in_one_discovered_leaf(
    sim_cluster: Cluster, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, tmp_path: Any
) -> None:
    cluster = sim_cluster
    conf = tmp_path / "topology.yaml"
    conf.write_text(CONF)
    kube, ns = cluster.admin, cluster.ns
    mark = f"lahar-test={ns}"
    common = f"cpu=4,memory=8Gi,label.{mark},taint.{mark}:NoSchedule,label.{SPINE}=s-{ns}"
    leaf_a = await cluster.add_nodes(f"2:{common},label.{TOR}=a-{ns},name={ns}-a")
    leaf_b = await cluster.add_nodes(f"2:{common},label.{TOR}=b-{ns},name={ns}-b")
    key, _, value = mark.partition("=")
    try:
        async with stack(cluster.client, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
            await ensure_queue(kube, "default")
            await s.cache()
            await s.controller(hypernode_types={n: list(reversed(k[:-1])) for n, k in TYPES.items()})

            async def tree() -> dict[str, dict[str, Any]]:
                got = await hypernodes(kube)
                return got if len(got) == 3 else {}

            found = await poll(tree, timeout=10.0)
            tiers = sorted(h["spec"]["tier"] for h in found.values())
            assert tiers == [1, 1, 2]
            await s.scheduler(str(conf), period=0.2)
            await s.binder()
            # One node of leaf a is taken: only leaf b still holds two 3-cpu pods.
            blocker = pinned(pod(ns, "blocker", "", cpu="3"), key, value)
            blocker["metadata"]["annotations"] = {}
            blocker["spec"]["nodeName"] = leaf_a[0]
            await kube.create("pods", ns, blocker)
            gang = podgroup(ns, "gang", 2)
            gang["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
            for i in range(2):
                await kube.create("pods", ns, pinned(pod(ns, f"g-{i}", "gang", cpu="3"), key, value))
            await kube.create("podgroups", ns, gang)

            async def placed() -> list[str]:
                nodes = [await node_of(kube, ns, f"g-{i}") for i in range(2)]
                return nodes if all(nodes) else []

            nodes = await poll(placed, timeout=15.0)
            assert sorted(nodes) == sorted(leaf_b), (nodes, leaf_a, leaf_b)
    finally:
        for name in await hypernodes(kube):
            with contextlib.suppress(KubeError):
                await kube.delete("hypernodes", "", name)
