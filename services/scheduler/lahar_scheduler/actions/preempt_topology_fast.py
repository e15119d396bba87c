"""Topology-aware preemption's dry runs for many nodes at once, when they are plain arithmetic.

``preempt_topology.select_victims`` dry-runs one node at a time through the simulate hooks.
When, for a preemptor, every consulted hook is a labelled kind (framework/simhooks.py) that says
it is trivial or vector arithmetic — the predicate passes everywhere (no inter-pod affinity
involving the pod), the task moves only change an affinity view or the queues' allocations, and
the allocatable test is ``allocated + request <= deserved`` on cpu and memory — a node's dry run
only adds and subtracts the victims' request vectors in victim order.  Then every candidate node
is dry-run together (a loop over victim positions, numpy over nodes), with the same float
operations in the same order as the per-node code, and the candidate is chosen from arrays by
kube's criteria.  Victim lists come from preempt_topology_cache.py.

Nodes this cannot decide — where the preemptor's own job has an evictable task (its candidates
differ from the view's), or whose cached row is odd — are dry-run exactly, one by one, and
merged in scan order.  A preemptor whose hooks or callbacks are not all labelled gets None from
``plan``, and the caller runs the exact path for every node.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from lahar_scheduler.actions.preempt_filters import OtherJobs
from lahar_scheduler.actions.preempt_topology_cache import (
    PRIORITY_LIMIT,
    VictimRows,
    View,
    pod_priority,
    rows_for,
    start_time,
)
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.simhooks import (
    QUEUE,
    VIEW,
    QueueRoom,
    Room,
    SimPredicate,
    TaskMove,
    is_pair_local,
    victims_key_of,
)
from lahar_scheduler.framework.types import PREEMPTABLE_STATUSES

if TYPE_CHECKING:
    from lahar_scheduler.actions.evictutil import TaskFilter
    from lahar_scheduler.framework.cyclestate import CycleState
    from lahar_scheduler.framework.jobs import QueueInfo, TaskInfo
    from lahar_scheduler.framework.nodes import BoolArray, FloatArray, IntArray, NodeInfo
    from lahar_scheduler.framework.session import Session

# Tests switch this off to compare with the exact path.
ENABLED = True
PRIORITY_OFFSET = 2**31  # as preempt_topology: kube's MaxInt32 + 1 added before summing
LIMITS = 64  # preemptor shapes whose Limits are kept
_NO_NODES: IntArray = np.zeros(0, dtype=np.intp)

# One dry run of one node, exactly: the chosen victims (most important first) or None.
Exact = Callable[["NodeInfo"], "list[TaskInfo] | None"]
# kube's pickOneNodeForPreemption criteria, each maximised in turn.
Score = tuple[int, int, int, float]


class OutOfRange(Exception):
    """A node dry-run exactly named a victim whose priority is outside int32 (kube's type), so
    the criteria do not fit the arrays: the caller redoes the preemptor on the exact path."""


class Plan:
    """What a preemptor's fast dry runs need.  A tier's view key is taken when the scan first
    reaches the tier (most preemptors find victims in the first): nothing the keys read changes
    while one preemptor's nodes are dry-run."""

    __slots__ = ("_keys", "base", "keep", "limits", "of", "own", "preemptor", "rows")

    def __init__(
        self,
        rows: VictimRows,
        of: list[list[Callable[[TaskInfo], Hashable]]],
        base: Hashable,
        preemptor: TaskInfo,
        keep: TaskFilter,
        limits: Limits,
        own: IntArray,
    ) -> None:
        self.rows, self.of, self.base, self.preemptor = rows, of, base, preemptor
        self.keep = keep
        self.limits = limits
        self.own = own  # nodes where the preemptor's job has an evictable task
        self._keys: dict[int, Hashable] = {}

    @property
    def tiers(self) -> int:
        return len(self.of)

    def key(self, tier: int) -> Hashable:
        """The view key of PreemptableFn's ``tier`` for this preemptor."""
        got = self._keys.get(tier)
        if got is None:
            keys = []
            for of in self.of[tier]:  # a loop: a generator is a frame of its own
                keys.append(of(self.preemptor))
            got = self._keys[tier] = (self.base, tier, tuple(keys))
        return got

    def view(self, tier: int) -> View:
        return self.rows.view(tier, self.key(tier))


def plan(ssn: Session, state: CycleState, preemptor: TaskInfo, queue: QueueInfo, keep: TaskFilter) -> Plan | None:
    """The fast path's inputs, or None when some hook or callback keeps the exact path."""
    if not ENABLED:
        return None
    hooks = _hooks(ssn)
    if hooks.victim_keys is None or _other_jobs_queue(ssn, preemptor, keep) != queue.uid:
        return None
    for fn in hooks.predicates:  # loops rather than generators here: this runs per preemptor
        if not fn.skips(state, preemptor):
            return None
    room = None
    if hooks.room is not None:
        room = hooks.room.room(state, queue, preemptor)
        if room is None:
            return None
    base = (queue.uid, preemptor.best_effort, preemptor.job in ssn.jobs)
    by_name = ssn.nodes.by_name
    at: list[int] = []
    for t in ssn.jobs[preemptor.job].tasks.values():
        if t.status in PREEMPTABLE_STATUSES and t.node_name in by_name:
            at.append(by_name[t.node_name].index)
    own = np.array(at, dtype=np.intp) if at else _NO_NODES  # most preemptors' jobs run nowhere
    shape = _limits_key(preemptor, room)
    limits = hooks.limits.get(shape)
    if limits is None:
        if len(hooks.limits) >= LIMITS:
            hooks.limits.clear()  # the queue's allocation moved on: old shapes rarely return
        limits = hooks.limits[shape] = Limits.of(preemptor, room)
    return Plan(rows_for(ssn), hooks.victim_keys, base, preemptor, keep, limits, own)


def _limits_key(task: TaskInfo, room: Room | None) -> Hashable:
    """What ``Limits.of`` reads: equal keys, equal limits."""
    return (task.fit_cols.tobytes(), task.init_vec.tobytes(), room)


def _other_jobs_queue(ssn: Session, preemptor: TaskInfo, keep: TaskFilter) -> str | None:
    """The queue of preempt's other-jobs filter when ``keep`` is that filter for this preemptor
    (the views are filled through it, and rely on its shape: evictable tasks of the queue, the
    preemptor's own job left out); None for any other filter."""
    if isinstance(keep, OtherJobs) and keep.ssn is ssn and keep.preemptor is preemptor:
        return keep.queue
    return None


@dataclass(frozen=True)
class Hooks:
    """The session's callbacks as the fast path sees them (fixed once the session is open).
    ``victim_keys`` is None when the path cannot be used at all."""

    victim_keys: list[list[Callable[[TaskInfo], Hashable]]] | None
    predicates: list[SimPredicate]
    room: QueueRoom | None
    limits: dict[Hashable, Limits] = field(default_factory=dict)  # Limits.of per _limits_key


_HOOKS: weakref.WeakKeyDictionary[Session, Hooks] = weakref.WeakKeyDictionary()
_UNUSABLE = Hooks(None, [], None)


def _hooks(ssn: Session) -> Hooks:
    hooks = _HOOKS.get(ssn)
    if hooks is None:
        hooks = _HOOKS[ssn] = _read_hooks(ssn)
    return hooks


def _read_hooks(ssn: Session) -> Hooks:
    """Usable when the order callbacks are pair-local, every victim callback has a key, every
    simulate predicate can say it skips, and the task moves and queue test are labelled: no
    allocatable hook and no queue moves, or exactly one QueueRoom with its queue moves on both
    the add and the remove hooks."""
    if not all(is_pair_local(fn) for fn in ssn.callbacks(P.JOB_ORDER) + ssn.callbacks(P.TASK_ORDER)):
        return _UNUSABLE
    if P.PREEMPTABLE.combine is not P.victim_intersection:
        return _UNUSABLE  # the views cache one tier's answer each, as victim_intersection reads them
    keys: list[list[Callable[[TaskInfo], Hashable]]] = []
    for tier in ssn.chain(P.PREEMPTABLE):
        of = [victims_key_of(fn) for fn in tier]
        if any(k is None for k in of):
            return _UNUSABLE
        keys.append([k for k in of if k is not None])
    predicates = [fn for fn in ssn.callbacks(P.SIMULATE_PREDICATE) if isinstance(fn, SimPredicate)]
    if len(predicates) != len(ssn.callbacks(P.SIMULATE_PREDICATE)):
        return _UNUSABLE
    kinds: list[str] = []
    for point in (P.SIMULATE_ADD_TASK, P.SIMULATE_REMOVE_TASK):
        for move in ssn.callbacks(point):
            if not isinstance(move, TaskMove) or move.kind not in (VIEW, QUEUE):
                return _UNUSABLE
            kinds.append(move.kind)
    rooms = ssn.callbacks(P.SIMULATE_ALLOCATABLE)
    if not rooms:
        return Hooks(keys, predicates, None) if QUEUE not in kinds else _UNUSABLE
    room = rooms[0]
    if len(rooms) > 1 or not isinstance(room, QueueRoom) or kinds.count(QUEUE) != 2:
        return _UNUSABLE
    return Hooks(keys, predicates, room)


# -- the search ---------------------------------------------------------------------------------
class Part:
    """One chunk's answers, per node in scan order: PreemptableFn's count, whether the node is a
    candidate, and kube's criteria (meaningful on candidates only)."""

    __slots__ = ("cand", "criteria", "exact", "named", "nodes", "runs")

    def __init__(self, nodes: IntArray) -> None:
        n = len(nodes)
        self.nodes = nodes
        self.named: IntArray = np.zeros(n, dtype=np.intp)
        self.cand: BoolArray = np.zeros(n, dtype=bool)
        self.criteria: list[np.ndarray] = [np.zeros(n, dtype=np.int64) for _ in range(3)] + [np.zeros(n)]
        self.runs: list[tuple[IntArray, View, BoolArray]] = []  # (positions, view, chosen) of fast rows
        self.exact: dict[int, list[TaskInfo]] = {}  # position → victims, of exactly dry-run rows

    def cut(self, stop: int) -> None:
        """Keep the first ``stop`` nodes."""
        self.nodes, self.named, self.cand = self.nodes[:stop], self.named[:stop], self.cand[:stop]
        self.criteria = [c[:stop] for c in self.criteria]

    def victims(self, pos: int) -> list[TaskInfo]:
        """The candidate's victims, most important first."""
        got = self.exact.get(pos)
        if got is not None:
            return got
        for positions, view, chosen in self.runs:
            k = int(np.searchsorted(positions, pos))
            if k < len(positions) and positions[k] == pos:
                return _chosen(view.victims[int(self.nodes[pos])], chosen[k])
        raise KeyError(pos)


@dataclass
class Best:
    node: int
    victims: list[TaskInfo]  # most important first


class ScanOrder:
    """The possible nodes in scan order: ``nodes`` from ``offset`` on, wrapping around.  Most
    scans stop early, so the head is built from a window of nodes rather than all of them."""

    __slots__ = ("nodes", "offset", "possible")

    def __init__(self, nodes: IntArray, possible: BoolArray, offset: int) -> None:
        self.nodes, self.possible, self.offset = nodes, possible, offset

    def full(self) -> IntArray:
        order = np.concatenate((self.nodes[self.offset :], self.nodes[: self.offset]))
        return order[self.possible[order]]

    def head(self, k: int) -> tuple[IntArray, bool]:
        """The first ``k`` possible nodes, and whether they are all of them."""
        n = len(self.nodes)
        if 2 * k < n:
            end = self.offset + 2 * k
            if end <= n:
                window = self.nodes[self.offset : end]
            else:
                window = self.nodes.take(np.arange(self.offset, end), mode="wrap")
            window = window[self.possible[window]]
            if len(window) >= k:
                return window[:k], False
        order = self.full()
        return order[:k], len(order) <= k


def best_candidate(
    ssn: Session,
    plan: Plan,
    preemptor: TaskInfo,
    scan: ScanOrder,
    wanted: int,
    exact: Exact,
    ceiling: Callable[[], BoolArray | None] = lambda: None,
) -> Best | None:
    """Dry-run the possible nodes in scan order until ``wanted`` candidates are found, then
    pick one by kube's criteria (first found on ties).  ``ceiling`` (see
    preempt_topology.topology_preempt) only says which node the exact path would have
    considered last when the scan runs out of nodes."""
    stats = ssn.result.stats
    before = stats.preemption_victims
    pos, size = 0, max(wanted + wanted // 4, 16)
    done, best = _quick(ssn, plan, *scan.head(size), wanted, ceiling)
    if done:
        return best
    order = scan.full()
    parts: list[Part] = []
    found = 0
    while pos < len(order) and found < wanted:
        part = _chunk(ssn, plan, preemptor, order[pos : pos + size], exact)
        pos += len(part.nodes)
        size *= 2
        seen = np.cumsum(part.cand)
        if found + int(seen[-1]) >= wanted:
            part.cut(int(np.searchsorted(seen, wanted - found)) + 1)  # stop at the last one wanted
        found += int(part.cand.sum())
        parts.append(part)
    if parts:
        # Volcano: per node considered, so the last one's (unchanged if there is none).
        last = _last_considered(parts, ceiling) if found < wanted else int(parts[-1].named[-1])
        stats.preemption_victims = before if last is None else last
    if not found:
        return None
    criteria = [np.concatenate([part.criteria[c][part.cand] for part in parts]) for c in range(4)]
    pick = _pick(criteria)
    for part in parts:  # the pick-th candidate, counted across the parts in order
        hits = np.flatnonzero(part.cand)
        if pick < len(hits):
            return Best(int(part.nodes[hits[pick]]), part.victims(int(hits[pick])))
        pick -= len(hits)
    raise AssertionError("the pick is one of the candidates")


def _quick(
    ssn: Session, plan: Plan, chunk: IntArray, whole: bool, wanted: int, ceiling: Callable[[], BoolArray | None]
) -> tuple[bool, Best | None]:
    """``best_candidate`` for the common case, with a few array operations: the first chunk
    (``whole``: all of the order) holds no node of the preemptor's job, the first tier names
    victims on every node and no row is odd.  (False, None) when that does not hold or the
    chunk has too few candidates; the general path then decides (filling the same rows)."""
    if not len(chunk) or len(plan.own):
        return False, None
    view = plan.view(0)
    valid = view.valid[chunk]
    # count_nonzero rather than all/any: a reduction's call costs several times more.
    if np.count_nonzero(valid) < len(chunk):
        plan.rows.fill(view, chunk[~valid], plan.preemptor, plan.keep)
    if np.count_nonzero(view.usable[chunk]) < len(chunk):
        return False, None
    count = view.count
    out = _outcome(view, plan.limits.key)
    stale = chunk[out.at[chunk] != view.filled[chunk]]
    if len(stale):
        _dry_run_rows(ssn, plan.limits, view, out, stale)
    hits = out.cand[chunk].nonzero()[0]  # flatnonzero's wrapper costs more than the search
    if len(hits) < wanted and not whole:
        return False, None
    hits = hits[:wanted]
    stats = ssn.result.stats
    if len(hits) == wanted:
        stats.preemption_victims = int(count[chunk[hits[-1]]])  # Volcano: per node considered, the last
    else:
        narrow = ceiling()  # the exact path walks only the nodes the ceiling lets through
        kept = np.flatnonzero(narrow[chunk]) if narrow is not None else [len(chunk) - 1]
        if len(kept):
            stats.preemption_victims = int(count[chunk[kept[-1]]])
    if not len(hits):
        return True, None
    rows = chunk[hits]
    criteria = out.criteria
    row = int(rows[_pick([criteria[0][rows], criteria[1][rows], criteria[2][rows], criteria[3][rows]])])
    return True, Best(row, _chosen(view.victims[row], out.chosen[row]))


def _chosen(ordered: list[TaskInfo], mask: BoolArray) -> list[TaskInfo]:
    """The victims ``mask`` marks in ``ordered``, most important (last) first."""
    flags: list[bool] = mask.tolist()
    out = []
    for p in range(len(ordered) - 1, -1, -1):
        if flags[p]:
            out.append(ordered[p])
    return out


def _last_considered(parts: list[Part], ceiling: Callable[[], BoolArray | None]) -> int | None:
    """PreemptableFn's count on the last scanned node the ceiling lets through (the scan went
    through every node: the exact path would have walked only those), None when it lets none."""
    narrow = ceiling()
    for part in reversed(parts):
        kept = np.flatnonzero(narrow[part.nodes]) if narrow is not None else np.arange(len(part.nodes))
        if len(kept):
            return int(part.named[kept[-1]])
    return None


def _pick(criteria: list[np.ndarray]) -> int:
    """kube's pickOneNodeForPreemption: each criterion maximised in turn, then the first.  That
    is the last of a stable sort by the criteria, the first criterion the most significant,
    with the position reversed to break ties."""
    n = len(criteria[0])
    if n == 1:
        return 0
    keys = (np.arange(n, 0, -1), *criteria[::-1])  # lexsort: the last key is the primary one
    return int(np.lexsort(keys)[-1])


def _chunk(ssn: Session, plan: Plan, preemptor: TaskInfo, chunk: IntArray, exact: Exact) -> Part:
    """Dry-run every node of ``chunk``.  A node's answer is its first tier's with victims; nodes
    no tier names victims on have none."""
    part = Part(chunk)
    positions = np.arange(len(chunk))
    own = np.isin(chunk, plan.own) if len(plan.own) else np.zeros(len(chunk), dtype=bool)
    slow = [positions[own]]
    left = positions[~own]
    for tier in range(plan.tiers):
        if not len(left):
            break
        view = plan.view(tier)
        rows = chunk[left]
        stale = rows[~view.valid[rows]]
        if len(stale):
            plan.rows.fill(view, stale, preemptor, plan.keep)
        named = view.count[rows] > 0
        here, left = left[named], left[~named]
        odd = view.odd[chunk[here]]
        slow.append(here[odd])
        if not odd.all():
            _fast(ssn, plan, view, part, here[~odd])
    infos, stats = ssn.nodes.infos, ssn.result.stats
    for p in np.concatenate(slow).tolist():
        victims = exact(infos[int(chunk[p])])
        named = stats.preemption_victims  # select_victims sets it for every node it considers
        assert named is not None
        part.named[p] = named
        if victims is not None:
            if any(abs(pod_priority(v)) >= PRIORITY_LIMIT for v in victims):
                raise OutOfRange
            part.cand[p] = True
            part.exact[p] = victims
            for c, value in enumerate(score(victims, ssn.now)):
                part.criteria[c][p] = value
    return part


# Dry-run results kept per view for this many preemptor shapes (request and queue state).
OUTCOMES = 8


class Outcome:
    """One preemptor shape's dry-run results over a view's rows, each valid while the row's
    ``View.filled`` is the one it was computed at: a row is recomputed whenever its node or its
    victims' jobs change, which is all a dry run reads besides the shape (``Limits.key``)."""

    __slots__ = ("at", "cand", "chosen", "criteria")

    def __init__(self, nodes: int, depth: int) -> None:
        self.at: IntArray = np.full(nodes, -1, dtype=np.int64)
        self.cand: BoolArray = np.zeros(nodes, dtype=bool)
        self.chosen: BoolArray = np.zeros((nodes, depth), dtype=bool)
        self.criteria: list[np.ndarray] = [np.zeros(nodes, dtype=np.int64) for _ in range(3)] + [np.zeros(nodes)]


def _outcome(view: View, key: bytes) -> Outcome:
    got: Outcome | None = view.outcomes.get(key)
    if got is None:
        got = view.outcomes[key] = Outcome(len(view.valid), view.depth)
        if len(view.outcomes) > OUTCOMES:
            view.outcomes.popitem(last=False)
    else:
        view.outcomes.move_to_end(key)
    return got


def _fast(ssn: Session, plan: Plan, view: View, part: Part, positions: IntArray) -> None:
    """Dry-run the rows at ``positions`` whose results for this shape are stale, and take every
    row's result into ``part``."""
    rows = part.nodes[positions]
    out = _outcome(view, plan.limits.key)
    stale = rows[out.at[rows] != view.filled[rows]]
    if len(stale):
        _dry_run_rows(ssn, plan.limits, view, out, stale)
    part.named[positions] = view.count[rows]
    cand = out.cand[rows]
    if not cand.any():
        return
    at, rows = positions[cand], rows[cand]
    part.cand[at] = True
    for c in range(4):
        part.criteria[c][at] = out.criteria[c][rows]
    part.runs.append((at, view, out.chosen[rows]))


# At most this many stale rows are dry-run one by one in Python floats: most preemptors find a
# row or two stale (the node of the last eviction), where numpy's cost per call would dominate.
SCALAR_ROWS = 4


def _dry_run_rows(ssn: Session, limits: Limits, view: View, out: Outcome, rows: IntArray) -> None:
    if len(rows) <= SCALAR_ROWS:
        for r in rows.tolist():
            _dry_run_row(ssn.nodes.future, limits, view, out, r)
        return
    count = view.count[rows]
    depth = int(count.max())
    res, queue_vec, prio, start = view.pack(rows, depth)
    chosen, cover = dry_run(limits, ssn.nodes.future[rows], res, queue_vec, count)
    cand = cover & chosen.any(axis=1)
    out.at[rows] = view.filled[rows]
    out.cand[rows] = cand
    out.chosen[rows] = False
    out.chosen[rows, :depth] = chosen
    if cand.any():
        picked = rows[cand]
        criteria = _criteria(chosen[cand], prio[cand], start[cand])
        for c, values in enumerate(criteria):
            out.criteria[c][picked] = values


def _dry_run_row(future: FloatArray, limits: Limits, view: View, out: Outcome, r: int) -> None:
    """``dry_run`` and ``_criteria`` for row ``r`` alone, with the same float operations in the
    same order (Python floats are the same doubles), taken into ``out``.  Only the checked
    columns are carried: ``have[j]`` is the node's room on ``limits.py_cols[j]``."""
    row = view.data[r]
    res, queue = row.res, row.queue
    m = len(res)
    need, (allocated, request, deserved) = limits.py_need, limits.py_queue
    cols, qcols = limits.py_cols, limits.py_queue_cols
    at_node: list[float] = future[r].tolist()
    have = [at_node[c] for c in cols]
    alloc = allocated.copy()  # changed in place below: the limits' own list is shared
    # ValidateVictims: every victim added in order (a left fold: the same additions in the
    # same order as the per-node loop; ``sum`` may compensate rounding on newer Pythons).
    cover = m > 0
    for j, c in enumerate(cols):
        total = have[j]
        for vec in res:
            total += vec[c]
        if not need[j] < total + 0.1:
            cover = False
            break
    # The room and the queue's allocation change in place, each column by the same operation
    # the vector code applies (plain loops: a comprehension is a frame of its own on 3.11).
    removed = 0
    for k in range(m):
        vec, qvec = res[k], queue[k]
        for j, c in enumerate(cols):
            have[j] += vec[c]
        for j, c in enumerate(qcols):
            alloc[j] -= qvec[c]
        removed = k + 1
        if _fits(need, have, alloc, request, deserved):
            break
    chosen: list[int] = []
    if cover:
        for k in range(removed - 1, -1, -1):
            vec, qvec = res[k], queue[k]
            for j, c in enumerate(cols):
                have[j] -= vec[c]
            for j, c in enumerate(qcols):
                alloc[j] += qvec[c]
            if not _fits(need, have, alloc, request, deserved):
                # Not spared: added back after the subtraction, as the per-node loop does.
                for j, c in enumerate(cols):
                    have[j] += vec[c]
                for j, c in enumerate(qcols):
                    alloc[j] -= qvec[c]
                chosen.append(k)  # descending: the most important victim first
    _take_row(out, r, int(view.filled[r]), chosen, row.prio, row.start)


def _fits(
    need: list[float], have: list[float], alloc: list[float], request: list[float], deserved: list[float]
) -> bool:
    """``dry_run``'s fit test for one row: the node's room, then the queue's."""
    # Index loops: zip(strict=True) parses its keyword on every call, all() runs a generator.
    for j, n in enumerate(need):
        if not n < have[j] + 0.1:
            return False
    for j, a in enumerate(alloc):
        if a + request[j] > deserved[j]:
            break
    else:
        return True
    return False


def _take_row(out: Outcome, r: int, filled: int, chosen: list[int], prio: list[int], start: list[float]) -> None:
    """One row's dry run into ``out``: the chosen positions (descending) and kube's criteria."""
    out.at[r] = filled
    out.cand[r] = bool(chosen)
    mask = out.chosen
    mask[r] = False
    if not chosen:
        return
    # Plain loops: a generator (or a comprehension, on Python 3.11) is a frame of its own.
    highest, total = prio[chosen[0]], 0
    for k in chosen:
        mask[r, k] = True
        p = prio[k]
        total += p + PRIORITY_OFFSET
        if p > highest:
            highest = p
    earliest = math.inf
    for k in chosen:
        if prio[k] == highest and start[k] < earliest:
            earliest = start[k]
    criteria = out.criteria
    criteria[0][r] = -prio[chosen[0]]
    criteria[1][r] = -total
    criteria[2][r] = -len(chosen)
    criteria[3][r] = earliest


@dataclass(frozen=True)
class Limits:
    """What a dry run checks, as arrays: the request on the node's fit columns, and the queue
    test on its checked columns (None: no queue test, or one that checks nothing).  ``key``
    tells shapes apart: equal keys give equal dry runs on equal rows."""

    cols: IntArray
    need: FloatArray
    queue_cols: IntArray | None
    allocated: FloatArray
    request: FloatArray
    deserved: FloatArray
    key: bytes

    # The same as Python floats, for one row's dry run: need; (allocated, request, deserved).
    py_need: list[float] = field(init=False, compare=False)
    py_queue: tuple[list[float], list[float], list[float]] = field(init=False, compare=False)
    py_cols: list[int] = field(init=False, compare=False)
    py_queue_cols: list[int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "py_need", self.need.tolist())
        queue = (self.allocated.tolist(), self.request.tolist(), self.deserved.tolist())
        object.__setattr__(self, "py_queue", queue if self.queue_cols is not None else ([], [], []))
        object.__setattr__(self, "py_cols", self.cols.tolist())
        object.__setattr__(self, "py_queue_cols", self.queue_cols.tolist() if self.queue_cols is not None else [])

    @classmethod
    def of(cls, task: TaskInfo, room: Room | None) -> Limits:
        cols = task.fit_cols.astype(np.intp)
        need = task.init_vec[cols].astype(float)
        if room is None or not any(room.checked):
            empty = np.zeros(0)
            return cls(cols, need, None, empty, empty, empty, _key(cols, need))
        qcols = np.flatnonzero(room.checked)
        allocated, request, deserved = (
            np.asarray(v, dtype=float)[qcols] for v in (room.allocated, room.request, room.deserved)
        )
        key = _key(cols, need, qcols, allocated, request, deserved)
        return cls(cols, need, qcols, allocated, request, deserved, key)


def _key(*arrays: np.ndarray) -> bytes:
    return b"|".join(len(a).to_bytes(4, "little") + a.tobytes() for a in arrays)


def dry_run(
    limits: Limits, future: FloatArray, res: FloatArray, queue_vec: FloatArray, count: IntArray
) -> tuple[BoolArray, BoolArray]:
    """``select_victims`` for every row at once: (chosen[row, position], ValidateVictims[row]).

    Victims are removed in order until the preemptor fits (queue test and node room), then
    reprieved from the last removed down, each kept out only if the preemptor no longer fits
    with it back.  Each row sees the same float operations, in the same order, as the per-node
    loop (a reprieve that fails adds the victim back after subtracting it); only the columns
    the checks read are carried."""
    need, qcols = limits.need, limits.queue_cols
    res = res[:, :, limits.cols]
    have = future[:, limits.cols]
    rows, depth = res.shape[0], res.shape[1]
    # ValidateVictims: every victim added in order (cumsum accumulates one term after another).
    full = np.cumsum(np.concatenate((have[:, None], res), axis=1), axis=1)[:, -1]
    cover = (count > 0) & np.all(need < full + 0.1, axis=1)
    if qcols is not None:
        alloc = np.tile(limits.allocated, (rows, 1))
        queue_vec = queue_vec[:, :, qcols]

    def fits(have: FloatArray, alloc: FloatArray | None) -> BoolArray:
        ok: BoolArray = np.all(need < have + 0.1, axis=1)
        if alloc is not None:
            ok &= ~np.any((alloc + limits.request) > limits.deserved, axis=1)
        return ok

    removed = np.zeros(rows, dtype=np.intp)
    act = count > 0
    for k in range(depth):
        act &= k < count
        if not act.any():
            break
        have = np.where(act[:, None], have + res[:, k], have)
        if qcols is not None:
            alloc = np.where(act[:, None], alloc - queue_vec[:, k], alloc)
        removed[act] = k + 1
        act &= ~fits(have, alloc if qcols is not None else None)
    chosen = np.zeros((rows, depth), dtype=bool)
    for k in range(int(removed.max(initial=0)) - 1, -1, -1):
        act = (k < removed) & cover
        if not act.any():
            continue
        back_have = have - res[:, k]
        back_alloc = alloc + queue_vec[:, k] if qcols is not None else None
        ok = fits(back_have, back_alloc)
        spared, out = act & ok, act & ~ok
        have = np.where(spared[:, None], back_have, np.where(out[:, None], back_have + res[:, k], have))
        if back_alloc is not None:
            alloc = np.where(spared[:, None], back_alloc, np.where(out[:, None], back_alloc - queue_vec[:, k], alloc))
        chosen[:, k] = out
    return chosen, cover


def _criteria(chosen: BoolArray, prio: IntArray, start: FloatArray) -> list[np.ndarray]:
    """kube's criteria per candidate row: the first victim's priority (the highest position
    chosen: reprieve visits the last removed first), the priority sum, the count, the earliest
    start among the highest-priority victims; negated where lower is better."""
    depth = chosen.shape[1]
    top = depth - 1 - np.argmax(chosen[:, ::-1], axis=1)
    first = prio[np.arange(len(chosen)), top]
    total = np.where(chosen, prio + PRIORITY_OFFSET, 0).sum(axis=1)
    highest = np.where(chosen, prio, -PRIORITY_LIMIT).max(axis=1)
    earliest = np.where(chosen & (prio == highest[:, None]), start, np.inf).min(axis=1)
    return [-first, -total, -chosen.sum(axis=1), earliest]


def score(victims: list[TaskInfo], now: float) -> Score:
    """The same criteria for one candidate's victims (most important first).  Pod priorities
    are int32, so the sum fits the int64 arrays the criteria are kept in."""
    prios = [pod_priority(v) for v in victims]
    top = max(prios)
    earliest = min(start_time(v, now) for v, p in zip(victims, prios, strict=True) if p == top)
    return (-prios[0], -sum(p + PRIORITY_OFFSET for p in prios), -len(victims), earliest)
