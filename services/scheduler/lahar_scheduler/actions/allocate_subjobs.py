"""allocate for a job with a subGroupPolicy: sub-jobs, each inside its own HyperNode.

Volcano's allocateForJob / allocateForSubJob over a job's sub-jobs.  The job's gradients (its
own networkTopology's eligible HyperNodes, or just the cluster) are tried tier by tier; in each
HyperNode of a gradient the job is dry-run: its sub-jobs are taken in order (those needed for
``minSubGroups`` first, then the plugins' sub-job order, then partition index) and each sub-job
is placed by the same search one level down, among the HyperNodes its own networkTopology allows
inside the job's HyperNode, keeping the best by ``hypernode_order`` (binpacking over the
sub-job's tasks) that can hold it.  A sub-job placed is put back while it has tasks left; the
dry run stops once the job is ready.  Of the job's HyperNodes where the job became ready or
pipelined, the one with the highest sum of its sub-jobs' scores wins and its operations are
replayed for real.  Jobs without a subGroupPolicy take allocate_hypernode.py (with a
networkTopology) or allocate's plain path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.hypernodes import CLUSTER_TOP
from lahar_scheduler.framework.pq import PriorityQueue
from lahar_scheduler.framework.statement import Op
from lahar_scheduler.framework.topology import JobTopology, gradients, hypernode_scores
from lahar_scheduler.framework.why import Why

if TYPE_CHECKING:
    from lahar_scheduler.actions.allocate import AllocateAction
    from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.framework.statement import Statement
    from lahar_scheduler.framework.subjobs import SubJobInfo

PLUGIN = "network-topology-aware"
Ops = list[tuple[Op, "TaskInfo", str]]


@dataclass
class JobWorksheet:
    """Volcano's JobWorksheet: the sub-jobs still to place and each one's pending tasks."""

    sub_jobs: PriorityQueue[SubJobInfo]
    tasks: dict[str, PriorityQueue[TaskInfo]] = field(default_factory=dict)

    def empty(self) -> bool:
        return self.sub_jobs.empty()

    def clone(self) -> JobWorksheet:
        return JobWorksheet(self.sub_jobs.clone(), {k: v.clone() for k, v in self.tasks.items()})

    def assign(self, other: JobWorksheet) -> None:
        self.sub_jobs.assign(other.sub_jobs)
        self.tasks = other.tasks


def organize(ssn: Session, job: JobInfo, tasks: list[TaskInfo]) -> JobWorksheet:
    """Volcano's organizeJobWorksheet: sub-jobs with pending tasks, those still needed to reach
    each policy's minSubGroups ahead of the rest."""
    subs = job.sub_jobs
    if subs is None:
        raise ValueError(f"job {job.uid} has no subGroupPolicy")
    done: dict[str, int] = {}
    waiting = []
    for sub in subs.all():
        if ssn.sub_job_ready(job, sub):
            done[sub.gid] = done.get(sub.gid, 0) + 1
        else:
            waiting.append(sub)
    order = PriorityQueue(ssn.sub_job_order, waiting)
    required: set[str] = set()
    while not order.empty():
        sub = order.pop()
        if done.get(sub.gid, 0) < subs.min_sub_jobs.get(sub.gid, 0):
            required.add(sub.uid)
            done[sub.gid] = done.get(sub.gid, 0) + 1

    def first(left: SubJobInfo, right: SubJobInfo) -> bool:
        lreq, rreq = left.uid in required, right.uid in required
        if lreq != rreq:
            return lreq
        return ssn.sub_job_order(left, right)

    sheet = JobWorksheet(PriorityQueue(first))
    by_sub: dict[str, list[TaskInfo]] = {}
    for task in tasks:
        owner = subs.of(task)
        if owner is not None:
            by_sub.setdefault(owner.uid, []).append(task)
    for uid, mine in by_sub.items():
        sheet.tasks[uid] = PriorityQueue(ssn.task_order, mine)
        sheet.sub_jobs.push(subs.by_uid[uid])
    return sheet


@dataclass
class Plan:
    ops: Ops
    sheet: JobWorksheet
    score: float
    allocated: dict[str, str]  # sub-job uid → its allocated HyperNode after the plan


