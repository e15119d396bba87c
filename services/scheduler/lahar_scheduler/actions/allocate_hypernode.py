"""allocate's HyperNode path: a job with a networkTopology is placed inside one HyperNode.

Volcano's allocateForJob / allocateForSubJob: the gradients (eligible HyperNodes grouped by tier,
lowest first) are tried in order; inside a gradient the job is dry-run in every HyperNode (its
tasks placed on that HyperNode's nodes only, then discarded), and of those where the job became
ready or pipelined, the best by ``hypernode_order`` is replayed for real.  A lower tier that works
is never passed over for a higher one.  A job placed in no HyperNode gets a reason naming each
tier and HyperNode tried.  (This is the path of a job without a sub-group policy: the job is its
one default sub-job, which carries the job's networkTopology, as Volcano builds it; jobs with
one take allocate_subjobs.py.)

Doing every dry run costs a full allocation per candidate HyperNode, so the search does less while
choosing the same HyperNode:

- HyperNode scores do not depend on the dry runs (each is discarded before scoring), so when the
  ``hypernode_order`` callbacks can bound a candidate's score in advance (``score_bound``),
  candidates are dry-run best bound first and the search stops once no remaining bound can beat
  the best plan found.
- A HyperNode whose nodes cannot hold the tasks the gang still needs (an exact upper bound from
  the cached predicate verdicts and future idle, ``_room``) cannot give a plan: it is dry-run
  only if the job is refused, for the refusal's details, and then only the first
  ``REFUSAL_DRY_RUNS`` of them (the others are listed with their bound).
- A dry run from the same state gives the same plan, so within one job's search each HyperNode
  is dry-run once (a tier-2 search retries the leaves the tier-1 gradient already tried).
- A plan returned by a dry run is ready or pipelined (allocate_job discards anything else), so it
  is not replayed once more just to ask that again.

For this to choose exactly what the exhaustive search chooses, nothing a skipped dry run would
have left behind may matter: each dry run breaks node-score ties with a random stream of its own
(drawn from the session's once per job), and the traces dry runs leave on the job (its fit
errors, its tasks' last placements, the decision's outcome) are set afterwards as the chosen
plan's dry run left them, or on a refusal as the exhaustive order's dry runs left them one after
the other; the nodes a dry run chose are not kept in the decision.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.hypernodes import CLUSTER_TOP
from lahar_scheduler.framework.statement import Op
from lahar_scheduler.framework.topology import JobTopology, gradients, hypernode_scores
from lahar_scheduler.framework.types import TaskStatus
from lahar_scheduler.framework.why import Why

if TYPE_CHECKING:
    from lahar_scheduler.actions.allocate import AllocateAction
    from lahar_scheduler.framework.fiterrors import FitErrors
    from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
    from lahar_scheduler.framework.pq import PriorityQueue
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.framework.statement import Statement

PLUGIN = "network-topology-aware"
# False: dry-run every candidate (the equivalence tests compare both ways).
PRUNE = True
# A refusal dry-runs at most this many doomed HyperNodes (lowest tier first, by name) for its
# details; the others are listed with the bound that doomed them.
REFUSAL_DRY_RUNS = 8
# Bounds are compared with this slack so rounding never skips a candidate that ties.
_SLACK = 1e-9

Last = tuple["TaskInfo", TaskStatus | None, str]


@dataclass
class Plan:
    """A dry run's outcome in one HyperNode: the operations to replay, what is left to place."""

    ops: list[tuple[Op, TaskInfo, str]]
    left: PriorityQueue[TaskInfo]
    allocated: str  # the job's allocated HyperNode after it
    score: float = 0.0
    placing: str = ""  # topo.placing after the dry run
    origin: str = ""  # the HyperNode it was dry-run in


@dataclass
class Trial:
    """What one dry run left behind, so it can be reused and its traces restored."""

    plan: Plan | None
    fit_errors: dict[str, FitErrors]
    lasts: list[Last]  # the last placements it gave the tasks it touched
    outcome: str | None = None  # the decision's outcome it set, None if it set none
    stmt: Statement | None = None  # not discarded yet (see Search.open)


