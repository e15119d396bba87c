"""``lahar bench preempt``: one preempt session, one reclaim session and one topology-aware
preempt session on a full cluster (issue 14 names their targets).

The cluster: NODES nodes of 32 cpu / 128 Gi, each full with one running low-priority job of 8
tasks of 4 cpu (minMember 1, so gang lets 7 of them go); PENDING pods of high priority in gangs
of 5 tasks of 4 cpu.  For reclaim, the running jobs belong to two queues that are over their
deserved share and the pending ones to two queues under it, all of one priority.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any

from lahar.api.objects import (
    Container,
    Node,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodGroup,
    PodGroupSpec,
    PodGroupStatus,
    PodSpec,
    PodStatus,
    PriorityClass,
    Queue,
    QueueSpec,
    QueueStatus,
    ResourceRequirements,
)
from lahar.api.quantity import Quantity
from lahar_scheduler.core import load_conf, run_session
from lahar_scheduler.framework.snapshot import Snapshot
from lahar_scheduler.framework.types import GROUP_NAME_ANNOTATION
from lahar_scheduler.gcpause import collector_paused

RUNNING_PER_NODE = 8
PENDING_GANG = 5
TIERS = """
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
PREEMPT_CONF = 'actions: "enqueue, allocate, preempt"' + TIERS
TOPOLOGY_CONF = (
    PREEMPT_CONF
    + """
configurations:
- name: preempt
  arguments:
    enableTopologyAwarePreemption: true
"""
)
RECLAIM_CONF = 'actions: "enqueue, allocate, reclaim"' + TIERS


@dataclass(frozen=True)
class Measured:
    seconds: float
    evictions: int
    build_seconds: float


def measure(kind: str, nodes: int, pending: int) -> Measured:
    """One session of ``kind`` (preempt, reclaim or topology) on a freshly built cluster."""
    started = time.perf_counter()
    snapshot = cluster(nodes, pending, reclaim=kind == "reclaim")
    built = time.perf_counter() - started
    conf = load_conf({"preempt": PREEMPT_CONF, "reclaim": RECLAIM_CONF, "topology": TOPOLOGY_CONF}[kind])
    # As the live scheduler does once it has loaded its snapshot (live.py): what exists before
    # the session is frozen, so a full collection the cluster's build has nearly earned does
    # not fall inside the measured session (0.6 s of 1.5 at 5,000 nodes, depending on how
    # many objects the session happens to keep alive across younger collections).
    # The live service also holds the cyclic collector back through a session (gcpause).
    gc.freeze()
    try:
        started = time.perf_counter()
        with collector_paused():
            result = run_session(snapshot, conf, uid=f"bench-{kind}")
        seconds = time.perf_counter() - started
    finally:
        gc.unfreeze()
    return Measured(seconds, len(result.evictions), built)


def cluster(nodes: int, pending: int, reclaim: bool = False) -> Snapshot:
    node_objs = [_node(i) for i in range(nodes)]
    groups: list[PodGroup] = []
    pods: list[Pod] = []
    for i in range(nodes):
        queue = f"queue-{i % 2}" if reclaim else "default"
        groups.append(_group(f"low-{i:05d}", queue, 1, "low" if not reclaim else "normal", "Running"))
        pods += [_pod(f"low-{i:05d}", t, "low" if not reclaim else "normal", f"node-{i:05d}") for t in range(8)]
    for g in range(max(1, pending // PENDING_GANG)):
        queue = f"queue-{2 + g % 2}" if reclaim else "default"
        priority = "normal" if reclaim else "high"
        groups.append(_group(f"high-{g:05d}", queue, PENDING_GANG, priority, "Inqueue"))
        pods += [_pod(f"high-{g:05d}", t, priority, "") for t in range(PENDING_GANG)]
    names = [f"queue-{q}" for q in range(4)] if reclaim else ["default"]
    queues = [
        Queue(metadata=ObjectMeta(name=n), spec=QueueSpec(weight=1, reclaimable=True), status=QueueStatus(state="Open"))
        for n in names
    ]
    classes = [
        PriorityClass(metadata=ObjectMeta(name=name), value=value)
        for name, value in (("low", 10), ("normal", 100), ("high", 1000))
    ]
    return Snapshot(node_objs, pods, groups, queues, classes)


def _node(i: int) -> Node:
    alloc = {"cpu": Quantity("32"), "memory": Quantity("128Gi"), "pods": Quantity("110")}
    labels = {"kubernetes.io/hostname": f"node-{i:05d}", "topology.kubernetes.io/zone": f"zone-{i % 3}"}
    return Node(
        metadata=ObjectMeta(name=f"node-{i:05d}", labels=labels),
        status=NodeStatus(capacity=dict(alloc), allocatable=alloc),
    )


def _group(name: str, queue: str, min_member: int, priority: str, phase: str) -> PodGroup:
    return PodGroup(
        metadata=ObjectMeta(name=name, namespace="bench"),
        spec=PodGroupSpec(min_member=min_member, queue=queue, priority_class_name=priority),
        status=PodGroupStatus(phase=phase),
    )


def _pod(job: str, index: int, priority: str, node: str) -> Pod:
    name = f"{job}-{index}"
    requests = {"cpu": Quantity("4"), "memory": Quantity("8Gi")}
    return Pod(
        metadata=ObjectMeta(
            name=name, namespace="bench", uid=f"bench-{name}", annotations={GROUP_NAME_ANNOTATION: job}
        ),
        spec=PodSpec(
            scheduler_name="volcano",
            node_name=node,
            priority_class_name=priority,
            containers=[Container(name="main", resources=ResourceRequirements(requests=requests))],
        ),
        status=PodStatus(phase="Running" if node else "Pending"),
    )


def report(nodes: int, pending: int, kinds: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": nodes, "pending_pods": pending, "evictions": {}}
    for kind in kinds:
        m = measure(kind, nodes, pending)
        key = {"preempt": "preempt", "reclaim": "reclaim", "topology": "topology_preempt"}[kind]
        out[f"{key}_session_seconds"] = round(m.seconds, 3)
        out["evictions"][key] = m.evictions
    return out
