"""Deleting finished Jobs after ``spec.ttlSecondsAfterFinished`` (pure), after Volcano's garbage
collector.

A Job is finished when Completed, Failed or Terminated; it finished at
``status.state.lastTransitionTime``.  Once ``finish + ttl <= now`` it is deleted (foreground, on a
fresh read, with its UID as precondition: the shell's part); before that it is looked at again
when the TTL runs out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from lahar_controller.kubetime import parse_time

FINISHED = frozenset({"Completed", "Failed", "Terminated"})


class TTLError(ValueError):
    """The Job cannot be judged (no finish time, or no TTL)."""


def _key(job: Mapping[str, Any]) -> str:
    meta = job.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def is_finished(job: Mapping[str, Any]) -> bool:
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "") in FINISHED


def ttl_seconds(job: Mapping[str, Any]) -> int | None:
    value = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def needs_cleanup(job: Mapping[str, Any]) -> bool:
    """Finished with a TTL set; a Job being deleted already is left alone."""
    deleting = bool((job.get("metadata") or {}).get("deletionTimestamp"))
    return not deleting and is_finished(job) and ttl_seconds(job) is not None


def finish_time(job: Mapping[str, Any]) -> datetime:
    stamp = ((job.get("status") or {}).get("state") or {}).get("lastTransitionTime")
    if not stamp:
        raise TTLError(f"unable to find the time when the Job {_key(job)} finished")
    return parse_time(str(stamp))


def expire_time(job: Mapping[str, Any]) -> datetime:
    ttl = ttl_seconds(job)
    if ttl is None or not is_finished(job):
        raise TTLError(f"job {_key(job)} should not be cleaned up")
    return finish_time(job) + timedelta(seconds=ttl)


@dataclass(frozen=True)
class TTLVerdict:
    delete: bool  # the TTL has run out: delete the Job now
    recheck_after: timedelta | None  # else look again after this long (None: never, no TTL applies)


def check(job: Mapping[str, Any], now: datetime) -> TTLVerdict:
    """What to do with ``job`` at ``now``; raises :class:`TTLError` when a finished Job with a TTL
    has no finish time."""
    if not needs_cleanup(job):
        return TTLVerdict(False, None)
    remaining = expire_time(job) - now
    if remaining <= timedelta(0):
        return TTLVerdict(True, None)
    return TTLVerdict(False, remaining)
