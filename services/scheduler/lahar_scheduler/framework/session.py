"""One scheduling session: plugins registered over a snapshot, actions run, results collected.

The session mutates the snapshot it is given (task statuses, node accounting) through
``move``.  When it closes, every change it did not commit is undone, so the snapshot is left
as the cluster will look once the committed binds and evictions land.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

import numpy as np

from lahar.api.objects import AllocationResult
from lahar.api.resource import Resource
from lahar_scheduler.framework.conf import PluginOption, SchedulerConf
from lahar_scheduler.framework.cyclestate import CycleState
from lahar_scheduler.framework.fiterrors import FitErrors
from lahar_scheduler.framework.hypernodes import HyperNodeTree
from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo, add_runs, pod_index
from lahar_scheduler.framework.nodes import NodeInfo, NodeTable
from lahar_scheduler.framework.plugin import Plugin
from lahar_scheduler.framework.points import (
    CYCLE_STATE,
    JOB_ORDER,
    JOB_PIPELINED,
    JOB_READY,
    NODE_ORDER,
    POINTS,
    PREDICATE,
    QUEUE_ORDER,
    SHORTCUTS,
    SUB_JOB_ORDER,
    SUB_JOB_PIPELINED,
    SUB_JOB_READY,
    TASK_ORDER,
    VICTIM_QUEUE_ORDER,
    Chain,
    Point,
    consulted,
    flat,
)
from lahar_scheduler.framework.ports import ExtenderTransport, NoTransport
from lahar_scheduler.framework.pq import ByKey
from lahar_scheduler.framework.predicate import Failure
from lahar_scheduler.framework.snapshot import Snapshot, parse_time
from lahar_scheduler.framework.statement import Statement
from lahar_scheduler.framework.stats import ON_SESSION_CLOSE, ON_SESSION_OPEN, SessionStats, Stopwatch
from lahar_scheduler.framework.subjobs import SubJobInfo
from lahar_scheduler.framework.sums import RunSums
from lahar_scheduler.framework.topology import JobTopology, job_topologies, sub_job_topologies
from lahar_scheduler.framework.types import (
    ALLOCATED_STATUSES,
    PodGroupPhase,
    TaskStatus,
)
from lahar_scheduler.framework.why import Why

if TYPE_CHECKING:
    from lahar_scheduler.framework.nodes import IntArray

S = TaskStatus
Q = ParamSpec("Q")
T = TypeVar("T")
R = TypeVar("R")


@dataclass
class EventHandler:
    allocate: Callable[[TaskInfo], None] | None = None
    deallocate: Callable[[TaskInfo], None] | None = None


@dataclass
class Condition:
    type: str
    status: str
    reason: str
    message: str
    transition_id: str = ""


@dataclass
class PodGroupUpdate:
    phase: str
    conditions: list[Condition]
    running: int
    succeeded: int
    failed: int
    changed: bool


@dataclass
class JobDecision:
    """What the session decided for one job, for traces and explanations."""

    job: str
    queue: str
    outcome: str = ""
    nodes_considered: int = 0
    chosen: dict[str, str] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    why: Why | None = None  # the first thing that stopped the job this session
    # What else bears on the wait (sla's deadline, what preempt tried), in the order noted.
    notes: list[str] = field(default_factory=list)


@dataclass
class TaskReason:
    reason: str
    message: str
    nominated_node: str = ""


@dataclass
class SessionResult:
    binds: list[tuple[TaskInfo, str]] = field(default_factory=list)
    evictions: list[tuple[TaskInfo, str]] = field(default_factory=list)
    pipelined: dict[str, str] = field(default_factory=dict)
    podgroups: dict[str, PodGroupUpdate] = field(default_factory=dict)
    queues: dict[str, Resource] = field(default_factory=dict)
    task_reasons: dict[str, TaskReason] = field(default_factory=dict)
    decisions: dict[str, JobDecision] = field(default_factory=dict)
    # DRA: claims the session allocated for pods it binds (the binder would write them first).
    claim_allocations: dict[str, AllocationResult] = field(default_factory=dict)
    stats: SessionStats = field(default_factory=SessionStats)  # for Volcano's metrics


class Session:
    """Volcano's Session: the tiers' callbacks, combined per extension point."""

    # Per-job sums the plugins' opens share (drf and proportion both sum what every job holds);
    # None outside ``open``, when tasks move.
    open_sums: RunSums | None = None

    def __init__(
        self,
        snapshot: Snapshot,
        conf: SchedulerConf,
        plugin_types: dict[str, type[Plugin]],
        *,
        seed: int = 0,
        uid: str = "session",
        clock: Callable[[], float] | None = None,
        transport: ExtenderTransport | None = None,
    ) -> None:
        self.snapshot = snapshot
        # How the extender plugin reaches its HTTP extender (the shell's adapter; see ports).
        self.transport: ExtenderTransport = transport if transport is not None else NoTransport()
        self.stopwatch = Stopwatch(clock)  # timings only; nothing decided depends on it
        self.conf = conf
        self.uid = uid
        self.rng = random.Random(seed)
        self.now = snapshot.now
        self.nodes: NodeTable = snapshot.nodes
        self.node_list: list[NodeInfo] = snapshot.nodes.infos
        self.queues: dict[str, QueueInfo] = snapshot.queues
        self.jobs: dict[str, JobInfo] = {
            uid: job for uid, job in snapshot.jobs.items() if job.podgroup is not None and job.queue in snapshot.queues
        }
        self.total_resource = snapshot.total_resource()
        self.enabled_actions = frozenset(conf.actions)
        self.result = SessionResult()
        self._registered: dict[str, dict[str, Any]] = {name: {} for name in POINTS}
        self._chains: dict[str, Chain] = {}
        # Per point, its callbacks' locality checks (predicates_local, scores_local: asked per
        # task; callbacks are registered only while the session opens, see ``add``).
        self._local_checks: dict[str, list[Callable[[TaskInfo], bool] | None]] = {}
        self._handlers: list[EventHandler] = []
        self._on_allocate: list[Callable[[TaskInfo], None]] = []
        self._on_deallocate: list[Callable[[TaskInfo], None]] = []
        self._touched: dict[int, tuple[TaskInfo, TaskStatus, str]] = {}
        self._unscored: dict[int, TaskInfo] = {}  # victims evicted in a Statement (see set_scored)
        self._committed: set[int] = set()
        self._old_status: dict[str, tuple[str, list[Condition]]] = {}
        self.conditions: dict[str, list[Condition]] = {}
        for job in self.jobs.values():
            job.priority = snapshot.job_priority(job)
            job.reset_fit_errors()
            pg = job.podgroup
            shown_conds = pg.status.conditions if pg is not None else None
            conds = (
                [Condition(c.type, c.status, c.reason, c.message, c.transition_id) for c in shown_conds]
                if shown_conds
                else []
            )
            # A status is due when it differs from what the cluster shows, not from ``job.phase``:
            # sessions set that to their own verdict before the write is echoed (the next session
            # schedules by it), so a write that was lost would otherwise never be seen as missing.
            shown = pg.status.phase if pg is not None else job.phase
            self._old_status[job.uid] = (shown, [Condition(**vars(c)) for c in conds] if conds else [])
            self.conditions[job.uid] = conds
        self.plugins: list[Plugin] = []
        self._plugin_types = plugin_types
        self._option: PluginOption | None = None
        self.job_order_key = functools.cmp_to_key(self._job_cmp)
        self.queue_order_key = functools.cmp_to_key(self._queue_cmp)
        self.task_order_key = functools.cmp_to_key(self._task_cmp)

    # -- network topology ---------------------------------------------------------------------
    @property
    def hypernodes(self) -> HyperNodeTree:
        """The HyperNode tree with its cluster-top node (built on first use)."""
        return self.snapshot.hypernodes

    @functools.cached_property
    def topology(self) -> dict[str, JobTopology]:
        """Per job with a networkTopology, its constraint as this session applies it."""
        if not any(j.network_topology is not None for j in self.jobs.values()):
            return {}  # no tree built, no per-job work: the default path stays as it was
        return job_topologies(self.jobs.values(), self.hypernodes)

    @functools.cached_property
    def sub_topology(self) -> dict[str, JobTopology]:
        """Per sub-job with a networkTopology (jobs with a subGroupPolicy), its constraint."""
        if not any(j.sub_jobs is not None for j in self.jobs.values()):
            return {}
        return sub_job_topologies(self.jobs.values(), self.hypernodes)

    def sub_job_ready(self, job: JobInfo, sub: SubJobInfo) -> bool:
        """Volcano's SubJobReady: the job's own readiness when it has no sub-group policy."""
        if job.sub_jobs is None:
            return self.call(JOB_READY, job)
        return self.call(SUB_JOB_READY, sub)

    def sub_job_pipelined(self, job: JobInfo, sub: SubJobInfo) -> bool:
        if job.sub_jobs is None:
            return self.call(JOB_PIPELINED, job)
        return self.call(SUB_JOB_PIPELINED, sub)

    def sub_job_order(self, left: SubJobInfo, right: SubJobInfo) -> bool:
        """The plugins' order, then the partition index, then the id (Volcano's SubJobOrderFn)."""
        r = self.call(SUB_JOB_ORDER, left, right)
        if r:
            return r < 0
        return (left.match_index, left.uid) < (right.match_index, right.uid)

    # -- lifecycle ------------------------------------------------------------------------
    def open(self) -> Session:
        opened = self.stopwatch.now()
        self.open_sums = RunSums()
        for tier in self.conf.tiers:
            for opt in tier.plugins:
                plugin = self._plugin_types[opt.name](opt.arguments)
                self._option = opt
                started = self.stopwatch.now()
                plugin.on_session_open(self)
                self._timed(plugin.name, ON_SESSION_OPEN, started)
                self.plugins.append(plugin)
                if self._touched:  # a plugin moved a task: what the sums kept may be stale
                    self.open_sums = RunSums()
        self._option = None
        self.open_sums = None
        self.result.stats.open_seconds = self.stopwatch.since(opened)
        return self

    def close(self) -> SessionResult:
        for plugin in self.plugins:
            started = self.stopwatch.now()
            plugin.on_session_close(self)
            self._timed(plugin.name, ON_SESSION_CLOSE, started)
        self._update_job_status()
        self._update_queue_status()
        # The next session sees committed victims as the pods they still are until they go.
        self.nodes.rescore(list(self._unscored.values()))
        self._unscored.clear()
        self._rollback_uncommitted()
        return self.result

    def _timed(self, plugin: str, hook: str, started: float | None) -> None:
        took = self.stopwatch.since(started)
        if took is not None:
            self.result.stats.plugin_seconds[(plugin, hook)] = took

    # -- registration and dispatch --------------------------------------------------------
    def add(self, point: Point[Q, T, Any], fn: Callable[Q, T]) -> None:
        """Register a plugin callback for an extension point (from ``on_session_open``)."""
        if POINTS.get(point.name) is not point:
            raise KeyError(f"unknown extension point {point.name!r}")
        if self._option is None:
            raise RuntimeError("callbacks are registered from on_session_open")
        self._registered[point.name][self._option.name] = fn
        self._chains.pop(point.name, None)
        self._local_checks.pop(point.name, None)

    def call(self, point: Point[Q, Any, R], *args: Q.args, **kwargs: Q.kwargs) -> R:
        """Dispatch to the point's callbacks, combined by the point's rule."""
        if kwargs:
            raise TypeError(f"{point.name}: callbacks take positional arguments only")
        return point.combine(self._chain(point), args)

    def caller(self, point: Point[Q, Any, R]) -> Callable[Q, R]:
        """``call`` for one point with its chain resolved once, for actions that call a point
        per task.  Callbacks are registered only while the session opens, so the chain an action
        resolves cannot change under it."""
        chain = self._chain(point)
        shortcut = SHORTCUTS.get(point.combine)
        fast = shortcut(flat(chain)) if shortcut is not None else None
        if fast is not None:
            return cast("Callable[Q, R]", fast)
        combine = point.combine

        def dispatch(*args: Q.args, **kwargs: Q.kwargs) -> R:
            return combine(chain, args)

        return dispatch

    def callbacks(self, point: Point[Q, T, Any]) -> list[Callable[Q, T]]:
        """The consulted callbacks in tier order (for actions that cache per-node verdicts)."""
        return flat(self._chain(point))

    def chain(self, point: Point[Q, T, Any]) -> Sequence[Sequence[Callable[Q, T]]]:
        """The consulted callbacks per tier (for helpers that follow the tiers themselves)."""
        return self._chain(point)

    def has(self, point: Point[Any, Any, Any]) -> bool:
        return any(self._chain(point))

    def add_event_handler(self, handler: EventHandler) -> None:
        self._handlers.append(handler)
        # Each event's callbacks in registration order, so firing one walks no handler twice.
        if handler.allocate is not None:
            self._on_allocate.append(handler.allocate)
        if handler.deallocate is not None:
            self._on_deallocate.append(handler.deallocate)

    def _chain(self, point: Point[Any, Any, Any]) -> Chain:
        """Callbacks per tier, in plugin order, with the point's enable flag applied."""
        chain = self._chains.get(point.name)
        if chain is None:
            registered = self._registered[point.name]
            chain = [
                [registered[o.name] for o in tier.plugins if o.name in registered and consulted(point.flag, o.enabled)]
                for tier in self.conf.tiers
            ]
            self._chains[point.name] = chain
        return chain

    # -- orders, with the framework's defaults behind the plugins' opinions ----------------------
    def job_order(self, left: JobInfo, right: JobInfo) -> bool:
        return self._job_cmp(left, right) < 0

    def _job_cmp(self, left: JobInfo, right: JobInfo) -> int:
        r = self.call(JOB_ORDER, left, right)
        if r:
            return r
        return _by_creation(left.creation, left.uid, right.creation, right.uid)

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> bool:
        return self._queue_cmp(left, right) < 0

    def _queue_cmp(self, left: QueueInfo, right: QueueInfo) -> int:
        r = self.call(QUEUE_ORDER, left, right)
        if r:
            return r
        return _by_creation(left.creation, left.uid, right.creation, right.uid)

    def victim_queue_order(self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo) -> bool:
        r = self.call(VICTIM_QUEUE_ORDER, left, right, preemptor)
        if r:
            return r < 0
        return not self.queue_order(left, right)

    def job_sort_key(self) -> Callable[[JobInfo], tuple[Any, ...]] | None:
        """A key ordering jobs exactly as ``job_order`` does (see framework/pq.py), or None when
        some job-order callback is not a ``ByKey`` or a creation stamp does not parse.

        The plugins' keys (priority, readiness, drf share) change only when the job's own tasks
        move, so a job's key holds while it waits in a queue.  The framework's default comes
        last: creation time, then uid (equal stamps are equal times, so the uid decides)."""
        keys = _keys(self.callbacks(JOB_ORDER))
        times = _creation_times(j.creation for j in self.jobs.values())
        if keys is None or times is None:
            return None

        def key(job: JobInfo) -> tuple[Any, ...]:
            created = times.get(job.creation)
            return (*[k(job) for k in keys], parse_time(job.creation) if created is None else created, job.uid)

        return key

    def task_sort_key(self, tasks: Sequence[TaskInfo]) -> Callable[[TaskInfo], tuple[Any, ...]] | None:
        """A key ordering ``tasks`` exactly as ``task_order`` does, or None.  The default order
        compares pod-name indices only when both tasks have one, so the key needs every task to
        have an index (then: index, creation time, uid)."""
        keys = _keys(self.callbacks(TASK_ORDER))
        if keys is None or any(t.index is None for t in tasks):
            return None
        times = _creation_times(t.creation for t in tasks)
        if times is None:
            return None

        def key(task: TaskInfo) -> tuple[Any, ...]:
            created = times.get(task.creation)
            at = parse_time(task.creation) if created is None else created
            return (*[k(task) for k in keys], task.index, at, task.uid)

        if len(keys) == 1 and len(times) == 1:
            # The default tiers (priority alone) on tasks of one stamp: the same tuples, built
            # without the general loop (a key per pending task each session).
            only, ((stamp, at),) = keys[0], times.items()

            def key1(task: TaskInfo) -> tuple[Any, ...]:
                if task.creation != stamp:
                    return key(task)
                return (only(task), task.index, at, task.uid)

            return key1
        return key

    def task_order(self, left: TaskInfo, right: TaskInfo) -> bool:
        return self._task_cmp(left, right) < 0

    def _task_cmp(self, left: TaskInfo, right: TaskInfo) -> int:
        r = self.call(TASK_ORDER, left, right)
        if r:
            return r
        return compare_task(left, right)

    # -- simulation for topology-aware preemption (state from cycle_state, cloned per node) --
    def cycle_state(self, task: TaskInfo) -> CycleState:
        """A fresh CycleState for ``task``, as the plugins' PrePredicate would have left it."""
        state = CycleState()
        self.call(CYCLE_STATE, task, state)
        return state

    def predicates_local(self, task: TaskInfo) -> bool:
        """True when every predicate's verdict on a node depends only on that node and the task,
        so verdicts may be cached per node (callbacks say so through an ``is_local`` method)."""
        checks = self._local_checks.get(PREDICATE.name)
        if checks is None:
            checks = self._local_checks[PREDICATE.name] = [_method(fn, "is_local") for fn in self.callbacks(PREDICATE)]
        for local in checks:  # noqa: SIM110 - all() over a generator is a frame more per task
            if local is None or not local(task):
                return False
        return True

    def scores_local(self, task: TaskInfo) -> bool:
        """True when every node-order callback scores a node as it would among any other
        candidates (no normalisation over the set), so scores taken over all nodes stand for
        scores over any subset.  Callbacks say so through a ``scores_local`` method, on
        themselves or, for a bound method, on their plugin."""
        checks = self._local_checks.get(NODE_ORDER.name)
        if checks is None:
            checks = self._local_checks[NODE_ORDER.name] = [_scores_local_of(fn) for fn in self.callbacks(NODE_ORDER)]
        for check in checks:  # noqa: SIM110 - as above
            if check is None or not check(task):
                return False
        return True

    # -- task moves (used by Statement and by backfill's direct allocate) ------------------
    def move(self, task: TaskInfo, status: TaskStatus, node_name: str) -> None:
        """Change a task's status and node (remembering its first state, to undo at close)."""
        key = id(task)
        if key not in self._touched:
            self._touched[key] = (task, task.status, task.node_name)
        self.snapshot.move(task, status, node_name)

    def release(self, task: TaskInfo) -> None:
        """``move(task, Releasing, task.node_name)`` then ``set_scored(task, False)``: an
        eviction, through ``Snapshot.release``."""
        key = id(task)
        if key not in self._touched:
            self._touched[key] = (task, task.status, task.node_name)
        self.snapshot.release(task)
        self._unscored[key] = task

    def set_scored(self, task: TaskInfo, scored: bool) -> None:
        """Take an evicted victim out of the scorers' node view, or put it back (see NodeTable)."""
        if scored:
            self._unscored.pop(id(task), None)
        else:
            self._unscored[id(task)] = task
        self.nodes.set_scored(task, scored)

    def fire_allocate(self, task: TaskInfo) -> None:
        for fn in self._on_allocate:
            fn(task)

    def fire_deallocate(self, task: TaskInfo) -> None:
        for fn in self._on_deallocate:
            fn(task)

    def statement(self) -> Statement:
        return Statement(self)

    def dispatch(self, task: TaskInfo) -> None:
        """Hand an allocated task to the binder: it becomes Binding."""
        node = task.node_name
        self.move(task, S.BINDING, node)
        self._committed.add(id(task))
        self.result.binds.append((task, node))

    def evict_committed(self, task: TaskInfo, reason: str) -> None:
        self._committed.add(id(task))
        self.result.evictions.append((task, reason))

    def allocate_now(self, task: TaskInfo, node: NodeInfo) -> None:
        """Session-level Allocate (backfill): allocate, then dispatch the job's tasks once ready."""
        self.move(task, S.ALLOCATED, node.name)
        self.fire_allocate(task)
        job = self.jobs[task.job]
        if self.call(JOB_READY, job):
            for t in list(job.tasks_in(S.ALLOCATED)):
                self.dispatch(t)

    # -- scheduling helpers shared by actions ---------------------------------------------
    def candidate_nodes(self) -> IntArray:
        return np.arange(len(self.node_list), dtype=np.intp)

    def record_fit_error(self, job: JobInfo, task: TaskInfo, errors: FitErrors) -> None:
        job.fit_errors[task.uid] = errors

    def update_podgroup_condition(self, job: JobInfo, cond: Condition) -> None:
        conds = self.conditions.setdefault(job.uid, [])
        for i, c in enumerate(conds):
            if c.type == cond.type:
                conds[i] = cond
                return
        conds.append(cond)

    def why_not_allocatable(self, queue: QueueInfo, task: TaskInfo) -> Why:
        """Ask the plugins whose allocatable callback is consulted which one refused, and why."""
        why = self._why_from("allocatable", "why_not_allocatable", queue, task)
        return why or Why("allocate", "allocatable", f"queue {queue.name} has no room for {task.name}")

    def why_overused(self, queue: QueueInfo) -> Why:
        """Ask the plugins whose overused callback is consulted which one found the queue overused."""
        why = self._why_from("overused", "why_overused", queue)
        return why or Why("allocate", "overused", f"queue {queue.name} is overused: allocate skips it")

    def _why_from(self, point: str, method: str, *args: Any) -> Why | None:
        consulted_fns = {id(fn) for fn in flat(self._chain(POINTS[point]))}
        registered = self._registered[point]
        for plugin in self.plugins:
            fn: Any = registered.get(plugin.name)
            explain = getattr(plugin, method, None)
            if fn is None or id(fn) not in consulted_fns or explain is None:
                continue
            why = explain(*args)
            if why is not None:
                return why  # type: ignore[no-any-return]
        return None

    def explain(self, job: JobInfo, why: Why | Callable[[], Why]) -> None:
        """Record why ``job`` waits; the first reason of a session stands (it stopped the job).
        A callable is only called when no reason is recorded yet (explaining costs string work
        on paths a large session may take per task)."""
        d = self.decision(job)
        if d.why is None:
            d.why = why() if callable(why) else why

    def note(self, job: JobInfo, text: str) -> None:
        """Add something that bears on why ``job`` waits without being what stopped it."""
        notes = self.decision(job).notes
        if text not in notes:
            notes.append(text)

    def decision(self, job: JobInfo) -> JobDecision:
        d = self.result.decisions.get(job.uid)
        if d is None:
            d = self.result.decisions[job.uid] = JobDecision(job.uid, job.queue)
        return d

    # -- close ------------------------------------------------------------------------------
    def _update_job_status(self) -> None:
        """Each job's PodGroup status, its tasks' reasons and where its pipelined tasks wait,
        read from each job's status buckets once."""
        podgroups = self.result.podgroups
        conditions, old_status, uid = self.conditions, self._old_status, self.uid
        for job in self.jobs.values():
            idx = job.status_index
            pending, pipelined = idx.get(_PENDING), idx.get(_PIPELINED)
            if pending or pipelined:
                self._task_reasons(job, pending, pipelined)
            conds = conditions.get(job.uid, [])
            unschedulable = False
            for c in conds:
                if c.type == "Unschedulable" and c.status == "True" and c.transition_id == uid:
                    unschedulable = True
                    break
            bucket = idx.get(_RUNNING)
            running = len(bucket) if bucket else 0
            bucket = idx.get(_SUCCEEDED)
            succeeded = len(bucket) if bucket else 0
            bucket = idx.get(_FAILED)
            failed = len(bucket) if bucket else 0
            phase = _phase(job, unschedulable, running, succeeded, failed)
            old_phase, old_conds = old_status[job.uid]
            changed = phase != old_phase or len(conds) != len(old_conds) or _conditions_changed(conds, old_conds)
            podgroups[job.uid] = PodGroupUpdate(phase, conds, running, succeeded, failed, changed)
            job.phase = phase

    def _task_reasons(
        self, job: JobInfo, pending: dict[str, TaskInfo] | None, pipelined: dict[str, TaskInfo] | None
    ) -> None:
        """Why each pending task waits; where each pipelined one waits (``result.pipelined``)."""
        reasons = self.result.task_reasons
        if pending:
            fit_errors = job.fit_errors
            for t in pending.values():
                err = fit_errors.get(t.uid)
                if t.last_status == _ALLOCATED:
                    msg = f"Pod {t.key} can possibly be assigned to {t.last_node}, once minAvailable is satisfied"
                    reasons[t.key] = TaskReason("Schedulable", msg)
                elif err is not None:
                    reasons[t.key] = TaskReason("Unschedulable", err.error(len(self.node_list)))
        if pipelined:
            waiting = self.result.pipelined
            for t in pipelined.values():
                key, node = f"{t.namespace}/{t.name}", t.node_name  # TaskInfo.key, without its call
                waiting[key] = node
                msg = (
                    f"Pod {key} can possibly be assigned to {node}, "
                    "once resource is released and minAvailable is satisfied"
                )
                reasons[key] = TaskReason("Unschedulable", msg, node if t.eviction_occurred else "")

    def _update_queue_status(self) -> None:
        allocated = {name: Resource() for name in self.queues}
        if "root" not in self.queues:
            # Each queue's held tasks in the order the per-task adds took them, summed as one
            # sequence: add_runs is an add per task, so runs may span jobs (one pod shape).
            held: dict[str, list[Iterable[TaskInfo]]] = {}
            for job in self.jobs.values():
                idx = job.status_index
                for status in _HELD:
                    tasks = idx.get(status)
                    if tasks:
                        held.setdefault(job.queue, []).append(tasks.values())
            for name, parts in held.items():
                add_runs(allocated[name], itertools.chain.from_iterable(parts))
            self.result.queues = allocated
            return
        for job in self.jobs.values():
            for status in _HELD:
                for t in job.tasks_in(status):
                    allocated[job.queue].add(t.resreq)
                    self._add_to_ancestors(allocated, job.queue, t.resreq)
        self.result.queues = allocated

    def _add_to_ancestors(self, allocated: dict[str, Resource], queue: str, r: Resource) -> None:
        seen = {queue}
        current = self.queues[queue]
        while True:
            parent = current.parent or "root"
            if parent in seen or parent not in self.queues:
                return
            allocated[parent].add(r)
            if parent == "root":
                return
            seen.add(parent)
            current = self.queues[parent]

    def _rollback_uncommitted(self) -> None:
        """Undo what this session did but did not commit; committed binds stay assumed.

        The moves are the ones ``move`` would make, latest first.  A move moves only its own
        task, so whether a task needs one does not depend on the moves before it; runs of moves
        off every node (back to Pending) go to the snapshot as one batch (``Snapshot.move_off``)."""
        committed = self._committed
        off: list[tuple[TaskInfo, TaskStatus]] = []
        for key, (task, status, node) in reversed(self._touched.items()):
            if key in committed or (task.status == status and task.node_name == node):
                continue
            if not node:
                off.append((task, status))
                continue
            if off:
                self.snapshot.move_off(off)
                off = []
            self.snapshot.move(task, status, node)
        if off:
            self.snapshot.move_off(off)
        self._touched.clear()


