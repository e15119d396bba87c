"""Volcano's extension points, each declared once: name, enable flag, signature, combiner, contract.

A ``Point[P, T, R]`` takes callbacks ``Callable[P, T]`` and combines them into an ``R``.  The
session walks the callbacks tier by tier, plugins in listed order, skipping a plugin whose option
disables the point's flag, and hands that chain to the point's combiner; actions never loop over
callbacks themselves.  ``session.add(JOB_ORDER, fn)`` registers, ``session.call(JOB_ORDER, l, r)``
dispatches, and mypy checks both against the point's signature.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

import numpy as np

from lahar_scheduler.framework.cyclestate import CycleState
from lahar_scheduler.framework.predicate import Failure, Filtered, run_predicates
from lahar_scheduler.framework.types import Vote

if TYPE_CHECKING:
    from lahar_scheduler.framework.eviction import EvictionContext
    from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
    from lahar_scheduler.framework.nodes import FloatArray, IntArray, NodeInfo
    from lahar_scheduler.framework.subjobs import SubJobInfo
    from lahar_scheduler.framework.topology import JobTopology

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")

# Callbacks per tier, each tier's in plugin order, flags already applied.
Chain = Sequence[Sequence[Callable[..., Any]]]


@dataclass(frozen=True)
class Point(Generic[P, T, R]):
    """One extension point: callbacks ``Callable[P, T]`` combined into an ``R``."""

    name: str
    # None: consulted whatever the plugin's flags say; a tuple: consulted when any of them is on.
    flag: str | tuple[str, ...] | None
    combine: Callable[[Chain, tuple[Any, ...]], R]
    contract: str


def consulted(flag: str | tuple[str, ...] | None, enabled: Callable[[str], bool]) -> bool:
    """Whether a plugin whose option answers ``enabled`` takes part in a point with this flag."""
    if flag is None:
        return True
    if isinstance(flag, tuple):
        return any(enabled(f) for f in flag)
    return enabled(flag)


def flat(chain: Chain) -> list[Callable[..., Any]]:
    # extend, not a comprehension (a frame of its own on Python 3.11): asked per task by
    # Session.predicates_local and scores_local.
    out: list[Callable[..., Any]] = []
    for fns in chain:
        out.extend(fns)
    return out


# -- combiners ---------------------------------------------------------------------------------
def first_nonzero(chain: Chain, args: tuple[Any, ...]) -> int:
    """The first non-zero comparison wins; 0 when every plugin ties."""
    for fns in chain:
        for fn in fns:
            r = fn(*args)
            if r != 0:
                return int(r)
    return 0


def every(chain: Chain, args: tuple[Any, ...]) -> bool:
    """Every plugin must say yes (none registered: yes)."""
    return all(fn(*args) for fns in chain for fn in fns)


def any_of(chain: Chain, args: tuple[Any, ...]) -> bool:
    """Any plugin saying yes is enough (none registered: no)."""
    return any(fn(*args) for fns in chain for fn in fns)


def first_error(chain: Chain, args: tuple[Any, ...]) -> str | None:
    """All must pass; the first failure's message is returned, None when all pass."""
    for fns in chain:
        for fn in fns:
            err = fn(*args)
            if err:
                return str(err)
    return None


def first_result(chain: Chain, args: tuple[Any, ...]) -> Any:
    """The first plugin returning something other than None decides."""
    for fns in chain:
        for fn in fns:
            got = fn(*args)
            if got is not None:
                return got
    return None


def first_registered(chain: Chain, args: tuple[Any, ...]) -> Any:
    """The first consulted plugin decides, whatever it returns (Volcano's TargetJob)."""
    for fns in chain:
        for fn in fns:
            return fn(*args)
    return None


def notify(chain: Chain, args: tuple[Any, ...]) -> None:
    """Every plugin is called; nothing is combined."""
    for fns in chain:
        for fn in fns:
            fn(*args)


def vote(chain: Chain, args: tuple[Any, ...]) -> bool:
    """Any reject loses; the first tier with a permit wins; no opinion at all permits."""
    for fns in chain:
        permit = False
        for fn in fns:
            v = fn(*args)
            if v < 0:
                return False
            if v > 0:
                permit = True
        if permit:
            return True
    return True


def first_tier(chain: Chain, args: tuple[Any, ...]) -> bool:
    """The first tier with a callback decides, every callback in it must agree."""
    for fns in chain:
        if fns:
            # A loop, not all() over a generator: a generator is a frame of its own (Python
            # 3.11), and starving is asked once per preemptor and reclaimer.
            for fn in fns:  # noqa: SIM110 - see above
                if not fn(*args):
                    return False
            return True
    return False