def allocate_for_job(
    action: AllocateAction, ssn: Session, job: JobInfo, queue: QueueInfo, sheet: JobWorksheet
) -> Statement | None:
    if sheet.empty():
        return None
    topo = ssn.topology.get(job.uid) if ssn.topology else None
    job_gradients = gradients(ssn, job, topo, CLUSTER_TOP) if topo is not None else [[CLUSTER_TOP]]
    tried: dict[str, str] = {}
    for gradient in job_gradients:
        plans: dict[str, Plan] = {}
        for hypernode in gradient:
            job.reset_fit_errors()
            plan = _dry_run(action, ssn, job, queue, sheet.clone(), hypernode)
            if isinstance(plan, Plan):
                plans[hypernode] = plan
            else:
                tried[hypernode] = plan
        if not plans:
            continue
        best = max(plans, key=lambda h: (plans[h].score, -gradient.index(h)))
        plan = plans[best]
        stmt = replay(ssn, plan.ops)
        sheet.assign(plan.sheet)
        for uid, where in plan.allocated.items():
            ssn.sub_topology[uid].allocated = where
        if topo is not None and ssn.call(P.JOB_READY, job):
            for _, _, node in plan.ops:
                leaf = ssn.hypernodes.leaf_of(node)
                if leaf:
                    topo.allocated = ssn.hypernodes.lca(topo.allocated, leaf)
        decision = ssn.decision(job)
        decision.chosen = {t.key: node for _, t, node in plan.ops}
        decision.verdicts[PLUGIN] = f"sub-groups placed in hypernode {best} (tier {ssn.hypernodes.tier(best)})"
        if not ssn.call(P.JOB_READY, job):
            decision.outcome = "pipelined"
        return stmt
    ssn.decision(job).outcome = "discarded"
    ssn.explain(job, lambda: _refusal(job, topo, tried))
    return None


def _dry_run(
    action: AllocateAction, ssn: Session, job: JobInfo, queue: QueueInfo, sheet: JobWorksheet, hypernode: str
) -> Plan | str:
    """The job's sub-jobs placed one after another inside ``hypernode``, then undone: the plan
    when the job became ready or pipelined there, else why not."""
    mine = [s.uid for s in job.sub_jobs.all()] if job.sub_jobs is not None else []
    saved = {
        uid: (ssn.sub_topology[uid].allocated, ssn.sub_topology[uid].placing) for uid in mine if uid in ssn.sub_topology
    }
    stmts: list[Statement] = []
    score = 0.0
    while not sheet.sub_jobs.empty():
        sub = sheet.sub_jobs.pop()
        got = allocate_for_sub_job(action, ssn, job, queue, sub, sheet.tasks[sub.uid], hypernode)
        if got is None:
            continue
        stmt, sub_score = got
        stmts.append(stmt)
        score += sub_score
        if len(sheet.tasks[sub.uid]):
            sheet.sub_jobs.push(sub)
        if ssn.call(P.JOB_READY, job):
            break
    ops: Ops = [(o.op, o.task, o.task.node_name) for s in stmts for o in s.operations]
    ok = bool(ops) and (ssn.call(P.JOB_READY, job) or ssn.call(P.JOB_PIPELINED, job))
    why = "" if ok else _shortfall(job, len(ops))
    after = {uid: ssn.sub_topology[uid].allocated for uid in saved}
    for stmt in reversed(stmts):
        stmt.discard()
    for uid, (allocated, placing) in saved.items():  # Volcano's RecoverSubJobStatus
        ssn.sub_topology[uid].allocated, ssn.sub_topology[uid].placing = allocated, placing
    return Plan(ops, sheet, score, after) if ok else why


def _shortfall(job: JobInfo, placed: int) -> str:
    """What a failed dry run lacked, read before it is undone."""
    subs = job.sub_jobs
    whole = sum(1 for s in subs.all() if s.is_pipelined()) if subs is not None else 0
    total = len(subs.all()) if subs is not None else 0
    out = f"{placed} pods placed, {whole} of {total} sub-groups whole"
    unmet = subs.unmet("pipelined") if subs is not None else None
    if unmet is not None:
        policy = unmet[0].rsplit("/", 1)[-1]
        return f"{out}; policy {policy}: {unmet[1]} of minSubGroups {unmet[2]} sub-groups whole"
    return f"{out}; minMember {job.min_available} not reached"


