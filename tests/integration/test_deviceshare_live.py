"""GPUs shared by memory, end to end: the emulator, the cache, the scheduler with deviceshare and
a binder on real NATS and Valkey.  Two pods asking 4000 of a 2-card node (8000 per card) land on
the same node and the same card, and the card index is on both pods (written through the
Binding, as Volcano does)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lahar.sim import Emulator

from .services import kube_for, poll, stack
from .test_distributed import ensure_queue, podgroup

pytestmark = pytest.mark.asyncio

CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: deviceshare
    arguments:
      deviceshare.GPUSharingEnable: true
"""


def gpu_pod(ns: str, name: str, group: str, mem: str) -> dict[str, Any]:
    amounts = {"cpu": "1", "memory": "1Gi", "volcano.sh/gpu-memory": mem}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": amounts, "limits": amounts}}],
        },
    }


async def test_two_pods_share_one_gpu_card(
    make_sim: Callable[..., Emulator], nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, tmp_path: Path
) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(CONF)
    sim = make_sim(nodes=["1:name=gpu,cpu=8,volcano.sh/gpu-memory=16000,volcano.sh/gpu-number=2"])
    kube = kube_for(sim.url)
    ns = "default"
    async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await ensure_queue(kube, "default")
        await s.cache()
        sched = await s.scheduler(conf=str(conf), period=0.2)
        await s.binder()
        await kube.create("podgroups", ns, podgroup(ns, "share", 2))
        await asyncio.gather(*(kube.create("pods", ns, gpu_pod(ns, f"s-{i}", "share", "4000")) for i in range(2)))

        async def placed() -> list[tuple[str, str]] | None:
            out = []
            for i in range(2):
                raw = json.loads(await kube.get("pods", ns, f"s-{i}"))
                node = raw["spec"].get("nodeName", "")
                if not node:
                    return None
                out.append((node, raw["metadata"].get("annotations", {}).get("volcano.sh/gpu-index", "")))
            return out

        got = await poll(placed, timeout=15.0)
        node_name = got[0][0]
        assert node_name.startswith("gpu")
        assert got == [(node_name, "0"), (node_name, "0")]

        # The node's NUMA layout: served by the emulator, mirrored by the cache, in the snapshot.
        topo = {
            "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
            "kind": "Numatopology",
            "metadata": {"name": node_name},
            "spec": {
                "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
                "numares": {"cpu": {"allocatable": "0-7", "capacity": 8}},
            },
        }
        await kube.create("numatopologies", "", topo)

        def mirrored() -> bool:
            held = sched.service.view.snapshot.numatopologies.get(node_name)
            return held is not None and held.spec.numares["cpu"].allocatable == "0-7"

        await poll(mirrored, timeout=10.0)
