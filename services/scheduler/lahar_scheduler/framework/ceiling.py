"""The victim ceiling: per node, at most what the plugins' PreemptableFn could name there.

Preempt walks nodes in score order and asks every preemptable callback for victims on each;
late in a large session most nodes have nothing left to give (their jobs are down to minMember,
their shares below the preemptor's), and asking costs a Python call per plugin per node.  A
plugin may say, per task and without the preemptor's own state, whether it could ever name that
task (``victim_ceiling(preemptor) -> (key, could_name)``), and promises it never abstains.  Then,
per tier, a node where one such plugin could name nothing yields no victims (an empty answer
vetoes its tier) and otherwise at most the largest single plugin's set (the intersection can
re-seed from a later plugin, but the victims are always one plugin's list or a subset of it).
The node's ceiling is the largest over tiers; a node whose future idle plus its ceiling cannot
hold the preemptor is skipped, exactly as walking it would have found nothing.

Rows are cached per (queue, plugins' keys).  A row is recomputed when its node changes, and
when a job with a task on it gains or loses a task anywhere (the session's allocate and
deallocate events: an eviction, a pipeline, a discard), since gang and drf read job state.  A
plugin whose test reads wider state (proportion: which queues are over their share) puts that
state in its key, so a change starts a fresh cache.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.predicate import fits_rows, fits_vector
from lahar_scheduler.framework.rowcache import SCALAR_ROWS
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.types import TaskStatus

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
    from lahar_scheduler.framework.nodes import BoolArray, FloatArray, IntArray

CouldName = Callable[["TaskInfo"], bool]
# Per tier, each plugin's per-task test; None for a plugin that gives no ceiling (anything, no veto).
Tiers = list[list[CouldName | None]]


def _ceiling_of(fn: Any, name: str = "victim_ceiling") -> Callable[[TaskInfo], Any] | None:
    owner = getattr(fn, "__self__", None)
    got = getattr(owner, name, None) if owner is not None else getattr(fn, name, None)
    return got if callable(got) else None


class _Entry:
    __slots__ = ("changes", "dirty", "fits", "values")

    def __init__(self, values: np.ndarray, changes: int, dirty: int) -> None:
        self.values, self.changes, self.dirty = values, changes, dirty
        # Per task shape: (does future idle + the ceiling hold it, read marks as above).
        self.fits: dict[bytes, tuple[np.ndarray, int, int]] = {}


class VictimCeiling:
    def __init__(
        self,
        ssn: Session,
        point: P.Point[Any, Any, Any],
        counts: Callable[[TaskInfo, str], bool],
        statuses: Collection[TaskStatus] | None = None,
    ) -> None:
        self.ssn = ssn
        self.counts = counts
        # The only statuses a task ``counts`` with (None: any); a job's other tasks mark nothing.
        self.statuses = None if statuses is None else tuple(statuses)
        chain: Sequence[Sequence[Callable[..., Any]]] = ssn.chain(point)
        self.chain = [[_ceiling_of(fn) for fn in fns] for fns in chain]
        self.useful = any(c is not None for tier in self.chain for c in tier)
        # A plugin may also give its ceiling's key alone (``victim_ceiling_key``: the same
        # key, without making the test): then ``key`` asks only those.
        keys = [
            [_ceiling_of(fn, "victim_ceiling_key") if c is not None else None for fn, c in zip(fns, tier, strict=True)]
            for fns, tier in zip(chain, self.chain, strict=True)
        ]
        self._keys = (
            keys
            if all(
                (k is None) == (c is None)
                for ks, cs in zip(keys, self.chain, strict=True)
                for k, c in zip(ks, cs, strict=True)
            )
            else None
        )
        self._entries: dict[Hashable, _Entry] = {}
        # Jobs that changed, in order (readers keep a read mark); resolved into rows only when
        # read (``dirty_rows``), as most changes are never read.
        self._jobs: list[str] = []
        self._queues: set[str] = set()  # the queues rows were computed for
        if self.useful:
            ssn.add_event_handler(EventHandler(self._job_changed, self._job_changed))

    def _job_changed(self, task: TaskInfo) -> None:
        # Not deduplicated against the last entry: a reader may have read in between.
        self._jobs.append(task.job)

    def dirty_rows(self, since: int) -> list[int]:
        """Rows holding a task that counts for a queue asked about, of a job that changed since
        read mark ``since``: the rows whose ceiling read that job's state (e.g. not the nodes of
        its pipelined tasks).  Resolved now, not when the job changed: a row that held such a
        task then and not now lost it by a change of its node since, which every reader takes
        as stale too (``NodeTable.changes``)."""
        by_name, counts, queues, jobs = self.ssn.nodes.by_name, self.counts, self._queues, self.ssn.jobs
        rows: list[int] = []
        marked: set[str] = set()  # a job's tasks share nodes: one row is marked once
        for uid in set(self._jobs[since:]):
            job = jobs.get(uid)
            if job is None:
                continue
            for t in self._may_count(job):
                name = t.node_name
                if not name or name in marked:
                    continue
                node = by_name.get(name)
                if node is not None and any(counts(t, q) for q in queues):
                    marked.add(name)
                    rows.append(node.index)
        return rows

    def row_jobs(self, i: int) -> set[str]:
        """The jobs whose state node ``i``'s ceiling reads: those with a task there that counts
        for a queue asked about (what ``dirty_rows`` would mark the row for)."""
        counts, queues, statuses = self.counts, self._queues, self.statuses
        return {
            t.job
            for t in self.ssn.node_list[i].tasks.values()
            if (statuses is None or t.status in statuses) and any(counts(t, q) for q in queues)
        }

    def dirty_jobs(self, since: int) -> list[str]:
        """The jobs that changed since read mark ``since``, in order (repeats possible)."""
        return self._jobs[since:]

    @property
    def dirty_mark(self) -> int:
        """A read mark: what ``dirty_rows`` and ``dirty_jobs`` will count from."""
        return len(self._jobs)

    def _may_count(self, job: JobInfo) -> Iterator[TaskInfo]:
        if self.statuses is None:
            yield from job.tasks.values()
            return
        for status in self.statuses:
            yield from job.tasks_in(status)

    def fits(self, preemptor: TaskInfo, queue: str) -> BoolArray | None:
        """Per node, whether future idle plus the ceiling could hold ``preemptor`` (None: no
        ceiling known).  Kept per task shape and refreshed on the rows that went stale, as the
        ceiling itself is; the array is cached, callers must not change it."""
        entry = self._entry(preemptor, queue)
        if entry is None:
            return None
        changes, mark = self.ssn.nodes.changes, self.dirty_mark
        future = self.ssn.nodes.future
        got = entry.fits.get(preemptor.template_key)
        if got is None:
            mask = fits_rows(preemptor, future + entry.values)
        else:
            mask, read_changes, read_dirty = got
            if read_changes < len(changes) or read_dirty < mark:
                stale = set(changes[read_changes:])
                stale.update(self.dirty_rows(read_dirty))
                if len(stale) <= SCALAR_ROWS:  # a row or two: numpy's per-call cost dominates
                    values = entry.values
                    for i in stale:
                        mask[i] = fits_vector(preemptor, future[i] + values[i])
                else:
                    rows = np.fromiter(sorted(stale), dtype=np.intp, count=len(stale))
                    mask[rows] = fits_rows(preemptor, future[rows] + entry.values[rows])
        entry.fits[preemptor.template_key] = (mask, len(changes), mark)
        return mask

    def nodes(self, preemptor: TaskInfo, queue: str) -> FloatArray | None:
        """Per node, the most the plugins could evict for ``preemptor`` (None: no ceiling known)."""
        entry = self._entry(preemptor, queue)
        return None if entry is None else entry.values

    def keyed_tests(self, preemptor: TaskInfo, queue: str) -> tuple[Hashable, Tiers] | None:
        """The plugins' could-name tests for ``preemptor`` and the key of what they read of it
        (None: no ceiling known).  Rows of ``queue`` are marked dirty from now on."""
        if not self.useful:
            return None
        parts = [[c(preemptor) if c is not None else None for c in tier] for tier in self.chain]
        self._queues.add(queue)
        key = (queue, tuple(tuple(p[0] if p is not None else None for p in tier) for tier in parts))
        return key, [[p[1] if p is not None else None for p in tier] for tier in parts]

    def key(self, preemptor: TaskInfo, queue: str) -> Hashable | None:
        """``keyed_tests``'s key (None: no ceiling known), through the plugins' key functions
        when all have one: a preemptor's walk needs the key, and the tests only if a walked
        node falls short."""
        if self._keys is None:
            keyed = self.keyed_tests(preemptor, queue)
            return None if keyed is None else keyed[0]
        if not self.useful:
            return None
        self._queues.add(queue)
        # Loops, not nested generators (each a frame of its own): asked once per preemptor.
        tiers = []
        for tier in self._keys:
            keys = []
            for k in tier:
                keys.append(k(preemptor) if k is not None else None)
            tiers.append(tuple(keys))
        return (queue, tuple(tiers))

    def row_holds(self, preemptor: TaskInfo, queue: str, tests: Tiers, i: int) -> bool:
        """Whether node ``i``'s future idle plus its ceiling, computed now, could hold
        ``preemptor``: when not, walking the node finds victims that cannot cover it."""
        # ``fits_vector(preemptor, future[i] + _compute(...)[0])`` on the columns it reads, in
        # Python floats (the same float64 additions and maxima: one row through numpy cost a
        # zeros row and a handful of small operations per tier).
        tasks = [t for t in self.ssn.nodes.infos[i].tasks.values() if self.counts(t, queue)]
        grouped = all(test is None or getattr(test, SHAPE_WISE, False) for tier in tests for test in tier)
        cols = preemptor.fit_cols.tolist()
        best = _row_columns(_groups(tasks) if grouped else [(t, 1) for t in tasks], tests, cols) if tasks else None
        have, need = self.ssn.nodes.future[i].tolist(), preemptor.init_vec.tolist()
        for k, c in enumerate(cols):
            held = have[c] + best[k] if best is not None else have[c] + 0.0
            if not need[c] < held + 0.1:
                return False
        return True

    def _entry(self, preemptor: TaskInfo, queue: str) -> _Entry | None:
        keyed = self.keyed_tests(preemptor, queue)
        if keyed is None:
            return None
        key, tests = keyed
        changes = self.ssn.nodes.changes
        entry = self._entries.get(key)
        if entry is None or len(entry.values) != len(self.ssn.nodes.infos):
            rows = np.arange(len(self.ssn.nodes.infos), dtype=np.intp)
            entry = self._entries[key] = _Entry(self._compute(queue, tests, rows), len(changes), self.dirty_mark)
            return entry
        mark = self.dirty_mark
        if entry.changes < len(changes) or entry.dirty < mark:
            stale = set(changes[entry.changes :])
            stale.update(self.dirty_rows(entry.dirty))
            rows = np.fromiter(sorted(stale), dtype=np.intp, count=len(stale))
            entry.values[rows] = self._compute(queue, tests, rows)
            entry.changes, entry.dirty = len(changes), mark
        return entry

    def _compute(self, queue: str, tiers: Tiers, rows: IntArray) -> np.ndarray:
        infos = self.ssn.nodes.infos
        width = len(self.ssn.nodes.space)
        out = np.zeros((len(rows), width))
        grouped = all(test is None or getattr(test, SHAPE_WISE, False) for tier in tiers for test in tier)
        for j, i in enumerate(rows.tolist()):
            tasks = [t for t in infos[i].tasks.values() if self.counts(t, queue)]
            if tasks:
                out[j] = _row(_groups(tasks) if grouped else [(t, 1) for t in tasks], tiers, width)
        return out


def shape_wise(test: CouldName) -> CouldName:
    """Mark a could-name test whose answer depends only on the task's job, request and priority
    class: the ceiling then asks it once per group of such tasks on a node (a node's tasks are
    mostly one job's copies of one pod), not once per task."""
    setattr(test, SHAPE_WISE, True)
    return test


SHAPE_WISE = "_lahar_ceiling_shape_wise"


def _groups(tasks: list[TaskInfo]) -> list[tuple[TaskInfo, int]]:
    """One representative per (job, request, priority class) and how many tasks it stands for."""
    count: dict[tuple[str, bytes, str], list[Any]] = {}
    for t in tasks:
        key = (t.job, t.res_vec.tobytes(), t.pod.spec.priority_class_name)
        got = count.get(key)
        if got is None:
            count[key] = [t, 1]
        else:
            got[1] += 1
    return [(t, n) for t, n in count.values()]


def _row(groups: list[tuple[TaskInfo, int]], tiers: Tiers, width: int) -> FloatArray:
    """The node's ceiling from its tasks, each group (a task, how many like it) tested once.
    Sums are exact either way: requests are whole milli-units and bytes."""
    best: FloatArray = np.zeros(width)
    total: FloatArray | None = None  # Σ all tasks, the common case of a plugin naming them all
    for tier in tiers:
        if not tier:
            continue
        sums: list[FloatArray] = []
        for test in tier:
            chosen = groups if test is None else [g for g in groups if test(g[0])]
            if test is not None and not chosen:
                sums = []
                break  # this plugin names nothing here: the tier is vetoed
            if len(chosen) == len(groups):
                if total is None:
                    total = _sum(groups, width)
                sums.append(total)
            else:
                sums.append(_sum(chosen, width))
        for s in sums:
            best = np.maximum(best, s)
    return best


def _row_columns(groups: list[tuple[TaskInfo, int]], tiers: Tiers, cols: list[int]) -> list[float]:
    """``_row`` on columns ``cols`` only, in Python floats: the same sums in the same order
    (a group of ``n`` adds its request times ``n``), the same maximum over tiers from zero."""
    best = [0.0] * len(cols)
    total: list[float] | None = None
    for tier in tiers:
        if not tier:
            continue
        sums: list[list[float]] = []
        for test in tier:
            chosen = groups if test is None else [g for g in groups if test(g[0])]
            if test is not None and not chosen:
                sums = []
                break
            if len(chosen) == len(groups):
                if total is None:
                    total = _sum_columns(groups, cols)
                sums.append(total)
            else:
                sums.append(_sum_columns(chosen, cols))
        for s in sums:
            best = [b if b >= v else v for b, v in zip(best, s, strict=True)]
    return best


def _sum_columns(groups: list[tuple[TaskInfo, int]], cols: list[int]) -> list[float]:
    out = [0.0] * len(cols)
    for t, n in groups:
        vec = t.res_vec.tolist()
        for k, c in enumerate(cols):
            out[k] += vec[c] if n == 1 else vec[c] * n
    return out


def _sum(groups: list[tuple[TaskInfo, int]], width: int) -> FloatArray:
    out: FloatArray = np.zeros(width)
    for t, n in groups:
        out += t.res_vec if n == 1 else t.res_vec * n
    return out