def _method(fn: Callable[..., Any], name: str) -> Callable[[TaskInfo], bool] | None:
    got = getattr(fn, name, None)
    return got if callable(got) else None


def _scores_local_of(fn: Callable[..., Any]) -> Callable[[TaskInfo], bool] | None:
    """A node-order callback's ``scores_local``, on itself or, for a bound method, its plugin."""
    owner = getattr(fn, "__self__", None)
    check = getattr(fn if owner is None else owner, "scores_local", None)
    return check if callable(check) else None


# Summed in the frozenset's own order, as the per-status loop always summed them.
_HELD = tuple(ALLOCATED_STATUSES)
# The members the close reads per job and per task, looked up once: on Python 3.11 reading a
# member off an enum class goes through the enum's slow lookup hook (~80 ns each time).
_PENDING, _PIPELINED, _ALLOCATED, _BOUND = S.PENDING, S.PIPELINED, S.ALLOCATED, S.BOUND
_RUNNING, _RELEASING, _SUCCEEDED, _FAILED = S.RUNNING, S.RELEASING, S.SUCCEEDED, S.FAILED
_UNKNOWN_PHASE, _COMPLETED_PHASE, _RUNNING_PHASE = PodGroupPhase.UNKNOWN, PodGroupPhase.COMPLETED, PodGroupPhase.RUNNING
_INQUEUE_PHASE, _PENDING_PHASE = PodGroupPhase.INQUEUE, PodGroupPhase.PENDING


