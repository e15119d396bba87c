"""How many feasible nodes allocate looks for, and where it starts: Volcano's PredicateNodes window.

Volcano does not score every feasible node of a large cluster.  Its predicate helper walks the
node list from where the previous search stopped (a scheduler-wide index), and stops once it has
found ``CalculateNumOfFeasibleNodesToFind(n)`` feasible nodes: every node up to 100, then an
adaptive 50% − n/125 (at least 5%, at least 100 nodes) with the default scheduler options.  Only
those nodes are scored; the index moves past the last node examined, so each node gets its turn
across tasks.  Lahar computes the feasibility of every node at once (cached per task shape), and
then keeps the same window Volcano's sequential walk would have kept; the index lives on the
snapshot, as Volcano keeps it for the process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from lahar_scheduler.framework.nodes import IntArray

MIN_NODES_TO_FIND = 100  # --minimum-feasible-nodes
MIN_PERCENTAGE = 5  # --minimum-percentage-nodes-to-find
BASELINE_PERCENTAGE = 50


def nodes_to_find(total: int) -> int:
    """CalculateNumOfFeasibleNodesToFind with the default options (percentage-nodes-to-find 0)."""
    if total <= MIN_NODES_TO_FIND:
        return total
    percentage = max(BASELINE_PERCENTAGE - total // 125, MIN_PERCENTAGE)
    return max(total * percentage // 100, MIN_NODES_TO_FIND)


def window(feasible: IntArray, total: int, start: int) -> tuple[IntArray, int]:
    """The feasible positions (sorted, in ``range(total)``) a walk from ``start`` keeps, and where
    the next walk starts (``window_positions`` on positions)."""
    if total == 0:
        return feasible, 0
    mask = np.zeros(total, dtype=bool)
    mask[feasible] = True
    return window_positions(mask, start)


def window_positions(feasible: np.ndarray, start: int) -> tuple[IntArray, int]:
    """The nodes (sorted positions) a walk from ``start`` keeps among the ``feasible`` ones (the
    non-zero entries: a mask, or verdict codes with 0 for infeasible), and where the next walk
    starts.  The walk stops at the first feasible node past the window (it was
    examined, so the index moves past it); with no such node every node was examined and the
    index is unchanged."""
    total = len(feasible)
    if total == 0:
        return np.zeros(0, dtype=np.intp), 0
    start %= total
    wanted = nodes_to_find(total)
    # Only the first wanted + 1 feasible nodes of the walk matter.  The part from ``start`` on
    # and the part before it are each ascending and every position of the first is larger, so
    # the kept nodes come out sorted by putting the second part first (no sort needed).
    end = start + 2 * (wanted + 1)
    if end < total:
        # On a cluster with room the walk ends within twice the window: look there first.
        near = feasible[start:end].nonzero()[0]  # np.flatnonzero without its wrappers (1-D)
        if len(near) > wanted:
            return near[:wanted] + start, (start + int(near[wanted]) + 1) % total
    ahead = feasible[start:].nonzero()[0]
    if len(ahead) > wanted:
        return ahead[:wanted] + start, (start + int(ahead[wanted]) + 1) % total
    behind = feasible[:start].nonzero()[0]
    need = wanted + 1 - len(ahead)  # feasible nodes the walk still looks for after wrapping
    if len(behind) >= need:
        return np.concatenate((behind[: need - 1], ahead + start)), (int(behind[need - 1]) + 1) % total
    return np.concatenate((behind, ahead + start)), start
