"""gang: all-or-nothing.  A job is ready only when minMember tasks (and each role's
minTaskMember) can run together; it offers victims only above minMember."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.ceiling import shape_wise
from lahar_scheduler.framework.eviction import EvictionContext
from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
from lahar_scheduler.framework.pq import ByKey
from lahar_scheduler.framework.session import Condition, Session
from lahar_scheduler.framework.stats import JobNumbers
from lahar_scheduler.framework.subjobs import SubJobInfo
from lahar_scheduler.framework.types import ALLOCATED_STATUSES, TaskStatus, Vote
from lahar_scheduler.framework.why import Why
from lahar_scheduler.plugins.base import NoArgs, Plugin

S = TaskStatus
_PENDING = S.PENDING  # read per job at close (an enum class's member lookup is slow on 3.11)


class GangPlugin(Plugin):
    name = "gang"
    Args = NoArgs

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        ssn.add(P.JOB_VALID, self.job_valid)
        ssn.add(P.PREEMPTABLE, self.evictable)
        ssn.add(P.RECLAIMABLE, self.evictable)
        ssn.add(P.UNIFIED_EVICTABLE, _unified_evictable)
        ssn.add(P.JOB_ORDER, JOB_ORDER)
        ssn.add(P.JOB_READY, _job_ready)
        ssn.add(P.JOB_PIPELINED, _job_pipelined)
        ssn.add(P.JOB_STARVING, _job_starving)
        ssn.add(P.SUB_JOB_ORDER, _sub_job_order)
        ssn.add(P.SUB_JOB_READY, _sub_job_ready)
        ssn.add(P.SUB_JOB_PIPELINED, _sub_job_pipelined)

    def job_valid(self, job: JobInfo) -> tuple[str, str] | None:
        invalid = _job_valid(job)
        if invalid is not None:
            self.ssn.explain(job, invalid_why(job))
        return invalid

    def evictable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        """Victims only above each job's minMember: a gang is never broken by eviction."""
        occupied: dict[str, int] = {}
        victims = []
        for t in preemptees:
            job = self.ssn.jobs.get(t.job)
            if job is None:
                continue
            left = occupied.get(job.uid)
            if left is None:  # setdefault would count the job's ready tasks for every candidate
                left = occupied[job.uid] = job.ready_num()
            if left > job.min_available:
                occupied[job.uid] = left - 1
                victims.append(t)
        return victims, Vote.PERMIT

    def victims_key(self, _: TaskInfo) -> Hashable:
        """Only the candidates' jobs' ready counts matter, not the preemptor."""
        return "gang"

    def victim_ceiling_key(self, _: TaskInfo) -> Hashable:
        """``victim_ceiling``'s key alone."""
        return "gang"

    def victim_ceiling(self, preemptor: TaskInfo) -> tuple[Hashable, Callable[[TaskInfo], bool]]:
        """Could name: tasks of jobs with more ready tasks than minMember."""
        jobs = self.ssn.jobs
        seen: dict[str, bool] = {}  # per job, for one ceiling computation (see drf's)

        def could_name(t: TaskInfo) -> bool:
            got = seen.get(t.job)
            if got is None:
                job = jobs.get(t.job)
                got = seen[t.job] = job is not None and job.ready_num() > job.min_available
            return got

        return "gang", shape_wise(could_name)

    def on_session_close(self, ssn: Session) -> None:
        stats = ssn.result.stats
        stats.unschedulable_jobs = 0
        numbers_of = stats.jobs
        # One condition for every ready job: conditions are replaced, never changed in place.
        scheduled = Condition("Scheduled", "True", "tasks in gang are ready to be scheduled", "", ssn.uid)
        for job in ssn.jobs.values():
            if not job.tasks:
                continue
            numbers = numbers_of.get(job.uid)
            if numbers is None:  # stats.job, without its call (gang's close is the first to ask)
                numbers = numbers_of[job.uid] = JobNumbers(job.name, job.namespace, job.queue)
            if job.is_ready():
                numbers.unschedulable_tasks = 0
                ssn.update_podgroup_condition(job, scheduled)
                continue
            if _skip_for_releasing(job):
                continue
            placeable = _placeable(job)
            unready = job.min_available - placeable
            # Volcano's unschedule_task_count, unschedule_job_count and job_retry_counts
            numbers.unschedulable_tasks, numbers.retried = unready, True
            stats.unschedulable_jobs += 1
            decision = ssn.decision(job)
            why = decision.why
            msg = (
                f"{unready}/{len(job.tasks)} tasks in gang unschedulable: {fit_error(ssn, job)}; "
                + (f"{why.short()}; " if why is not None else "")
                + "".join(f"{n}; " for n in decision.notes)
                + f"gang: {placeable}/{len(job.tasks)} tasks placeable, minMember {job.min_available}"
            )
            ssn.update_podgroup_condition(job, Condition("Unschedulable", "True", "NotEnoughResources", msg, ssn.uid))