def _by_creation(lc: str, luid: str, rc: str, ruid: str) -> int:
    if lc == rc:
        return -1 if luid < ruid else (1 if luid > ruid else 0)
    lt, rt = parse_time(lc), parse_time(rc)
    if lt == rt:
        return -1 if luid < ruid else (1 if luid > ruid else 0)
    return -1 if lt < rt else 1


def _keys(fns: Sequence[Callable[[T, T], int]]) -> list[Callable[[T], Any]] | None:
    """The callbacks' keys when every one is a ``ByKey``."""
    keys = []
    for fn in fns:
        if not isinstance(fn, ByKey):
            return None
        keys.append(fn.key)
    return keys


def _creation_times(stamps: Iterable[str]) -> dict[str, float] | None:
    """Each distinct stamp's time, or None when one does not parse (comparators would then fail
    only when they compare it, which a precomputed key cannot reproduce)."""
    times: dict[str, float] = {}
    for stamp in stamps:
        if stamp not in times:
            try:
                times[stamp] = parse_time(stamp)
            except ValueError:
                return None
    return times


def compare_task(left: TaskInfo, right: TaskInfo) -> int:
    """Volcano's default task order: pod-name index, then creation time, then UID."""
    li, ri = left.index, right.index
    if li is not None and ri is not None and li != ri:
        return -1 if li < ri else 1
    return _by_creation(left.creation, left.uid, right.creation, right.uid)


