"""The JSON of Volcano's extender protocol (pkg/scheduler/plugins/extender/argument.go).

Volcano marshals its own scheduler structs with Go's encoding/json, so the field names are the
Go names (``UID``, ``Resreq``, ``MilliCPU``…) and the Kubernetes objects inside are their API JSON.
Only the fields an extender can use are written; task statuses are Volcano's bit values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from lahar.api.codec import to_builtins
from lahar.api.resource import Resource

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
    from lahar_scheduler.framework.nodes import NodeInfo

Json = dict[str, Any]


def resource(r: Resource) -> Json:
    return {"MilliCPU": r.milli_cpu, "Memory": r.memory, "ScalarResources": dict(r.scalars) or None, "MaxTaskNum": 0}


def task_status(status: int) -> int:
    """Volcano's TaskStatus is a bit per status (Pending 1, Allocated 2, … Unknown 512), in the
    order Lahar's enum numbers them from 1."""
    return 1 << (int(status) - 1)


def task(t: TaskInfo) -> Json:
    from lahar_scheduler.plugins.tdm import task_revocable_zone

    return {
        "UID": t.uid,
        "Job": t.job,
        "Name": t.name,
        "Namespace": t.namespace,
        "TaskRole": t.role,
        "Resreq": resource(t.resreq),
        "InitResreq": resource(t.init_resreq),
        "NodeName": t.node_name,
        "EvictionOccurred": t.eviction_occurred,
        "Status": task_status(t.status),
        "Priority": t.priority,
        "Preemptable": t.preemptable,
        "BestEffort": t.best_effort,
        "SchGated": t.sch_gated,
        "RevocableZone": task_revocable_zone(t),
        "Pod": to_builtins(t.pod),
    }


def node(n: NodeInfo) -> Json:
    return {
        "Name": n.name,
        "Node": to_builtins(n.node),
        "State": {"Phase": "Ready" if not n.unschedulable else "NotReady", "Reason": ""},
        "Releasing": resource(n.releasing),
        "Pipelined": resource(n.pipelined),
        "Idle": resource(n.idle),
        "Used": resource(n.used),
        "Allocatable": resource(n.allocatable),
        "Capacity": resource(n.allocatable),
        "Tasks": {uid: task(t) for uid, t in n.tasks.items()},
        "RevocableZone": n.labels.get("volcano.sh/revocable-zone", ""),
    }


def job(j: JobInfo) -> Json:
    return {
        "UID": j.uid,
        "Name": j.name,
        "Namespace": j.namespace,
        "Queue": j.queue,
        "Priority": j.priority,
        "MinAvailable": j.min_available,
        "Tasks": {uid: task(t) for uid, t in j.tasks.items()},
        "TaskMinAvailable": dict(j.task_min_available),
        "Allocated": resource(j.allocated),
        "TotalRequest": resource(j.total_request),
        "CreationTimestamp": j.creation or None,
        "PodGroup": to_builtins(j.podgroup) if j.podgroup is not None else None,
        "Preemptable": j.preemptable,
    }


def queue(q: QueueInfo) -> Json:
    return {"UID": q.uid, "Name": q.name, "Weight": q.weight, "Queue": to_builtins(q.queue)}


# -- replies ----------------------------------------------------------------------------------


class PredicateResponse(msgspec.Struct):
    error_message: str = msgspec.field(default="", name="status")
    code: int = 0


class PrioritizeResponse(msgspec.Struct):
    node_score: dict[str, float] | None = msgspec.field(default=None, name="nodeScore")
    error_message: str = msgspec.field(default="", name="errorMessage")


class VictimRef(msgspec.Struct):
    """A victim as the extender returns it: a TaskInfo of which only the UID is read back."""

    uid: str = msgspec.field(default="", name="UID")


class PreemptableResponse(msgspec.Struct):
    status: int = 0
    victims: list[VictimRef] | None = None


class StatusResponse(msgspec.Struct):
    status: int = 0


class ReadyResponse(msgspec.Struct):
    status: bool = False


class OverusedResponse(msgspec.Struct):
    overused: bool = False


class EventHandlerResponse(msgspec.Struct):
    error_message: str = msgspec.field(default="", name="errorMessage")
