"""What gangpreempt and gangreclaim share (Volcano's actions/utils and the two actions' loops).

Both work a whole starving job at a time instead of one task: the job's pending tasks form one
need; victims come in bundles of other jobs (bundles.py), taken in rank order until the
domain's idle plus releasing plus what the bundles hold covers the need; then a dry run evicts
those victims and pipelines every pending task inside the domain, and is kept only if the job
ends pipelined.  Statements commit per job, only when it is pipelined, as in preempt and reclaim.

Domains are HyperNodes, as in Volcano: a job with a networkTopology gets the HyperNodes the
network-topology-aware plugin's eviction gradients name (those whose allocatable could hold the
job, widest tier first, at most ``hypernode.gradient.evict.max-hypernodes`` of them, then at most
``maxDomains``); a job without one gets the whole cluster (the cluster-top HyperNode).  Victims
are looked for, and the job's tasks pipelined, only on the domain's nodes.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from lahar.api.resource import Dim, Resource
from lahar_scheduler.actions.allocate import best_of_gradients
from lahar_scheduler.actions.args import typed
from lahar_scheduler.actions.base import Action
from lahar_scheduler.actions.bundles import Bundle, BundleType, apply_allowed, flatten, job_bundles, total_resreq
from lahar_scheduler.actions.evictutil import preempt_nodes
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.eviction import EvictionContext, EvictionKind
from lahar_scheduler.framework.hypernodes import CLUSTER_TOP
from lahar_scheduler.framework.pq import PriorityQueue
from lahar_scheduler.framework.predicate import fits_rows
from lahar_scheduler.framework.topology import PURPOSE_EVICT, gradients
from lahar_scheduler.framework.types import PREEMPTABLE_KEY, TaskStatus

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
    from lahar_scheduler.framework.nodes import IntArray
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.framework.statement import Statement

S = TaskStatus
DEFAULT_MAX_DOMAINS = 8


class GangEvictArgs(msgspec.Struct, forbid_unknown_fields=True):
    max_domains: int = msgspec.field(default=DEFAULT_MAX_DOMAINS, name="maxDomains")
    allow_whole_bundle: bool = msgspec.field(default=True, name="allowWholeBundle")


def parse_args(raw: dict[str, object]) -> GangEvictArgs:
    """Typed arguments; a maxDomains of 0 or less falls back to the default (Volcano warns)."""
    args = typed(raw, GangEvictArgs)
    if args.max_domains <= 0:
        args.max_domains = DEFAULT_MAX_DOMAINS
    return args


# -- domains ----------------------------------------------------------------------------------------


def pick_domains(gradients: list[list[str]], max_domains: int, fallback: str) -> list[str]:
    """Hyper-node gradients flattened in order without repeats, at most ``max_domains``;
    ``fallback`` when they name none."""
    out: list[str] = []
    for gradient in gradients:
        for name in gradient:
            if name in out:
                continue
            out.append(name)
            if 0 < max_domains <= len(out):
                return out
    if not out and fallback:
        out.append(fallback)
    return out


def candidate_domains(ssn: Session, job: JobInfo, max_domains: int) -> list[tuple[str, IntArray]]:
    """(name, node rows) of each domain to look for victims in, best first (Volcano's
    GetCandidateDomains): a job with a networkTopology gets the HyperNodes its eviction gradients
    name, widest first; a job without one, or without a gradient plugin, the whole cluster."""
    topo = ssn.topology.get(job.uid) if ssn.topology else None
    if topo is None:
        names = pick_domains([[CLUSTER_TOP]], max_domains, CLUSTER_TOP)
    else:
        evict = dataclasses.replace(topo, purpose=PURPOSE_EVICT)
        # No fallback: a job bound to its topology may not look for room outside it.
        names = pick_domains(gradients(ssn, job, evict, CLUSTER_TOP), max_domains, "")
    everywhere = ssn.candidate_nodes()
    if names == [CLUSTER_TOP]:
        return [(CLUSTER_TOP, everywhere)]
    rows = ssn.hypernodes.rows(ssn.nodes)
    return [(name, everywhere if name == CLUSTER_TOP else np.intersect1d(rows[name], everywhere)) for name in names]


# -- the preemptor's side ---------------------------------------------------------------------------


def worksheet(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """Pending tasks allocate would place, in task order (not gated, not BestEffort)."""
    tasks = [t for t in job.tasks_in(S.PENDING) if not t.sch_gated and not t.resreq.is_empty()]
    queue = PriorityQueue(ssn.task_order, tasks)
    return [queue.pop() for _ in range(len(queue))]


def total_init(tasks: list[TaskInfo]) -> Resource:
    out = Resource()
    for t in tasks:
        out.add(t.init_resreq)
    return out


def gang_preemptable(job: JobInfo) -> bool:
    """A victim job may lose tasks unless its PodGroup says ``volcano.sh/preemptable: false``
    (unset means yes for the gang actions, unlike the pods' own default)."""
    pg = job.podgroup
    if pg is None:
        return True
    if PREEMPTABLE_KEY in pg.metadata.annotations or PREEMPTABLE_KEY in pg.metadata.labels:
        return job.preemptable
    return True


def idle_and_releasing(ssn: Session, nodes: IntArray) -> Resource:
    table = ssn.nodes
    row = table.idle[nodes].sum(axis=0) + table.releasing[nodes].sum(axis=0)
    return table.space.resource(row)


# -- the dry run ------------------------------------------------------------------------------------


def nomination_plan(
    ssn: Session,
    queue: QueueInfo | None,
    job: JobInfo,
    nodes: IntArray,
    victims: list[TaskInfo],
    reason: str,
    domain: str = CLUSTER_TOP,
) -> Statement | None:
    """Evict ``victims`` and pipeline the job's pending tasks within ``nodes`` (the domain's);
    the statement (left applied) when the job is then pipelined, else None with the session as it
    was.  A job with a subGroupPolicy is placed sub-job by sub-job (gangevict_subjobs.py)."""
    tasks = worksheet(ssn, job)
    if not tasks:
        return None
    plan = ssn.statement()
    for victim in victims:
        plan.evict(victim, reason)
    trial = ssn.statement()
    if job.sub_jobs is not None:
        from lahar_scheduler.actions.gangevict_subjobs import pipeline_sub_jobs

        placed = pipeline_sub_jobs(ssn, queue, job, tasks, domain, nodes, trial, bool(victims))
    else:
        placed = _pipeline_all(ssn, queue, job, tasks, nodes, trial, bool(victims))
    if not placed:
        trial.discard()
        plan.discard()
        return None
    plan.merge(trial)
    if not ssn.call(P.JOB_PIPELINED, job):
        plan.discard()
        return None
    return plan


def _pipeline_all(
    ssn: Session,
    queue: QueueInfo | None,
    job: JobInfo,
    tasks: list[TaskInfo],
    nodes: IntArray,
    trial: Statement,
    evicted: bool,
) -> bool:
    """Every task must find a node (idle fit first, then future idle, best score) or the trial fails."""
    for task in tasks:
        if not pipeline_one(ssn, queue, task, nodes, trial, evicted):
            return False
    return len(trial) > 0 and (ssn.call(P.JOB_READY, job) or ssn.call(P.JOB_PIPELINED, job))


def pipeline_one(
    ssn: Session, queue: QueueInfo | None, task: TaskInfo, nodes: IntArray, trial: Statement, evicted: bool
) -> bool:
    """Pipeline one task on the best of ``nodes`` it fits once victims leave; False if none."""
    if queue is not None and not ssn.call(P.ALLOCATABLE, queue, task):
        return False
    if ssn.call(P.PRE_PREDICATE, task) is not None:
        return False
    rows = np.intersect1d(preempt_nodes(ssn, task), nodes)
    rows = rows[fits_rows(task, ssn.nodes.future[rows])]
    if not len(rows):
        return False
    now = fits_rows(task, ssn.nodes.idle[rows])
    best = best_of_gradients(ssn, task, (rows[now], rows[~now]))
    if best is None:
        return False
    trial.pipeline(task, ssn.node_list[best].name, evicted)
    return True


# -- the actions ------------------------------------------------------------------------------------


class GangEvictAction(Action):
    """The loop both actions share; subclasses say which tasks are candidates and how to rank."""

    kind: EvictionKind

    def execute(self, ssn: Session) -> None:
        self.args = parse_args(self.arguments)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order)
        seen: set[str] = set()
        starving: dict[str, PriorityQueue[JobInfo]] = {}
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
                starving.setdefault(queue.uid, PriorityQueue(ssn.job_order)).push(job)
        while not queues.empty():
            queue = queues.pop()
            if not self.queue_may_evict(ssn, queue):
                continue
            jobs = starving.get(queue.uid)
            while jobs is not None and not jobs.empty():
                self.for_job(ssn, queue, jobs.pop())

    def for_job(self, ssn: Session, queue: QueueInfo, job: JobInfo) -> None:
        stmt = ssn.statement()
        self.evict_in_domains(ssn, stmt, queue, job)
        if ssn.call(P.JOB_PIPELINED, job):
            if stmt.has_evictions():
                ssn.decision(job).verdicts[self.name] = "evicted bundles of other jobs"
                ssn.result.stats.evicting_commit(self.name)
            stmt.commit()
        else:
            stmt.discard()
            placed = job.ready_num() + job.waiting_num()
            ssn.note(
                job,
                f"{self.name}: starving ({placed} of minMember {job.min_available} placed), no domain where "
                "evicting whole bundles of other jobs makes room for all its pending tasks",
            )

    def evict_in_domains(self, ssn: Session, stmt: Statement, queue: QueueInfo, job: JobInfo) -> None:
        pending = worksheet(ssn, job)
        if not pending or not self.job_may_evict(ssn, queue, pending):
            return
        need = total_init(pending)
        for domain, nodes in candidate_domains(ssn, job, self.args.max_domains):
            if not len(nodes):
                continue
            bundles = self.domain_bundles(ssn, job, need, domain, nodes)
            if not bundles:
                continue
            idle = idle_and_releasing(ssn, nodes)
            victims: list[TaskInfo] = []
            for bundle in bundles:
                victims.extend(bundle.tasks)
                if not need.less_equal(idle.clone().add(total_resreq(victims)), Dim.ZERO):
                    continue
                plan = nomination_plan(ssn, queue, job, nodes, list(victims), self.name, domain)
                if plan is not None:
                    stmt.merge(plan)
                    return

    def domain_bundles(self, ssn: Session, job: JobInfo, need: Resource, domain: str, nodes: IntArray) -> list[Bundle]:
        """Candidates grouped by victim job into bundles, ranked, filtered by the plugins'
        ``unified_evictable`` (whole bundles all or nothing), ranked again."""
        by_job: dict[str, list[TaskInfo]] = {}
        for i in nodes.tolist():
            for t in ssn.node_list[i].tasks.values():
                victim_job = ssn.jobs.get(t.job)
                if victim_job is not None and self.candidate(ssn, job, t, victim_job) and gang_preemptable(victim_job):
                    by_job.setdefault(t.job, []).append(t)
        bundles = [b for uid, tasks in by_job.items() for b in job_bundles(ssn.jobs[uid], tasks)]
        if not bundles:
            return []
        self.rank(ssn, job, bundles, need)
        allowed = ssn.call(P.UNIFIED_EVICTABLE, EvictionContext(self.kind, job, domain), flatten(bundles))
        if not allowed:
            return []
        valid = apply_allowed(bundles, {t.uid for t in allowed})
        self.rank(ssn, job, valid, need)
        return [b for b in valid if b.type is BundleType.SAFE or self.args.allow_whole_bundle]

    # -- what the two actions differ in -------------------------------------------------------------
    def queue_may_evict(self, ssn: Session, queue: QueueInfo) -> bool:
        return True

    def job_may_evict(self, ssn: Session, queue: QueueInfo, pending: list[TaskInfo]) -> bool:
        return True

    def candidate(self, ssn: Session, job: JobInfo, task: TaskInfo, victim_job: JobInfo) -> bool:
        raise NotImplementedError

    def rank(self, ssn: Session, job: JobInfo, bundles: list[Bundle], need: Resource) -> None:
        raise NotImplementedError