def pod_group_phase(job: JobInfo, unschedulable: bool) -> str:
    """The PodGroup phase at session close (Volcano's getPodGroupPhase)."""
    idx = job.status_index
    return _phase(job, unschedulable, _size(idx, S.RUNNING), _size(idx, S.SUCCEEDED), _size(idx, S.FAILED))


def _size(idx: dict[TaskStatus, dict[str, TaskInfo]], status: TaskStatus) -> int:
    bucket = idx.get(status)
    return len(bucket) if bucket else 0


def _phase(job: JobInfo, unschedulable: bool, running: int, succeeded: int, failed: int) -> str:
    """``pod_group_phase`` with the job's running, succeeded and failed counts already taken."""
    if running and unschedulable:
        return _UNKNOWN_PHASE
    idx = job.status_index
    # scheduled_num (running, bound, failed, succeeded) plus releasing_scheduled_num.
    bound = idx.get(_BOUND)
    scheduled = running + (len(bound) if bound else 0) + failed + succeeded
    releasing = idx.get(_RELEASING)
    if releasing:
        scheduled += sum(1 for t in releasing.values() if t.node_name)
    if scheduled >= job.min_available:
        return _COMPLETED_PHASE if scheduled == succeeded + failed else _RUNNING_PHASE
    if job.phase != _INQUEUE_PHASE:
        return _PENDING_PHASE
    return job.phase


def _conditions_changed(new: list[Condition], old: list[Condition]) -> bool:
    if len(new) != len(old):
        return True
    return any(
        (n.type, n.status, n.reason, n.message) != (o.type, o.status, o.reason, o.message)
        for n, o in zip(new, old, strict=True)
    )


__all__ = [
    "Condition",
    "EventHandler",
    "Failure",
    "JobDecision",
    "Plugin",
    "PodGroupUpdate",
    "Session",
    "SessionResult",
    "compare_task",
    "pod_group_phase",
    "pod_index",
]
