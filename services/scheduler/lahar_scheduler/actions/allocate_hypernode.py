"""allocate's HyperNode path: a job with a networkTopology is placed inside one HyperNode.

Volcano's allocateForJob / allocateForSubJob: the gradients (eligible HyperNodes grouped by tier,
lowest first) are tried in order; inside a gradient the job is dry-run in every HyperNode (its
tasks placed on that HyperNode's nodes only, then discarded), and of those where the job became
ready or pipelined, the best by ``hypernode_order`` is replayed for real.  A lower tier that works
is never passed over for a higher one.  A job placed in no HyperNode gets a reason naming each
tier and HyperNode tried.  (Sub-group policies are not split into sub-jobs: the job is its one
default sub-job, which carries the job's networkTopology, as Volcano builds it.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.hypernodes import CLUSTER_TOP
from lahar_scheduler.framework.statement import Op
from lahar_scheduler.framework.topology import JobTopology, gradients, hypernode_scores
from lahar_scheduler.framework.why import Why

if TYPE_CHECKING:
    from lahar_scheduler.actions.allocate import AllocateAction
    from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
    from lahar_scheduler.framework.pq import PriorityQueue
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.framework.statement import Statement

PLUGIN = "network-topology-aware"


@dataclass
class Plan:
    """A dry run's outcome in one HyperNode: the operations to replay, what is left to place."""

    ops: list[tuple[Op, TaskInfo, str]]
    left: PriorityQueue[TaskInfo]
    allocated: str  # the job's allocated HyperNode after it
    score: float = 0.0


@dataclass
class Tried:
    """Per HyperNode tried, how many tasks it took (for the refusal's explanation)."""

    placed: dict[str, tuple[int, int]] = field(default_factory=dict)
    first: dict[str, str] = field(default_factory=dict)  # what stopped the dry run there


def allocate_in_hypernodes(
    action: AllocateAction,
    ssn: Session,
    job: JobInfo,
    queue: QueueInfo,
    tasks: PriorityQueue[TaskInfo],
    topo: JobTopology,
) -> Statement | None:
    tried = Tried()
    for gradient in gradients(ssn, job, topo, CLUSTER_TOP):
        plans: dict[str, Plan] = {}
        for hypernode in gradient:
            job.reset_fit_errors()
            plan = _subjob(action, ssn, job, queue, tasks.clone(), topo, hypernode, tried)
            if plan is None:
                continue
            stmt = _replay(ssn, plan)
            if ssn.call(P.JOB_READY, job) or ssn.call(P.JOB_PIPELINED, job):
                plans[hypernode] = plan
            stmt.discard()
        if not plans:
            continue
        best = max(plans, key=lambda h: (plans[h].score, -gradient.index(h)))
        plan = plans[best]
        stmt = _replay(ssn, plan)
        tasks.assign(plan.left)  # the job's worksheet goes on from where the plan left it
        decision = ssn.decision(job)
        decision.chosen = {t.key: node for _, t, node in plan.ops}
        decision.verdicts[PLUGIN] = f"placed in hypernode {best} (tier {ssn.hypernodes.tier(best)})"
        if ssn.call(P.JOB_READY, job):
            topo.allocated = plan.allocated
        return stmt
    ssn.explain(job, lambda: refusal(ssn, job, topo, tried))
    return None


def _subjob(
    action: AllocateAction,
    ssn: Session,
    job: JobInfo,
    queue: QueueInfo,
    tasks: PriorityQueue[TaskInfo],
    topo: JobTopology,
    hypernode: str,
    tried: Tried,
) -> Plan | None:
    """allocateForSubJob: the job's own gradients inside ``hypernode``, best plan of the first
    gradient that has one."""
    for gradient in gradients(ssn, job, topo, hypernode):
        plans: dict[str, Plan] = {}
        for inner in gradient:
            job.reset_fit_errors()
            plan = _try(action, ssn, job, queue, tasks.clone(), topo, inner, tried)
            if plan is not None and plan.ops:
                plans[inner] = plan
        if not plans:
            continue
        scores = hypernode_scores(ssn, job, list(plans))
        best = max(plans, key=lambda h: (scores[h], -gradient.index(h)))
        plans[best].score = scores[best]
        plans[best].allocated = ssn.hypernodes.lca(topo.allocated, best)
        return plans[best]
    return None


