"""Job status: pod counts by phase, per-task counts, conditions, and the write rules.

Counts follow Volcano's classification: a pod being deleted counts as ``terminating`` (and in no
other column); otherwise by phase, anything unrecognised as ``unknown``.  Zero counts and empty
maps are omitted, as Go's ``omitempty`` does, so two statuses compare equal when they mean the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lahar_controller.job.jsoncopy import copy_json
from lahar_controller.job.names import TASK_SPEC
from lahar_controller.job.view import Obj, annotations_of, phase_of, spec, tasks

COUNTS = ("pending", "running", "succeeded", "failed", "terminating", "unknown")
_COLUMN = {"Pending": "pending", "Running": "running", "Succeeded": "succeeded", "Failed": "failed"}
FINISHED = frozenset({"Completed", "Failed", "Terminated"})


@dataclass
class Tally:
    """Counts gathered while walking a job's pods."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    per_task: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, pod: Obj) -> None:
        phase = phase_of(pod)
        self.counts[_COLUMN.get(phase, "unknown")] += 1
        task = annotations_of(pod).get(TASK_SPEC)
        if task is None:
            return
        key = phase if phase in _COLUMN else "Unknown"
        by_phase = self.per_task.setdefault(task, {})
        by_phase[key] = by_phase.get(key, 0) + 1

    def add_created(self, pod: Obj) -> None:
        """A pod we are creating: the API server gives it phase Pending."""
        self.add({**pod, "status": {"phase": "Pending"}})

    def write(self, status: Obj) -> None:
        for name in COUNTS:
            status[name] = self.counts[name]
        status["taskStatusCount"] = {t: {"phase": dict(p)} for t, p in self.per_task.items()}


def total_replicas(job: Obj) -> int:
    return sum(int(t.get("replicas") or 0) for t in tasks(job))


def total_task_min_available(job: Obj) -> int:
    """Σ task minAvailable, a task without one counting its replicas."""
    total = 0
    for t in tasks(job):
        m = t.get("minAvailable")
        total += int(m) if m is not None else int(t.get("replicas") or 0)
    return total


def min_available(job: Obj) -> int:
    return int(spec(job).get("minAvailable") or 0)


def count(status: Obj, name: str) -> int:
    return int(status.get(name) or 0)


def task_succeeded(status: Obj, task: str) -> int | None:
    """Succeeded pods of ``task`` per ``taskStatusCount``; None when the task has no entry."""
    entry = (status.get("taskStatusCount") or {}).get(task)
    if entry is None:
        return None
    return int((entry.get("phase") or {}).get("Succeeded") or 0)


def phase(status: Obj) -> str:
    return str((status.get("state") or {}).get("phase") or "")


def set_phase(status: Obj, value: str) -> None:
    status.setdefault("state", {})["phase"] = value


def rfc3339(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def append_condition(conditions: list[Obj], condition: Obj) -> list[Obj]:
    """Drop any earlier condition with the same status (phase) and put the new one last."""
    kept = [c for c in conditions if c.get("status") != condition.get("status")]
    return [*kept, condition]


def stamp(status: Obj, now: datetime) -> None:
    """Record a transition: the state's time moves to ``now`` and the phase's condition goes last."""
    when = rfc3339(now)
    status.setdefault("state", {})["lastTransitionTime"] = when
    condition = {"status": phase(status), "lastTransitionTime": when}
    status["conditions"] = append_condition(list(status.get("conditions") or []), condition)


def prune(value: Any) -> Any:
    """The value with Go zero values (0, "", False, None, {}, []) removed from maps, recursively."""
    if isinstance(value, dict):
        out = {k: prune(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (0, "", None, {}, [])}
    if isinstance(value, list):
        return [prune(v) for v in value]
    return value


def same(a: Obj, b: Obj) -> bool:
    return bool(prune(a) == prune(b))


def copied(job: Obj) -> Obj:
    """A deep copy of the job's status (never None)."""
    status: Obj = copy_json(job.get("status") or {})
    return status


def go_duration(seconds: float) -> str:
    """``seconds`` as Go's time.Duration prints it (``1h2m3s``, ``4.5s``, ``0s``)."""
    if seconds == 0:
        return "0s"
    sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
    if seconds < 1:
        ms = seconds * 1000
        return f"{sign}{ms:g}ms" if ms >= 1 else f"{sign}{ms * 1000:g}µs"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.9f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{sign}{int(hours)}h{int(minutes)}m{text}"
    if minutes:
        return f"{sign}{int(minutes)}m{text}"
    return sign + text


def parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
