"""Per-node victim lists for topology-aware preemption, kept between preemptors.

A dry run on a node starts from the victims PreemptableFn names there, in victim order.  For a
preemptor whose candidates on a node are other jobs' tasks of its queue, that list depends on
the node's tasks, on the state of their jobs, and on the preemptor only through what each
victim callback's ``victims_key`` says (see framework/simhooks.py); the order depends on the
victims' jobs alone when the order callbacks are ``pair_local``.  PreemptableFn's answer is the
first tier's with a non-empty list, so each tier's own answer is cached per *view* — (queue,
BestEffort preemptor, the tier, its callbacks' keys) — as padded arrays over all nodes (request
vectors, queue vectors, pod priorities, start times, in victim order), and a row is recomputed
only when its node changed (``NodeTable.changes``) or a job with a task on it gained or lost one
(the session's allocate/deallocate events, as framework/ceiling.py does).  Views of one tier are
shared by preemptors whose later tiers' keys differ (drf's depends on the preemptor's share).

The rows are filled by calling the real callbacks for some preemptor of the view, on nodes
where that preemptor's own job has no evictable task (the caller does those exactly), so a row
holds exactly what a dry run of any preemptor of the view would compute there.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from lahar_scheduler.actions.preempt_filters import OtherJobs
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.pq import ByKey
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.snapshot import parse_time
from lahar_scheduler.framework.types import PREEMPTABLE_STATUSES
from lahar_scheduler.framework.victims import in_victim_order, kept_per_task

if TYPE_CHECKING:
    from lahar_scheduler.actions.evictutil import TaskFilter
    from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
    from lahar_scheduler.framework.nodes import BoolArray, FloatArray, IntArray

# Pod priorities are int32 in kube; a larger one could overflow the int64 sums, so its row
# keeps the exact path.
PRIORITY_LIMIT = 2**31
# Up to this many rows are marked (stale, or refreshed) one by one: a preemptor's moves touch a
# node or two, where an index array would cost more than the marks.
SCALAR_MARKS = 8


def pod_priority(task: TaskInfo) -> int:
    prio = task.pod.spec.priority
    return prio if prio is not None else 0


def start_time(task: TaskInfo, now: float) -> float:
    stamp = task.pod.status.start_time
    return parse_time(stamp) if stamp else now


class Row:
    """One row's victims as the dry runs read them, in victim order: each victim's request
    vector, its (milli cpu, memory) for the queue test, its pod priority and start time."""

    __slots__ = ("prio", "queue", "res", "start")

    def __init__(self, res: list[list[float]], queue: list[list[float]], prio: list[int], start: list[float]) -> None:
        self.res, self.queue, self.prio, self.start = res, queue, prio, start


EMPTY_ROW = Row([], [], [], [])


class _Facts:
    """What a row holds of one victim, read once per session: a task's request, its pod's
    priority and start time do not change within a session.  ``task`` and ``vec`` tell a
    replaced task or request vector (the snapshot widens the vectors for a new resource)."""

    __slots__ = ("prio", "queue", "res", "start", "task", "vec")

    def __init__(self, t: TaskInfo, now: float) -> None:
        req = t.resreq
        self.task, self.vec = t, t.res_vec
        self.res: list[float] = t.res_vec.tolist()
        # As float64 arrays held them (the same doubles for any int a request may be).
        self.queue = [float(req.milli_cpu), float(req.memory)]
        self.prio = pod_priority(t)
        self.start = start_time(t, now)


class View:
    """Rows over all nodes for one view key; ``valid`` says which rows are current.  A row's
    victims are kept as Python lists: most dry runs read one or two rows, in Python floats, and
    the few that read many pack them into arrays then (``pack``)."""

    __slots__ = (
        "changes",
        "count",
        "data",
        "depth",
        "dirty",
        "filled",
        "odd",
        "outcomes",
        "tier",
        "usable",
        "valid",
        "victims",
        "width",
    )

    def __init__(self, tier: int, nodes: int, width: int, changes: int, dirty: int) -> None:
        self.tier, self.width = tier, width
        self.changes, self.dirty = changes, dirty
        self.valid: BoolArray = np.zeros(nodes, dtype=bool)
        self.odd: BoolArray = np.zeros(nodes, dtype=bool)  # the exact path must run here
        self.usable: BoolArray = np.zeros(nodes, dtype=bool)  # count > 0 and not odd: one test
        self.count: IntArray = np.zeros(nodes, dtype=np.intp)  # the tier's victims (0: next tier)
        self.victims: list[list[TaskInfo]] = [[] for _ in range(nodes)]
        self.data: list[Row] = [EMPTY_ROW] * nodes  # meaningful on rows that are not odd
        self.filled: IntArray = np.zeros(nodes, dtype=np.int64)  # bumped whenever a row is recomputed
        # Dry-run results per preemptor shape (see preempt_topology_fast.Outcome), most recent last.
        self.outcomes: OrderedDict[bytes, Any] = OrderedDict()
        self.depth = 4  # room for victims per row in the outcomes' chosen masks

    def deepen(self, depth: int) -> None:
        """Room for ``depth`` victims per row."""
        if depth <= self.depth:
            return
        self.outcomes.clear()  # their chosen masks are as deep as the rows were
        self.depth = max(depth, 2 * self.depth)

    def pack(self, rows: IntArray, depth: int) -> tuple[FloatArray, FloatArray, IntArray, FloatArray]:
        """The ``rows`` as padded arrays ``depth`` victims deep (padding zero; dry runs add it):
        request vectors, queue vectors, pod priorities, start times."""
        n = len(rows)
        res = np.zeros((n, depth, self.width))
        queue_vec = np.zeros((n, depth, 2))
        prio = np.zeros((n, depth), dtype=np.int64)
        start = np.zeros((n, depth))
        at: list[int] = []
        pos: list[int] = []
        flat_res: list[list[float]] = []
        flat_queue: list[list[float]] = []
        flat_prio: list[int] = []
        flat_start: list[float] = []
        data = self.data
        for j, i in enumerate(rows.tolist()):
            row = data[i]
            m = len(row.prio)
            at += [j] * m
            pos += range(m)
            flat_res += row.res
            flat_queue += row.queue
            flat_prio += row.prio
            flat_start += row.start
        if at:
            # Flattened first: numpy converts a flat list of floats many times faster than a
            # list of short lists (the same doubles either way).
            k = len(at)
            res[at, pos] = np.fromiter(chain.from_iterable(flat_res), float, k * self.width).reshape(k, self.width)
            queue_vec[at, pos] = np.fromiter(chain.from_iterable(flat_queue), float, 2 * k).reshape(k, 2)
            prio[at, pos] = flat_prio
            start[at, pos] = flat_start
        return res, queue_vec, prio, start


class VictimRows:
    """The session's views; one instance per session (``rows_for``)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self._views: dict[Hashable, View] = {}
        self._dirty: list[int] = []  # rows whose jobs changed, in order (views keep a read mark)
        self._job_keys = _job_keys(ssn)
        self._shared_task_key: Callable[[TaskInfo], tuple[Any, ...]] | None = None
        self._facts: dict[str, _Facts] = {}  # per victim uid, what its rows hold of it
        ssn.add_event_handler(EventHandler(self._job_changed, self._job_changed))

    def _job_changed(self, task: TaskInfo) -> None:
        job = self.ssn.jobs.get(task.job)
        if job is None:
            return
        # A row reads the state of its candidates' jobs only (the tasks preempt may take are
        # Bound or Running), so the nodes of the job's other tasks (e.g. a gang's pipelined
        # ones) keep their rows.  A task's own move changes its nodes, which the node table
        # records; its node is marked besides, for a move the table does not record.
        # Each node once: a job's tasks mostly share a few nodes.
        by_name, names = self.ssn.nodes.by_name, set()
        for t in job.tasks.values():
            if t.node_name and (t.status in PREEMPTABLE_STATUSES or t is task):
                names.add(t.node_name)
        for name in names:
            node = by_name.get(name)
            if node is not None:
                self._dirty.append(node.index)

    def view(self, tier: int, key: Hashable) -> View:
        """The view of ``tier`` for ``key``, rows of nodes that changed since its last use
        marked stale."""
        table = self.ssn.nodes
        n, width = len(table.infos), table.future.shape[1]
        view = self._views.get(key)
        if view is None or len(view.valid) != n or view.width != width:
            view = self._views[key] = View(tier, n, width, len(table.changes), len(self._dirty))
            return view
        changes, dirty = table.changes, self._dirty
        if view.changes < len(changes) or view.dirty < len(dirty):
            # One mark per node: a preemptor's moves record its node or two many times over.
            _stale(view.valid, {*changes[view.changes :], *dirty[view.dirty :]})
            view.changes, view.dirty = len(changes), len(dirty)
        return view

    def fill(self, view: View, rows: IntArray, preemptor: TaskInfo, keep: TaskFilter) -> None:
        """Compute the stale ``rows`` with ``preemptor``'s callbacks of the view's tier (none of
        the rows may hold an evictable task of its job)."""
        infos = self.ssn.nodes.infos
        fns = self.ssn.chain(P.PREEMPTABLE)[view.tier]
        # Every row is recomputed (``filled`` bumped), odd or not.
        listed: list[int] = rows.tolist()
        if len(listed) > SCALAR_MARKS:
            view.valid[rows] = True
            view.filled[rows] += 1
        else:
            for i in listed:
                view.valid[i] = True
                view.filled[i] += 1
        candidates = self._candidates(keep)
        for i in listed:
            cands = candidates(infos[i].tasks.values())
            named = P.tier_victims(fns, (preemptor, cands)) or []
            ordered = self._in_victim_order(named, preemptor)
            view.victims[i] = ordered
            m = len(ordered)
            view.count[i] = m
            row = self._row(ordered, cands, view.width)
            view.odd[i] = row is None
            view.usable[i] = m > 0 and row is not None
            if row is not None:
                view.data[i] = row
                view.deepen(m)

    def _candidates(self, keep: TaskFilter) -> Callable[[Iterable[TaskInfo]], list[TaskInfo]]:
        """The tasks ``keep`` lets through, as a list.  Preempt's other-jobs filter (the one the
        fast path fills through) selects in one loop (``OtherJobs.select``): a call per task
        was a fifth of a row's fill."""
        if type(keep) is not OtherJobs or keep.ssn is not self.ssn:
            return lambda tasks: [t for t in tasks if keep(t)]
        return keep.select

    def _row(self, ordered: list[TaskInfo], cands: list[TaskInfo], width: int) -> Row | None:
        """The dry runs' data for ``ordered``; None when the exact path must decide: the
        callbacks named a victim that is not a candidate, or one with an odd vector or priority."""
        if not ordered:
            return EMPTY_ROW
        given = set(map(id, cands))  # not a set comprehension: a frame of its own on 3.11
        facts = self._facts
        res: list[list[float]] = []
        queue: list[list[float]] = []
        prio: list[int] = []
        start: list[float] = []
        for t in ordered:
            got = facts.get(t.uid)
            if got is None or got.task is not t or got.vec is not t.res_vec:
                got = facts[t.uid] = _Facts(t, self.ssn.now)
            if id(t) not in given or len(got.res) != width or abs(got.prio) >= PRIORITY_LIMIT:
                return None
            res.append(got.res)
            queue.append(got.queue)
            prio.append(got.prio)
            start.append(got.start)
        return Row(res, queue, prio, start)

    def _in_victim_order(self, named: list[TaskInfo], preemptor: TaskInfo) -> list[TaskInfo]:
        """``in_victim_order``, by sort keys when the orders have them.  Victims of one queue
        are taken in reverse job order by the job-order callbacks alone, then in reverse task
        order (framework/victims.py); with ``ByKey`` callbacks that is the descending order of
        (their job keys, the task's sort key), a strict order (the task key ends with the uid),
        in which the victim heap pops exactly as the sort does."""
        if len(named) < 2:
            return list(named)
        try:
            return self._sorted(named)
        except _Unkeyed:
            return in_victim_order(self.ssn, named, preemptor)

    def _sorted(self, named: list[TaskInfo]) -> list[TaskInfo]:
        ssn = self.ssn
        task_key = self._task_key(named)
        first = named[0].job
        for t in named:
            if t.job != first:
                break
        else:
            return _sort(named, task_key)  # one job: reverse task order alone
        by_job = self._job_keys
        if by_job is None:
            raise _Unkeyed
        jobs = ssn.jobs
        queues = {j.queue if (j := jobs.get(t.job)) is not None else None for t in named}
        if len(queues) != 1 or None in queues:
            raise _Unkeyed  # victim queue order, or a job gone: the heap's cases
        job_key: dict[str, tuple[Any, ...]] = {}
        for t in named:
            if t.job not in job_key:
                job = jobs[t.job]
                job_key[t.job] = tuple(k(job) for k in by_job)
        return _sort(named, lambda t: (job_key[t.job], task_key(t)))

    def _task_key(self, named: list[TaskInfo]) -> Callable[[TaskInfo], tuple[Any, ...]]:
        """``Session.task_sort_key`` for ``named``: the key it makes for one set of tasks orders
        any tasks with an index (a creation stamp it has not seen is parsed when met), so the
        first one made is kept."""
        for t in named:
            if t.index is None:
                raise _Unkeyed
        key = self._shared_task_key
        if key is None:
            made = self.ssn.task_sort_key(named)
            if made is None:
                raise _Unkeyed
            key = self._shared_task_key = kept_per_task(made, {})
        return key


def _stale(valid: BoolArray, rows: set[int]) -> None:
    if len(rows) > SCALAR_MARKS:
        valid[list(rows)] = False
        return
    for i in rows:
        valid[i] = False


class _Unkeyed(Exception):
    """The victims have no sort key (the victim heap orders them)."""


def _sort(named: list[TaskInfo], key: Callable[[TaskInfo], Any]) -> list[TaskInfo]:
    """Descending by ``key``; a creation stamp that does not parse leaves it to the heap."""
    try:
        return sorted(named, key=key, reverse=True)
    except ValueError as e:
        raise _Unkeyed from e


def _job_keys(ssn: Session) -> list[Callable[[JobInfo], Any]] | None:
    """The job-order callbacks' keys when every one is a ``ByKey``."""
    keys = []
    for fn in ssn.callbacks(P.JOB_ORDER):
        if not isinstance(fn, ByKey):
            return None
        keys.append(fn.key)
    return keys


_ROWS: weakref.WeakKeyDictionary[Session, VictimRows] = weakref.WeakKeyDictionary()


def rows_for(ssn: Session) -> VictimRows:
    rows = _ROWS.get(ssn)
    if rows is None:
        rows = _ROWS[ssn] = VictimRows(ssn)
    return rows
