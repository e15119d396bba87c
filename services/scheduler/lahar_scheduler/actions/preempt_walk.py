"""The normal preempt path's node order, kept between preemptors of one shape.

The normal path walks, best score first, the nodes a preemptor could possibly take: the victim
bound says their countable tasks could cover it, the queue's eviction need that those tasks
could free it, and no predicate fails the node unresolvably.  For a task whose predicates and
scores are local (``Session.predicates_local``, ``Session.scores_local``) each of these is a
function of the node's row alone, so the *masked scores* (a possible node's score, -inf
elsewhere) are kept per queue, task shape, ceiling key and need, and only the rows that changed
since they were last read are computed again.  A preemptor changes one or two rows; computing
the masks and scores over every node again took some twenty array operations per preemptor, a
third of a preempt session.

The victim ceiling (framework/ceiling.py) is asked lazily, one row at a time: only when a
walked node's victims could not cover the preemptor.  If the ceiling then shows that no
preemptor of this key could be covered there, the node is *vetoed* (masked out) until its row
goes stale: the node changes, or a job with a countable task there changes (the ceiling's changed
jobs).  Walking a node the ceiling would have ruled out finds victims that cannot cover the
preemptor (they are a subset of what it counts) and changes nothing, so the nodes where
preemption succeeds or tries evictions, and their order, are the plain path's with the ceiling
applied up front; asking it up front cost a row per preemptor (the changed node's jobs are
always dirty) and every row once.

The order is exactly the plain path's: the first of the highest scores, then the other possible
nodes by score, ties in node order (what a stable sort gives, and repeated argmax too).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from lahar_scheduler.actions.scalar_fit import Requests, column_sum, fits_with_sum
from lahar_scheduler.framework import points as P

if TYPE_CHECKING:
    from lahar_scheduler.actions.evictutil import UnresolvableCache, VictimBound
    from lahar_scheduler.framework.ceiling import Tiers, VictimCeiling
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import FloatArray
    from lahar_scheduler.framework.session import Session

IMPOSSIBLE = -np.inf
WALKS_KEPT = 16
# Nodes found by argmax after the best one failed, before sorting the rest: each argmax is a
# pass over the scores, the sort a few hundred passes' worth.
ARGMAX_STEPS = 16


class _Walk:
    __slots__ = ("changes", "dirty", "masked", "veto_jobs", "vetoed")

    def __init__(self, masked: FloatArray, changes: int, dirty: int) -> None:
        self.masked, self.changes, self.dirty = masked, changes, dirty
        self.vetoed: set[int] = set()  # rows the ceiling masked out (see the module's doc)
        # Per job with a task on a vetoed row, those rows: a change of the job makes them stale.
        # An entry may outlive its veto (the row was refreshed since); it then costs one
        # needless, exact, refresh at most.
        self.veto_jobs: dict[str, set[int]] = {}

    def veto(self, i: int, jobs: set[str]) -> None:
        """Mask out row ``i``, whose ceiling reads ``jobs`` (``VictimCeiling.row_jobs``)."""
        self.masked[i] = IMPOSSIBLE
        self.vetoed.add(i)
        for uid in jobs:
            self.veto_jobs.setdefault(uid, set()).add(i)

    def stale_vetoes(self, jobs: list[str]) -> set[int]:
        """Vetoed rows some of ``jobs`` (changed jobs) have a task on."""
        out: set[int] = set()
        for uid in jobs:
            rows = self.veto_jobs.pop(uid, None)
            if rows:
                out.update(rows)
        out &= self.vetoed
        return out


class Walk:
    """One preemptor's nodes, best first (iterated once).  ``uncovered(i)`` tells the memo that
    node ``i``'s victims could not cover the preemptor."""

    __slots__ = ("best", "ceiling", "entry", "keyed", "queue", "task", "tests")

    def __init__(
        self, entry: _Walk, best: int, task: TaskInfo, queue: str, ceiling: VictimCeiling, keyed: bool
    ) -> None:
        self.entry, self.best, self.task, self.queue = entry, best, task, queue
        self.ceiling, self.keyed = ceiling, keyed
        self.tests: Tiers | None = None  # made when a walked node first falls short

    def __iter__(self) -> Iterator[int]:
        return _walk(self.entry.masked, self.best)

    def uncovered(self, i: int) -> None:
        if not self.keyed:
            return
        if self.tests is None:
            keyed = self.ceiling.keyed_tests(self.task, self.queue)
            if keyed is None:
                return
            self.tests = keyed[1]
        if not self.ceiling.row_holds(self.task, self.queue, self.tests, i):
            self.entry.veto(i, self.ceiling.row_jobs(i))