def _try(
    action: AllocateAction,
    ssn: Session,
    job: JobInfo,
    queue: QueueInfo,
    tasks: PriorityQueue[TaskInfo],
    topo: JobTopology,
    hypernode: str,
    tried: Tried,
) -> Plan | None:
    """allocateResourcesForTasks on the nodes of one HyperNode, then undone (a dry run)."""
    from lahar_scheduler.actions.allocate import Within

    tree = ssn.hypernodes
    rows = tree.rows(ssn.nodes)[hypernode]
    if not len(rows):
        tried.placed[hypernode] = (0, len(tasks))
        return None
    mask = np.zeros(len(ssn.node_list), dtype=bool)
    mask[rows] = True
    topo.placing = topo.allocated
    count = [0]

    def placed(task: TaskInfo, node: str) -> None:
        count[0] += 1
        leaf = tree.leaf_of(node)
        if leaf:
            topo.placing = tree.lca(topo.placing, leaf)

    total = len(tasks)
    decision = ssn.decision(job)
    # A dry run's reasons are per HyperNode: kept for the refusal, not as the job's own.
    kept, decision.why = decision.why, None
    stmt = action.allocate_job(ssn, job, queue, tasks, Within(rows, mask, placed))
    if decision.why is not None:
        tried.first[hypernode] = decision.why.summary
    decision.why = kept
    if stmt is None:
        tried.placed[hypernode] = (count[0], total)
        return None
    ops = [(o.op, o.task, o.task.node_name) for o in stmt.operations]
    tried.placed[hypernode] = (len(ops), total)
    stmt.discard()
    return Plan(ops, tasks, topo.allocated)


def _replay(ssn: Session, plan: Plan) -> Statement:
    stmt = ssn.statement()
    for op, task, node in plan.ops:
        if op is Op.ALLOCATE:
            stmt.allocate(task, ssn.nodes.by_name[node])
        else:
            stmt.pipeline(task, node, False)
    return stmt


def refusal(ssn: Session, job: JobInfo, topo: JobTopology, tried: Tried) -> Why:
    """Why a job with a networkTopology was placed in no HyperNode, tier by tier."""
    tree = ssn.hypernodes
    need = job.min_available
    mode = "soft" if topo.soft else "hard"
    limit = "any tier" if topo.soft else f"tier <= {topo.highest_tier}"
    details = []
    for name, (got, total) in sorted(tried.placed.items(), key=lambda kv: (tree.tier(kv[0]), kv[0])):
        label = "the whole cluster" if name == CLUSTER_TOP else f"hypernode {name}"
        first = f" ({tried.first[name]})" if name in tried.first else ""
        details.append(f"tier {tree.tier(name)} {label}: {got} of {total} pending tasks fit, {need} needed{first}")
    if not tried.placed:
        where = f" (already running in {topo.allocated})" if topo.allocated else ""
        summary = f"no hypernode of {limit} is eligible for the job{where}"
    else:
        tiers = sorted({tree.tier(n) for n in tried.placed})
        in_tiers = ("tiers " if len(tiers) > 1 else "tier ") + ", ".join(map(str, tiers))
        summary = (
            f"{mode} network topology: no single hypernode of {limit} can hold {need} tasks "
            f"(tried {len(tried.placed)} hypernodes in {in_tiers})"
        )
    remedy = "" if topo.soft else "free room inside one hypernode, or raise highestTierAllowed"
    return Why("allocate", PLUGIN, summary, remedy, details)