def allocate_for_sub_job(
    action: AllocateAction,
    ssn: Session,
    job: JobInfo,
    queue: QueueInfo,
    sub: SubJobInfo,
    tasks: PriorityQueue[TaskInfo],
    within: str,
) -> tuple[Statement, float] | None:
    """The sub-job's gradients inside the job's HyperNode ``within``; of the first gradient where
    it can be placed, the best HyperNode by ``hypernode_order``, replayed; with its score."""
    if tasks.empty():
        return None
    topo = ssn.sub_topology.get(sub.uid)
    sub_gradients = gradients(ssn, sub, topo, within) if topo is not None else [[within]]
    for gradient in sub_gradients:
        # A HyperNode's score does not depend on the dry run (it reads only what is placed
        # already), so HyperNodes are tried best first and the first that holds the sub-job is
        # kept: Volcano's choice (dry-run all, keep the best) at the cost of one placement where
        # Volcano pays one per HyperNode of the gradient.  Ties go to gradient order, and the
        # task-share bonus for ties is judged among all candidates rather than the successful.
        scores = hypernode_scores(ssn, sub, gradient)
        for hypernode in sorted(gradient, key=lambda h: (-scores[h], gradient.index(h))):
            for uid in [t for t in job.fit_errors if t in sub.tasks]:
                del job.fit_errors[uid]  # Volcano's ResetSubJobFitErr: each HyperNode afresh
            left = tasks.clone()
            stmt = _try(action, ssn, job, queue, sub, topo, left, hypernode)
            if stmt is None:
                continue
            if topo is not None:
                topo.allocated = ssn.hypernodes.lca(topo.allocated, hypernode)
            tasks.assign(left)
            return stmt, scores[hypernode]
    return None


def _try(
    action: AllocateAction,
    ssn: Session,
    job: JobInfo,
    queue: QueueInfo,
    sub: SubJobInfo,
    topo: JobTopology | None,
    tasks: PriorityQueue[TaskInfo],
    hypernode: str,
) -> Statement | None:
    """allocateResourcesForTasks for one sub-job on one HyperNode's nodes: the statement, left
    applied, when the sub-job became ready or pipelined there; else None, nothing applied."""
    from lahar_scheduler.actions.allocate import Within

    tree = ssn.hypernodes
    rows = tree.rows(ssn.nodes)[hypernode]
    if not len(rows):
        return None
    mask = np.zeros(len(ssn.node_list), dtype=bool)
    mask[rows] = True
    if topo is not None:
        topo.placing = topo.allocated

    def placed(task: TaskInfo, node: str) -> None:
        leaf = tree.leaf_of(node)
        if topo is not None and leaf:
            topo.placing = tree.lca(topo.placing, leaf)

    decision = ssn.decision(job)
    kept, decision.why = decision.why, None  # a failed try's reasons are not the job's own
    stmt = action.allocate_job(ssn, job, queue, tasks, Within(rows, mask, placed, sub))
    decision.why = kept
    if stmt is not None and not len(stmt):
        stmt.discard()
        return None
    return stmt


def replay(ssn: Session, ops: Ops) -> Statement:
    stmt = ssn.statement()
    for op, task, node in ops:
        if op is Op.ALLOCATE:
            stmt.allocate(task, ssn.nodes.by_name[node])
        else:
            stmt.pipeline(task, node, False)
    return stmt


def _refusal(job: JobInfo, topo: JobTopology | None, tried: dict[str, str]) -> Why:
    subs = job.sub_jobs.all() if job.sub_jobs is not None else []
    groups = f"{len(subs)} sub-group" + ("" if len(subs) == 1 else "s")
    summary = f"sub-group policy: the job's {groups} could not be placed together"
    if topo is not None:
        summary += f" inside one hypernode of tier <= {topo.highest_tier}"
    label = {CLUSTER_TOP: "the whole cluster"}
    details = [f"{label.get(h, f'hypernode {h}')}: {why}" for h, why in sorted(tried.items())]
    if not tried:
        details.append("no hypernode is eligible for the job")
    return Why("allocate", PLUGIN, summary, "free room inside the sub-groups' hypernodes", details)
