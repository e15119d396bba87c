"""enqueue: admit Pending PodGroups (phase → Inqueue) while the plugins' enqueue votes allow."""

from __future__ import annotations

from lahar_scheduler.actions.base import Action
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import JobInfo, QueueInfo
from lahar_scheduler.framework.pq import PriorityQueue
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.types import PodGroupPhase


class EnqueueAction(Action):
    name = "enqueue"

    def execute(self, ssn: Session) -> None:
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order)
        seen: set[str] = set()
        jobs: dict[str, PriorityQueue[JobInfo]] = {}
        # Admitting a job moves none of its tasks, so the job keys hold (framework/pq.py).
        key = ssn.job_sort_key()
        for job in ssn.jobs.values():
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            if queue.uid not in seen:
                seen.add(queue.uid)
                queues.push(queue)
            if job.is_pending():
                waiting = jobs.get(job.queue)
                if waiting is None:
                    waiting = jobs[job.queue] = PriorityQueue(ssn.job_order, key=key)
                waiting.push(job)
        while not queues.empty():
            queue = queues.pop()
            pending = jobs.get(queue.uid)
            if pending is None or pending.empty():
                continue
            job = pending.pop()
            decision = ssn.decision(job)
            if job.min_resources is None or ssn.call(P.JOB_ENQUEUEABLE, job):
                ssn.call(P.JOB_ENQUEUED, job)
                job.phase = PodGroupPhase.INQUEUE
                decision.verdicts["enqueue"] = "admitted"
            else:
                decision.verdicts["enqueue"] = job.job_fit_error or "rejected"
                decision.outcome = "not enqueued"
            queues.push(queue)
