"""The controller's view of one Job (Volcano's JobInfo), requests, actions and the keys they use.

A job's pods are grouped by task (the pod's ``volcano.sh/task-spec`` annotation), then by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lahar_controller.job.names import OUT_OF_SYNC, TASK_SPEC

Obj = dict[str, Any]

# Actions (bus.volcano.sh/v1alpha1)
ABORT_JOB, RESTART_JOB, RESTART_TASK = "AbortJob", "RestartJob", "RestartTask"
RESTART_POD, RESTART_PARTITION = "RestartPod", "RestartPartition"
TERMINATE_JOB, COMPLETE_JOB, RESUME_JOB = "TerminateJob", "CompleteJob", "ResumeJob"
SYNC_JOB, ENQUEUE_JOB = "SyncJob", "EnqueueJob"
SYNC_QUEUE, OPEN_QUEUE, CLOSE_QUEUE = "SyncQueue", "OpenQueue", "CloseQueue"

# Events
ANY_EVENT = "*"
POD_PENDING, POD_RUNNING, POD_FAILED, POD_EVICTED = "PodPending", "PodRunning", "PodFailed", "PodEvicted"
JOB_UNKNOWN, TASK_COMPLETED, TASK_FAILED = "Unknown", "TaskCompleted", "TaskFailed"
OUT_OF_SYNC_EVENT, COMMAND_ISSUED = "OutOfSync", "CommandIssued"


@dataclass(frozen=True, slots=True)
class Request:
    """A unit of work for a job worker (equal requests queued twice collapse, as in a workqueue)."""

    namespace: str
    job_name: str
    job_uid: str = ""
    task_name: str = ""
    pod_name: str = ""
    pod_uid: str = ""
    partition_id: str = ""
    event: str = ""
    exit_code: int = 0
    action: str = ""
    job_version: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.job_name}"


@dataclass(frozen=True, slots=True)
class Target:
    """What a RestartTask / RestartPod / RestartPartition kills."""

    type: str  # task | pod | partition
    task: str = ""
    pod: str = ""
    partition: str = ""


@dataclass(frozen=True, slots=True)
class Action:
    name: str
    target: Target | None = None


@dataclass
class JobView:
    job: Obj
    pods: dict[str, dict[str, Obj]] = field(default_factory=dict)  # task -> pod name -> pod

    @classmethod
    def of(cls, job: Obj, pods: list[Obj]) -> JobView:
        view = cls(job)
        for pod in pods:
            view.pods.setdefault(task_of(pod), {})[name_of(pod)] = pod
        return view

    def all_pods(self) -> Iterator[Obj]:
        for pods in self.pods.values():
            yield from pods.values()

    @property
    def key(self) -> str:
        return f"{namespace_of(self.job)}/{name_of(self.job)}"


def meta(obj: Obj) -> Obj:
    m: Obj = obj.get("metadata") or {}
    return m


def name_of(obj: Obj) -> str:
    return str(meta(obj).get("name", ""))


def namespace_of(obj: Obj) -> str:
    return str(meta(obj).get("namespace") or "")


def uid_of(obj: Obj) -> str:
    return str(meta(obj).get("uid") or "")


def annotations_of(obj: Obj) -> dict[str, str]:
    a: dict[str, str] = meta(obj).get("annotations") or {}
    return a


def labels_of(obj: Obj) -> dict[str, str]:
    lb: dict[str, str] = meta(obj).get("labels") or {}
    return lb


def task_of(pod: Obj) -> str:
    return annotations_of(pod).get(TASK_SPEC, "")


def phase_of(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def terminating(obj: Obj) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def out_of_sync(pod: Obj) -> bool:
    return OUT_OF_SYNC in annotations_of(pod)


def spec(job: Obj) -> Obj:
    s: Obj = job.get("spec") or {}
    return s


def status(job: Obj) -> Obj:
    s: Obj = job.get("status") or {}
    return s


def tasks(job: Obj) -> list[Obj]:
    t: list[Obj] = spec(job).get("tasks") or []
    return t


def job_phase(job: Obj) -> str:
    return str((status(job).get("state") or {}).get("phase") or "")


def controller_ref(obj: Obj) -> Obj | None:
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            r: Obj = ref
            return r
    return None
