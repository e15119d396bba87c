"""Topology-aware preemption (``enableTopologyAwarePreemption``): kube-scheduler's default
preemption as Volcano runs it.

Nodes are dry-run from a random offset until enough candidates are found
(``clamp(n·minCandidateNodesPercentage/100, minCandidateNodesAbsolute, maxCandidateNodesAbsolute)``).
On each node, on a clone of the preemptor's CycleState, victims are removed in victim order until
the preemptor fits (SimulateAllocatable, future idle, SimulatePredicate), then reprieved from the
most important down, keeping those it still fits beside.  The candidate whose most important
victim matters least wins; its victims are evicted and the preemptor pipelined there.

When the simulate hooks are plain arithmetic for the preemptor, preempt_topology_fast dry-runs
the nodes together from cached victim lists, with the same outcome; ``_walk`` below is the
exact node-by-node path every other case takes (and the one the fast path is tested against).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lahar_scheduler.actions import preempt_topology_fast
from lahar_scheduler.actions.evictutil import TaskFilter, fits_vector, victims_cover
from lahar_scheduler.actions.preempt_topology_cache import pod_priority, start_time
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.victims import victims_queue

if TYPE_CHECKING:
    from lahar_scheduler.actions.args import PreemptArgs
    from lahar_scheduler.framework.cyclestate import CycleState
    from lahar_scheduler.framework.jobs import QueueInfo, TaskInfo
    from lahar_scheduler.framework.nodes import BoolArray, FloatArray, IntArray, NodeInfo
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.framework.statement import Statement

# Added to every pod priority before summing, so negative priorities still sum to more with
# more pods (kube's MaxInt32 + 1).
PRIORITY_OFFSET = preempt_topology_fast.PRIORITY_OFFSET


@dataclass
class Candidate:
    node: NodeInfo
    victims: list[TaskInfo]  # most important first, as reprieve visits them


def num_candidates(nodes: int, args: PreemptArgs) -> int:
    n = nodes * args.min_percentage // 100
    n = max(n, args.min_absolute)
    return min(n, args.max_absolute, nodes)


def topology_preempt(
    ssn: Session,
    stmt: Statement,
    preemptor: TaskInfo,
    keep: TaskFilter,
    nodes: IntArray,
    possible: BoolArray,
    args: PreemptArgs,
    salt: int,
    ceiling: Callable[[], BoolArray | None] = lambda: None,
) -> bool:
    """Dry-run nodes for ``preemptor`` and, if some node is a candidate, evict the chosen one's
    victims and pipeline it there.  ``possible`` are the nodes whose victims could cover it at
    all; ``ceiling`` (asked only when needed) narrows them to nodes where the victim callbacks
    could name enough: a node it rules out is never a candidate, it only spares dry runs."""
    if not len(nodes):
        return False
    queue = ssn.queues[ssn.jobs[preemptor.job].queue]
    state = ssn.cycle_state(preemptor)
    # Random, but drawn per preemptor (from a salt the action takes from the session's seeded
    # generator), so skipping an attempt elsewhere does not shift this one's nodes.
    offset = random.Random(f"{salt}/{preemptor.uid}").randrange(len(nodes))
    wanted = num_candidates(len(nodes), args)
    decided, best = _fast(ssn, state, preemptor, queue, keep, nodes, possible, offset, wanted, ceiling)
    if not decided:
        narrow = ceiling()
        if narrow is not None:
            possible = possible & narrow
        found = _walk(ssn, state, preemptor, queue, keep, nodes, possible, offset, wanted)
        best = pick_one(found, ssn.now) if found else None
    if best is None:
        return False
    tmp = ssn.statement()
    for victim in best.victims:
        tmp.evict(victim, "preempt")
    ssn.result.stats.preemption_attempts += 1  # Volcano's prepareCandidate counts an attempt
    tmp.pipeline(preemptor, best.node.name, True)
    stmt.merge(tmp)
    return True


def _walk(
    ssn: Session,
    state: CycleState,
    preemptor: TaskInfo,
    queue: QueueInfo,
    keep: TaskFilter,
    nodes: IntArray,
    possible: BoolArray,
    offset: int,
    wanted: int,
) -> list[Candidate]:
    """The exact path: dry-run node after node from ``offset`` until ``wanted`` candidates."""
    found: list[Candidate] = []
    for k in range(len(nodes)):
        i = int(nodes[(offset + k) % len(nodes)])
        if not possible[i]:
            continue  # fails ValidateVictims whatever the plugins offer
        node = ssn.node_list[i]
        victims = select_victims(ssn, state, preemptor, queue, node, keep)
        if victims:
            found.append(Candidate(node, victims))
            if len(found) >= wanted:
                break
    return found


def _fast(
    ssn: Session,
    state: CycleState,
    preemptor: TaskInfo,
    queue: QueueInfo,
    keep: TaskFilter,
    nodes: IntArray,
    possible: BoolArray,
    offset: int,
    wanted: int,
    ceiling: Callable[[], BoolArray | None],
) -> tuple[bool, Candidate | None]:
    """The fast path (see preempt_topology_fast): (True, the best candidate or None when there
    is none), or (False, None) when the exact path must decide.  It dry-runs without the
    ceiling (the candidates are the same) and asks it only to count the statistics as the
    exact path, which walks the narrowed nodes, does."""
    plan = preempt_topology_fast.plan(ssn, state, preemptor, queue, keep)
    if plan is None:
        return False, None
    # Possible nodes in scan order, dry-run together.
    order = preempt_topology_fast.ScanOrder(nodes, possible, offset)

    def exact(node: NodeInfo) -> list[TaskInfo] | None:
        return select_victims(ssn, state, preemptor, queue, node, keep)

    try:
        got = preempt_topology_fast.best_candidate(ssn, plan, preemptor, order, wanted, exact, ceiling)
    except preempt_topology_fast.OutOfRange:
        return False, None
    return True, None if got is None else Candidate(ssn.node_list[got.node], got.victims)


def select_victims(
    ssn: Session, base: CycleState, preemptor: TaskInfo, queue: QueueInfo, node: NodeInfo, keep: TaskFilter
) -> list[TaskInfo] | None:
    """The fewest victims on ``node`` that let the preemptor fit, tried on a clone of the
    preemptor's CycleState; None when there is no such set (or no victim is needed at all)."""
    victims = ssn.call(P.PREEMPTABLE, preemptor, [t for t in node.tasks.values() if keep(t)])
    ssn.result.stats.preemption_victims = len(victims)  # Volcano: per node considered
    if not victims_cover(preemptor, node, victims):
        return None
    state = base.clone()
    have = ssn.nodes.future[node.index].copy()
    removed: list[TaskInfo] = []
    order = victims_queue(ssn, victims, preemptor)
    while not order.empty():
        victim = order.pop()
        removed.append(victim)
        if ssn.call(P.SIMULATE_REMOVE_TASK, state, preemptor, victim, node) is not None:
            return None
        have += victim.res_vec
        if _fits(ssn, state, queue, preemptor, node, have):
            break
    # Only the predicate is required once every victim is gone (kube's SelectVictimsOnNode): a
    # node where the queue still cannot take the preemptor stays a candidate, with every victim
    # kept (none can be reprieved), as in Volcano.
    if not removed or ssn.call(P.SIMULATE_PREDICATE, state, preemptor, node) is not None:
        return None
    chosen: list[TaskInfo] = []
    for victim in reversed(removed):  # most important first: it is the first to be spared
        if ssn.call(P.SIMULATE_ADD_TASK, state, preemptor, victim, node) is not None:
            return None
        have -= victim.res_vec
        if _fits(ssn, state, queue, preemptor, node, have):
            continue
        if ssn.call(P.SIMULATE_REMOVE_TASK, state, preemptor, victim, node) is not None:
            return None
        have += victim.res_vec
        chosen.append(victim)
    return chosen or None


