"""``lahar bench subgroups``: one allocate session for a job split into many sub-groups.

Volcano's BenchmarkHyperNodeGradientFnPerformance (pkg/scheduler/actions/allocate/allocate_test.go):
nodes of 4 cpu / 8Gi in tier-1 HyperNodes of 10 under one tier-2 HyperNode; one job of 4-cpu pods
in sub-groups of 10 (hard, tier 1; all needed), the job itself hard at tier 2.  Every sub-group
must land whole inside one tier-1 HyperNode.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from typing import Any

CONF = """\
actions: "allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: predicates
  - name: network-topology-aware
"""
PER = 10  # nodes per tier-1 HyperNode and pods per sub-group, as in Volcano's benchmark
SPEC = "volcano.sh/task-spec"


def register_bench(bench_sub: Any) -> None:
    p = bench_sub.add_parser("subgroups", help="one allocate session: a job in many sub-groups over HyperNodes")
    p.add_argument("--pods", type=int, default=1000, help="pods (and nodes); sub-groups of 10")
    p.add_argument("--output", choices=("text", "json"), default="text")
    p.set_defaults(handler=run_bench)


def objects(pods: int) -> list[Any]:
    from lahar.api.codec import decode_object

    leaves = pods // PER
    raw: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q1"}}
    ]
    for h in range(leaves):
        names = [f"n-{h * PER + j}" for j in range(PER)]
        for n in names:
            alloc = {"cpu": "4", "memory": "8Gi", "pods": "10"}
            raw.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}, "status": {"allocatable": alloc}})
        members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in names]
        raw.append(_hypernode(f"hn1-{h}", 1, members))
    raw.append(
        _hypernode(
            "hn2", 2, [{"type": "HyperNode", "selector": {"exactMatch": {"name": f"hn1-{h}"}}} for h in range(leaves)]
        )
    )
    policy = {
        "name": "task1",
        "matchLabelKeys": [SPEC],
        "subGroupSize": PER,
        "minSubGroups": leaves,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
    }
    spec = {
        "queue": "q1",
        "minMember": leaves * PER,
        "minResources": {"cpu": str(4 * leaves * PER), "memory": f"{8 * leaves * PER}Gi"},
        "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
        "subGroupPolicy": [policy],
    }
    meta = {"name": "pg1", "namespace": "c1"}
    raw.append(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": meta,
            "spec": spec,
            "status": {"phase": "Inqueue"},
        }
    )
    for i in range(leaves * PER):
        pod_meta = {
            "name": f"p{i}",
            "namespace": "c1",
            "uid": f"c1-p{i}",
            "labels": {SPEC: f"subgroup-{i // PER}"},
            "annotations": {"scheduling.k8s.io/group-name": "pg1"},
        }
        container = {"name": "c", "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}
        pod_spec = {"schedulerName": "volcano", "containers": [container]}
        raw.append(
            {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec, "status": {"phase": "Pending"}}
        )
    return [decode_object(r) for r in raw]


def _hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members},
    }


def report(pods: int) -> dict[str, Any]:
    from lahar.api.objects import HyperNode, Node, Pod, PodGroup, Queue
    from lahar_scheduler.core import load_conf, run_session
    from lahar_scheduler.framework.snapshot import Snapshot

    objs = objects(pods)
    snapshot = Snapshot(
        [o for o in objs if isinstance(o, Node)],
        [o for o in objs if isinstance(o, Pod)],
        [o for o in objs if isinstance(o, PodGroup)],
        [o for o in objs if isinstance(o, Queue)],
        [],
        hypernodes=[o for o in objs if isinstance(o, HyperNode)],
    )
    start = time.perf_counter()
    result = run_session(snapshot, load_conf(CONF), seed=0, uid="bench-subgroups")
    seconds = time.perf_counter() - start
    leaves: dict[str, set[str]] = defaultdict(set)
    for task, node in result.binds:
        leaves[task.pod.metadata.labels[SPEC]].add(str(int(node.split("-")[1]) // PER))
    whole = sum(1 for hns in leaves.values() if len(hns) == 1)
    return {
        "pods": pods // PER * PER,
        "sub_groups": pods // PER,
        "pods_placed": len(result.binds),
        "sub_groups_inside_one_hypernode": whole,
        "session_seconds": round(seconds, 3),
    }


def run_bench(args: argparse.Namespace) -> int:
    if args.pods < PER:
        print(f"lahar bench subgroups: --pods: must be at least {PER}", file=sys.stderr)
        return 2
    got = report(args.pods)
    if args.output == "json":
        print(json.dumps(got))
    else:
        print(
            f"placed {got['pods_placed']}/{got['pods']} pods in {got['sub_groups']} sub-groups "
            f"({got['sub_groups_inside_one_hypernode']} inside one tier-1 hypernode) in one session: "
            f"{got['session_seconds']} s"
        )
    return 0
