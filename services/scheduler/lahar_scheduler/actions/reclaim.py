"""reclaim: starving jobs take back resources from other, reclaimable queues (Volcano's reclaim).

Queues in queue order, skipping overused ones; each starving job (job order) gets one statement.
For each pending task (preemptionPolicy Never skipped, the queue must be ``preemptive``) the nodes
passing the preempt-style predicate are tried in node order: the Running, preemptable tasks of
other reclaimable queues are offered to the reclaimable plugins, and victims are evicted in
victim order while the task does not fit future idle plus what was evicted.  The task is pipelined
on the first node where it fits; the statement is committed only if the job is then pipelined.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lahar_scheduler.actions.base import Action
from lahar_scheduler.actions.evictutil import (
    NEVER,
    UnresolvableCache,
    fits_vector,
    pending_tasks,
    preempt_nodes,
    shape_key,
    victims_cover,
)
from lahar_scheduler.actions.reclaim_bound import ReclaimBound
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


class ReclaimAction(Action):
    name = "reclaim"

    def execute(self, ssn: Session) -> None:
        self.bound = ReclaimBound(ssn)
        self.verdicts = UnresolvableCache(ssn)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order)
        seen: set[str] = set()
        jobs: dict[str, PriorityQueue[JobInfo]] = {}
        tasks: dict[str, PriorityQueue[TaskInfo]] = {}
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
                jobs.setdefault(queue.uid, PriorityQueue(ssn.job_order)).push(job)
                tasks[job.uid] = PriorityQueue(ssn.task_order, pending_tasks(job))
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
                self.reclaim_for_job(ssn, queue, job, tasks[job.uid])
                if not waiting.empty():
                    # Volcano pushes the queue back while jobs remain; it is popped again later
                    # (and re-checked for overuse) once these jobs are done.
                    queues.push(queue)

    def reclaim_for_job(self, ssn: Session, queue: QueueInfo, job: JobInfo, pending: PriorityQueue[TaskInfo]) -> None:
        stmt = ssn.statement()
        failed: set[tuple[object, ...]] = set()
        miss = ""  # why the last task tried found nothing to reclaim
        while ssn.call(P.JOB_STARVING, job) and not pending.empty():
            task = pending.pop()
            if task.preemption_policy == NEVER:
                miss = f"task {task.name}: its preemptionPolicy is Never, so it evicts nothing"
                continue
            if not ssn.call(P.PREEMPTIVE, queue, [task]):
                miss = f"task {task.name} (asks {task.resreq}): queue {queue.name} may not grow by it (deserved share)"
                continue
            err = ssn.call(P.PRE_PREDICATE, task)
            if err is not None:
                miss = f"task {task.name}: {err}"
                continue
            key = shape_key(task, "reclaim")
            if key in failed:
                continue
            if self.reclaim_for_task(ssn, stmt, task, job):
                failed.clear()
            else:
                failed.add(key)
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
        possible = self.bound.candidates(task, job.queue)
        if not possible.any():
            return False
        # No victim ceiling here (framework/ceiling.py): reclaim's walk is cheap enough that
        # computing one cost more than it saved (6.1 s without, 8.5 s with, at 5,000 nodes).
        nodes = preempt_nodes(ssn, task, self.verdicts)
        # Nodes that fail the bound fail ValidateVictims whatever the plugins offer: not walked.
        # The walk usually ends on its first node or two, so nodes are taken one at a time.
        nodes = nodes[possible[nodes]]
        for k in range(len(nodes)):
            i = int(nodes[k])
            node = ssn.node_list[i]
            reclaimees = [t for t in node.tasks.values() if _reclaimee(ssn, t, job.queue)]
            if not reclaimees:
                continue
            victims = ssn.call(P.RECLAIMABLE, task, reclaimees)
            if not victims_cover(task, node, victims):
                continue
            if self._evict_until_fits(ssn, stmt, task, node, victims):
                return True
        return False

    def _evict_until_fits(
        self, ssn: Session, stmt: Statement, task: TaskInfo, node: NodeInfo, victims: list[TaskInfo]
    ) -> bool:
        """Evict (checking before each) until the task fits future idle plus what was evicted;
        then pipeline it and keep this node's evictions, else undo them."""
        node_stmt = ssn.statement()
        order = victims_queue(ssn, victims, task)
        have = ssn.nodes.future[node.index].copy()
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


def _note(ssn: Session, job: JobInfo, why: str) -> None:
    placed = job.ready_num() + job.waiting_num()
    ssn.note(job, f"reclaim: starving ({placed} of minMember {job.min_available} placed), {why}")


def _reclaimee(ssn: Session, t: TaskInfo, queue: str) -> bool:
    """Strictly Running, preemptable, of a job in another queue that allows reclaiming."""
    if t.status != S.RUNNING or not t.preemptable:
        return False
    job = ssn.jobs.get(t.job)
    return job is not None and job.queue != queue and ssn.queues[job.queue].reclaimable
