"""Pieces preempt and reclaim share: candidate nodes, the victim-sum bound, resource fit checks.

The bound is a vectorised necessary condition: a node can satisfy Volcano's ValidateVictims
(future idle + Σ victims ≥ request) only if future idle + Σ every task that could ever be a
victim there covers the request.  Victims are always a subset of those tasks, so skipping nodes
that fail the bound changes no outcome; it saves walking their tasks and calling the victim
plugins, which is what makes preemption affordable on large clusters.  The same sums answer
whether a node's evictable tasks could free a queue's shortfall (``need_vector``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from lahar.api.resource import Resource
from lahar_scheduler.actions.scalar_fit import Requests, fits_with_sum
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.predicate import fits_rows
from lahar_scheduler.framework.predicate import fits_vector as fits_vector  # re-exported: actions import it here
from lahar_scheduler.framework.rowcache import RowCache
from lahar_scheduler.framework.types import PREEMPTABLE_STATUSES, TaskStatus

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
    from lahar_scheduler.framework.nodes import BoolArray, FloatArray, IntArray, NodeInfo
    from lahar_scheduler.framework.session import Session

S = TaskStatus
NEVER = "Never"
TaskFilter = Callable[["TaskInfo"], bool]


def victims_cover(task: TaskInfo, node: NodeInfo, victims: list[TaskInfo]) -> bool:
    """Volcano's ValidateVictims: the request fits future idle plus everything the victims hold."""
    have = node.table.future[node.index].copy()
    for v in victims:
        have += v.res_vec
    return fits_vector(task, have)


def preempt_nodes(ssn: Session, task: TaskInfo, verdicts: UnresolvableCache | None = None) -> IntArray:
    """Nodes where evictions could help: every node minus those allocate found
    UnschedulableAndUnresolvable for the task, kept unless PredicateFn fails them unresolvably
    (plain Unschedulable, e.g. too many pods or anti-affinity with a victim, is acceptable)."""
    idx = ssn.candidate_nodes()
    err = ssn.jobs[task.job].fit_errors.get(task.uid) if task.job in ssn.jobs else None
    if err is not None and err.unresolvable:
        skip = np.array([ssn.nodes.by_name[n].index for n in err.unresolvable if n in ssn.nodes.by_name])
        idx = idx[~np.isin(idx, skip)]
    if verdicts is not None and ssn.predicates_local(task):
        unresolvable = verdicts.get(task)
        # Mostly no node is: then the nodes are all kept, without indexing them again.
        return idx[~unresolvable[idx]] if np.count_nonzero(unresolvable) else idx
    filtered = ssn.call(P.PREDICATE, task, idx)
    if not len(filtered.unresolvable):
        return idx
    return idx[~np.isin(idx, filtered.unresolvable)]


class NodePasses:
    """Whether PredicateFn passes node ``i``.  With local verdicts, through the callbacks'
    scalar ``passes_row`` twins when all have one (as allocate's cached verdicts do): running
    the whole predicate machinery for one node costs tens of microseconds.  The twins are looked
    up once (callbacks are registered as the session opens)."""

    __slots__ = ("rows", "ssn")

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        rows = [getattr(fn, "passes_row", None) for fn in ssn.callbacks(P.PREDICATE)]
        self.rows: list[Callable[[TaskInfo, int], bool]] | None = (
            [row for row in rows if row is not None] if all(row is not None for row in rows) else None
        )

    def __call__(self, task: TaskInfo, i: int) -> bool:
        if self.rows is not None and self.ssn.predicates_local(task):
            return all(row(task, i) for row in self.rows)
        return bool(len(self.ssn.call(P.PREDICATE, task, np.array([i], dtype=np.intp)).passed))


