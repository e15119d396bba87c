"""overcommit: admit jobs while their minResources fit the cluster's idle capacity × a factor."""

from __future__ import annotations

import msgspec

from lahar.api.resource import Resource
from lahar_scheduler.framework.jobs import JobInfo
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.types import PodGroupPhase, Vote
from lahar_scheduler.plugins.base import Plugin
from lahar_scheduler.plugins.queueshare import deduct_gated, inqueue_resource, min_resources

DEFAULT_FACTOR = 1.2


class OvercommitArgs(msgspec.Struct, forbid_unknown_fields=True):
    overcommit_factor: float = msgspec.field(default=DEFAULT_FACTOR, name="overcommit-factor")


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
        self.idle, self.inqueue = idle, inqueue

        def enqueueable(job: JobInfo) -> Vote:
            if job.min_resources is None:
                return Vote.PERMIT
            minimum = min_resources(job)
            ok, short = inqueue.clone().add(minimum).less_equal_in(idle, minimum)
            if ok:
                return Vote.PERMIT
            job.job_fit_error = f"resource in cluster is overused: overused {', '.join(short)}"
            return Vote.REJECT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is not None:
                inqueue.add(deduct_gated(job, min_resources(job)))

        ssn.add("job_enqueueable", enqueueable)
        ssn.add("job_enqueued", enqueued)
