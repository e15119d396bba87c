"""Per-node results cached per task shape, refreshed only on the nodes that changed.

Tasks of one job are usually identical, and placing one changes one node.  A ``RowCache``
keeps, for each task shape (``template_key``), an array over all nodes computed by a *row-local*
function (row n depends only on node n and the task), and recomputes just the rows that
``NodeTable.changes`` lists since the entry was last read.  Only row-local functions may be
cached this way.

A cache may also take a scalar ``row`` function computing one node's value.  Updating one or
two rows through numpy costs tens of microseconds of call overhead per operation, while plain
Python arithmetic on one row costs well under one; the scalar twin must compute exactly what the
vector function does (a property test checks each pair).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import IntArray, NodeTable

SCALAR_ROWS = 8
A = TypeVar("A", bound=np.ndarray)


class _Entry(Generic[A]):
    __slots__ = ("read", "stale", "values")

    def __init__(self, values: A, read: int) -> None:
        self.values = values
        self.read = read
        # Rows changed but not yet recomputed (``rows`` leaves rows it was not asked for).
        self.stale: np.ndarray | None = None


class RowCache(Generic[A]):
    def __init__(
        self,
        table: NodeTable,
        compute: Callable[[TaskInfo, IntArray], A],
        row: Callable[[TaskInfo, int], float] | None = None,
        size: int = 64,
    ) -> None:
        self.table = table
        self.compute = compute
        self.row = row
        self.size = size
        self._entries: OrderedDict[bytes, _Entry[A]] = OrderedDict()

    def get(self, key: bytes, task: TaskInfo) -> A:
        changes = self.table.changes
        entry = self._entries.get(key)
        if entry is None or len(entry.values) != len(self.table.infos):
            values = self.compute(task, np.arange(len(self.table.infos), dtype=np.intp))
            self._entries[key] = _Entry(values, len(changes))
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)
            return values
        self._entries.move_to_end(key)
        pending = set(changes[entry.read :]) if entry.read < len(changes) else set()
        stale = entry.stale
        if stale is not None and stale.any():
            # Rows ``rows`` left for later are recomputed too: the entry is whole again.
            pending.update(stale.nonzero()[0].tolist())
            stale[:] = False
        if pending:
            if self.row is not None and len(pending) <= SCALAR_ROWS:
                for i in pending:
                    entry.values[i] = self.row(task, i)
            else:
                rows = np.array(sorted(pending), dtype=np.intp)
                entry.values[rows] = self.compute(task, rows)
        entry.read = len(changes)
        return entry.values

    def rows(self, key: bytes, task: TaskInfo, idx: IntArray) -> A:
        """``get(key, task)[idx]``, bringing only the rows of ``idx`` up to date.  A changed row
        elsewhere is marked and recomputed when it is next asked for: the functions are
        row-local, so computing it then gives what computing it now would.  Placements spread
        over the cluster while a caller asks for one window of nodes at a time, so most changed
        rows are not recomputed for every task shape."""
        changes = self.table.changes
        entry = self._entries.get(key)
        if entry is None or len(entry.values) != len(self.table.infos):
            return self.get(key, task)[idx]  # type: ignore[return-value]
        self._entries.move_to_end(key)
        stale = entry.stale
        if entry.read < len(changes):
            if stale is None:
                stale = entry.stale = np.zeros(len(entry.values), dtype=bool)
            stale[changes[entry.read :]] = True
            entry.read = len(changes)
        if stale is not None:
            hit = stale[idx]
            if hit.any():
                need = idx[hit]
                if self.row is not None and len(need) <= SCALAR_ROWS:
                    for i in need.tolist():
                        entry.values[i] = self.row(task, i)
                else:
                    entry.values[need] = self.compute(task, need)
                stale[need] = False
        return entry.values[idx]  # type: ignore[return-value]
