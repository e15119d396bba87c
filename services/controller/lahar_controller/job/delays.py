"""Delayed policy actions (a policy with ``timeout``), kept per job and pod until due or cancelled.

Cancellation follows Volcano: a pod event other than PodPending cancels that pod's waiting
PodPending action (only for the same pod UID: a recreated pod's Pending may arrive before the old
pod's deletion), and PodRunning also cancels a waiting PodFailed / PodEvicted action.  Once an
action that is not internal has run, waiting actions of the same level are dropped: all job-level
ones, or those of the same task / pod / partition.  Unlike Volcano, a replaced action is cancelled
(Volcano's timer for it still fires).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from lahar_controller.job.policy import POD_EVENTS, Decision
from lahar_controller.job.view import POD_EVICTED, POD_FAILED, POD_PENDING, POD_RUNNING, Request


@dataclass(frozen=True, slots=True)
class Waiting:
    decision: Decision
    due: datetime


class DelayedActions:
    def __init__(self) -> None:
        self._jobs: dict[str, dict[str, Waiting]] = {}  # job key -> pod name ("" for none) -> action

    def add(self, decision: Decision, now: datetime) -> bool:
        """Start waiting; False when the same action already waits for this pod (its clock runs on)."""
        req = decision.request
        slots = self._jobs.setdefault(req.key, {})
        old = slots.get(req.pod_name)
        if old is not None and old.decision.action == decision.action:
            return False
        slots[req.pod_name] = Waiting(decision, now + timedelta(seconds=decision.delay))
        return True

    def on_request(self, req: Request) -> list[Decision]:
        """Cancel what a pod event makes moot; returns the cancelled decisions."""
        if req.event not in POD_EVENTS or req.event == POD_PENDING:
            return []
        slots = self._jobs.get(req.key, {})
        waiting = slots.get(req.pod_name)
        if waiting is None:
            return []
        was = waiting.decision.request
        moot = (was.event == POD_PENDING and was.pod_uid == req.pod_uid) or (
            was.event in (POD_FAILED, POD_EVICTED) and req.event == POD_RUNNING
        )
        if not moot:
            return []
        del slots[req.pod_name]
        return [waiting.decision]

    def after_executed(self, done: Decision) -> list[Decision]:
        """Drop waiting actions of the same level as ``done`` (scoped to its task/pod/partition)."""
        slots = self._jobs.get(done.request.key, {})
        dropped = []
        for pod, waiting in list(slots.items()):
            if _same_scope(waiting.decision, done):
                del slots[pod]
                dropped.append(waiting.decision)
        return dropped

    def due(self, now: datetime) -> list[Decision]:
        """Remove and return the actions whose time has come, earliest first."""
        ready = sorted(
            ((w.due, key, pod) for key, slots in self._jobs.items() for pod, w in slots.items() if w.due <= now),
        )
        return [self._jobs[key].pop(pod).decision for _, key, pod in ready]

    def next_due(self) -> datetime | None:
        return min((w.due for slots in self._jobs.values() for w in slots.values()), default=None)

    def forget(self, job_key: str) -> None:
        self._jobs.pop(job_key, None)

    def waiting(self, job_key: str) -> list[Decision]:
        return [w.decision for w in self._jobs.get(job_key, {}).values()]


def _same_scope(a: Decision, b: Decision) -> bool:
    if a.level != b.level:
        return False
    ra, rb = a.request, b.request
    if a.level == "task":
        return ra.task_name == rb.task_name
    if a.level == "pod":
        return ra.pod_name == rb.pod_name
    if a.level == "partition":
        return ra.partition_id == rb.partition_id
    return True
