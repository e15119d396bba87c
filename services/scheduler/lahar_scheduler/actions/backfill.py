"""backfill: place BestEffort tasks (no requests) that allocate skipped, on any node the
plugin predicates accept."""

from __future__ import annotations

from functools import partial

from lahar_scheduler.actions.allocate import filter_nodes, select_best
from lahar_scheduler.actions.base import Action
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.fiterrors import FitErrors
from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
from lahar_scheduler.framework.pq import PriorityQueue
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.types import TaskStatus
from lahar_scheduler.framework.why_nodes import nodes_why, pre_predicate_why

S = TaskStatus


class BackfillAction(Action):
    name = "backfill"

    def execute(self, ssn: Session) -> None:
        all_nodes = ssn.candidate_nodes()
        for task in self._pending(ssn):
            job = ssn.jobs[task.job]
            err = ssn.call(P.PRE_PREDICATE, task)
            if err is not None:
                fe = FitErrors(err)
                fe.add(err, len(all_nodes))
                job.fit_errors[task.uid] = fe
                ssn.explain(job, partial(pre_predicate_why, self.name, task, err))
                continue
            filtered = filter_nodes(ssn, task, all_nodes, check_fit=False)
            if not len(filtered.passed):
                job.fit_errors[task.uid] = filtered.errors
                ssn.explain(job, partial(nodes_why, self.name, task, filtered.errors, len(all_nodes)))
                continue
            best = select_best(ssn, task, filtered.passed)
            node = ssn.node_list[best]
            ssn.allocate_now(task, node)
            ssn.decision(job).chosen[task.key] = node.name

    def _pending(self, ssn: Session) -> list[TaskInfo]:
        """BestEffort tasks in queue → job → task order (pipelined ones un-pipelined first)."""
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order)
        jobs: dict[str, PriorityQueue[JobInfo]] = {}
        tasks: dict[str, PriorityQueue[TaskInfo]] = {}
        for job in ssn.jobs.values():
            if job.is_pending() or ssn.call(P.JOB_VALID, job) is not None:
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None:
                continue
            picked = [t for t in job.tasks_in(S.PENDING) if t.best_effort and not t.sch_gated]
            for t in list(job.tasks_in(S.PIPELINED)):
                if t.best_effort:
                    ssn.statement().unpipeline(t)
                    picked.append(t)
            if not picked:
                continue
            tasks[job.uid] = PriorityQueue(ssn.task_order, picked)
            if queue.uid not in jobs:
                queues.push(queue)
                jobs[queue.uid] = PriorityQueue(ssn.job_order)
            jobs[queue.uid].push(job)
        out: list[TaskInfo] = []
        while not queues.empty():
            queue = queues.pop()
            while not jobs[queue.uid].empty():
                job = jobs[queue.uid].pop()
                while not tasks[job.uid].empty():
                    out.append(tasks[job.uid].pop())
        return out