def _job_valid(job: JobInfo) -> tuple[str, str] | None:
    if not job.check_task_valid():
        return "NotEnoughPodsOfTask", "Not enough valid pods of each task for gang-scheduling"
    if job.sub_jobs is not None and not job.sub_jobs.valid():
        return "NotEnoughPodsOfTask", "Not enough valid subGroups of each task for gang-scheduling"
    valid = job.valid_num()
    if valid < job.min_available:
        return (
            "NotEnoughTasks",
            f"Not enough valid tasks for gang-scheduling, valid: {valid}, min: {job.min_available}",
        )
    return None


def invalid_why(job: JobInfo) -> Why:
    """Which count is short: a role below its minTaskMember, or the job below minMember."""
    if not job.check_task_valid():
        counts = job.valid_by_role()
        short = [(r, counts.get(r, 0), m) for r, m in sorted(job.task_min_available.items()) if counts.get(r, 0) < m]
        parts = ", ".join(f"role {r}: {n} of minTaskMember {m} pods exist" for r, n, m in short)
        remedy = " and ".join(f"create {m - n} more {r} pod(s)" for r, n, m in short)
        return Why("allocate", "gang", f"job not valid: {parts}", f"{remedy}, or lower minTaskMember")
    valid = job.valid_num()
    return Why(
        "allocate",
        "gang",
        f"job not valid: {valid} of minMember {job.min_available} pods exist (pending or placed)",
        f"create {job.min_available - valid} more pod(s) in the group, or lower minMember to {valid}",
        [f"{len(job.tasks)} pods name the group; only pending and placed ones count"],
    )


def _job_ready(job: JobInfo) -> bool:
    subs = job.sub_jobs
    return job.check_task_ready() and (subs is None or subs.ready()) and job.is_ready()


def _job_pipelined(job: JobInfo) -> Vote:
    subs = job.sub_jobs
    ok = job.check_task_pipelined() and (subs is None or subs.pipelined()) and job.is_pipelined()
    return Vote.PERMIT if ok else Vote.REJECT


def _sub_job_ready(sub: SubJobInfo) -> bool:
    return sub.is_ready()


def _sub_job_pipelined(sub: SubJobInfo) -> Vote:
    return Vote.PERMIT if sub.is_pipelined() else Vote.REJECT


def _sub_job_order(left: SubJobInfo, right: SubJobInfo) -> int:
    """Sub-jobs still to be made whole go first (as jobs in _job_order)."""
    lr, rr = left.is_ready(), right.is_ready()
    if lr == rr:
        return 0
    return 1 if lr else -1


def _job_starving(job: JobInfo) -> bool:
    return job.is_starving()


def _ready_key(job: JobInfo) -> bool:
    return job.is_ready()


# Jobs still to be made whole go first (False before True).  Readiness changes only when the
# job's own tasks move, so queues may compare it precomputed (framework/pq.py).
JOB_ORDER: ByKey[JobInfo] = ByKey(_ready_key)


def _placeable(job: JobInfo) -> int:
    """Ready tasks plus pending tasks this session could place before the gang was discarded."""
    pending = job.status_index.get(_PENDING)
    tried = sum(1 for t in pending.values() if t.last_status in ALLOCATED_STATUSES) if pending else 0
    return job.ready_num() + tried


def _skip_for_releasing(job: JobInfo) -> bool:
    releasing = job.releasing_scheduled_num()
    if releasing == 0 or job.count(S.PENDING, S.PIPELINED):
        return False
    return job.scheduled_num() + releasing >= job.min_available


def fit_error(ssn: Session, job: JobInfo) -> str:
    """Why the job's tasks found no node: the first task's per-node histogram, or the job's reason."""
    if job.job_fit_error:
        return job.job_fit_error
    for task in job.tasks.values():
        err = job.fit_errors.get(task.uid)
        if err is not None:
            return err.error(len(ssn.node_list))
    pending = job.count(S.PENDING)
    return f"{pending} Pending, {job.min_available} minAvailable, pod group is not ready"


def _unified_evictable(_ctx: EvictionContext, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
    """Gang-aware eviction keeps minMember through its safe/whole bundles: permit every candidate."""
    return candidates, Vote.PERMIT
