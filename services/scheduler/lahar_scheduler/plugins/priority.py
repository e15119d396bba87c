"""priority: PriorityClass-based job order, pod-priority task order, priority preemption."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.ceiling import shape_wise
from lahar_scheduler.framework.eviction import EvictionContext, EvictionKind
from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
from lahar_scheduler.framework.pq import ByKey
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.subjobs import SubJobInfo
from lahar_scheduler.framework.types import Vote
from lahar_scheduler.plugins.base import NoArgs, Plugin


def _desc(left: int, right: int) -> int:
    """Higher first."""
    return 0 if left == right else (-1 if left > right else 1)


class PriorityPlugin(Plugin):
    name = "priority"
    Args = NoArgs

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        ssn.add(P.TASK_ORDER, BY_PRIORITY)
        ssn.add(P.JOB_ORDER, BY_PRIORITY)
        ssn.add(P.SUB_JOB_ORDER, _sub_job_by_priority)
        ssn.add(P.PREEMPTABLE, self.preemptable)
        ssn.add(P.UNIFIED_EVICTABLE, self.unified_evictable)
        ssn.add(P.JOB_STARVING, _starving)

    def unified_evictable(self, ctx: EvictionContext, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        """Gang reclaim is about fairness between queues, so priority lets every candidate go; gang
        preempt may take only tasks of jobs below the preemptor job's priority."""
        if ctx.kind is EvictionKind.GANG_RECLAIM:
            return candidates, Vote.PERMIT
        victims = []
        for t in candidates:
            job = self.ssn.jobs.get(t.job)
            if job is not None and job.priority < ctx.job.priority:
                victims.append(t)
        return victims, Vote.PERMIT

    def preemptable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        """Other jobs' tasks of lower job priority; within the job, tasks of lower pod priority."""
        pjob = self.ssn.jobs.get(preemptor.job)
        if pjob is None:
            return [], Vote.PERMIT
        victims = []
        for t in preemptees:
            job = self.ssn.jobs.get(t.job)
            if job is None:
                continue
            if job.uid != pjob.uid:
                if job.priority < pjob.priority:
                    victims.append(t)
            elif t.priority < preemptor.priority:
                victims.append(t)
        return victims, Vote.PERMIT

    def victims_key(self, preemptor: TaskInfo) -> Hashable:
        """For candidates of other jobs the answer depends on the preemptor's job priority alone."""
        pjob = self.ssn.jobs.get(preemptor.job)
        return ("priority", None if pjob is None else pjob.priority)

    def victim_ceiling_key(self, preemptor: TaskInfo) -> Hashable:
        """``victim_ceiling``'s key alone."""
        pjob = self.ssn.jobs.get(preemptor.job)
        return None if pjob is None else ("priority", pjob.priority)

    def victim_ceiling(self, preemptor: TaskInfo) -> tuple[Hashable, Callable[[TaskInfo], bool]]:
        """Could name: tasks of jobs of at most the preemptor job's priority (equal only for its
        own job's tasks, which the test cannot tell apart without the job)."""
        pjob = self.ssn.jobs.get(preemptor.job)
        if pjob is None:
            return None, _never
        top, jobs = pjob.priority, self.ssn.jobs

        def could_name(t: TaskInfo) -> bool:
            job = jobs.get(t.job)
            return job is not None and job.priority <= top

        return ("priority", top), shape_wise(could_name)


def _never(_: TaskInfo) -> bool:
    return False


def _minus_priority(item: JobInfo | TaskInfo) -> int:
    return -item.priority


# Higher priority first, as a key (framework/pq.py): a job's or task's priority does not change
# in a session, so queues may compare it precomputed.
BY_PRIORITY: ByKey[JobInfo | TaskInfo] = ByKey(_minus_priority)


def _starving(job: JobInfo) -> bool:
    return job.ready_num() + job.waiting_num() < len(job.tasks)


def _sub_job_by_priority(left: SubJobInfo, right: SubJobInfo) -> int:
    """The sub-job holding the higher-priority task goes first."""
    return _desc(left.priority, right.priority)
