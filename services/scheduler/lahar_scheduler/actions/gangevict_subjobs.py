"""The gang eviction dry run for a job with a subGroupPolicy (Volcano's BuildNominationPlanInDomain).

Once victims are evicted in a domain, the job's sub-jobs are pipelined one after another, in the
order allocate would take them (those needed for ``minSubGroups`` first).  With a network
topology (the job's or a sub-job's), each sub-job is tried in the HyperNodes of its eviction
gradients inside the domain, widest first, and kept in the first where all its pending tasks fit;
without one, in the whole domain.  The dry run stops once the job is pipelined (or, for a job
already running, after one sub-job), and fails as soon as one sub-job fits nowhere.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from lahar_scheduler.actions.allocate_subjobs import organize
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.hypernodes import CLUSTER_TOP
from lahar_scheduler.framework.topology import PURPOSE_EVICT, gradients

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
    from lahar_scheduler.framework.nodes import IntArray
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.framework.statement import Statement
    from lahar_scheduler.framework.subjobs import SubJobInfo


def pipeline_sub_jobs(
    ssn: Session,
    queue: QueueInfo | None,
    job: JobInfo,
    tasks: list[TaskInfo],
    domain: str,
    nodes: IntArray,
    trial: Statement,
    evicted: bool,
) -> bool:
    sheet = organize(ssn, job, tasks)
    was_ready = ssn.call(P.JOB_READY, job)
    topo = ssn.topology.get(job.uid) if ssn.topology else None
    subs = job.sub_jobs.all() if job.sub_jobs is not None else []
    has_topology = topo is not None or any(s.uid in ssn.sub_topology for s in subs)
    while not sheet.empty():
        sub = sheet.sub_jobs.pop()
        mine = sheet.tasks[sub.uid]
        ordered = [mine.pop() for _ in range(len(mine))]
        places = _places(ssn, sub, domain) if has_topology else [domain]
        if not any(_try(ssn, queue, job, sub, ordered, where, nodes, trial, evicted) for where in places):
            return False
        if was_ready or ssn.call(P.JOB_PIPELINED, job):
            break
    return ssn.call(P.JOB_PIPELINED, job)


def _places(ssn: Session, sub: SubJobInfo, domain: str) -> list[str]:
    """The sub-job's eviction gradients inside the domain, flattened (widest first)."""
    topo = ssn.sub_topology.get(sub.uid)
    if topo is None:
        return [domain]
    evict = dataclasses.replace(topo, purpose=PURPOSE_EVICT)
    return [h for gradient in gradients(ssn, sub, evict, domain) for h in gradient]


def _try(
    ssn: Session,
    queue: QueueInfo | None,
    job: JobInfo,
    sub: SubJobInfo,
    tasks: list[TaskInfo],
    where: str,
    domain_nodes: IntArray,
    trial: Statement,
    evicted: bool,
) -> bool:
    """Pipeline every task of the sub-job inside ``where``; kept (merged into ``trial``) only if
    the sub-job is then ready or pipelined."""
    from lahar_scheduler.actions.gangevict import pipeline_one

    nodes = domain_nodes
    if where != CLUSTER_TOP:
        nodes = np.intersect1d(ssn.hypernodes.rows(ssn.nodes)[where], domain_nodes)
    if not len(nodes):
        return False
    attempt = ssn.statement()
    for task in tasks:
        if not pipeline_one(ssn, queue, task, nodes, attempt, evicted):
            attempt.discard()
            return False
    if not len(attempt) or not (ssn.sub_job_ready(job, sub) or ssn.sub_job_pipelined(job, sub)):
        attempt.discard()
        return False
    trial.merge(attempt)
    return True