class UnresolvableCache:
    """Per task shape and node, whether PredicateFn fails the node UnschedulableAndUnresolvable.

    Only for tasks whose predicates are local (``Session.predicates_local``): a node's verdict
    then depends on that node alone (run_predicates shows a node to the next plugin only if it
    passed the previous ones, which is again that node's own path), so a verdict is recomputed
    only when its node changed, instead of running every predicate over every node for each
    preemptor."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self._rows: RowCache[np.ndarray] = RowCache(ssn.nodes, self._compute, self._row)
        # The predicates' scalar twins (callbacks are registered once, as the session opens).
        self._passes = [getattr(fn, "passes_row", None) for fn in ssn.callbacks(P.PREDICATE)]

    def _compute(self, task: TaskInfo, rows: IntArray) -> np.ndarray:
        return np.isin(rows, self.ssn.call(P.PREDICATE, task, rows).unresolvable)

    def _row(self, task: TaskInfo, i: int) -> bool:
        # A node that passes is not unresolvable: only a failing one needs the reasons' codes.
        for row in self._passes:  # a loop: a generator is a frame of its own (a changed row per preemptor)
            if row is None or not row(task, i):
                return bool(self._compute(task, np.array([i], dtype=np.intp))[0])
        return False

    def get(self, task: TaskInfo) -> BoolArray:
        return self._rows.get(task.template_key, task)

    def row(self, task: TaskInfo, i: int) -> bool:
        """Node ``i``'s verdict computed now, without the cache (a reader of one changed row)."""
        return self._row(task, i)


class VictimBound:
    """Per node, Σ resources of the tasks some kind of eviction may take, kept fresh as nodes change.

    ``counts(task, key)`` says whether a task on a node counts for a key (a queue name); the sums
    are cached per key and only the rows of nodes that changed are recomputed (see RowCache).
    """

    def __init__(self, ssn: Session, counts: Callable[[TaskInfo, str], bool]) -> None:
        self.ssn = ssn
        self.counts = counts
        self._caches: dict[str, RowCache[np.ndarray]] = {}
        # Per key, per task shape: the candidates mask, refreshed on the nodes that changed.
        self._fits: dict[str, RowCache[np.ndarray]] = {}
        self.requests: Requests = {}  # each task's request as floats (actions/scalar_fit.py)

    def _cache(self, key: str) -> RowCache[np.ndarray]:
        cache = self._caches.get(key)
        if cache is None:
            cache = self._caches[key] = RowCache(self.ssn.nodes, self._compute(key), self._sum_row(key), size=1)
        return cache

    def countable(self, key: str, i: int) -> list[TaskInfo]:
        """Node ``i``'s tasks that count for ``key``, in node order (what its bound row sums)."""
        counts, out = self.counts, []
        for t in self.ssn.nodes.infos[i].tasks.values():  # a loop: a comprehension is a frame on 3.11
            if counts(t, key):
                out.append(t)
        return out

    def _sum_row(self, key: str) -> Callable[[TaskInfo, int], FloatArray]:
        """One node's Σ countable tasks, added in node order from zero (the cache's scalar row,
        and each row of ``_compute``)."""
        infos, width, counts = self.ssn.nodes.infos, len(self.ssn.nodes.space), self.counts

        def row(_: TaskInfo, i: int) -> FloatArray:
            out: FloatArray = np.zeros(width)
            for t in infos[i].tasks.values():
                if counts(t, key):
                    out += t.res_vec
            return out

        return row

    def _compute(self, key: str) -> Callable[[TaskInfo, IntArray], np.ndarray]:
        """The rows' sums at once: ``np.add.at`` adds the countable tasks' vectors one after
        another in the order given (node order within a row, from zero), as ``_sum_row`` does,
        without a numpy call per task."""
        infos, width, counts = self.ssn.nodes.infos, len(self.ssn.nodes.space), self.counts

        def compute(_: TaskInfo, rows: IntArray) -> np.ndarray:
            at: list[int] = []
            vecs: list[FloatArray] = []
            for j, i in enumerate(rows.tolist()):
                for t in infos[i].tasks.values():
                    if counts(t, key):
                        at.append(j)
                        vecs.append(t.res_vec)
            out = np.zeros((len(rows), width))
            if at:
                np.add.at(out, np.array(at, dtype=np.intp), np.array(vecs))
            return out

        return compute

    def candidates(self, task: TaskInfo, key: str) -> BoolArray:
        """Nodes where future idle plus every countable task could cover the request (a cached
        array: callers must not change it)."""
        cache = self._fits.get(key)
        if cache is None:
            cache = self._fits[key] = RowCache(self.ssn.nodes, self._compute_fits(key), self._fits_row(key))
        return cache.get(task.template_key, task)

    def _fits_row(self, key: str) -> Callable[[TaskInfo, int], bool]:
        """One node's candidates verdict in Python floats (scalar_fit's twin of the vector row:
        the node's countable tasks summed from zero in node order, then added to its future
        idle): refreshing the sums' row through numpy cost more than the verdict itself."""
        table, requests = self.ssn.nodes, self.requests

        def row(task: TaskInfo, i: int) -> bool:
            # ``future`` is read now: the table replaces it when a new resource name appears.
            return fits_with_sum(task, table.future[i], self.countable(key, i), requests)

        return row

    def _compute_fits(self, key: str) -> Callable[[TaskInfo, IntArray], np.ndarray]:
        # Row-local: a row reads its node's future idle and the node's countable tasks only.
        def compute(task: TaskInfo, rows: IntArray) -> np.ndarray:
            return fits_rows(task, self.ssn.nodes.future[rows] + self.sums(task, key)[rows])

        return compute

    def sums(self, task: TaskInfo, key: str) -> FloatArray:
        """Per node, Σ the countable tasks (a cached array: callers must not change it)."""
        return self._cache(key).get(b"bound", task)

    def covering(self, task: TaskInfo, key: str, need: FloatArray) -> BoolArray:
        """Nodes whose countable tasks hold at least ``need`` (see ``need_vector``)."""
        extra = self.sums(task, key)
        # Only the dimensions the queue needs: sums are never negative, so a zero need holds.
        cols = np.flatnonzero(need > 0).tolist()
        ok: BoolArray = np.ones(len(extra), dtype=bool)
        for c in cols:
            ok &= extra[:, c] >= need[c]
        return ok


