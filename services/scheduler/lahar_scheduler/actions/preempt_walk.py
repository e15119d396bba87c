"""The normal preempt path's node order, kept between preemptors of one shape.

The normal path walks, best score first, the nodes a preemptor could possibly take: the victim
bound says their countable tasks could cover it, the ceiling (once in use) that the plugins
could name enough victims there, the queue's eviction need that those tasks could free it, and
no predicate fails the node unresolvably.  For a task whose predicates and scores are local
(``Session.predicates_local``, ``Session.scores_local``) each of these is a function of the
node's row alone (the ceiling's also of the jobs with tasks there, which it marks dirty), so the
*masked scores* (a possible node's score, -inf elsewhere) are kept per queue, task shape,
ceiling key and need, and only the rows that changed since they were last read are computed
again.  A preemptor changes one or two rows; computing the masks and scores over every node
again took some twenty array operations per preemptor, a third of a preempt session.

The order is exactly the plain path's: the first of the highest scores, then the other possible
nodes by score, ties in node order (a stable sort).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from lahar_scheduler.framework import points as P

if TYPE_CHECKING:
    from lahar_scheduler.actions.evictutil import UnresolvableCache, VictimBound
    from lahar_scheduler.framework.ceiling import VictimCeiling
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import BoolArray, FloatArray
    from lahar_scheduler.framework.session import Session

IMPOSSIBLE = -np.inf
WALKS_KEPT = 16


class _Walk:
    __slots__ = ("changes", "dirty", "masked")

    def __init__(self, masked: FloatArray, changes: int, dirty: int) -> None:
        self.masked, self.changes, self.dirty = masked, changes, dirty


class WalkMemo:
    def __init__(self, ssn: Session, bound: VictimBound, ceiling: VictimCeiling, verdicts: UnresolvableCache) -> None:
        self.ssn, self.bound, self.ceiling, self.verdicts = ssn, bound, ceiling, verdicts
        # Most recently used last; a queue whose need moves with every preemptor makes a new key
        # each time, so only a few are kept (each holds a float per node).
        self._walks: OrderedDict[Hashable, _Walk] = OrderedDict()

    @staticmethod
    def applies(ssn: Session, task: TaskInfo) -> bool:
        """Local predicates and scores, and no node that allocate found unresolvable for this
        very task (that set is the task's own, not its shape's)."""
        job = ssn.jobs.get(task.job)
        err = job.fit_errors.get(task.uid) if job is not None else None
        if err is not None and err.unresolvable:
            return False
        return ssn.predicates_local(task) and ssn.scores_local(task)

    def order(self, task: TaskInfo, queue: str, use_ceiling: bool, room: FloatArray | None) -> Iterator[int] | None:
        """The nodes to walk, best first; None when no node is possible."""
        ceiling, ceiling_key = self.ceiling.fits_keyed(task, queue) if use_ceiling else (None, None)
        key = (queue, task.template_key, ceiling_key if ceiling is not None else None, _bytes(room))
        changes, dirty = self.ssn.nodes.changes, self.ceiling.dirty
        walk = self._walks.get(key)
        if walk is None or len(walk.masked) != len(self.ssn.nodes.infos):
            walk = self._walks[key] = _Walk(self._full(task, queue, ceiling, room), len(changes), len(dirty))
            if len(self._walks) > WALKS_KEPT:
                self._walks.popitem(last=False)
        else:
            self._walks.move_to_end(key)
            stale = set(changes[walk.changes :])
            if ceiling is not None:
                stale.update(dirty[walk.dirty :])
            if stale:
                self._refresh(walk.masked, sorted(stale), task, queue, ceiling, room)
            walk.changes, walk.dirty = len(changes), len(dirty)
        best = int(walk.masked.argmax())
        if walk.masked[best] == IMPOSSIBLE:
            return None
        return _walk(walk.masked, best)

    def _full(self, task: TaskInfo, queue: str, ceiling: BoolArray | None, room: FloatArray | None) -> FloatArray:
        possible = self.bound.candidates(task, queue) & ~self.verdicts.get(task)
        if ceiling is not None:
            possible &= ceiling
        if room is not None:
            possible &= self.bound.covering(task, queue, room)
        scores = self.ssn.call(P.NODE_ORDER, task, self.ssn.candidate_nodes())
        return np.where(possible, scores, IMPOSSIBLE)

    def _refresh(
        self,
        masked: FloatArray,
        rows: list[int],
        task: TaskInfo,
        queue: str,
        ceiling: BoolArray | None,
        room: FloatArray | None,
    ) -> None:
        """``_full`` on ``rows`` only, in Python: a few rows cost less so than through numpy."""
        candidates, unresolvable = self.bound.candidates(task, queue), self.verdicts.get(task)
        needs = [] if room is None else [(c, float(room[c])) for c in np.flatnonzero(room > 0).tolist()]
        sums = self.bound.sums(task, queue) if needs else None
        scores = self.ssn.call(P.NODE_ORDER, task, np.array(rows, dtype=np.intp)).tolist()
        for j, r in enumerate(rows):
            ok = bool(candidates[r]) and not unresolvable[r] and (ceiling is None or bool(ceiling[r]))
            if ok and sums is not None:
                ok = all(sums[r, c] >= need for c, need in needs)
            masked[r] = scores[j] if ok else IMPOSSIBLE


def _walk(masked: FloatArray, best: int) -> Iterator[int]:
    yield best
    # Reached only when the best node failed; the walk changed nothing it kept (a failed node's
    # statement is discarded), and ``masked`` is read again only by the next preemptor.
    nodes = np.flatnonzero(masked > IMPOSSIBLE)
    for j in np.argsort(-masked[nodes], kind="stable").tolist():
        if int(nodes[j]) != best:
            yield int(nodes[j])


def _bytes(room: FloatArray | None) -> bytes | None:
    return None if room is None else room.tobytes()


__all__ = ["WalkMemo"]