def _fits(ssn: Session, state: CycleState, queue: QueueInfo, task: TaskInfo, node: NodeInfo, have: FloatArray) -> bool:
    return (
        ssn.call(P.SIMULATE_ALLOCATABLE, state, queue, task)
        and fits_vector(task, have)
        and ssn.call(P.SIMULATE_PREDICATE, state, task, node) is None
    )


def pick_one(candidates: list[Candidate], now: float) -> Candidate:
    """kube's pickOneNodeForPreemption: the lowest most-important victim priority, then the
    lowest priority sum, the fewest victims, the latest start among the most important victims,
    then the first found."""
    if len(candidates) == 1:
        return candidates[0]
    scorers = (
        lambda c: -_priority(c.victims[0]),
        lambda c: -sum(_priority(v) + PRIORITY_OFFSET for v in c.victims),
        lambda c: -len(c.victims),
        lambda c: _earliest_top_start(c.victims, now),
    )
    left = candidates
    for score in scorers:
        values = [score(c) for c in left]
        top = max(values)
        left = [c for c, v in zip(left, values, strict=True) if v == top]
        if len(left) == 1:
            break
    return left[0]


def _priority(task: TaskInfo) -> int:
    return pod_priority(task)


def _earliest_top_start(victims: list[TaskInfo], now: float) -> float:
    """Earliest start time among the highest-priority victims (not started: now)."""
    top = max(_priority(v) for v in victims)
    return min(start_time(v, now) for v in victims if _priority(v) == top)