def union_first_tier(chain: Chain, args: tuple[Any, ...]) -> list[TaskInfo]:
    """Union of a tier's lists (first named first); the first non-empty tier wins."""
    for fns in chain:
        seen: dict[int, TaskInfo] = {}
        for fn in fns:
            for t in fn(*args):
                seen[id(t)] = t
        if seen:
            return list(seen.values())
    return []


def victim_intersection(chain: Chain, args: tuple[Any, ...]) -> list[TaskInfo]:
    """Per tier, intersect the lists of plugins that did not abstain; the first non-empty wins."""
    for fns in chain:
        victims = _tier_victims(fns, args)
        if victims:
            return victims
    return []


def tier_victims(fns: Sequence[Callable[..., Any]], args: tuple[Any, ...]) -> list[TaskInfo] | None:
    """One tier's answer for ``victim_intersection`` (None: vetoed); empty lets the next tier speak."""
    return _tier_victims(fns, args)


def _tier_victims(fns: Sequence[Callable[..., Any]], args: tuple[Any, ...]) -> list[TaskInfo] | None:
    victims: list[TaskInfo] | None = None
    init = False
    for fn in fns:
        got, v = fn(*args)
        if v == Vote.ABSTAIN:
            continue
        if not got:
            # A plugin that permits but names no victim vetoes the rest of its tier (Volcano
            # breaks out of the tier loop); otherwise the next plugin would re-seed the list and
            # undo the veto, e.g. priority's "nothing lower" overridden by gang's list.
            return None
        if not init:
            victims = list(got)
            init = True
        elif victims is not None and not _same_tasks(got, victims):
            keep = {id(t) for t in got}
            victims = [t for t in victims if id(t) in keep]
        if not victims:
            init = False  # Volcano's quirk: an empty intersection re-seeds from the next plugin
    return victims


def _same_tasks(got: list[TaskInfo], victims: list[TaskInfo]) -> bool:
    """The same tasks in the same order: then the intersection is ``victims`` as it is (the
    common case: every plugin of a tier names every candidate)."""
    return len(got) == len(victims) and all(map(operator.is_, got, victims))


def predicate_filter(chain: Chain, args: tuple[Any, ...]) -> Filtered:
    """All must pass, over many nodes at once: a node failing one plugin is not shown to the next."""
    task, idx = args
    return run_predicates(task, idx, flat(chain), [])


def score_sum(chain: Chain, args: tuple[Any, ...]) -> FloatArray:
    """Every plugin's scores over the nodes, summed."""
    _task, idx = args
    total: FloatArray | None = None
    for fns in chain:
        for fn in fns:
            got = fn(*args)
            if total is not None:
                total += got
            elif isinstance(got, np.ndarray) and got.shape == (len(idx),):
                # The first scores as a float copy (what zeros plus them give): one array
                # operation fewer per task placed.
                total = got.astype(np.float64)
            else:
                total = np.zeros(len(idx))
                total += got
    return np.zeros(len(idx)) if total is None else total


# -- one point's dispatch resolved once ------------------------------------------------------
def _every_of(fns: list[Callable[..., Any]]) -> Callable[..., Any] | None:
    if not fns:
        return lambda *args: True
    if len(fns) == 1:
        fn = fns[0]
        return lambda *args: bool(fn(*args))  # all() of one answer
    return None


def _first_error_of(fns: list[Callable[..., Any]]) -> Callable[..., Any] | None:
    if not fns:
        return lambda *args: None
    if len(fns) == 1:
        fn = fns[0]

        def one(*args: Any) -> str | None:
            err = fn(*args)
            return str(err) if err else None

        return one
    return None


def _first_result_of(fns: list[Callable[..., Any]]) -> Callable[..., Any] | None:
    if not fns:
        return lambda *args: None
    return fns[0] if len(fns) == 1 else None


# Combiners with a shortcut for the chains most configurations have (none or one callback): the
# same answers without walking the tiers.  Others are dispatched through the combiner as ``call``.
SHORTCUTS: dict[Callable[..., Any], Callable[[list[Callable[..., Any]]], Callable[..., Any] | None]] = {
    every: _every_of,
    first_error: _first_error_of,
    first_result: _first_result_of,
}


# Volcano calls the simulate add/remove hooks of plugins that enable preemptable or allocatable.
_SIMULATE_TASK = ("enablePreemptable", "enabledAllocatable")

Victims = tuple[list["TaskInfo"], Vote]


