"""gangreclaim: a starving job of a queue below its share evicts whole bundles of other queues.

Volcano's pkg/scheduler/actions/gangreclaim: overused queues are skipped and the queue must be
``preemptive`` for the job's pending tasks; candidates are Running preemptable tasks of jobs in
other, reclaimable queues; bundles are ranked safe first, then victim queues in victim-queue
order (relative to the reclaimer's queue), then by return on investment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lahar_scheduler.actions.bundles import sort_for_reclaim
from lahar_scheduler.actions.gangevict import GangEvictAction
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.eviction import EvictionKind
from lahar_scheduler.framework.types import TaskStatus

if TYPE_CHECKING:
    from lahar.api.resource import Resource
    from lahar_scheduler.actions.bundles import Bundle
    from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
    from lahar_scheduler.framework.session import Session


class GangReclaimAction(GangEvictAction):
    name = "gangreclaim"
    kind = EvictionKind.GANG_RECLAIM

    def queue_may_evict(self, ssn: Session, queue: QueueInfo) -> bool:
        return not ssn.call(P.OVERUSED, queue)

    def job_may_evict(self, ssn: Session, queue: QueueInfo, pending: list[TaskInfo]) -> bool:
        return ssn.call(P.PREEMPTIVE, queue, pending)

    def candidate(self, ssn: Session, job: JobInfo, task: TaskInfo, victim_job: JobInfo) -> bool:
        if task.status != TaskStatus.RUNNING or not task.preemptable or victim_job.queue == job.queue:
            return False
        queue = ssn.queues.get(victim_job.queue)
        return queue is not None and queue.reclaimable

    def rank(self, ssn: Session, job: JobInfo, bundles: list[Bundle], need: Resource) -> None:
        mine = ssn.queues.get(job.queue)

        def first(left: QueueInfo, right: QueueInfo) -> bool:
            if mine is None:
                return ssn.queue_order(left, right)
            return ssn.victim_queue_order(left, right, mine)

        sort_for_reclaim(bundles, need, first, ssn.queues)