def need_vector(ssn: Session, need: Resource) -> FloatArray:
    """A queue's eviction need over the node dimensions; a dimension no node knows makes it
    unreachable.  One unit of slack keeps the check a strict necessary condition whatever the
    rounding: the real allocatable check still runs on every node that passes it."""
    space = ssn.nodes.space
    out = [0.0] * len(space)  # built in Python: asked once per preemptor, numpy costs more here
    for name in need.names():
        col = space.index.get(name)
        if col is None:
            return np.full(len(space), np.inf)
        out[col] = float(need.get(name))
    return np.array([v - 1.0 if v > 0 else 0.0 for v in out])


def covers(held: FloatArray, need: FloatArray) -> BoolArray:
    """Rows of ``held`` (one per node, or a single vector) at least ``need`` on every dimension."""
    return np.asarray(np.all(held >= need, axis=-1))


def preemptable_in_queue(ssn: Session) -> Callable[[TaskInfo, str], bool]:
    """Tasks preempt may evict for a preemptor of queue ``key``: Bound/Running, preemptable, same queue."""

    def counts(t: TaskInfo, key: str) -> bool:
        if t.status not in PREEMPTABLE_STATUSES or not t.preemptable:
            return False
        job = ssn.jobs.get(t.job)
        return job is not None and job.queue == key

    return counts


def reclaimable_elsewhere(ssn: Session) -> Callable[[TaskInfo, str], bool]:
    """Tasks reclaim may evict for a reclaimer of queue ``key``: Running, preemptable, in another
    queue that is reclaimable."""

    def counts(t: TaskInfo, key: str) -> bool:
        if t.status != S.RUNNING or not t.preemptable:
            return False
        job = ssn.jobs.get(t.job)
        return job is not None and job.queue != key and ssn.queues[job.queue].reclaimable

    return counts


def pending_tasks(job: JobInfo) -> list[TaskInfo]:
    """A job's Pending tasks that no scheduling gate holds back."""
    return [t for t in job.tasks_in(S.PENDING) if not t.sch_gated]


def shape_key(task: TaskInfo, kind: str) -> tuple[object, ...]:
    """Tasks with equal keys get the same answer from a preemption attempt on unchanged state:
    same job, request, placement constraints, labels (existing pods' anti-affinity reads them)
    and priority."""
    pod = task.pod
    labels = tuple(sorted(pod.metadata.labels.items()))
    return (
        kind,
        task.job,
        task.template_key,
        task.priority,
        task.preemption_policy,
        pod.status.nominated_node_name,
        pod.spec.priority,
        labels,
    )
