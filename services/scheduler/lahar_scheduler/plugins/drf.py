"""drf: dominant-resource fairness between jobs.

A job's share is the largest, over the cluster's resources, of what it holds divided by the
cluster total.  Smaller shares go first, and a preemptor may evict from a job whose share after
the eviction is still at least the preemptor's share after it is placed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import msgspec

from lahar.api.resource import Resource, share
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import TaskInfo
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.types import ALLOCATED_STATUSES, Vote
from lahar_scheduler.plugins.base import Plugin

SHARE_DELTA = 1e-6


class DrfArgs(msgspec.Struct, forbid_unknown_fields=True):
    pass


class DrfPlugin(Plugin):
    name = "drf"
    Args = DrfArgs

    def on_session_open(self, ssn: Session) -> None:
        total = ssn.total_resource
        names = total.names()
        allocated: dict[str, Resource] = {}
        shares: dict[str, float] = {}

        def dominant(r: Resource) -> float:
            best = 0.0
            for n in names:
                s = share(r.get(n), total.get(n))
                if s > best:
                    best = s
            return best

        for job in ssn.jobs.values():
            r = Resource()
            for status in ALLOCATED_STATUSES:
                for t in job.tasks_in(status):
                    r.add(t.resreq)
            allocated[job.uid] = r
            shares[job.uid] = dominant(r)
        self.shares = shares

        def job_order(left: object, right: object) -> int:
            ls, rs = shares[left.uid], shares[right.uid]  # type: ignore[attr-defined]
            return 0 if ls == rs else (-1 if ls < rs else 1)

        def preemptable(preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
            mine = allocated.get(preemptor.job)
            if mine is None:
                return [], Vote.PERMIT
            ls = dominant(mine.clone().add(preemptor.resreq))
            left: dict[str, Resource] = {}
            victims = []
            for t in preemptees:
                if t.job not in allocated:
                    continue
                alloc = left.setdefault(t.job, allocated[t.job].clone())
                alloc.sub(t.resreq)
                rs = dominant(alloc)
                if ls < rs or abs(ls - rs) <= SHARE_DELTA:
                    victims.append(t)
            return victims, Vote.PERMIT

        def victim_ceiling(preemptor: TaskInfo) -> tuple[Hashable, Callable[[TaskInfo], bool]]:
            """Could name: tasks whose job's share without them is at least the preemptor's
            request alone (its share once placed can only be larger)."""
            floor = dominant(preemptor.resreq) - SHARE_DELTA

            def could_name(t: TaskInfo) -> bool:
                held = allocated.get(t.job)
                return held is not None and dominant(held.clone().sub(t.resreq)) >= floor

            return ("drf", floor), could_name

        preemptable.victim_ceiling = victim_ceiling  # type: ignore[attr-defined]

        def on_allocate(task: TaskInfo) -> None:
            r = allocated.get(task.job)
            if r is not None:
                r.add(task.resreq)
                shares[task.job] = dominant(r)

        def on_deallocate(task: TaskInfo) -> None:
            r = allocated.get(task.job)
            if r is not None:
                r.sub(task.resreq)
                shares[task.job] = dominant(r)

        ssn.add(P.PREEMPTABLE, preemptable)
        ssn.add(P.JOB_ORDER, job_order)
        ssn.add_event_handler(EventHandler(on_allocate, on_deallocate))
        self.allocated, self.dominant = allocated, dominant

    def on_session_close(self, ssn: Session) -> None:
        """Each job's share (Volcano's job_share) and each namespace's: the dominant share of
        what its jobs hold together (namespace_share)."""
        by_namespace: dict[str, Resource] = {}
        stats = ssn.result.stats
        for uid, share_ in self.shares.items():
            job = ssn.jobs[uid]
            stats.job(uid, job.name, job.namespace, job.queue).share = share_
            by_namespace.setdefault(job.namespace, Resource()).add(self.allocated[uid])
        for namespace, held in by_namespace.items():
            stats.namespace_shares[namespace] = self.dominant(held)