class WalkMemo:
    def __init__(self, ssn: Session, bound: VictimBound, ceiling: VictimCeiling, verdicts: UnresolvableCache) -> None:
        self.ssn, self.bound, self.ceiling, self.verdicts = ssn, bound, ceiling, verdicts
        # Most recently used last; a queue whose need moves with every preemptor makes a new key
        # each time, so only a few are kept (each holds a float per node).
        self._walks: OrderedDict[Hashable, _Walk] = OrderedDict()
        self._score_rows = _score_rows(ssn)
        self.requests: Requests = {}  # each task's request as floats (actions/scalar_fit.py)
        self._needs: tuple[bytes | None, list[tuple[int, float]]] = (None, [])

    @staticmethod
    def applies(ssn: Session, task: TaskInfo) -> bool:
        """Local predicates and scores, and no node that allocate found unresolvable for this
        very task (that set is the task's own, not its shape's)."""
        job = ssn.jobs.get(task.job)
        err = job.fit_errors.get(task.uid) if job is not None else None
        if err is not None and err.unresolvable:
            return False
        return ssn.predicates_local(task) and ssn.scores_local(task)

    def order(self, task: TaskInfo, queue: str, room: FloatArray | None, ceiling: bool) -> Walk | None:
        """The nodes to walk, best first; None when no node is possible.  ``ceiling``: the
        victim ceiling may veto nodes (not for victims of the preemptor's own job)."""
        ceiling_key = self.ceiling.key(task, queue) if ceiling else None
        key = (queue, task.template_key, ceiling_key, _bytes(room))
        changes, mark = self.ssn.nodes.changes, self.ceiling.dirty_mark
        walk = self._walks.get(key)
        if walk is None or len(walk.masked) != len(self.ssn.nodes.infos):
            walk = self._walks[key] = _Walk(self._full(task, queue, room), len(changes), mark)
            if len(self._walks) > WALKS_KEPT:
                self._walks.popitem(last=False)
        else:
            self._walks.move_to_end(key)
            stale = set(changes[walk.changes :])
            vetoed = walk.vetoed
            if vetoed:
                # Only a veto reads the jobs on its node: other rows are the node's alone.
                stale.update(walk.stale_vetoes(self.ceiling.dirty_jobs(walk.dirty)))
                vetoed.difference_update(stale)
            if stale:
                self._refresh(walk.masked, sorted(stale), task, queue, room)
            walk.changes, walk.dirty = len(changes), mark
        best = int(walk.masked.argmax())
        if walk.masked[best] == IMPOSSIBLE:
            return None
        return Walk(walk, best, task, queue, self.ceiling, ceiling_key is not None)

    def _full(self, task: TaskInfo, queue: str, room: FloatArray | None) -> FloatArray:
        possible = self.bound.candidates(task, queue) & ~self.verdicts.get(task)
        if room is not None:
            possible &= self.bound.covering(task, queue, room)
        scores = self.ssn.call(P.NODE_ORDER, task, self.ssn.candidate_nodes())
        return np.where(possible, scores, IMPOSSIBLE)

    def _refresh(
        self, masked: FloatArray, rows: list[int], task: TaskInfo, queue: str, room: FloatArray | None
    ) -> None:
        """``_full`` on ``rows`` only, each row computed in Python by the caches' one-row
        functions (a few rows cost less so than through numpy, or through the caches, which
        catch up on their own next read)."""
        needs, future, bound, requests = self.needed(room), self.ssn.nodes.future, self.bound, self.requests
        scores = self._scores(task, rows)
        for j, r in enumerate(rows):
            counted = bound.countable(queue, r)
            # VictimBound.candidates (its row: the counted tasks summed from zero, in node
            # order), then UnresolvableCache, then VictimBound.covering, in scalar twins.
            ok = fits_with_sum(task, future[r], counted, requests) and not self.verdicts.row(task, r)
            if ok and needs:
                for c, need in needs:  # a loop: a generator would be a frame of its own
                    if not column_sum(counted, c, requests) >= need:
                        ok = False
                        break
            masked[r] = scores[j] if ok else IMPOSSIBLE

    def needed(self, room: FloatArray | None) -> list[tuple[int, float]]:
        """The dimensions ``room`` needs and how much, kept for the last room asked about (a
        queue's need moves only when its allocation does)."""
        if room is None:
            return []
        raw = room.tobytes()
        if self._needs[0] != raw:
            self._needs = (raw, [(c, float(room[c])) for c in np.flatnonzero(room > 0).tolist()])
        return self._needs[1]

    def _scores(self, task: TaskInfo, rows: list[int]) -> list[float]:
        """The node-order scores of ``rows``: through the callbacks' one-node twins when every
        callback has one (summed in the chain's order, as ``score_sum`` adds them)."""
        if self._score_rows is None:
            return self.ssn.call(P.NODE_ORDER, task, np.array(rows, dtype=np.intp)).tolist()  # type: ignore[no-any-return]
        out = []
        for r in rows:
            total = 0.0
            for k, row in enumerate(self._score_rows):
                total = row(task, r) if k == 0 else total + row(task, r)
            out.append(total)
        return out


def _score_rows(ssn: Session) -> list[Callable[[TaskInfo, int], float]] | None:
    """Each node-order callback's ``score_row`` (on itself or its plugin), valid for tasks whose
    scores are local, which are the only ones the memo serves; None if one has none."""
    rows = []
    for fn in ssn.callbacks(P.NODE_ORDER):
        owner = getattr(fn, "__self__", None)
        row = getattr(fn if owner is None else owner, "score_row", None)
        if row is None:
            return None
        rows.append(row)
    return rows


def _walk(masked: FloatArray, best: int) -> Iterator[int]:
    yield best
    # Reached only when the best node failed; the walk changed nothing it kept (a failed node's
    # statement is discarded), and ``masked`` changes only by vetoes of nodes already walked.
    work = masked.copy()
    work[best] = IMPOSSIBLE
    for _ in range(ARGMAX_STEPS):
        j = int(work.argmax())
        if work[j] == IMPOSSIBLE:
            return
        yield j
        work[j] = IMPOSSIBLE
    nodes = np.flatnonzero(work > IMPOSSIBLE)
    for j in np.argsort(-work[nodes], kind="stable").tolist():
        yield int(nodes[j])


def _bytes(room: FloatArray | None) -> bytes | None:
    return None if room is None else room.tobytes()


__all__ = ["Walk", "WalkMemo"]
