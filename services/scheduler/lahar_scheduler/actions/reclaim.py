"""reclaim: starving jobs take back resources from other, reclaimable queues (Volcano's reclaim).

Queues in queue order, skipping overused ones; each starving job (job order) gets one statement.
For each pending task (preemptionPolicy Never skipped, the queue must be ``preemptive``) the nodes
passing the preempt-style predicate are tried in node order: the Running, preemptable tasks of
other reclaimable queues are offered to the reclaimable plugins, and victims are evicted in
victim order while the task does not fit future idle plus what was evicted.  The task is pipelined
on the first node where it fits; the statement is committed only if the job is then pipelined.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from lahar_scheduler.actions.base import Action
from lahar_scheduler.actions.evictutil import (
    NEVER,
    UnresolvableCache,
    fits_vector,
    pending_tasks,
    preempt_nodes,
    shape_key,
)
from lahar_scheduler.actions.reclaim_bound import ReclaimBound
from lahar_scheduler.actions.reclaim_walk import ReclaimWalk
from lahar_scheduler.actions.scalar_fit import fits_with_each
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.pq import PriorityQueue
from lahar_scheduler.framework.types import TaskStatus
from lahar_scheduler.framework.victims import victims_queue

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
    from lahar_scheduler.framework.nodes import NodeInfo
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.framework.statement import Statement

S = TaskStatus
_UNKNOWN: Any = object()


class ReclaimAction(Action):
    name = "reclaim"

    def execute(self, ssn: Session) -> None:
        self.bound = ReclaimBound(ssn)
        self.verdicts = UnresolvableCache(ssn)
        self.walks = ReclaimWalk(ssn, self.bound, self.verdicts)
        # Points asked per reclaimer or per walked node, their chains resolved once.
        self.starving = ssn.caller(P.JOB_STARVING)
        self.preemptive = ssn.caller(P.PREEMPTIVE)
        self.pre_predicate = ssn.caller(P.PRE_PREDICATE)
        self.reclaimable = ssn.caller(P.RECLAIMABLE)
        # Per victim job, its tasks' sort key (None: no key; see _first_victim).
        self._task_keys: dict[str, Callable[[TaskInfo], Any] | None] = {}
        self._key_values: dict[str, Any] = {}  # per task uid, its key (see _first_victim)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order)
        seen: set[str] = set()
        jobs: dict[str, PriorityQueue[JobInfo]] = {}
        starving: list[tuple[QueueInfo, JobInfo]] = []
        for job in ssn.jobs.values():
            if job.is_pending() or ssn.call(P.JOB_VALID, job) is not None:
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            if queue.uid not in seen:
                seen.add(queue.uid)
                queues.push(queue)
            if ssn.call(P.JOB_STARVING, job):
                starving.append((queue, job))
        job_key = self._job_key(ssn, [job for _, job in starving])
        for queue, job in starving:
            jobs.setdefault(queue.uid, PriorityQueue(ssn.job_order, key=job_key)).push(job)
        while not queues.empty():
            queue = queues.pop()
            if ssn.call(P.OVERUSED, queue):
                # Dropped for the rest of the action (as in Volcano): its starving jobs wait.
                dropped = jobs.pop(queue.uid, None)
                while dropped is not None and not dropped.empty():
                    _note(
                        ssn,
                        dropped.pop(),
                        f"queue {queue.name} holds its deserved share (overused): it reclaims nothing",
                    )
                continue
            waiting = jobs.get(queue.uid)
            while waiting is not None and not waiting.empty():
                job = waiting.pop()
                # Its pending tasks are queued only now: no reclaim moves a waiting job's pending
                # tasks (only Running ones are victims) and their order does not change, so the
                # queue is the one Volcano built up front, without keeping thousands of entries
                # alive through the whole action.
                pending = pending_tasks(job)
                tasks = PriorityQueue(ssn.task_order, pending, key=ssn.task_sort_key(pending))
                self.reclaim_for_job(ssn, queue, job, tasks)
                if not waiting.empty():
                    # Volcano pushes the queue back while jobs remain; it is popped again later
                    # (and re-checked for overuse) once these jobs are done.
                    queues.push(queue)

    def _job_key(self, ssn: Session, starving: list[JobInfo]) -> Callable[[JobInfo], Any] | None:
        """The job order as a precomputed key (framework/pq.py), when the keys of waiting jobs
        cannot change: a job's key moves only with its own tasks, and reclaim moves only the
        popped job's tasks and its victims.  So no key when a starving job could be a victim
        (it holds a task some reclaimer could evict), where the comparator's answers change."""
        for job in starving:
            if any(self.bound.countable_queue(t) is not None for t in job.tasks_in(S.RUNNING)):
                return None
        return ssn.job_sort_key()

    def reclaim_for_job(self, ssn: Session, queue: QueueInfo, job: JobInfo, pending: PriorityQueue[TaskInfo]) -> None:
        stmt = ssn.statement()
        failed: set[tuple[object, ...]] = set()
        miss = ""  # why the last task tried found nothing to reclaim
        while self.starving(job) and not pending.empty():
            task = pending.pop()
            if task.preemption_policy == NEVER:
                miss = f"task {task.name}: its preemptionPolicy is Never, so it evicts nothing"
                continue
            if not self.preemptive(queue, [task]):
                miss = f"task {task.name} (asks {task.resreq}): queue {queue.name} may not grow by it (deserved share)"
                continue
            err = self.pre_predicate(task)
            if err is not None:
                miss = f"task {task.name}: {err}"
                continue
            # The key is built only when it is asked (mostly no task has failed): what it reads
            # of the pod does not change in a session.
            if failed and shape_key(task, "reclaim") in failed:
                continue
            if self.reclaim_for_task(ssn, stmt, task, job):
                failed.clear()
            else:
                failed.add(shape_key(task, "reclaim"))
                miss = (
                    f"task {task.name} (asks {task.resreq}): no node where Running pods of other reclaimable "
                    "queues above their deserved share make room"
                )
        if ssn.call(P.JOB_PIPELINED, job):
            if stmt.has_evictions():
                ssn.decision(job).verdicts["reclaim"] = "evicted tasks of other queues"
                ssn.result.stats.evicting_commit("reclaim")
            stmt.commit()
        else:
            self._discard(stmt)
            if miss:
                _note(ssn, job, miss)

    def _discard(self, stmt: Statement) -> None:
        stmt.discard()

    def reclaim_for_task(self, ssn: Session, stmt: Statement, task: TaskInfo, job: JobInfo) -> bool:
        # No victim ceiling here (framework/ceiling.py): reclaim's walk is cheap enough that
        # computing one cost more than it saved (6.1 s without, 8.5 s with, at 5,000 nodes).
        # Nodes that fail the bound fail ValidateVictims whatever the plugins offer: not walked.
        for i, reclaimees in self._nodes_to_walk(ssn, task, job.queue):
            if not reclaimees:
                continue
            node = ssn.node_list[i]
            victims = self.reclaimable(task, reclaimees)
            if not fits_with_each(task, ssn.nodes.future[i], victims, self.walks.requests):  # ValidateVictims
                continue
            if self._evict_until_fits(ssn, stmt, task, node, victims):
                return True
        return False

    def _nodes_to_walk(self, ssn: Session, task: TaskInfo, queue: str) -> Iterator[tuple[int, list[TaskInfo]]]:
        """``preempt_nodes`` within the bound, in node order, each with its reclaimees: Running,
        preemptable tasks of jobs in other queues that allow reclaiming.  Mostly from the walk
        memo (actions/reclaim_walk.py); the walk usually ends on its first node."""
        if ReclaimWalk.applies(ssn, task):
            yield from self.walks.nodes(task, queue)
            return
        possible = self.bound.candidates(task, queue)
        if not possible.any():
            return
        nodes = preempt_nodes(ssn, task, self.verdicts)
        for i in nodes[possible[nodes]].tolist():
            yield i, self.walks.reclaimees(i, queue)

    def _evict_until_fits(
        self, ssn: Session, stmt: Statement, task: TaskInfo, node: NodeInfo, victims: list[TaskInfo]
    ) -> bool:
        """Evict (checking before each) until the task fits future idle plus what was evicted;
        then pipeline it and keep this node's evictions, else undo them."""
        future = ssn.nodes.future[node.index]
        if not fits_vector(task, future):
            first = self._first_victim(ssn, victims)
            if first is not None and fits_with_each(task, future, [first], self.walks.requests):
                # One eviction is enough: the walk below would pop this victim, evict it and
                # stop, and its statement could not then fail, so it goes straight into stmt.
                stmt.evict(first, "reclaim")
                stmt.pipeline(task, node.name, True)
                return True
        have = future.copy()
        node_stmt = ssn.statement()
        order = victims_queue(ssn, victims, task)
        evicted = False
        while not order.empty() and not fits_vector(task, have):
            victim = order.pop()
            node_stmt.evict(victim, "reclaim")
            have += victim.res_vec
            evicted = True
        if not fits_vector(task, have):
            self._discard(node_stmt)
            return False
        node_stmt.pipeline(task, node.name, evicted)
        stmt.merge(node_stmt)
        return True

    def _first_victim(self, ssn: Session, victims: list[TaskInfo]) -> TaskInfo | None:
        """The victim Volcano's victim queue pops first, when that is cheap to know for sure
        (else None): victims of one job come out in reverse task order, so the first is the
        largest by the task key (``Session.task_sort_key``, an exact twin of the task order)."""
        if not victims:
            return None
        job = victims[0].job
        if any(v.job != job for v in victims):
            return None
        key = self._task_keys.get(job, _UNKNOWN)
        if key is _UNKNOWN:
            owner = ssn.jobs.get(job)
            key = self._task_keys[job] = ssn.task_sort_key(list(owner.tasks.values())) if owner else None
        if key is None or any(v.index is None for v in victims):
            return None
        # max(victims, key=key), each task's key computed once a session (a node's victims are
        # offered again to each reclaimer that walks it; the key reads fields a session keeps).
        values = self._key_values
        best, most = None, None
        for v in victims:
            got = values.get(v.uid)
            if got is None:
                got = values[v.uid] = key(v)
            if most is None or got > most:
                best, most = v, got
        return best


def _note(ssn: Session, job: JobInfo, why: str) -> None:
    placed = job.ready_num() + job.waiting_num()
    ssn.note(job, f"reclaim: starving ({placed} of minMember {job.min_available} placed), {why}")
