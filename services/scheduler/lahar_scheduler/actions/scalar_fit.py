"""Scalar twins of two fit checks reclaim makes for every reclaimer, on the columns the check
reads only, in plain Python: with a node's seven or eight tasks, numpy's per-call cost (a zeros
row, an add per task, a copy) was most of each check.

Each column is added in the same order, from the same start, as the vector code adds it (a
float64 add is the same IEEE operation whether numpy or Python does it), so every answer is
bit for bit the vector one; ``fits_vector`` reads nothing but ``init_vec`` on ``fit_cols``.
Requests are read as Python floats once per task (``Requests``): a task's request does not
change within a session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import FloatArray

EPSILON = 0.1  # fits_vector's: LessEqual with a tenth of a unit to spare
Requests = dict[str, list[float]]  # per task uid, its ``res_vec`` as floats (one per session)


def _rows(tasks: Sequence[TaskInfo], requests: Requests) -> list[list[float]]:
    out = []
    for t in tasks:
        row = requests.get(t.uid)
        if row is None:
            row = requests[t.uid] = t.res_vec.tolist()
        out.append(row)
    return out


def fits_with_sum(task: TaskInfo, base: FloatArray, tasks: Sequence[TaskInfo], requests: Requests) -> bool:
    """``fits_vector(task, base + s)``, ``s`` the tasks' requests summed from zero in order
    (the victim bound's row: ``s = zeros; s += t.res_vec`` for each task)."""
    need, rows = task.init_vec, _rows(tasks, requests)
    for c in task.fit_cols.tolist():
        s = 0.0
        for row in rows:
            s += row[c]
        if not need[c] < base[c] + s + EPSILON:
            return False
    return True


def column_sum(tasks: Sequence[TaskInfo], c: int, requests: Requests) -> float:
    """Column ``c`` of the tasks' requests summed from zero in order (a bound row's column)."""
    s = 0.0
    for row in _rows(tasks, requests):
        s += row[c]
    return s


def fits_with_each(task: TaskInfo, base: FloatArray, tasks: Sequence[TaskInfo], requests: Requests) -> bool:
    """``fits_vector(task, have)`` after ``have = base.copy(); have += t.res_vec`` for each task
    in order (``evictutil.victims_cover``)."""
    need, rows = task.init_vec, _rows(tasks, requests)
    for c in task.fit_cols.tolist():
        have = float(base[c])
        for row in rows:
            have += row[c]
        if not need[c] < have + EPSILON:
            return False
    return True
