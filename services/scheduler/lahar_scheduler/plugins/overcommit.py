"""overcommit: admit jobs while their minResources fit the cluster's idle capacity × a factor."""

from __future__ import annotations

import msgspec

from lahar.api.resource import Resource
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import JobInfo
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.types import PodGroupPhase, Vote
from lahar_scheduler.framework.why import Why, amount, shortages
from lahar_scheduler.plugins.base import Plugin
from lahar_scheduler.plugins.queueshare import deduct_gated, inqueue_resource, min_resources

DEFAULT_FACTOR = 1.2


class OvercommitArgs(msgspec.Struct, forbid_unknown_fields=True):
    overcommit_factor: float = msgspec.field(default=DEFAULT_FACTOR, name="overcommit-factor")


def overcommit_why(
    total: Resource, factor: float, idle: Resource, inqueue: Resource, req: Resource, names: list[str]
) -> Why:
    """The cluster × factor, less what runs and what is already admitted, cannot hold ``req``."""
    cap = total.clone().multi(factor)
    on_nodes = cap.clone().sub(idle)
    short = shortages(req, on_nodes.clone().add(inqueue), cap, names)
    parts = "; ".join(s.text("overcommit capacity") for s in short)
    free = ", ".join(f"{amount(s.name, s.missing)} {s.name}" for s in short)
    details = [
        f"{s.name}: nodes hold {amount(s.name, total.get(s.name))} × overcommit-factor {factor:g}"
        f" = {amount(s.name, s.limit)}; {amount(s.name, on_nodes.get(s.name))} in use on nodes,"
        f" {amount(s.name, inqueue.get(s.name))} held by admitted (Inqueue) jobs"
        for s in short
    ]
    remedy = f"add nodes, raise overcommit-factor, or wait until running or admitted jobs free {free}"
    return Why("enqueue", "overcommit", f"cluster: {parts}", remedy, details)


class OvercommitPlugin(Plugin):
    name = "overcommit"
    Args = OvercommitArgs

    def on_session_open(self, ssn: Session) -> None:
        args: OvercommitArgs = self.args or OvercommitArgs()
        factor = args.overcommit_factor if args.overcommit_factor >= 1.0 else DEFAULT_FACTOR
        used = ssn.nodes.space.resource(ssn.nodes.used.sum(axis=0)) if len(ssn.node_list) else Resource()
        idle = ssn.total_resource.clone().multi(factor).sub(used)
        inqueue = Resource()
        for job in ssn.jobs.values():
            pg = job.podgroup
            if pg is None or pg.spec.min_resources is None:
                continue
            if job.phase == PodGroupPhase.INQUEUE:
                inqueue.add(deduct_gated(job, min_resources(job)))
            elif job.phase == PodGroupPhase.RUNNING and job.allocated_num() >= pg.spec.min_member:
                inqueue.add(inqueue_resource(job, job.allocated))
        self.ssn, self.factor = ssn, factor
        self.idle, self.inqueue = idle, inqueue
        ssn.add(P.JOB_ENQUEUEABLE, self.enqueueable)
        ssn.add(P.JOB_ENQUEUED, self.enqueued)

    def enqueueable(self, job: JobInfo) -> Vote:
        """Admit a job while the admitted minResources fit the cluster × overcommit-factor."""
        if job.min_resources is None:
            return Vote.PERMIT
        minimum = min_resources(job)
        ok, short = self.inqueue.clone().add(minimum).less_equal_in(self.idle, minimum)
        if ok:
            return Vote.PERMIT
        job.job_fit_error = f"resource in cluster is overused: overused {', '.join(short)}"
        why = overcommit_why(self.ssn.total_resource, self.factor, self.idle, self.inqueue, minimum, short)
        self.ssn.explain(job, why)
        return Vote.REJECT

    def enqueued(self, job: JobInfo) -> None:
        if job.min_resources is not None:
            self.inqueue.add(deduct_gated(job, min_resources(job)))
