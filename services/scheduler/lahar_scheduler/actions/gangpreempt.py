"""gangpreempt: a starving job evicts whole bundles of lower-priority jobs in its own queue.

Volcano's pkg/scheduler/actions/gangpreempt: candidates are Running or Bound preemptable tasks
of other jobs of the same queue with a lower job priority; bundles are ranked safe first, then
victim jobs in reverse job order (the job allocate would serve last goes first), then by return
on investment.  No overuse check: preemption stays inside the queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lahar_scheduler.actions.bundles import sort_for_preempt
from lahar_scheduler.actions.gangevict import GangEvictAction
from lahar_scheduler.framework.eviction import EvictionKind
from lahar_scheduler.framework.types import PREEMPTABLE_STATUSES

if TYPE_CHECKING:
    from lahar.api.resource import Resource
    from lahar_scheduler.actions.bundles import Bundle
    from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
    from lahar_scheduler.framework.session import Session


class GangPreemptAction(GangEvictAction):
    name = "gangpreempt"
    kind = EvictionKind.GANG_PREEMPT

    def candidate(self, ssn: Session, job: JobInfo, task: TaskInfo, victim_job: JobInfo) -> bool:
        if task.status not in PREEMPTABLE_STATUSES or not task.preemptable:
            return False
        # Unlike preempt, a BestEffort preemptor is not kept off non-BestEffort victims here;
        # the unified_evictable plugins decide.
        return victim_job.queue == job.queue and victim_job.uid != job.uid and victim_job.priority < job.priority

    def rank(self, ssn: Session, job: JobInfo, bundles: list[Bundle], need: Resource) -> None:
        sort_for_preempt(bundles, need, lambda left, right: not ssn.job_order(left, right))
