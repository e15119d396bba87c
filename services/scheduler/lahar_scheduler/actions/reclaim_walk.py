"""Reclaim's nodes to walk, kept between reclaimers of one queue and task shape.

Reclaim walks, in node order, the nodes within the victim bound (future idle plus every task
reclaimable for the queue could hold the reclaimer) that no predicate fails unresolvably.  For a
task whose predicates are local (``Session.predicates_local``) both are functions of the node's
row alone, and both are already cached that way (``ReclaimBound``, ``UnresolvableCache``); still,
refreshing the bound's sums and mask and masking the verdicts over every node took some forty
microseconds per reclaimer, most of the walk's cost, where the walk itself usually ends on its
first node.

So the mask of nodes to walk is kept per (queue, task shape), and a row is not computed until
the walk reaches it: a new mask knows only the verdicts (cached over every node anyway), and a
row that changed since the mask was last read is marked *unknown* (possibly walkable) again.
The walk goes through known and unknown nodes in node order; an unknown node is resolved when
the walk reaches it, with the bound's arithmetic (its reclaimees, the tasks the walk offers the
plugins anyway, summed in node order from zero) and the cached verdicts, and skipped if it
fails.  A walk that meets many unknown nodes settles the rest at once, through the bound's
vector sums (shared by a queue's task shapes).  A row read later than the plain path
would read it holds the same value: it depends on that node alone, and the walk changes no
node ahead of it (only the node it walks, and undoes a failed one).  So the nodes walked, and
their order, are the plain path's; nodes past the one where the reclaimer fits are not computed
at all, and mostly that is the first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from lahar_scheduler.actions.scalar_fit import Requests, fits_with_sum
from lahar_scheduler.framework.types import TaskStatus

if TYPE_CHECKING:
    from lahar_scheduler.actions.evictutil import UnresolvableCache
    from lahar_scheduler.actions.reclaim_bound import ReclaimBound
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import BoolArray
    from lahar_scheduler.framework.session import Session

S = TaskStatus
# Masks kept (a bool per node each): a key per queue and task shape in use.
WALKS_KEPT = 64
# Nodes found one argmax at a time before the rest are listed (a pass over the mask each).
ARGMAX_STEPS = 8
# A walk settles all unknown rows once it has resolved one by one more than this share of the
# nodes: resolving a row costs about what settling costs per node the first time for a queue (a
# pass over every task of the cluster), so settling earlier would mostly compute rows for
# nothing (a new queue's first reclaimer walks past every node the queues before it emptied).
SETTLE_SHARE = 4


class _Walk:
    __slots__ = ("ok", "read", "unknown")

    def __init__(self, ok: BoolArray, read: int) -> None:
        # True on known walkable rows and on unknown ones; how far ``NodeTable.changes`` is read.
        self.ok, self.read = ok, read
        self.unknown: set[int] = set()


class ReclaimWalk:
    def __init__(self, ssn: Session, bound: ReclaimBound, verdicts: UnresolvableCache) -> None:
        self.ssn, self.bound, self.verdicts = ssn, bound, verdicts
        self.table = ssn.nodes
        self._walks: OrderedDict[tuple[str, bytes], _Walk] = OrderedDict()
        self.requests: Requests = {}

    @staticmethod
    def applies(ssn: Session, task: TaskInfo) -> bool:
        """Local predicates, and no node allocate found unresolvable for this very task (that
        set is the task's own, not its shape's)."""
        job = ssn.jobs.get(task.job)
        err = job.fit_errors.get(task.uid) if job is not None else None
        if err is not None and err.unresolvable:
            return False
        return ssn.predicates_local(task)

    def nodes(self, task: TaskInfo, queue: str) -> Iterator[tuple[int, list[TaskInfo]]]:
        """The nodes to walk in node order, each with its reclaimees (``reclaimees``)."""
        entry = self._entry(task, queue)
        ok, start = entry.ok, 0
        # Node by node (argmax stops at the first True) while the walk goes on, which it rarely
        # does for long: mostly the first node takes the reclaimer, or an unknown one is ruled
        # out first.
        for _ in range(ARGMAX_STEPS):
            i = start + int(ok[start:].argmax()) if start < len(ok) else start
            if i >= len(ok) or not ok[i]:
                return
            got = self._visit(entry, task, queue, i)
            if got is not None:
                yield i, got
            start = i + 1
        # A long walk (mostly through known nodes whose victims the plugins keep): the rest is
        # listed at once and unknown rows resolved as they come, unless there are many; then
        # all are settled through the bound's vector sums (shared by the queue's task shapes,
        # where one by one each shape would compute every row again).
        lazily, most = 0, len(ok) // SETTLE_SHARE
        for i in (np.flatnonzero(ok[start:]) + start).tolist():
            if i in entry.unknown:
                lazily += 1
                if lazily > most:
                    self._settle(entry, task, queue)
            got = self._visit(entry, task, queue, i)
            if got is not None:
                yield i, got

    def _visit(self, entry: _Walk, task: TaskInfo, queue: str, i: int) -> list[TaskInfo] | None:
        """Node ``i``'s reclaimees, or None when it is not to be walked (resolving it if unknown)."""
        if i not in entry.unknown:
            return self.reclaimees(i, queue) if entry.ok[i] else None
        entry.unknown.discard(i)
        reclaimees = self.reclaimees(i, queue)
        # The bound's row: its countable tasks summed in node order from zero.
        holds = fits_with_sum(task, self.table.future[i], reclaimees, self.requests) and not self.verdicts.row(task, i)
        entry.ok[i] = holds
        return reclaimees if holds else None

    def _settle(self, entry: _Walk, task: TaskInfo, queue: str) -> None:
        """Resolve every unknown row with the vector bound and verdicts (their rows are as the
        walk found them: it changed none of them, only nodes it walked)."""
        if entry.unknown:
            rows = np.fromiter(entry.unknown, dtype=np.intp, count=len(entry.unknown))
            entry.ok[rows] = self.bound.candidates(task, queue)[rows] & ~self.verdicts.get(task)[rows]
            entry.unknown.clear()

    def reclaimees(self, i: int, queue: str) -> list[TaskInfo]:
        """Strictly Running, preemptable, of a job in another queue that allows reclaiming
        (``ReclaimBound.countable_queue``, inlined: it is asked for every task of a walked node)."""
        job_queue = self.bound.job_queue
        out = []
        for t in self.table.infos[i].tasks.values():
            if t.status == S.RUNNING and t.preemptable:
                q = job_queue.get(t.job)
                if q is not None and q != queue:
                    out.append(t)
        return out

    def _entry(self, task: TaskInfo, queue: str) -> _Walk:
        key = (queue, task.template_key)
        changes = self.table.changes
        entry = self._walks.get(key)
        if entry is None or len(entry.ok) != len(self.table.infos):
            # Every node is unknown but those the predicates rule out: the walk usually ends
            # within its first few nodes, so the bound is not computed over all of them.
            ok = ~self.verdicts.get(task)
            entry = self._walks[key] = _Walk(ok, len(changes))
            entry.unknown.update(np.flatnonzero(ok).tolist())
            if len(self._walks) > WALKS_KEPT:
                self._walks.popitem(last=False)
            return entry
        self._walks.move_to_end(key)
        if entry.read < len(changes):
            ok, stale = entry.ok, set(changes[entry.read :])
            entry.unknown |= stale
            for i in stale:  # mostly one row (changed four times): no numpy call
                ok[i] = True
            entry.read = len(changes)
        return entry


__all__ = ["ReclaimWalk"]
