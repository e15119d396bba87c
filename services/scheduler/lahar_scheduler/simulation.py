"""What-if simulation: run sessions over a set of Kubernetes objects and apply their decisions.

Between cycles, bound pods start running, evicted pods disappear, and PodGroup status is
written back, so cycle N+1 sees the cluster as cycle N left it.  Pure: callers pass in the
objects and read the decisions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from lahar.api.objects import (
    Condition,
    DeviceClass,
    DraObject,
    HyperNode,
    KubeObject,
    Namespace,
    Node,
    Numatopology,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    Queue,
    ResourceClaim,
    ResourceQuota,
    ResourceSlice,
)
from lahar_scheduler.core import run_session
from lahar_scheduler.framework.conf import SchedulerConf
from lahar_scheduler.framework.session import SessionResult
from lahar_scheduler.framework.snapshot import DraObjects, Snapshot


@dataclass
class Outcome:
    """Decisions across all cycles, keyed as a conformance case's ``expect``."""

    binds: dict[str, str] = field(default_factory=dict)
    evictions: list[str] = field(default_factory=list)
    pipelined: dict[str, str] = field(default_factory=dict)
    phases: dict[str, str] = field(default_factory=dict)
    conditions: dict[str, str] = field(default_factory=dict)
    results: list[SessionResult] = field(default_factory=list)
    # GPU cards chosen at bind (deviceshare): pod -> its gpu-index, or its vGPU devices.
    cards: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {
            "binds": dict(sorted(self.binds.items())),
            "evictions": sorted(self.evictions),
            "pipelined": dict(sorted(self.pipelined.items())),
            "podGroupPhases": dict(sorted(self.phases.items())),
            "conditions": dict(sorted(self.conditions.items())),
        }
        if self.cards:  # only with deviceshare, so other outputs keep their shape
            out["cards"] = dict(sorted(self.cards.items()))
        return out


class Cluster:
    """Objects by kind and key, as a real API server would hold them."""

    def __init__(self, objects: Iterable[KubeObject | DraObject]) -> None:
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, Pod] = {}
        self.podgroups: dict[str, PodGroup] = {}
        self.queues: dict[str, Queue] = {}
        self.priority_classes: dict[str, PriorityClass] = {}
        self.namespaces: dict[str, Namespace] = {}
        self.quotas: dict[str, ResourceQuota] = {}
        self.numatopologies: dict[str, Numatopology] = {}
        self.pdbs: dict[str, PodDisruptionBudget] = {}
        self.hypernodes: dict[str, HyperNode] = {}
        self.dra = DraObjects()
        for obj in objects:
            self.add(obj)

    def add(self, obj: KubeObject | DraObject) -> None:
        meta = obj.metadata
        key = f"{meta.namespace}/{meta.name}"
        if isinstance(obj, Node):
            self.nodes[meta.name] = obj
        elif isinstance(obj, Pod):
            self.pods[key] = obj
        elif isinstance(obj, PodGroup):
            self.podgroups[key] = obj
        elif isinstance(obj, Queue):
            self.queues[meta.name] = obj
        elif isinstance(obj, PriorityClass):
            self.priority_classes[meta.name] = obj
        elif isinstance(obj, Namespace):
            self.namespaces[meta.name] = obj
        elif isinstance(obj, ResourceQuota):
            self.quotas[key] = obj
        elif isinstance(obj, Numatopology):
            self.numatopologies[meta.name] = obj
        elif isinstance(obj, PodDisruptionBudget):
            self.pdbs[key] = obj
        elif isinstance(obj, HyperNode):
            self.hypernodes[meta.name] = obj
        elif isinstance(obj, ResourceClaim):
            self.dra.claims[key] = obj
        elif isinstance(obj, ResourceSlice):
            self.dra.slices.append(obj)
        elif isinstance(obj, DeviceClass):
            self.dra.classes[meta.name] = obj

    def snapshot(self, now: float = 0.0) -> Snapshot:
        return Snapshot(
            list(self.nodes.values()),
            list(self.pods.values()),
            list(self.podgroups.values()),
            list(self.queues.values()),
            self.priority_classes.values(),
            self.namespaces.values(),
            now=now,
            resource_quotas=self.quotas.values(),
            numatopologies=self.numatopologies.values(),
            pdbs=self.pdbs.values(),
            hypernodes=self.hypernodes.values(),
            dra=self.dra,
        )

    def apply(self, result: SessionResult) -> None:
        """Land a session's decisions: binds run, evictions vanish, PodGroup status is written."""
        for task, node in result.binds:
            pod = self.pods.get(task.key)
            if pod is not None:
                spec = msgspec.structs.replace(pod.spec, node_name=node)
                status = msgspec.structs.replace(pod.status, phase="Running")
                meta = pod.metadata
                if task.card_annotations:  # the Binding's annotations land on the pod
                    meta = msgspec.structs.replace(meta, annotations={**meta.annotations, **task.card_annotations})
                self.pods[task.key] = msgspec.structs.replace(pod, metadata=meta, spec=spec, status=status)
        for task, _ in result.evictions:
            self.pods.pop(task.key, None)
        for key, allocation in result.claim_allocations.items():
            claim = self.dra.claims.get(key)
            if claim is not None:
                claimed = msgspec.structs.replace(claim.status, allocation=allocation)
                self.dra.claims[key] = msgspec.structs.replace(claim, status=claimed)
        for uid, update in result.podgroups.items():
            pg = self.podgroups.get(uid)
            if pg is None:
                continue
            conds = [
                Condition(
                    type=c.type,
                    status=c.status,
                    reason=c.reason,
                    message=c.message,
                    transition_id=c.transition_id,
                )
                for c in update.conditions
            ]
            pg_status = msgspec.structs.replace(
                pg.status,
                phase=update.phase,
                conditions=conds,
                running=update.running,
                succeeded=update.succeeded,
                failed=update.failed,
            )
            self.podgroups[uid] = msgspec.structs.replace(pg, status=pg_status)


def simulate(
    objects: Iterable[KubeObject], conf: SchedulerConf, cycles: int = 1, seed: int = 0, now: float = 0.0
) -> Outcome:
    """``now`` (epoch seconds) is the sessions' clock: only time-based plugins (sla) read it."""
    cluster = Cluster(objects)
    outcome = Outcome()
    for cycle in range(cycles):
        result = run_session(cluster.snapshot(now), conf, seed=seed + cycle, uid=f"session-{cycle + 1}")
        outcome.results.append(result)
        for task, node in result.binds:
            outcome.binds[task.key] = node
            held = task.card_annotations or {}
            card = held.get("volcano.sh/gpu-index") or held.get("volcano.sh/vgpu-ids-new")
            if card:
                outcome.cards[task.key] = card
        outcome.evictions.extend(task.key for task, _ in result.evictions)
        outcome.pipelined = dict(result.pipelined)
        for uid, update in result.podgroups.items():
            outcome.phases[uid] = update.phase
            fresh = f"session-{cycle + 1}"
            unsched = [
                c.message
                for c in update.conditions
                if c.type == "Unschedulable" and c.status == "True" and c.transition_id == fresh
            ]
            if unsched:
                outcome.conditions[uid] = unsched[0]
            else:
                outcome.conditions.pop(uid, None)
        cluster.apply(result)
    return outcome
