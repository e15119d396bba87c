"""Which running tasks a preemptor may take: preempt's two victim filters, as small classes so
the paths that rely on a filter's shape (the topology fast path fills its victim views through
the other-jobs filter) recognise it by type and read what it was made for."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from lahar_scheduler.framework.types import PREEMPTABLE_STATUSES

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.session import Session


def evictable_by(preemptor: TaskInfo, t: TaskInfo) -> bool:
    """Bound/Running and preemptable; a BestEffort preemptor may only evict BestEffort tasks."""
    if t.status not in PREEMPTABLE_STATUSES or not t.preemptable:
        return False
    return not (preemptor.best_effort and not t.best_effort)


class OtherJobs:
    """Evictable tasks of the other jobs of ``queue`` (preempt between jobs)."""

    __slots__ = ("preemptor", "queue", "ssn")

    def __init__(self, ssn: Session, preemptor: TaskInfo, queue: str) -> None:
        self.ssn, self.preemptor, self.queue = ssn, preemptor, queue

    def __call__(self, t: TaskInfo) -> bool:
        if not evictable_by(self.preemptor, t):
            return False
        job = self.ssn.jobs.get(t.job)
        return job is not None and job.queue == self.queue and t.job != self.preemptor.job

    def select(self, tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
        """The tasks this filter keeps, in order: ``[t for t in tasks if self(t)]`` in one loop
        (asked for every walked node, whose pipelined and releasing tasks go first)."""
        preemptor, jobs, queue = self.preemptor, self.ssn.jobs, self.queue
        mine, best_effort = preemptor.job, preemptor.best_effort
        out = []
        for t in tasks:
            if t.status not in PREEMPTABLE_STATUSES or not t.preemptable or (best_effort and not t.best_effort):
                continue
            job = jobs.get(t.job)
            if job is not None and job.queue == queue and t.job != mine:
                out.append(t)
        return out


class SameJob:
    """Evictable tasks of the preemptor's own job (preempt within a job; the ceiling is built
    for other jobs' tasks only)."""

    __slots__ = ("preemptor",)

    def __init__(self, preemptor: TaskInfo) -> None:
        self.preemptor = preemptor

    def __call__(self, t: TaskInfo) -> bool:
        return evictable_by(self.preemptor, t) and t.job == self.preemptor.job


__all__ = ["OtherJobs", "SameJob", "evictable_by"]
