"""Scalar twins of two fit checks reclaim makes for every reclaimer, on the columns the check
reads only, in plain Python: with a node's seven or eight tasks, numpy's per-call cost (a zeros
row, an add per task, a copy) was most of each check.

Each column is added in the same order, from the same start, as the vector code adds it (a
float64 add is the same IEEE operation whether numpy or Python does it), so every answer is
bit for bit the vector one; ``fits_vector`` reads nothing but ``init_vec`` on ``fit_cols``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import FloatArray

EPSILON = 0.1  # fits_vector's: LessEqual with a tenth of a unit to spare


def fits_with_sum(task: TaskInfo, base: FloatArray, tasks: Sequence[TaskInfo]) -> bool:
    """``fits_vector(task, base + s)``, ``s`` the tasks' requests summed from zero in order
    (the victim bound's row: ``s = zeros; s += t.res_vec`` for each task)."""
    need = task.init_vec
    for c in task.fit_cols.tolist():
        s = 0.0
        for t in tasks:
            s += t.res_vec[c]
        if not need[c] < base[c] + s + EPSILON:
            return False
    return True


def fits_with_each(task: TaskInfo, base: FloatArray, tasks: Sequence[TaskInfo]) -> bool:
    """``fits_vector(task, have)`` after ``have = base.copy(); have += t.res_vec`` for each task
    in order (``evictutil.victims_cover``)."""
    need = task.init_vec
    for c in task.fit_cols.tolist():
        have = base[c]
        for t in tasks:
            have += t.res_vec[c]
        if not need[c] < have + EPSILON:
            return False
    return True
