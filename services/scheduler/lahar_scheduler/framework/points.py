"""Volcano's extension points, each declared once with its enable flag and how tiers combine.

The session walks registered callbacks tier by tier, plugins in listed order, skipping a
plugin whose option disables the point's flag.  ``Combine`` names the rule; the session holds
one function per rule, never a copied loop per point.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass


class Combine(enum.Enum):
    FIRST_NONZERO = "first non-zero comparison wins"
    ALL_PASS = "all must pass; first failure returned"
    SUM = "scores summed"
    FIRST_RESULT = "first plugin returning a result wins"
    VICTIM_INTERSECTION = "per-tier intersection; empty falls through to the next tier"
    ANY = "any plugin says yes"
    ALL = "every plugin must say yes"
    VOTE = "any reject loses; a tier with a permit wins"
    FIRST_TIER = "first tier with a callback decides (AND within it)"
    UNION_FIRST_TIER = "union within a tier; first non-empty tier wins"
    NOTIFY = "all called"
    FIRST_FAILURE = "first failing result"


@dataclass(frozen=True)
class Point:
    name: str
    # None: consulted whatever the plugin's flags say; a tuple: consulted when any of them is on.
    flag: str | tuple[str, ...] | None
    combine: Combine


def consulted(flag: str | tuple[str, ...] | None, enabled: Callable[[str], bool]) -> bool:
    """Whether a plugin whose option answers ``enabled`` takes part in a point with this flag."""
    if flag is None:
        return True
    if isinstance(flag, tuple):
        return any(enabled(f) for f in flag)
    return enabled(flag)


# Volcano calls the simulate add/remove hooks of plugins that enable preemptable or allocatable.
_SIMULATE_TASK = ("enablePreemptable", "enabledAllocatable")


POINTS: dict[str, Point] = {
    p.name: p
    for p in (
        Point("job_order", "enableJobOrder", Combine.FIRST_NONZERO),
        Point("queue_order", "enableQueueOrder", Combine.FIRST_NONZERO),
        Point("task_order", "enableTaskOrder", Combine.FIRST_NONZERO),
        Point("victim_queue_order", None, Combine.FIRST_NONZERO),
        Point("predicate", "enablePredicate", Combine.ALL_PASS),
        Point("pre_predicate", "enablePredicate", Combine.ALL_PASS),
        Point("node_order", "enableNodeOrder", Combine.SUM),
        Point("best_node", "enableBestNode", Combine.FIRST_RESULT),
        Point("preemptable", "enablePreemptable", Combine.VICTIM_INTERSECTION),
        Point("reclaimable", "enableReclaimable", Combine.VICTIM_INTERSECTION),
        Point("overused", "enabledOverused", Combine.ANY),
        Point("allocatable", "enabledAllocatable", Combine.ALL),
        Point("preemptive", "enablePreemptive", Combine.ALL),
        Point("job_ready", "enableJobReady", Combine.ALL),
        Point("job_pipelined", "enableJobPipelined", Combine.VOTE),
        Point("job_enqueueable", "enableJobEnqueued", Combine.VOTE),
        Point("job_enqueued", "enableJobEnqueued", Combine.NOTIFY),
        Point("job_valid", None, Combine.FIRST_FAILURE),
        Point("job_starving", "enableJobStarving", Combine.FIRST_TIER),
        Point("victim_tasks", "enabledVictim", Combine.UNION_FIRST_TIER),
        # Gang-aware eviction (gangpreempt, gangreclaim): no enable flag, as in Volcano.
        Point("unified_evictable", None, Combine.VICTIM_INTERSECTION),
        Point("target_job", "enableTargetJob", Combine.FIRST_RESULT),
        Point("reserved_nodes", "enableReservedNodes", Combine.NOTIFY),
        # Topology-aware preemption dry-runs victims on node copies through these hooks; they
        # read and write the preemptor's CycleState.  In Volcano plugins fill it in PrePredicate;
        # here "cycle_state" callbacks (same flag) fill it when it is asked for, right after
        # pre_predicate, so allocate never pays for states nobody reads.
        Point("cycle_state", "enablePredicate", Combine.NOTIFY),
        Point("simulate_allocatable", "enabledAllocatable", Combine.ALL),
        Point("simulate_predicate", "enablePredicate", Combine.ALL_PASS),
        Point("simulate_add_task", _SIMULATE_TASK, Combine.ALL_PASS),
        Point("simulate_remove_task", _SIMULATE_TASK, Combine.ALL_PASS),
    )
}
