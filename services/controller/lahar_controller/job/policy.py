"""Lifecycle policies: which action a request leads to, and after what delay.

Order (SKIPPED.md §2.3): an explicit action (Commands) wins; internal events (OutOfSync,
CommandIssued, PodRunning) sync; a request for another job UID, or from pods of an older job version,
syncs; then the request's task policies, then the job's, first match wins.  A policy matches by
event (or ``*``; PodPending only when the policy has a ``timeout``) or by exit code.  A policy's
``timeout`` delays the action (``Delayed``): a later event can cancel it before it fires.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lahar_controller.job.view import (
    ABORT_JOB,
    ANY_EVENT,
    CLOSE_QUEUE,
    COMMAND_ISSUED,
    COMPLETE_JOB,
    ENQUEUE_JOB,
    OPEN_QUEUE,
    OUT_OF_SYNC_EVENT,
    POD_EVICTED,
    POD_FAILED,
    POD_PENDING,
    POD_RUNNING,
    RESTART_JOB,
    RESTART_PARTITION,
    RESTART_POD,
    RESTART_TASK,
    RESUME_JOB,
    SYNC_JOB,
    SYNC_QUEUE,
    TERMINATE_JOB,
    Action,
    Obj,
    Request,
    Target,
    spec,
    tasks,
    uid_of,
)

INTERNAL_EVENTS = frozenset({OUT_OF_SYNC_EVENT, COMMAND_ISSUED, POD_RUNNING})
INTERNAL_ACTIONS = frozenset({SYNC_JOB, ENQUEUE_JOB, SYNC_QUEUE, OPEN_QUEUE, CLOSE_QUEUE})
POD_EVENTS = frozenset({POD_PENDING, POD_RUNNING, POD_FAILED, POD_EVICTED})
JOB_LEVEL = frozenset({ABORT_JOB, RESTART_JOB, TERMINATE_JOB, COMPLETE_JOB, RESUME_JOB})


@dataclass(frozen=True, slots=True)
class Decision:
    """What a request leads to: ``action`` now (delay 0) or after ``delay`` seconds."""

    request: Request
    action: str
    delay: float = 0.0

    @property
    def level(self) -> str:
        return level_of(self.action)

    def state_action(self) -> Action:
        """The state-machine action, with the kill target the restart actions need."""
        req = self.request
        if self.action == RESTART_TASK:
            return Action(self.action, Target("task", req.task_name))
        if self.action == RESTART_POD:
            return Action(self.action, Target("pod", req.task_name, req.pod_name))
        if self.action == RESTART_PARTITION:
            return Action(self.action, Target("partition", req.task_name, req.pod_name, req.partition_id))
        return Action(self.action)


def level_of(action: str) -> str:
    return {RESTART_TASK: "task", RESTART_POD: "pod", RESTART_PARTITION: "partition"}.get(action, "job")


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in a Go duration (``10s``, ``1m30s``, ``500ms``); ValueError when malformed."""
    text = text.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    parts = _DURATION.findall(body)
    if not parts or "".join(n + u for n, u in parts) != body:
        raise ValueError(f"invalid duration {text!r}")
    return sign * sum(float(n) * _UNIT[u] for n, u in parts)


def _events(policy: Obj) -> list[str]:
    events = list(policy.get("events") or [])
    if policy.get("event"):
        events.append(policy["event"])
    return events


def _match(policy: Obj, req: Request) -> bool:
    events = _events(policy)
    # a pod is Pending as a matter of course: only a policy with a timeout acts on it
    if (
        events
        and req.event
        and (req.event in events or ANY_EVENT in events)
        and (req.event != POD_PENDING or policy.get("timeout") is not None)
    ):
        return True
    code = policy.get("exitCode")
    return code is not None and int(code) == req.exit_code


def _decide(policy: Obj, req: Request) -> Decision:
    timeout = policy.get("timeout")
    delay = parse_duration(str(timeout)) if timeout is not None else 0.0
    return Decision(req, str(policy.get("action") or SYNC_JOB), delay)


def apply_policies(job: Obj, req: Request) -> Decision:
    if req.action:
        return Decision(req, req.action)
    if req.event in INTERNAL_EVENTS:
        return Decision(req, SYNC_JOB)
    if req.job_uid and req.job_uid != uid_of(job):
        return Decision(req, SYNC_JOB)  # a pod of an earlier job of the same name
    if req.job_version < int((job.get("status") or {}).get("version") or 0):
        return Decision(req, SYNC_JOB)  # a pod from before the last restart
    policies: list[Obj] = []
    if req.task_name:
        task = next((t for t in tasks(job) if t.get("name") == req.task_name), None)
        policies.extend((task or {}).get("policies") or [])
    policies.extend(spec(job).get("policies") or [])
    for policy in policies:
        if _match(policy, req):
            return _decide(policy, req)
    return Decision(req, SYNC_JOB)
