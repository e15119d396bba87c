"""Vectorised predicate results.

A predicate callback is evaluated over an array of node indices at once and returns the groups
of nodes that fail, each with a reason and a status code.  The session runs callbacks in tier
order; a node that fails one plugin is not shown to the next, as Volcano's PredicateFn returns on
the first failing plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from lahar_scheduler.framework.fiterrors import FitErrors
from lahar_scheduler.framework.types import Code

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import BoolArray, FloatArray, IntArray

ABORT_CODES = frozenset({Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.ERROR})


@dataclass(slots=True)
class Failure:
    """Nodes (a mask over the candidates handed in) failing for one reason."""

    mask: BoolArray
    reason: str
    code: Code = Code.UNSCHEDULABLE


PredicateCallback = Callable[["TaskInfo", "IntArray"], list[Failure]]
ScoreCallback = Callable[["TaskInfo", "IntArray"], "FloatArray"]


@dataclass(slots=True)
class Filtered:
    """The nodes that passed, and why the others did not."""

    passed: IntArray
    errors: FitErrors
    unresolvable: IntArray


def run_predicates(task: TaskInfo, idx: IntArray, callbacks: list[PredicateCallback], names: list[str]) -> Filtered:
    """Apply callbacks in order over ``idx`` (node indices)."""
    failed = np.zeros(len(idx), dtype=bool)
    unresolvable = np.zeros(len(idx), dtype=bool)
    live = np.arange(len(idx))
    errors = FitErrors()
    for fn in callbacks:
        if not len(live):
            break
        plugin_failed = np.zeros(len(live), dtype=bool)
        for failure in fn(task, idx[live]):
            count = int(failure.mask.sum())
            if not count:
                continue
            errors.add(failure.reason, count)
            plugin_failed |= failure.mask
            if failure.code in ABORT_CODES:
                unresolvable[live[failure.mask]] = failure.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        if plugin_failed.any():
            failed[live[plugin_failed]] = True
            live = live[~plugin_failed]
    errors.add_nodes(int(failed.sum()))
    return Filtered(idx[~failed], errors, idx[unresolvable])


def first_true(mask: BoolArray) -> IntArray:
    """Index of the first True per row (rows must have one)."""
    return np.asarray(mask.argmax(axis=1), dtype=np.intp)


def fit_failures(
    need: FloatArray, have: FloatArray, cols: IntArray, names: list[str]
) -> tuple[BoolArray, list[Failure]]:
    """Volcano's ``LessEqual(request, have, Zero)`` per node, on the task's checked columns.

    Returns the passing mask and one failure group per first-insufficient resource
    (``Insufficient cpu``), as WrapInsufficientResourceReason reports only the first name.
    """
    short = need[cols] >= have[:, cols] + 0.1
    bad: BoolArray = np.asarray(short.any(axis=1))
    if not bad.any():
        return ~bad, []
    first = cols[first_true(short[bad])]
    failures = []
    rows = np.flatnonzero(bad)
    for col in np.unique(first):
        mask = np.zeros(len(have), dtype=bool)
        mask[rows[first == col]] = True
        failures.append(Failure(mask, f"Insufficient {names[int(col)]}", Code.UNSCHEDULABLE))
    return ~bad, failures


def fits_vector(task: TaskInfo, have: FloatArray) -> bool:
    """``LessEqual(InitResreq, have, Zero)`` for one node's vector (epsilon 0.1): ``fits_rows``
    for one row, without numpy's per-call cost."""
    need = task.init_vec
    for c in task.fit_cols.tolist():  # noqa: SIM110 - a generator would be a frame of its own
        if not need[c] < have[c] + 0.1:
            return False
    return True


def fits_rows(task: TaskInfo, have: FloatArray) -> BoolArray:
    """``LessEqual(InitResreq, have, Zero)`` (epsilon 0.1) for each row of ``have`` at once."""
    cols = task.fit_cols
    return np.asarray(np.all(task.init_vec[cols] < have[:, cols] + 0.1, axis=1))
