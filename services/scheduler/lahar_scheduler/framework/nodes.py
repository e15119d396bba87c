"""Node state held as arrays, so predicates and scores are vector operations over all nodes.

Row ``i`` of every array is node ``i``; column ``d`` is resource dimension ``space.dims[d]``.
Volcano's accounting (``api/node_info.go``) is kept exactly:

* ``used``      = Σ running/bound/binding/allocated/releasing tasks (not pipelined)
* ``idle``      = allocatable − used
* ``releasing`` = Σ releasing tasks
* ``pipelined`` = Σ pipelined tasks
* future idle   = idle + releasing − pipelined
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from lahar.api.resource import CPU, MEMORY, PODS, Resource
from lahar_scheduler.framework.devices import DeviceTable
from lahar_scheduler.framework.types import TaskStatus

if TYPE_CHECKING:
    from lahar.api.objects import Node, Taint
    from lahar_scheduler.framework.jobs import TaskInfo

FloatArray = npt.NDArray[np.float64]
# Read per task placed or taken off: module names, not attributes of the TaskStatus class (on
# Python 3.11 those take the enum's slow lookup hook).
_PIPELINED = TaskStatus.PIPELINED
_RELEASING = TaskStatus.RELEASING
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]


class ResourceSpace:
    """The resource dimensions of one snapshot: cpu, memory, pods, then scalars in name order."""

    def __init__(self, scalar_names: set[str]) -> None:
        extra = sorted(scalar_names - {CPU, MEMORY, PODS})
        self.dims: list[str] = [CPU, MEMORY, PODS, *extra]
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.dims)}

    def __len__(self) -> int:
        return len(self.dims)

    def ensure(self, name: str) -> int:
        """Index of a dimension, adding it when first seen (arrays must then be widened)."""
        idx = self.index.get(name)
        if idx is None:
            idx = len(self.dims)
            self.dims.append(name)
            self.index[name] = idx
        return idx

    def vector(self, r: Resource) -> FloatArray:
        cols = [self.ensure(name) for name in r.scalars]
        out = np.zeros(len(self.dims))
        out[0] = r.milli_cpu
        out[1] = r.memory
        for col, amount in zip(cols, r.scalars.values(), strict=True):
            out[col] = amount
        return out

    def checked_columns(self, r: Resource) -> IntArray:
        """Columns ``LessEqual(r, ·, Zero)`` looks at: cpu, memory and every scalar present in ``r``."""
        cols = [0, 1, *(self.index[n] for n in r.scalars)]
        return np.array(sorted(set(cols)), dtype=np.intp)

    def resource(self, row: FloatArray, present: BoolArray | None = None) -> Resource:
        r = Resource(float(row[0]), float(row[1]))
        for i in range(2, len(self.dims)):
            if i < len(row) and (row[i] != 0 or (present is not None and present[i])):
                r.scalars[self.dims[i]] = float(row[i])
        return r


class NodeInfo:
    """One node: identity, labels and taints in Python; resources in the shared ``NodeTable``."""

    __slots__ = ("index", "labels", "name", "node", "table", "taints", "tasks", "unschedulable")

    def __init__(self, table: NodeTable, index: int, node: Node) -> None:
        self.table = table
        self.index = index
        self.node = node
        self.name = node.metadata.name
        self.labels: dict[str, str] = node.metadata.labels
        self.taints: list[Taint] = node.spec.taints
        self.unschedulable = node.spec.unschedulable
        self.tasks: dict[str, TaskInfo] = {}

    def _res(self, arr: FloatArray) -> Resource:
        return self.table.space.resource(arr[self.index], self.table.present[self.index])

    @property
    def allocatable(self) -> Resource:
        return self._res(self.table.alloc)

    @property
    def idle(self) -> Resource:
        return self._res(self.table.idle)

    @property
    def used(self) -> Resource:
        return self._res(self.table.used)

    @property
    def releasing(self) -> Resource:
        return self._res(self.table.releasing)

    @property
    def pipelined(self) -> Resource:
        return self._res(self.table.pipelined)

    def future_idle(self) -> Resource:
        t = self.table
        i = self.index
        return t.space.resource(t.idle[i] + t.releasing[i] - t.pipelined[i], t.present[i])

    def __repr__(self) -> str:
        return f"NodeInfo({self.name})"


class NodeTable:
    """All nodes of a snapshot, with their resources as ``[node, dimension]`` arrays."""

    def __init__(self, space: ResourceSpace, nodes: list[Node]) -> None:
        self.space = space
        n, d = len(nodes), len(space)
        self.alloc = np.zeros((n, d))
        self.present = np.zeros((n, d), dtype=bool)
        self.infos: list[NodeInfo] = []
        self.by_name: dict[str, NodeInfo] = {}
        for i, node in enumerate(nodes):
            r = Resource.from_list(node.status.allocatable)
            self.alloc[i] = space.vector(r)
            self.present[i, 0:2] = True
            for name in r.scalars:
                self.present[i, space.index[name]] = True
            info = NodeInfo(self, i, node)
            self.infos.append(info)
            self.by_name[info.name] = info
        self.used = np.zeros((n, d))
        self.idle = self.alloc.copy()
        self.releasing = np.zeros((n, d))
        self.pipelined = np.zeros((n, d))
        # idle + releasing − pipelined, kept up to date so fit checks read one array.
        self.future = self.alloc.copy()
        self.pod_count = np.zeros(n, dtype=np.int64)
        # What kube-scheduler's NodeInfo sees for scoring: every pod on the node (pipelined and
        # releasing too), by launch request, and cpu/memory with the non-zero defaults.
        self.requested = np.zeros((n, d))
        self.nonzero = np.zeros((n, 2))
        self.max_pods = self.alloc[:, space.index[PODS]].copy()
        # Shared GPU cards per node (deviceshare); kept by add_task/remove_task like the sums.
        self.devices = DeviceTable(nodes)
        # Bumped on every change of a node's tasks, so per-node results can be cached and only
        # the rows that changed recomputed (see RowCache).
        self.generation = 0
        self.row_version = np.zeros(n, dtype=np.int64)
        # Rows in the order they changed; caches remember how far they have read (see RowCache).
        self.changes: list[int] = []

    def __len__(self) -> int:
        return len(self.infos)

    def future_idle(self, idx: IntArray | slice = slice(None)) -> FloatArray:
        return self.future[idx]

    def add_task(self, node: NodeInfo, task: TaskInfo) -> None:
        """NodeInfo.AddTask: account a task on a node by its status."""
        i = node.index
        vec = task.res_vec
        # In place on row views: ``a[i] += v`` would also write the row back (__setitem__).
        if task.status == _PIPELINED:
            row = self.pipelined[i]
            row += vec
            row = self.future[i]
            row -= vec
        else:
            if task.status == _RELEASING:
                row = self.releasing[i]
                row += vec
            else:
                row = self.future[i]
                row -= vec
            row = self.used[i]
            row += vec
            row = self.idle[i]
            row -= vec
        if not task.unscored:
            row = self.requested[i]
            row += task.init_vec
            row = self.nonzero[i]
            row += _nonzero(task)
        if task.cards is not None and task.status not in _NO_CARDS:
            self.devices.add(i, task.uid, task.cards, task.job)
        self.pod_count[i] += 1
        node.tasks[task.uid] = task
        self.generation += 1
        self.row_version[i] += 1
        self.changes.append(i)

    def add_tasks(self, placed: list[tuple[NodeInfo, TaskInfo]]) -> None:
        """``add_task`` for many tasks at once (a snapshot's build): the same sums, in the same
        order (``np.add.at`` adds row by row as the loop would), one vector operation per array
        instead of a dozen small ones per task."""
        width = self.alloc.shape[1]
        if not placed or any(len(t.res_vec) != width for _, t in placed):
            for node, task in placed:
                self.add_task(node, task)
            return
        idx = np.fromiter((node.index for node, _ in placed), dtype=np.intp, count=len(placed))
        rows, vectors = _shared_rows([t for _, t in placed])
        res = vectors[0][rows]
        piped = np.fromiter((t.status == _PIPELINED for _, t in placed), dtype=bool, count=len(placed))
        held = ~piped
        releasing = np.fromiter((t.status == _RELEASING for _, t in placed), dtype=bool, count=len(placed))
        np.add.at(self.pipelined, idx[piped], res[piped])
        np.subtract.at(self.future, idx[piped], res[piped])
        np.add.at(self.releasing, idx[releasing], res[releasing])
        counted = held & ~releasing  # releasing tasks still count as used, but as future room too
        np.subtract.at(self.future, idx[counted], res[counted])
        np.add.at(self.used, idx[held], res[held])
        np.subtract.at(self.idle, idx[held], res[held])
        scored = [k for k, (_, t) in enumerate(placed) if not t.unscored]
        if scored:
            np.add.at(self.requested, idx[scored], vectors[1][rows[scored]])
            np.add.at(self.nonzero, idx[scored], vectors[2][rows[scored]])
        np.add.at(self.pod_count, idx, 1)
        np.add.at(self.row_version, idx, 1)
        for node, task in placed:
            if task.cards is not None and task.status not in _NO_CARDS:
                self.devices.add(node.index, task.uid, task.cards, task.job)
            node.tasks[task.uid] = task
        self.generation += len(placed)
        self.changes.extend(idx.tolist())

    def remove_task(self, node: NodeInfo, task: TaskInfo) -> None:
        """NodeInfo.RemoveTask: undo ``add_task`` for the task's current status."""
        i = node.index
        vec = task.res_vec
        if task.status == _PIPELINED:
            row = self.pipelined[i]
            row -= vec
            row = self.future[i]
            row += vec
        else:
            if task.status == _RELEASING:
                row = self.releasing[i]
                row -= vec
            else:
                row = self.future[i]
                row += vec
            row = self.used[i]
            row -= vec
            row = self.idle[i]
            row += vec
        if not task.unscored:
            row = self.requested[i]
            row -= task.init_vec
            row = self.nonzero[i]
            row -= _nonzero(task)
        if task.cards is not None and task.status not in _NO_CARDS:
            self.devices.sub(i, task.uid, task.cards)
        self.pod_count[i] -= 1
        node.tasks.pop(task.uid, None)
        self.generation += 1
        self.row_version[i] += 1
        self.changes.append(i)

    def release(self, node: NodeInfo, task: TaskInfo, unscore: bool = False) -> None:
        """``remove_task`` then ``add_task`` of a task on ``node`` whose status goes from one
        that holds the node (Allocated, Binding, Bound, Running) to Releasing (an eviction), the
        task has no cards; with ``unscore``, then ``set_scored(task, False)``.  The same
        operations on every array, in the same order (``x - v + v`` is not always ``x`` in
        floats), with each row view made once, the pod count and the node's task order left as
        the calls leave them."""
        i = node.index
        vec = task.res_vec
        row = self.future[i]
        row += vec
        # The round trips in Python floats, element by element: the same two float64
        # operations numpy makes, without its per-call cost on a row of a few columns.
        amounts = vec.tolist()
        _there_and_back(self.used[i], amounts, -1.0)
        _there_and_back(self.idle[i], amounts, 1.0)
        if not task.unscored:
            _there_and_back(self.requested[i], task.init_vec.tolist(), -1.0, unscore)
            _there_and_back(self.nonzero[i], _nonzero(task).tolist(), -1.0, unscore)
            if unscore:
                task.unscored = True
        row = self.releasing[i]
        row += vec
        tasks = node.tasks
        del tasks[task.uid]
        tasks[task.uid] = task  # last, as a removal and an addition order it
        self.generation += 1
        self.row_version[i] += 1
        self.changes.append(i)

    def remove_tasks(self, placed: list[tuple[NodeInfo, TaskInfo]]) -> None:
        """``remove_task`` for many tasks at once (a session's close undoing its placements): the
        same rows changed by the same amounts in the same order.  Each array takes one
        ``ufunc.at`` over the tasks that change it, in the loop's order (``at`` is unbuffered:
        row by row as the loop), so every row's float sequence is the loop's bit for bit."""
        width = self.alloc.shape[1]
        if len(placed) < 2 or any(len(t.res_vec) != width or len(t.init_vec) != width for _, t in placed):
            for node, task in placed:
                self.remove_task(node, task)
            return
        idx = np.fromiter((node.index for node, _ in placed), dtype=np.intp, count=len(placed))
        rows, vectors = _shared_rows([t for _, t in placed])
        res = vectors[0][rows]
        status = np.fromiter((t.status for _, t in placed), dtype=np.int64, count=len(placed))
        piped = status == _PIPELINED
        releasing = status == _RELEASING
        held = ~piped
        # Pipelined and plain held tasks both give their request back to future idle.
        freed = ~releasing
        np.subtract.at(self.pipelined, idx[piped], res[piped])
        np.add.at(self.future, idx[freed], res[freed])
        np.subtract.at(self.releasing, idx[releasing], res[releasing])
        np.subtract.at(self.used, idx[held], res[held])
        np.add.at(self.idle, idx[held], res[held])
        scored = np.fromiter((not t.unscored for _, t in placed), dtype=bool, count=len(placed))
        np.subtract.at(self.requested, idx[scored], vectors[1][rows[scored]])
        np.subtract.at(self.nonzero, idx[scored], vectors[2][rows[scored]])
        np.subtract.at(self.pod_count, idx, 1)
        np.add.at(self.row_version, idx, 1)
        for node, task in placed:
            if task.cards is not None and task.status not in _NO_CARDS:
                self.devices.sub(node.index, task.uid, task.cards)
            node.tasks.pop(task.uid, None)
        self.generation += len(placed)
        self.changes.extend(idx.tolist())

    def hold_cards(self, node: NodeInfo, task: TaskInfo) -> None:
        """Account cards chosen for a task already on ``node`` (deviceshare's allocate)."""
        if task.cards is not None and task.status not in _NO_CARDS:
            self.devices.add(node.index, task.uid, task.cards, task.job)
            self.generation += 1
            self.row_version[node.index] += 1
            self.changes.append(node.index)

    def set_scored(self, task: TaskInfo, scored: bool) -> None:
        """Put a task on a node into, or take it out of, what the kube scorers read (``requested``
        and ``nonzero``), leaving the resource accounting (idle, releasing, future) alone.

        Volcano's predicates plugin removes a victim evicted in a Statement from its kube
        NodeInfo, so the node scores as freer for the next preemptor of the same session."""
        if task.unscored == (not scored):
            return
        node = self.by_name.get(task.node_name) if task.node_name else None
        on_node = node is not None and task.uid in node.tasks
        task.unscored = not scored
        if node is None or not on_node:
            return
        # In place on row views (``x + -v`` is ``x - v`` exactly), without ``sign * v``'s copies.
        i = node.index
        requested, nonzero = self.requested[i], self.nonzero[i]
        if scored:
            requested += task.init_vec
            nonzero += _nonzero(task)
        else:
            requested -= task.init_vec
            nonzero -= _nonzero(task)
        self.generation += 1
        self.row_version[i] += 1
        self.changes.append(i)

    def rescore(self, tasks: list[TaskInfo]) -> None:
        """``set_scored(task, True)`` for each task in order (a session's close putting its
        evicted victims back in the scorers' view): the same rows changed by the same amounts in
        the same order, one ``ufunc.at`` per array (see ``remove_tasks``)."""
        width = self.alloc.shape[1]
        back: list[tuple[NodeInfo, TaskInfo]] = []
        for task in tasks:
            if not task.unscored:
                continue
            node = self.by_name.get(task.node_name) if task.node_name else None
            task.unscored = False
            if node is not None and task.uid in node.tasks:
                back.append((node, task))
        if not back:
            return
        if any(len(t.init_vec) != width for _, t in back):
            for _, task in back:
                task.unscored = True
                self.set_scored(task, True)
            return
        idx = np.fromiter((node.index for node, _ in back), dtype=np.intp, count=len(back))
        rows, vectors = _shared_rows([t for _, t in back])
        # ``+= 1.0 * v`` in set_scored adds v itself: multiplying by one is exact.
        np.add.at(self.requested, idx, vectors[1][rows])
        np.add.at(self.nonzero, idx, vectors[2][rows])
        np.add.at(self.row_version, idx, 1)
        self.generation += len(back)
        self.changes.extend(idx.tolist())

    def widen(self, width: int) -> None:
        """Add zero columns after a new resource dimension appeared."""
        extra = width - self.alloc.shape[1]
        if extra <= 0:
            return
        pad = np.zeros((len(self.infos), extra))
        self.alloc = np.hstack([self.alloc, pad])
        self.used = np.hstack([self.used, pad])
        self.idle = np.hstack([self.idle, pad])
        self.releasing = np.hstack([self.releasing, pad])
        self.pipelined = np.hstack([self.pipelined, pad])
        self.future = np.hstack([self.future, pad])
        self.requested = np.hstack([self.requested, pad])
        self.present = np.hstack([self.present, np.zeros((len(self.infos), extra), dtype=bool)])


def _there_and_back(row: FloatArray, amounts: list[float], first: float, again: bool = False) -> None:
    """``row -= v; row += v`` (``first`` -1) or ``row += v; row -= v`` (``first`` 1), then with
    ``again`` one more ``row -= v``: per element, in order, as numpy's in-place operations."""
    values = row.tolist()
    if first < 0:
        for c, v in enumerate(amounts):
            x = (values[c] - v) + v
            row[c] = x - v if again else x
    else:
        for c, v in enumerate(amounts):
            row[c] = (values[c] + v) - v


# Volcano's NodeInfo.AddTask adds a pod's devices except while it is pipelined or releasing.
_NO_CARDS = frozenset({_PIPELINED, _RELEASING})

DEFAULT_MILLI_CPU_REQUEST = 100.0
DEFAULT_MEMORY_REQUEST = 200.0 * 1024 * 1024


def _shared_rows(tasks: list[TaskInfo]) -> tuple[IntArray, tuple[FloatArray, FloatArray, FloatArray]]:
    """Each task's row in three matrices of its (res_vec, init_vec, nonzero) vectors, one row per
    distinct trio: the tasks of one shape share their vectors, and gathering rows of a few is
    cheaper than stacking a vector per task (the same values either way)."""
    first: dict[tuple[int, int, int], int] = {}
    trios: list[TaskInfo] = []
    codes = []
    for t in tasks:
        key = (id(t.res_vec), id(t.init_vec), id(t.nonzero_vec))
        code = first.get(key)
        if code is None:
            code = first[key] = len(trios)
            trios.append(t)
        codes.append(code)
    rows = np.array(codes, dtype=np.intp)
    res = np.stack([t.res_vec for t in trios])
    init = np.stack([t.init_vec for t in trios])
    nonzero = np.stack([_nonzero(t) for t in trios])
    return rows, (res, init, nonzero)


def _nonzero(task: TaskInfo) -> FloatArray:
    """cpu/memory as kube-scheduler scores them: containers without a request count 100m / 200Mi."""
    return task.nonzero_vec
