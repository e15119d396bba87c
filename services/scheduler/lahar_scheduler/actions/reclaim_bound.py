"""Reclaim's victim-sum bound (evictutil's ``VictimBound`` over ``reclaimable_elsewhere``),
kept up to date row by row in plain Python.

Reclaim asks for the bound once per pending task and each answer follows one pipeline and one
or two evictions, on one node.  VictimBound refreshes that node through two RowCaches, each
building index arrays and temporary matrices for a single row: tens of microseconds per task,
which at 5,000 reclaimers was a fifth of the action.  Here each queue's sums and each (queue,
task shape) candidates mask remember how far they have read ``NodeTable.changes`` and redo only
the rows listed since, with the same arithmetic VictimBound does (a row's sum starts at zero
and adds its countable tasks in node order; a row fits when ``fits_vector`` says so), so every
answer is bit for bit the one VictimBound gives.

The first sums of a queue come from one pass over every node's tasks: what each task counts
for does not depend on the queue except through "another queue", so the pass is shared and
each queue's sums are then one ``np.add.at`` (which adds row by row in the order given, as the
per-node loop would).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lahar_scheduler.actions.evictutil import fits_vector
from lahar_scheduler.framework.predicate import fits_rows
from lahar_scheduler.framework.types import TaskStatus

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import BoolArray, FloatArray
    from lahar_scheduler.framework.session import Session

S = TaskStatus


class _Rows:
    """An array over the nodes and how far into ``NodeTable.changes`` its rows are current."""

    __slots__ = ("read", "values")

    def __init__(self, values: np.ndarray, read: int) -> None:
        self.values = values
        self.read = read


class ReclaimBound:
    """Per node, future idle plus Σ the Running, preemptable tasks of other reclaimable queues:
    a node where that cannot hold a reclaimer yields nothing to reclaim (see evictutil)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.table = ssn.nodes
        self._sums: dict[str, _Rows] = {}
        # Per row: (its row_version, Σ all its countable tasks, their queues); see _row_sum.
        self._rows: dict[int, tuple[int, FloatArray, set[str]]] = {}
        # Jobs of reclaimable queues, and their queue (both fixed for the session).
        queues = ssn.queues
        self.job_queue = {
            uid: job.queue for uid, job in ssn.jobs.items() if job.queue in queues and queues[job.queue].reclaimable
        }
        self._fits: dict[tuple[str, bytes], _Rows] = {}
        # (row, queue, vector) of every countable task in node and task order, for first sums.
        self._countable: tuple[np.ndarray, list[str], np.ndarray, int] | None = None
        self._listed_nodes = 0

    def countable_queue(self, t: TaskInfo) -> str | None:
        """The queue a task may be reclaimed from: None unless Running, preemptable and in a
        reclaimable queue (``reclaimable_elsewhere`` without the "other queue" test)."""
        if t.status != S.RUNNING or not t.preemptable:
            return None
        return self.job_queue.get(t.job)

    def _row_sum(self, i: int, key: str) -> FloatArray:
        """Σ the row's tasks countable for ``key``, added in node order from zero.  Rows are
        usually asked by every reclaiming queue in turn, and where none of the row's countable
        tasks is of ``key``'s queue the sum is the same additions as the sum of all of them,
        so that one is kept per row (until the row changes) and shared."""
        version = int(self.table.row_version[i])
        got = self._rows.get(i)
        if got is None or got[0] != version:
            total = np.zeros(len(self.table.space))
            queues: set[str] = set()
            job_queue = self.job_queue
            for t in self.table.infos[i].tasks.values():
                if t.status == S.RUNNING and t.preemptable:
                    q = job_queue.get(t.job)
                    if q is not None:
                        total += t.res_vec
                        queues.add(q)
            got = self._rows[i] = (version, total, queues)
        if key not in got[2]:
            return got[1]
        out = np.zeros(len(self.table.space))
        for t in self.table.infos[i].tasks.values():
            q = self.countable_queue(t)
            if q is not None and q != key:
                out += t.res_vec
        return out

    def _all_countable(self) -> tuple[np.ndarray, list[str], np.ndarray, int]:
        """Every countable task as (rows, queues, vectors), and the changes mark it was read at
        (redone only if the node table was rebuilt)."""
        got = self._countable
        if got is None or self._listed_nodes != len(self.table.infos):
            self._listed_nodes = len(self.table.infos)
            rows: list[int] = []
            queues: list[str] = []
            vecs: list[FloatArray] = []
            job_queue = self.job_queue
            for i, info in enumerate(self.table.infos):
                for t in info.tasks.values():
                    # countable_queue, inlined: this visits every task on every node once.
                    if t.status == S.RUNNING and t.preemptable:
                        q = job_queue.get(t.job)
                        if q is not None:
                            rows.append(i)
                            queues.append(q)
                            vecs.append(t.res_vec)
            stacked = np.array(vecs) if vecs else np.zeros((0, len(self.table.space)))
            got = self._countable = (np.array(rows, dtype=np.intp), queues, stacked, len(self.table.changes))
        return got

    def sums(self, key: str) -> FloatArray:
        """Per node, Σ what reclaimers of queue ``key`` could evict there (a cached array)."""
        changes = self.table.changes
        entry = self._sums.get(key)
        if entry is None or len(entry.values) != len(self.table.infos):
            rows, queues, vecs, read = self._all_countable()
            values = np.zeros((len(self.table.infos), len(self.table.space)))
            other = np.fromiter((q != key for q in queues), dtype=bool, count=len(queues))
            np.add.at(values, rows[other], vecs[other])
            # Rows changed since the tasks were listed are redone below, as for any entry.
            entry = self._sums[key] = _Rows(values, read)
        if entry.read < len(changes):
            values = entry.values
            for i in set(changes[entry.read :]):
                values[i] = self._row_sum(i, key)
            entry.read = len(changes)
        return entry.values

    def candidates(self, task: TaskInfo, key: str) -> BoolArray:
        """Nodes where future idle plus every task reclaimable for ``key`` could cover the
        request (a cached array: callers must not change it)."""
        extra = self.sums(key)
        future = self.table.future
        changes = self.table.changes
        fkey = (key, task.template_key)
        entry = self._fits.get(fkey)
        if entry is None or len(entry.values) != len(extra):
            entry = self._fits[fkey] = _Rows(fits_rows(task, future + extra), len(changes))
        elif entry.read < len(changes):
            mask = entry.values
            for i in set(changes[entry.read :]):
                mask[i] = fits_vector(task, future[i] + extra[i])
            entry.read = len(changes)
        return entry.values
