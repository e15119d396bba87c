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
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import IntArray, NodeTable

SCALAR_ROWS = 8
A = TypeVar("A", bound=np.ndarray)


class _Entry(Generic[A]):
    __slots__ = ("read", "values")

    def __init__(self, values: A, read: int) -> None:
        self.values = values
        self.read = read


class RowCache(Generic[A]):
    def __init__(
        self,
        table: NodeTable,
        compute: Callable[[TaskInfo, IntArray], A],
        row: Callable[[TaskInfo, int], Any] | None = None,  # one node's value: a number or a row
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
        if entry.read < len(changes):
            pending = set(changes[entry.read :])
            if self.row is not None and len(pending) <= SCALAR_ROWS:
                for i in pending:
                    entry.values[i] = self.row(task, i)
            else:
                rows = np.array(sorted(pending), dtype=np.intp)
                entry.values[rows] = self.compute(task, rows)
            entry.read = len(changes)
        return entry.values
