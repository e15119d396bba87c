"""priority: PriorityClass-based job order, pod-priority task order, priority preemption."""

from __future__ import annotations

from functools import partial

from lahar_scheduler.framework.eviction import EvictionContext, EvictionKind
from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.types import Vote
from lahar_scheduler.plugins.base import NoArgs, Plugin


def _desc(left: int, right: int) -> int:
    """Higher first."""
    return 0 if left == right else (-1 if left > right else 1)


class PriorityPlugin(Plugin):
    name = "priority"
    Args = NoArgs

    def on_session_open(self, ssn: Session) -> None:
        ssn.add("task_order", lambda left, right: _desc(left.priority, right.priority))
        ssn.add("job_order", lambda left, right: _desc(left.priority, right.priority))

        def preemptable(preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
            pjob = ssn.jobs.get(preemptor.job)
            if pjob is None:
                return [], Vote.PERMIT
            victims = []
            for t in preemptees:
                job = ssn.jobs.get(t.job)
                if job is None:
                    continue
                if job.uid != pjob.uid:
                    if job.priority < pjob.priority:
                        victims.append(t)
                elif t.priority < preemptor.priority:
                    victims.append(t)
            return victims, Vote.PERMIT

        ssn.add("preemptable", preemptable)
        ssn.add("unified_evictable", partial(_unified_evictable, ssn))
        ssn.add("job_starving", _starving)


def _unified_evictable(ssn: Session, ctx: EvictionContext, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
    """Gang reclaim is about fairness between queues, so priority lets every candidate go; gang
    preempt may take only tasks of jobs below the preemptor job's priority."""
    if ctx.kind is EvictionKind.GANG_RECLAIM:
        return candidates, Vote.PERMIT
    victims = []
    for t in candidates:
        job = ssn.jobs.get(t.job)
        if job is not None and job.priority < ctx.job.priority:
            victims.append(t)
    return victims, Vote.PERMIT


def _starving(job: JobInfo) -> bool:
    return job.ready_num() + job.waiting_num() < len(job.tasks)
