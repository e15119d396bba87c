"""nodeorder's resource scores (LeastAllocated and BalancedAllocation, weighted and summed) for the
common case, in fewer array operations than the general kernels of scores.py.

The common case: every node offers cpu and memory (so both resources always count), the pod is
balanced over cpu and memory only (no GPU asked for, or no GPU in the cluster), it asks for some
cpu or memory (so BalancedAllocation scores it), and MostAllocated is not weighted.  Each
function computes, element by element, the same IEEE operations in the same order as the general
kernels do for that case, without the masks that only matter outside it: the results are equal
(tests/unit/test_scores_fast.py compares them on random tables).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from lahar_scheduler.plugins.k8s.scores import GPU, MAX

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import FloatArray, IntArray, NodeTable


def every_node_has_cpu_and_memory(table: NodeTable) -> bool:
    return bool(len(table.alloc) and (table.alloc[:, :2] > 0).all())


def applies(table: NodeTable, task: TaskInfo, most_weight: int) -> bool:
    """Whether the task is in the common case (``every_node_has_cpu_and_memory`` is the caller's)."""
    if most_weight:
        return False
    gpu = table.space.index.get(GPU)
    init = task.init_vec
    if gpu is not None and gpu < len(init) and init[gpu] > 0:
        return False
    return bool(init[:2].any())


def local_scores(
    table: NodeTable, task: TaskInfo, rows: IntArray, least_weight: int, balanced_weight: int
) -> FloatArray:
    """Σ weight × score over ``rows``, as NodeOrderPlugin._local_scores gives in the common case."""
    alloc = table.alloc[rows, :2]
    total = np.zeros(len(rows))
    if least_weight:
        held = table.nonzero[rows] + task.nonzero_vec
        per = (alloc - held) * MAX
        per /= alloc
        np.floor(per, out=per)
        per = np.where(held <= alloc, per, 0.0)
        least = np.floor(per.sum(axis=1) / 2)
        total += least * least_weight
    if balanced_weight:
        before = table.requested[rows, :2]
        with_pod = _balance(alloc, before + task.init_vec[:2])
        without = _balance(alloc, before)
        total += (MAX // 2 + (MAX // 2 + with_pod - without) // 2) * balanced_weight
    return total


def _balance(alloc: FloatArray, req: FloatArray) -> FloatArray:
    frac = req / alloc
    np.minimum(frac, 1.0, out=frac)
    spread = np.abs(frac[:, 0] - frac[:, 1])
    spread /= 2
    return np.asarray(np.floor((1 - spread) * MAX))


def local_score_row(table: NodeTable, task: TaskInfo, i: int, least_weight: int, balanced_weight: int) -> float:
    """The scalar twin of ``local_scores`` for one node (see RowCache)."""
    a0, a1 = table.alloc[i, :2].tolist()
    total = 0.0
    if least_weight:
        h0, h1 = table.nonzero[i].tolist()
        n0, n1 = task.nonzero_vec.tolist()
        r0, r1 = h0 + n0, h1 + n1
        least = 0.0
        if r0 <= a0:
            least += math.floor((a0 - r0) * MAX / a0)
        if r1 <= a1:
            least += math.floor((a1 - r1) * MAX / a1)
        total += float(math.floor(least / 2)) * least_weight
    if balanced_weight:
        b0, b1 = table.requested[i, :2].tolist()
        p0, p1 = task.init_vec[:2].tolist()
        with_pod = _balance_row(a0, a1, b0 + p0, b1 + p1)
        without = _balance_row(a0, a1, b0, b1)
        total += float(MAX // 2 + (MAX // 2 + with_pod - without) // 2) * balanced_weight
    return total


def _balance_row(a0: float, a1: float, r0: float, r1: float) -> int:
    std = abs(min(r0 / a0, 1.0) - min(r1 / a1, 1.0)) / 2
    return math.floor((1 - std) * MAX)