@dataclass
class Tried:
    """Per HyperNode tried, how many tasks it took (for the refusal's explanation)."""

    placed: dict[str, tuple[int, int]] = field(default_factory=dict)
    first: dict[str, str] = field(default_factory=dict)  # what stopped the dry run there
    bound: dict[str, tuple[int, int]] = field(default_factory=dict)  # doomed, not dry-run: at most


@dataclass
class Search:
    """One job's HyperNode search: the dry runs done so far and the random streams they use."""

    action: AllocateAction
    job: JobInfo
    queue: QueueInfo
    topo: JobTopology
    tasks: PriorityQueue[TaskInfo]  # the job's worksheet, cloned for each dry run
    seed: int
    tried: Tried = field(default_factory=Tried)
    trials: dict[str, Trial] = field(default_factory=dict)
    base: list[Last] = field(default_factory=list)  # the pending tasks' last placements before
    sequence: list[str] = field(default_factory=list)  # dry runs of failed gradients, exhaustive order
    current: list[str] = field(default_factory=list)  # dry runs asked for by the candidate at hand
    skipped: list[str] = field(default_factory=list)  # doomed, not dry-run (yet)
    room: np.ndarray | None = None  # per node row, how many of the job's tasks fit at most
    room_in: dict[str, int] = field(default_factory=dict)  # the same summed per HyperNode
    # The last dry run, left applied while nothing needs the state before it: if it is the plan
    # chosen, it is kept as is rather than discarded and replayed.
    open: Trial | None = None
    need: int = 0  # how many more tasks a plan must place


def allocate_in_hypernodes(
    action: AllocateAction,
    ssn: Session,
    job: JobInfo,
    queue: QueueInfo,
    tasks: PriorityQueue[TaskInfo],
    topo: JobTopology,
) -> Statement | None:
    search = Search(action, job, queue, topo, tasks, ssn.rng.getrandbits(64))
    search.base = _lasts(list(job.tasks_in(TaskStatus.PENDING)))
    if PRUNE:
        search.room, search.need = _room(ssn, action, job), _still_needed(ssn, job)
    for gradient in gradients(ssn, job, topo, CLUSTER_TOP):
        found = _best_in_gradient(ssn, search, gradient)
        if found is None:
            continue
        best, plan = found
        kept = search.trials[plan.origin].stmt
        if kept is None:
            _close(search)
        search.open = None
        _settle(ssn, search, plan, gradient)
        stmt = kept if kept is not None else _replay(ssn, plan)
        tasks.assign(plan.left)  # the job's worksheet goes on from where the plan left it
        decision = ssn.decision(job)
        decision.chosen = {t.key: node for _, t, node in plan.ops}
        decision.verdicts[PLUGIN] = f"placed in hypernode {best} (tier {ssn.hypernodes.tier(best)})"
        if ssn.call(P.JOB_READY, job):
            topo.allocated = plan.allocated
        else:
            decision.outcome = "pipelined"
        return stmt
    _close(search)
    # A refusal names every HyperNode with what its dry run placed: run the doomed ones too (the
    # first REFUSAL_DRY_RUNS; the others by their bound), and leave the job as the exhaustive
    # order's dry runs left it, one after the other.
    tree = ssn.hypernodes
    for k, hypernode in enumerate(sorted(set(search.skipped), key=lambda h: (tree.tier(h), h))):
        if k < REFUSAL_DRY_RUNS:
            search.trials[hypernode] = _dry_run(ssn, search, hypernode)
        else:
            search.tried.bound[hypernode] = (_room_in(ssn, search, hypernode), len(tasks))
    _restore(ssn, search, [search.trials[h] for h in search.sequence if h in search.trials])
    ssn.explain(job, lambda: refusal(ssn, job, topo, search.tried))
    return None


