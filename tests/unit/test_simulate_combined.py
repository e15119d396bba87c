"""``lahar simulate`` on one dump with everything issue 13 adds: GPUs shared by memory on every
node, a 3-tier HyperNode tree, and a Numatopology per node.  Jobs are placed as Volcano would
(deviceshare's gpushare: a card with room for the whole request, cards chosen written out;
numa-aware: single-numa-node keeps a Guaranteed pod's cpus on one NUMA node; hard network
topology: the gang inside one HyperNode of tier <= highestTierAllowed), and each refusal names
what stopped it: the GPU card, the NUMA node, the hypernode tier."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_simulate_dumps import Run
from test_simulate_topology import tree

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
  - name: numa-aware
  - name: network-topology-aware
"""
ALLOC = {"cpu": "8", "memory": "16Gi", "pods": "110", "volcano.sh/gpu-memory": "16000", "volcano.sh/gpu-number": "2"}


def node(name: str) -> list[dict[str, Any]]:
    """A node with 2 GPU cards of 8000 and 2 NUMA nodes of 4 cpus (single-numa-node policy)."""
    numa = {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
            "numares": {"cpu": {"allocatable": "0-7", "capacity": 8}},
            "cpuDetail": {str(c): {"numa": c // 4, "socket": c // 4, "core": c} for c in range(8)},
        },
    }
    status = {"allocatable": dict(ALLOC), "capacity": dict(ALLOC)}
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}, numa]


def job(name: str, n: int, limits: dict[str, str], *, tier: int | None = None, numa: bool = False) -> list[Any]:
    spec: dict[str, Any] = {"minMember": n, "queue": "default"}
    if tier is not None:
        spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
    meta = {"name": name, "namespace": "ml", "creationTimestamp": "2024-01-01T00:00:00Z"}
    docs: list[Any] = [
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": meta, "spec": spec}
    ]
    for i in range(n):
        annotations = {"scheduling.k8s.io/group-name": name}
        if numa:
            annotations["volcano.sh/numa-topology-policy"] = "single-numa-node"
        resources = {"requests": dict(limits), "limits": dict(limits)}
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {**meta, "name": f"{name}-{i}", "annotations": annotations},
                "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "resources": resources}]},
            }
        )
    return docs


def cluster() -> list[Any]:
    """The 3-tier tree of test_simulate_topology, every node with GPUs and NUMA nodes."""
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}}
    return [queue, *tree(node)]


@pytest.fixture
def simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(tmp_path, capsys)


def test_gpus_numa_and_hypernodes_in_one_dump(simulate: Run, tmp_path: Path) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text(CONF)
    gpu = {"cpu": "1", "memory": "1Gi", "volcano.sh/gpu-memory": "4000"}
    docs = [
        *cluster(),
        *job("pair", 2, gpu, tier=1),  # two 4000 slices, kept in one leaf
        *job("huge", 1, {**gpu, "volcano.sh/gpu-memory": "9000"}),  # no card holds 9000
        *job("four", 1, {"cpu": "4", "memory": "1Gi"}, numa=True),  # one whole NUMA node
        *job("five", 1, {"cpu": "5", "memory": "1Gi"}, numa=True),  # no NUMA node has 5 cpus
        *job("wide", 3, {"cpu": "8", "memory": "1Gi"}, tier=1),  # 3 whole nodes: no leaf has them
    ]
    code, out, warnings = simulate(docs, "--conf", str(conf))
    assert code == 0 and warnings == [], simulate.stderr
    binds = out["binds"]
    pair = [binds[f"ml/pair-{i}"] for i in range(2)]
    assert pair[0].split("-")[0] == pair[1].split("-")[0]  # one leaf
    assert set(out["cards"]) >= {"ml/pair-0", "ml/pair-1"}
    assert "ml/four-0" in binds
    assert not any(k.startswith(("ml/huge", "ml/five", "ml/wide")) for k in binds)
    conditions = out["conditions"]
    assert "GpuShare no enough gpu memory (asks 9000 on one card, the freest card has 8000)" in conditions["ml/huge"]
    assert "cannot be assigned by numa (free cpus per NUMA node 0: 4, 1: 4)" in conditions["ml/five"]
    assert "no single hypernode of tier <= 1 can hold 3 tasks" in conditions["ml/wide"]
