"""The order in which victims are evicted (Volcano's BuildVictimsPriorityQueue).

The least important victim comes first: within a job, reverse task order; across queues, the
plugins' victim queue order (reverse queue order by default); otherwise reverse job order, ties
broken by reverse task order.  Tasks whose job left the session go first, their PodGroup is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from lahar_scheduler.framework.pq import PriorityQueue

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.session import Session


def victim_less(ssn: Session, preemptor: TaskInfo) -> Callable[[TaskInfo, TaskInfo], bool]:
    """``less(l, r)``: l is evicted before r."""
    preemptor_job = ssn.jobs.get(preemptor.job)

    def less(left: TaskInfo, right: TaskInfo) -> bool:
        if left.job == right.job:
            return not ssn.task_order(left, right)
        lj, rj = ssn.jobs.get(left.job), ssn.jobs.get(right.job)
        if lj is None or rj is None:
            return not ssn.task_order(left, right) if lj is None and rj is None else lj is None
        if preemptor_job is not None and lj.queue != rj.queue:
            queues = ssn.queues
            return ssn.victim_queue_order(queues[lj.queue], queues[rj.queue], queues[preemptor_job.queue])
        cmp = ssn.job_order_plugins(lj, rj)
        if cmp:
            return cmp > 0
        return not ssn.task_order(left, right)

    return less


def victims_queue(ssn: Session, victims: Iterable[TaskInfo], preemptor: TaskInfo) -> PriorityQueue[TaskInfo]:
    return PriorityQueue(victim_less(ssn, preemptor), victims)


def in_victim_order(ssn: Session, victims: Iterable[TaskInfo], preemptor: TaskInfo) -> list[TaskInfo]:
    """Every victim, popped in eviction order."""
    queue = victims_queue(ssn, victims, preemptor)
    out = []
    while not queue.empty():
        out.append(queue.pop())
    return out
