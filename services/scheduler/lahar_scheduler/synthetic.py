"""Synthetic clusters for benchmarks, demos and property tests.

Heterogeneous nodes (general-purpose, large-memory, and GPU nodes tainted for GPU work), gang
jobs of identical tasks spread over weighted queues.  Deterministic for a given seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from lahar.api.objects import (
    Container,
    Node,
    NodeSpec,
    NodeStatus,
    ObjectMeta,
    Pod,
    PodGroup,
    PodGroupSpec,
    PodSpec,
    PodStatus,
    PriorityClass,
    Queue,
    QueueSpec,
    QueueStatus,
    ResourceRequirements,
    Taint,
    Toleration,
)
from lahar.api.quantity import Quantity
from lahar_scheduler.framework.types import GROUP_NAME_ANNOTATION

GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")


@dataclass(frozen=True)
class NodeShape:
    name: str
    share: float
    cpu: int
    memory_gi: int
    gpus: int = 0


SHAPES = (
    NodeShape("general", 0.7, 32, 128),
    NodeShape("highmem", 0.2, 32, 256),
    NodeShape("gpu", 0.1, 64, 512, gpus=8),
)


def _q(v: str | int) -> Quantity:
    return Quantity(v)


def make_nodes(count: int, seed: int = 0) -> list[Node]:
    rng = random.Random(seed)
    nodes = []
    for i in range(count):
        pick = rng.random()
        acc = 0.0
        shape = SHAPES[-1]
        for s in SHAPES:
            acc += s.share
            if pick < acc:
                shape = s
                break
        alloc = {"cpu": _q(shape.cpu), "memory": _q(f"{shape.memory_gi}Gi"), "pods": _q(110)}
        labels = {
            "kubernetes.io/hostname": f"node-{i:05d}",
            "topology.kubernetes.io/zone": f"zone-{i % 3}",
            "node.lahar.io/shape": shape.name,
        }
        taints = []
        if shape.gpus:
            alloc["nvidia.com/gpu"] = _q(shape.gpus)
            labels["accelerator"] = "nvidia"
            taints.append(GPU_TAINT)
        nodes.append(
            Node(
                metadata=ObjectMeta(name=f"node-{i:05d}", labels=labels),
                spec=NodeSpec(taints=taints),
                status=NodeStatus(capacity=dict(alloc), allocatable=alloc),
            )
        )
    return nodes


def make_queues(count: int) -> list[Queue]:
    return [
        Queue(
            metadata=ObjectMeta(name=f"queue-{q}"),
            spec=QueueSpec(weight=q + 1, reclaimable=True),
            status=QueueStatus(state="Open"),
        )
        for q in range(count)
    ]


def make_jobs(
    pods: int,
    tasks_per_job: int,
    queues: int,
    seed: int = 0,
    namespace: str = "bench",
    stamp: str | None = None,
) -> tuple[list[PodGroup], list[Pod]]:
    """Gang jobs (minMember = tasks) of identical tasks; one in ten asks for GPUs."""
    rng = random.Random(seed)
    groups: list[PodGroup] = []
    out: list[Pod] = []
    jobs = max(1, pods // tasks_per_job)
    for j in range(jobs):
        name = f"job-{j:05d}"
        gpu = rng.random() < 0.1
        cpu = rng.choice((1, 2, 4)) if not gpu else 8
        mem = rng.choice((2, 4, 8)) if not gpu else 32
        queue = f"queue-{j % queues}"
        groups.append(
            PodGroup(
                metadata=ObjectMeta(name=name, namespace=namespace, creation_timestamp=stamp),
                spec=PodGroupSpec(min_member=tasks_per_job, queue=queue, priority_class_name="batch"),
            )
        )
        requests = {"cpu": _q(cpu), "memory": _q(f"{mem}Gi")}
        tolerations: list[Toleration] = []
        selector: dict[str, str] = {}
        if gpu:
            requests["nvidia.com/gpu"] = _q(1)
            tolerations = [Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")]
            selector = {"accelerator": "nvidia"}
        for t in range(tasks_per_job):
            pod_name = f"{name}-worker-{t}"
            out.append(
                Pod(
                    metadata=ObjectMeta(
                        name=pod_name,
                        namespace=namespace,
                        uid=f"{namespace}-{pod_name}",
                        annotations={GROUP_NAME_ANNOTATION: name},
                        labels={"job": name},
                        creation_timestamp=stamp,
                    ),
                    spec=PodSpec(
                        scheduler_name="volcano",
                        containers=[Container(name="main", resources=ResourceRequirements(requests=requests))],
                        tolerations=tolerations,
                        node_selector=selector,
                    ),
                    status=PodStatus(phase="Pending"),
                )
            )
    return groups, out


def priority_classes() -> list[PriorityClass]:
    return [PriorityClass(metadata=ObjectMeta(name="batch"), value=100)]