def _best_in_gradient(ssn: Session, search: Search, gradient: list[str]) -> tuple[str, Plan] | None:
    """The best plan of one gradient, by (score, earlier in the gradient)."""
    bounds = _bounds(ssn, search, gradient) if PRUNE else None
    order = list(range(len(gradient)))
    if bounds is not None:
        order.sort(key=lambda k: (-bounds[k], k))
    best: tuple[float, int, Plan] | None = None
    asked: dict[int, list[str]] = {}
    for k in order:
        if best is not None and bounds is not None and bounds[k] + _SLACK * (1 + abs(bounds[k])) < best[0]:
            break  # sorted by bound: nothing after this can beat the best either
        search.current = asked[k] = []
        plan = _subjob(ssn, search, gradient[k])
        if plan is None:
            continue
        if best is None or (plan.score, -k) > (best[0], -best[1]):
            best = (plan.score, k, plan)
    if best is None:
        # Every candidate was tried: note their dry runs in the exhaustive order.
        for k in range(len(gradient)):
            search.sequence += asked.get(k, [])
        return None
    return gradient[best[1]], best[2]


def _bounds(ssn: Session, search: Search, gradient: list[str]) -> list[float] | None:
    """Per candidate, a bound on the score its plan can get (the best score of any HyperNode
    under it); None when some ``hypernode_order`` callback offers no ``score_bound``."""
    _close(search)
    job = search.job
    callbacks: list[Any] = ssn.callbacks(P.HYPERNODE_ORDER)
    if not all(hasattr(fn, "score_bound") for fn in callbacks):
        return None
    total = np.zeros(len(gradient))
    for fn in callbacks:
        total += np.asarray(fn.score_bound(job, gradient), dtype=float)
    return [float(b) for b in total]


def _still_needed(ssn: Session, job: JobInfo) -> int:
    """How many more tasks a plan must place: at least one (a plan with no operations is not
    kept), and up to minMember when the gang plugin's verdicts decide readiness (its ready and
    pipelined both count ready + waiting + best-effort tasks against minMember)."""
    from lahar_scheduler.plugins.gang import _job_pipelined, _job_ready

    pipelined = [tier for tier in ssn.chain(P.JOB_PIPELINED) if tier]
    if _job_ready not in ssn.callbacks(P.JOB_READY) or not pipelined or _job_pipelined not in pipelined[0]:
        return 1
    placed = job.waiting_num() + job.ready_num() + job.pending_best_effort
    return max(1, job.min_available - placed)


def _room(ssn: Session, action: AllocateAction, job: JobInfo) -> np.ndarray | None:
    """Per node row, at most how many of the job's pending tasks a dry run can place there:
    none where no task passes the predicates, else as many of the smallest request as fit
    future idle.  Exact as a bound: a dry run places a task only where its request fits
    future idle (which each placement lowers by the task's request) and the predicates pass
    (cached verdicts are of local predicates, which only fail more as nodes fill).  None when
    verdicts may not be cached.  The job's pending tasks hold the worksheet's (more tasks only
    loosen the bound)."""
    pending = [t for t in job.tasks_in(TaskStatus.PENDING) if not t.resreq.is_empty()]
    if not pending:
        return None
    table = ssn.nodes
    allowed = np.zeros(len(table), dtype=bool)
    for task in {t.template_key: t for t in pending}.values():
        got = action.caches.feasible(task)
        if got is None:
            return None
        allowed[got[0]] = True
        allowed[got[1]] = True
    cols = set(pending[0].fit_cols.tolist())
    for t in pending[1:]:
        cols &= set(t.fit_cols.tolist())
    smallest = np.min(np.array([t.res_vec for t in pending]), axis=0)
    bounded = [c for c in sorted(cols) if smallest[c] > 0]
    room = np.full(len(table), len(pending), dtype=np.int64)
    if bounded:
        c = np.array(bounded, dtype=np.intp)
        # m tasks fit only if m × smallest < future idle + 0.1 (slack: rounding never lowers it)
        fits = np.floor((table.future[:, c] + 0.1) / smallest[c] + 1e-6).min(axis=1)
        room = np.minimum(room, np.clip(fits, 0, None).astype(np.int64))
    return np.where(allowed, room, 0)


def _doomed(ssn: Session, search: Search, hypernode: str) -> bool:
    """True where the job can become neither ready nor pipelined (see ``_room``)."""
    return search.room is not None and _room_in(ssn, search, hypernode) < search.need