def dict_sum(chain: Chain, args: tuple[Any, ...]) -> dict[str, float]:
    """Every plugin's scores per name, summed (names no plugin scored are absent)."""
    total: dict[str, float] = {}
    for fns in chain:
        for fn in fns:
            for name, score in fn(*args).items():
                total[name] = total.get(name, 0.0) + score
    return total


# -- order ---------------------------------------------------------------------------------------
JOB_ORDER: Point[[JobInfo, JobInfo], int, int] = Point(
    "job_order", "enableJobOrder", first_nonzero, "negative when the left job goes first, 0 for no opinion"
)
QUEUE_ORDER: Point[[QueueInfo, QueueInfo], int, int] = Point(
    "queue_order", "enableQueueOrder", first_nonzero, "negative when the left queue is served first"
)
TASK_ORDER: Point[[TaskInfo, TaskInfo], int, int] = Point(
    "task_order", "enableTaskOrder", first_nonzero, "negative when the left task is placed first"
)
VICTIM_QUEUE_ORDER: Point[[QueueInfo, QueueInfo, QueueInfo], int, int] = Point(
    "victim_queue_order", None, first_nonzero, "negative when the left queue gives up victims first (3rd: reclaimer)"
)
# -- placement -----------------------------------------------------------------------------------
PREDICATE: Point[[TaskInfo, IntArray], list[Failure], Filtered] = Point(
    "predicate", "enablePredicate", predicate_filter, "failure groups over the node indices; may not move tasks"
)
PRE_PREDICATE: Point[[TaskInfo], str | None, str | None] = Point(
    "pre_predicate", "enablePredicate", first_error, "an error message when no node can host the task at all"
)
NODE_ORDER: Point[[TaskInfo, IntArray], FloatArray, FloatArray] = Point(
    "node_order", "enableNodeOrder", score_sum, "a score per node index, higher is better"
)
BEST_NODE: Point[[TaskInfo, IntArray, FloatArray], int | None, int | None] = Point(
    "best_node", "enableBestNode", first_result, "the chosen node index among the scored ones, or None"
)
# -- queues and jobs -----------------------------------------------------------------------------
OVERUSED: Point[[QueueInfo], bool, bool] = Point(
    "overused", "enabledOverused", any_of, "True when the queue may not get more this session"
)
ALLOCATABLE: Point[[QueueInfo, TaskInfo], bool, bool] = Point(
    "allocatable", "enabledAllocatable", every, "True when the queue has room for the task"
)
PREEMPTIVE: Point[[QueueInfo, list[TaskInfo]], bool, bool] = Point(
    "preemptive", "enablePreemptive", every, "True when the queue may preempt for these tasks"
)
JOB_READY: Point[[JobInfo], bool, bool] = Point(
    "job_ready", "enableJobReady", every, "True when the job's allocated tasks may be dispatched"
)
JOB_PIPELINED: Point[[JobInfo], int, bool] = Point(
    "job_pipelined", "enableJobPipelined", vote, "a Vote: may the job keep its pipelined reservations"
)
# Sub-jobs (a PodGroup's subGroupPolicy): each is a gang of its own inside the job.
SUB_JOB_READY: Point[[SubJobInfo], bool, bool] = Point(
    "sub_job_ready", "enabledSubJobReady", every, "True when the sub-job's allocated tasks make it whole"
)
SUB_JOB_PIPELINED: Point[[SubJobInfo], int, bool] = Point(
    "sub_job_pipelined", "enabledSubJobPipelined", vote, "a Vote: may the sub-job keep its pipelined reservations"
)
SUB_JOB_ORDER: Point[[SubJobInfo, SubJobInfo], int, int] = Point(
    "sub_job_order", "enabledSubJobOrder", first_nonzero, "negative when the left sub-job is placed first"
)
JOB_ENQUEUEABLE: Point[[JobInfo], int, bool] = Point(
    "job_enqueueable", "enableJobEnqueued", vote, "a Vote: may the job move to Inqueue"
)
JOB_ENQUEUED: Point[[JobInfo], None, None] = Point(
    "job_enqueued", "enableJobEnqueued", notify, "told that the job moved to Inqueue (account its minResources)"
)
JOB_VALID: Point[[JobInfo], tuple[str, str] | None, tuple[str, str] | None] = Point(
    "job_valid", None, first_result, "None when valid, else (reason, message)"
)
JOB_STARVING: Point[[JobInfo], bool, bool] = Point(
    "job_starving", "enableJobStarving", first_tier, "True when the job still wants resources"
)
TARGET_JOB: Point[[list[JobInfo]], JobInfo | None, JobInfo | None] = Point(
    "target_job", "enableTargetJob", first_registered, "the job to reserve resources for, or None"
)
RESERVED_NODES: Point[[], None, None] = Point(
    "reserved_nodes", "enableReservedNodes", notify, "lock nodes for the target job (session state)"
)
# -- victims ---------------------------------------------------------------------------------------
PREEMPTABLE: Point[[TaskInfo, list[TaskInfo]], Victims, list[TaskInfo]] = Point(
    "preemptable", "enablePreemptable", victim_intersection, "(victims, vote) among the candidates"
)
RECLAIMABLE: Point[[TaskInfo, list[TaskInfo]], Victims, list[TaskInfo]] = Point(
    "reclaimable", "enableReclaimable", victim_intersection, "(victims, vote) among the candidates"
)
# Gang-aware eviction (gangpreempt, gangreclaim): a whole job's candidates at once, no enable flag
# (Volcano consults every plugin that registers one).
UNIFIED_EVICTABLE: Point[[EvictionContext, list[TaskInfo]], Victims, list[TaskInfo]] = Point(
    "unified_evictable", None, victim_intersection, "(victims, vote) among a gang-aware eviction's candidates"
)
VICTIM_TASKS: Point[[list[TaskInfo]], list[TaskInfo], list[TaskInfo]] = Point(
    "victim_tasks", "enabledVictim", union_first_tier, "tasks to evict whatever is pending (shuffle)"
)
# -- topology-aware preemption dry-runs victims on node copies through these hooks; they read and
# write the preemptor's CycleState.  In Volcano plugins fill it in PrePredicate; here CYCLE_STATE
# callbacks (same flag) fill it when it is asked for, right after pre_predicate, so allocate never
# pays for states nobody reads.
CYCLE_STATE: Point[[TaskInfo, CycleState], None, None] = Point(
    "cycle_state", "enablePredicate", notify, "fill the preemptor's CycleState"
)
SIMULATE_ALLOCATABLE: Point[[CycleState, QueueInfo, TaskInfo], bool, bool] = Point(
    "simulate_allocatable", "enabledAllocatable", every, "allocatable, on the dry run's state"
)
SIMULATE_PREDICATE: Point[[CycleState, TaskInfo, NodeInfo], str | None, str | None] = Point(
    "simulate_predicate", "enablePredicate", first_error, "predicate on one node copy, an error or None"
)
SIMULATE_ADD_TASK: Point[[CycleState, TaskInfo, TaskInfo, NodeInfo], str | None, str | None] = Point(
    "simulate_add_task", _SIMULATE_TASK, first_error, "account a task added to the node copy"
)
SIMULATE_REMOVE_TASK: Point[[CycleState, TaskInfo, TaskInfo, NodeInfo], str | None, str | None] = Point(
    "simulate_remove_task", _SIMULATE_TASK, first_error, "account a victim removed from the node copy"
)
# -- network topology: the HyperNodes a job may go to, lowest tier first, and how good each is ------
HYPERNODE_GRADIENT: Point[[JobInfo | SubJobInfo, JobTopology, str], list[list[str]] | None, list[list[str]] | None] = (
    Point(
        "hypernode_gradient",
        "enabledHyperNodeGradient",
        first_result,
        "eligible HyperNodes under the given root, grouped by tier, lowest first; None for no opinion",
    )
)
HYPERNODE_ORDER: Point[[JobInfo | SubJobInfo, list[str]], dict[str, float], dict[str, float]] = Point(
    "hypernode_order", "enabledHyperNodeOrder", dict_sum, "a score per candidate HyperNode, higher is better"
)

POINTS: dict[str, Point[Any, Any, Any]] = {
    p.name: p
    for p in (
        JOB_ORDER,
        QUEUE_ORDER,
        TASK_ORDER,
        VICTIM_QUEUE_ORDER,
        PREDICATE,
        PRE_PREDICATE,
        NODE_ORDER,
        BEST_NODE,
        PREEMPTABLE,
        RECLAIMABLE,
        UNIFIED_EVICTABLE,
        OVERUSED,
        ALLOCATABLE,
        PREEMPTIVE,
        JOB_READY,
        JOB_PIPELINED,
        SUB_JOB_READY,
        SUB_JOB_PIPELINED,
        SUB_JOB_ORDER,
        JOB_ENQUEUEABLE,
        JOB_ENQUEUED,
        JOB_VALID,
        JOB_STARVING,
        VICTIM_TASKS,
        TARGET_JOB,
        RESERVED_NODES,
        CYCLE_STATE,
        SIMULATE_ALLOCATABLE,
        SIMULATE_PREDICATE,
        SIMULATE_ADD_TASK,
        SIMULATE_REMOVE_TASK,
        HYPERNODE_GRADIENT,
        HYPERNODE_ORDER,
    )
}