def _room_in(ssn: Session, search: Search, hypernode: str) -> int:
    """At most how many of the job's tasks a dry run in ``hypernode`` can place."""
    if search.room is None:
        return len(search.tasks)
    got = search.room_in.get(hypernode)
    if got is None:
        rows = ssn.hypernodes.rows(ssn.nodes)[hypernode]
        got = search.room_in[hypernode] = min(int(search.room[rows].sum()), len(search.tasks))
    return got


def _subjob(ssn: Session, search: Search, hypernode: str) -> Plan | None:
    """allocateForSubJob: the job's own gradients inside ``hypernode``, best plan of the first
    gradient that has one."""
    job = search.job
    for gradient in gradients(ssn, job, search.topo, hypernode):
        plans: dict[str, Plan] = {}
        # One candidate: scored before its dry run (scores do not depend on it), which may then
        # be left applied.
        alone = None
        if PRUNE and len(gradient) == 1 and gradient[0] not in search.trials and not _doomed(ssn, search, gradient[0]):
            _close(search)
            alone = hypernode_scores(ssn, job, gradient)
        for inner in gradient:
            plan = _try(ssn, search, inner, keep=alone is not None)
            if plan is not None and plan.ops:
                plans[inner] = plan
        if not plans:
            continue
        if alone is None:
            _close(search)
        scores = alone if alone is not None else hypernode_scores(ssn, job, list(plans))
        best = max(plans, key=lambda h: (scores[h], -gradient.index(h)))
        chosen = plans[best]
        # A fresh Plan: the same trial may be chosen again under another parent.
        return Plan(
            chosen.ops,
            chosen.left,
            ssn.hypernodes.lca(search.topo.allocated, best),
            scores[best],
            chosen.placing,
            chosen.origin,
        )
    return None


def _try(ssn: Session, search: Search, hypernode: str, keep: bool = False) -> Plan | None:
    """allocateResourcesForTasks on the nodes of one HyperNode, then undone (a dry run); done
    once per HyperNode per search, and not at all (unless the job is refused) where doomed."""
    search.current.append(hypernode)
    trial = search.trials.get(hypernode)
    if trial is None:
        if _doomed(ssn, search, hypernode):
            search.skipped.append(hypernode)
            return None
        trial = search.trials[hypernode] = _dry_run(ssn, search, hypernode, keep)
    return trial.plan


def _close(search: Search) -> None:
    """Discard the dry run left applied, if any: what comes next needs the state before it."""
    trial, search.open = search.open, None
    if trial is not None and trial.stmt is not None:
        trial.stmt.discard()
        trial.stmt = None


def _dry_run(ssn: Session, search: Search, hypernode: str, keep: bool = False) -> Trial:
    from lahar_scheduler.actions.allocate import Within

    _close(search)
    job, topo, tried = search.job, search.topo, search.tried
    tasks = search.tasks.clone()
    job.reset_fit_errors()
    tree = ssn.hypernodes
    rows = tree.rows(ssn.nodes)[hypernode]
    decision = ssn.decision(job)
    if not len(rows):
        tried.placed[hypernode] = (0, len(tasks))
        return Trial(None, {}, [])
    mask = np.zeros(len(ssn.node_list), dtype=bool)
    mask[rows] = True
    topo.placing = topo.allocated
    count = [0]

    def placed(task: TaskInfo, node: str) -> None:
        count[0] += 1
        leaf = tree.leaf_of(node)
        if leaf:
            topo.placing = tree.lca(topo.placing, leaf)

    # Which tasks it touches: the discard marks them (their last placement), unmarked is None.
    pending = list(job.tasks_in(TaskStatus.PENDING))
    before = _lasts(pending)
    for t in pending:
        t.last_status = None
    outcome, decision.outcome = decision.outcome, ""
    total = len(tasks)
    # A dry run's reasons are per HyperNode: kept for the refusal, not as the job's own; nor are
    # the nodes it chose the job's.
    kept, decision.why = decision.why, None
    chosen, decision.chosen = decision.chosen, dict(decision.chosen)
    # Ties between nodes are broken by this HyperNode's own stream (see the module's docstring).
    rng, ssn.rng = ssn.rng, random.Random(f"{search.seed}/{hypernode}")
    try:
        stmt = search.action.allocate_job(ssn, job, search.queue, tasks, Within(rows, mask, placed))
    finally:
        ssn.rng = rng
    if decision.why is not None:
        tried.first[hypernode] = decision.why.summary
    decision.why, decision.chosen = kept, chosen
    plan = None
    if stmt is None:
        tried.placed[hypernode] = (count[0], total)
    else:
        ops = [(o.op, o.task, o.task.node_name) for o in stmt.operations]
        tried.placed[hypernode] = (len(ops), total)
        plan = Plan(ops, tasks, topo.allocated, placing=topo.placing, origin=hypernode)
    # allocate_job discarded a failed run itself, marking what it touched; a plan's discard would
    # mark its operations' tasks as placed where it put them.
    if plan is None:
        touched = [last for last in _lasts(pending) if last[1] is not None]
    else:
        touched = [(t, _PLACED[op], node) for op, t, node in plan.ops]
    for t, status, node in before:
        if t.last_status is None:
            t.last_status, t.last_node = status, node
    trial = Trial(plan, dict(job.fit_errors), touched, decision.outcome or None)
    decision.outcome = outcome
    if stmt is not None:
        if keep:
            trial.stmt, search.open = stmt, trial
        else:
            stmt.discard()
    return trial


_PLACED = {Op.ALLOCATE: TaskStatus.ALLOCATED, Op.PIPELINE: TaskStatus.PIPELINED}


def _lasts(tasks: list[TaskInfo]) -> list[Last]:
    return [(t, t.last_status, t.last_node) for t in tasks]


def _restore(ssn: Session, search: Search, trials: list[Trial]) -> None:
    """Leave the job as these dry runs, one after the other, left it: the last one's fit errors,
    its tasks' last placements, the decision's outcome."""
    decision = ssn.decision(search.job)
    for task, status, node in search.base:
        task.last_status, task.last_node = status, node
    for trial in trials:
        for task, status, node in trial.lasts:
            task.last_status, task.last_node = status, node
        if trial.outcome is not None:
            decision.outcome = trial.outcome
    if trials:
        search.job.fit_errors = dict(trials[-1].fit_errors)


def _settle(ssn: Session, search: Search, plan: Plan, gradient: list[str]) -> None:
    """Before the chosen plan is replayed: the job as its own dry run left it (the replay's
    discard of old marked its tasks as placed where the plan puts them)."""
    job = search.job
    _restore(ssn, search, [search.trials[plan.origin]])
    for op, task, node in plan.ops:
        task.last_status = TaskStatus.ALLOCATED if op is Op.ALLOCATE else TaskStatus.PIPELINED
        task.last_node = node
    search.topo.placing = plan.placing
    rows = ssn.hypernodes.rows(ssn.nodes)
    decision = ssn.decision(job)
    decision.nodes_considered = max(decision.nodes_considered, max(len(rows[h]) for h in gradient))


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
    every = {**tried.placed, **tried.bound}
    for name, (got, total) in sorted(every.items(), key=lambda kv: (tree.tier(kv[0]), kv[0])):
        label = "the whole cluster" if name == CLUSTER_TOP else f"hypernode {name}"
        if name in tried.bound:
            details.append(
                f"tier {tree.tier(name)} {label}: at most {got} of {total} pending tasks fit, {need} needed "
                "(room on its nodes that pass the predicates)"
            )
            continue
        first = f" ({tried.first[name]})" if name in tried.first else ""
        details.append(f"tier {tree.tier(name)} {label}: {got} of {total} pending tasks fit, {need} needed{first}")
    if not every:
        where = f" (already running in {topo.allocated})" if topo.allocated else ""
        summary = f"no hypernode of {limit} is eligible for the job{where}"
    else:
        tiers = sorted({tree.tier(n) for n in every})
        in_tiers = ("tiers " if len(tiers) > 1 else "tier ") + ", ".join(map(str, tiers))
        summary = (
            f"{mode} network topology: no single hypernode of {limit} can hold {need} tasks "
            f"(tried {len(every)} hypernodes in {in_tiers})"
        )
    remedy = "" if topo.soft else "free room inside one hypernode, or raise highestTierAllowed"
    return Why("allocate", PLUGIN, summary, remedy, details)
