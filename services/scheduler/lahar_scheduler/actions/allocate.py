"""allocate: place pending tasks, queue by queue and job by job, all-or-nothing per gang.

Follows Volcano's allocate action: the best queue is popped (and dropped for the rest of the
action if overused), its best job is popped, and that job's tasks are placed in task order until
the job is ready.  The job's operations form one statement, committed only when the job is
ready; a job that is only pipelined keeps its reservations for the rest of the session.

Node filtering and scoring are vector operations over every node (Volcano samples a subset of
nodes; scoring them all gives equal or better placements and costs little here).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from lahar_scheduler.actions.allocate_subjobs import JobWorksheet, allocate_for_job, organize
from lahar_scheduler.actions.base import Action
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.fiterrors import FitErrors
from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
from lahar_scheduler.framework.nodewindow import window, window_positions
from lahar_scheduler.framework.pq import PriorityQueue
from lahar_scheduler.framework.predicate import Filtered, fit_failures, run_predicates
from lahar_scheduler.framework.rowcache import RowCache
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.statement import Statement
from lahar_scheduler.framework.types import PodGroupPhase, TaskStatus
from lahar_scheduler.framework.why import best_effort_why
from lahar_scheduler.framework.why_nodes import nodes_why, pre_predicate_why

if TYPE_CHECKING:
    from lahar_scheduler.framework.nodes import FloatArray, IntArray
    from lahar_scheduler.framework.subjobs import SubJobInfo
    from lahar_scheduler.framework.topology import JobTopology


def allocate_in_hypernodes(*args: Any) -> Statement | None:
    # Imported on first use: the HyperNode path builds on this module's AllocateAction.
    from lahar_scheduler.actions.allocate_hypernode import allocate_in_hypernodes as run

    return run(*args)


S = TaskStatus
_PENDING = S.PENDING  # read per job (an enum class's member lookup is slow on Python 3.11)
QUEUE_GATE = "scheduling.volcano.sh/queue-allocation-gate"


def filter_nodes(ssn: Session, task: TaskInfo, idx: IntArray, check_fit: bool = True) -> Filtered:
    """Allocate's predicate: request ≤ future idle (``Insufficient <resource>``), then PredicateFn."""
    table = ssn.nodes
    errors = FitErrors()
    if check_fit:
        ok, failures = fit_failures(task.init_vec, table.future[idx], task.fit_cols, table.space.dims)
        for f in failures:
            errors.add(f.reason, int(f.mask.sum()))
        errors.add_nodes(int((~ok).sum()))
        idx = idx[ok]
    rest = run_predicates(task, idx, ssn.callbacks(P.PREDICATE), [])
    errors.reasons.update(rest.errors.reasons)
    errors.add_nodes(rest.errors.nodes)
    return Filtered(rest.passed, errors, rest.unresolvable)


def fits(task: TaskInfo, have: np.ndarray, rows: IntArray) -> np.ndarray:
    """Volcano's LessEqual(request, have, Zero) on the task's checked columns, per row."""
    cols = task.fit_cols
    # Rows first, then columns: cheaper than one broadcast fancy index; the same elements.
    return np.asarray((task.init_vec[cols] < have[rows][:, cols] + 0.1).all(axis=1))


NO_FIT, FITS_FUTURE, FITS_IDLE = 0, 1, 2


class NodeCaches:
    """Per-task-shape verdicts over all nodes, refreshed only where nodes changed.

    One code per node: 0 = infeasible, 1 = passes predicates and fits future idle only (would be
    pipelined), 2 = passes and fits idle now.
    """

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.table = ssn.nodes
        self.codes = RowCache(ssn.nodes, self._codes, self._code_row)
        # Any: callbacks may offer a ``passes`` fast path beside the point's signature.
        self.callbacks: list[Any] = ssn.callbacks(P.PREDICATE)
        self._rows = [getattr(fn, "passes_row", None) for fn in self.callbacks]
        # Session.predicates_local's question, its callbacks looked up once.
        locals_ = [getattr(fn, "is_local", None) for fn in self.callbacks]
        self._locals: list[Callable[[TaskInfo], bool]] | None = (
            None if any(fn is None for fn in locals_) else [fn for fn in locals_ if fn is not None]
        )
        self._shape_asks: dict[bytes, tuple[list[float], list[int]]] = {}

    def _code_row(self, task: TaskInfo, i: int) -> float:
        table = self.table
        req, cols = self._asks(task)
        future = table.future[i].tolist()
        for c in cols:
            if req[c] >= future[c] + 0.1:
                return NO_FIT
        for row in self._rows:
            ok = row(task, i) if row is not None else bool(self._predicates(task, np.array([i]))[0])
            if not ok:
                return NO_FIT
        idle = table.idle[i].tolist()
        for c in cols:
            if not req[c] < idle[c] + 0.1:
                return FITS_FUTURE
        return FITS_IDLE

    def _asks(self, task: TaskInfo) -> tuple[list[float], list[int]]:
        """The task's request and checked columns as Python numbers (the same doubles, compared
        faster one by one than numpy scalars), kept per shape."""
        got = self._shape_asks.get(task.template_key)
        if got is None:
            got = self._shape_asks[task.template_key] = (task.init_vec.tolist(), task.fit_cols.tolist())
        return got

    def _codes(self, task: TaskInfo, rows: IntArray) -> np.ndarray:
        table = self.table
        cols = task.fit_cols
        req = task.init_vec[cols]
        # fits() for future and idle, the request gathered once; codes as np.where would give.
        ok = (req < table.future[rows][:, cols] + 0.1).all(axis=1)
        ok &= self._predicates(task, rows)
        now = (req < table.idle[rows][:, cols] + 0.1).all(axis=1)
        codes = np.zeros(len(rows), dtype=np.int8)
        codes[ok] = FITS_FUTURE
        codes[ok & now] = FITS_IDLE
        return codes

    def _predicates(self, task: TaskInfo, rows: IntArray) -> np.ndarray:
        callbacks = self.callbacks
        if all(hasattr(fn, "passes") for fn in callbacks):
            ok = np.ones(len(rows), dtype=bool)
            for fn in callbacks:
                ok &= fn.passes(task, rows)
            return ok
        passed = run_predicates(task, rows, callbacks, []).passed
        out = np.zeros(len(rows), dtype=bool)
        out[np.searchsorted(rows, passed)] = True
        return out

    def local(self, task: TaskInfo) -> bool:
        """``Session.predicates_local``: every predicate's verdict on a node depends only on it."""
        checks = self._locals
        if checks is None:
            return False
        for check in checks:  # noqa: SIM110 - all() over a generator is a frame more per task
            if not check(task):
                return False
        return True

    def feasible(self, task: TaskInfo) -> tuple[IntArray, IntArray] | None:
        """(nodes fitting idle now, nodes fitting only future idle), both passing predicates;
        None when verdicts are not local and so may not be cached."""
        if not self.local(task):
            return None
        codes = self.codes.get(task.template_key, task)
        return (codes == FITS_IDLE).nonzero()[0], (codes == FITS_FUTURE).nonzero()[0]

    def feasible_window(self, task: TaskInfo) -> tuple[IntArray, IntArray] | None:
        """``feasible`` within Volcano's predicate walk (framework/nodewindow.py): only the nodes
        the walk keeps, and the walk's index moved on the snapshot."""
        if not self.local(task):
            return None
        codes = self.codes.get(task.template_key, task)
        snapshot = self.ssn.snapshot
        if len(codes) and not codes.any():
            # No node passes (a full cluster): what window_positions gives for an empty mask,
            # without walking it: nothing kept, the walk's index where it was (modulo the nodes).
            snapshot.last_processed_node %= len(codes)
            nothing = np.zeros(0, dtype=np.intp)
            return nothing, nothing.copy()
        # A boolean mask: numpy finds non-zero booleans three times faster than non-zero bytes.
        kept, snapshot.last_processed_node = window_positions(codes > NO_FIT, snapshot.last_processed_node)
        got = codes[kept]
        return kept[got == FITS_IDLE], kept[got == FITS_FUTURE]


@dataclass(frozen=True)
class Calls:
    """The extension points allocate calls per task, each resolved once (``Session.caller``)."""

    allocatable: Callable[[QueueInfo, TaskInfo], bool]
    pre_predicate: Callable[[TaskInfo], str | None]
    job_ready: Callable[[JobInfo], bool]
    node_order: Callable[[TaskInfo, IntArray], FloatArray]
    best_node: Callable[[TaskInfo, IntArray, FloatArray], int | None]
    job_pipelined: Callable[[JobInfo], bool]  # asked of every job allocate could not make ready
    overused: Callable[[QueueInfo], bool]  # asked at every pop of a queue

    @classmethod
    def of(cls, ssn: Session) -> Calls:
        return cls(
            ssn.caller(P.ALLOCATABLE),
            ssn.caller(P.PRE_PREDICATE),
            ssn.caller(P.JOB_READY),
            ssn.caller(P.NODE_ORDER),
            ssn.caller(P.BEST_NODE),
            ssn.caller(P.JOB_PIPELINED),
            ssn.caller(P.OVERUSED),
        )


def select_best(ssn: Session, task: TaskInfo, idx: IntArray, calls: Calls | None = None) -> int:
    """Highest score; ``BestNodeFn`` may override; ties broken at random (seeded)."""
    if len(idx) == 1:
        return int(idx[0])
    if calls is None:
        scores = ssn.call(P.NODE_ORDER, task, idx)
        chosen = ssn.call(P.BEST_NODE, task, idx, scores)
    else:
        scores = calls.node_order(task, idx)
        chosen = calls.best_node(task, idx, scores)
    if chosen is not None:
        return chosen
    # ``nonzero()[0]`` on a 1-D mask is np.flatnonzero without its Python wrappers (per task).
    ties = (scores == np.maximum.reduce(scores)).nonzero()[0]  # .max() without its Python frame
    pick = ties[ssn.rng.randrange(len(ties))] if len(ties) > 1 else ties[0]
    return int(idx[pick])


def best_of_gradients(
    ssn: Session, task: TaskInfo, gradients: tuple[IntArray, IntArray], calls: Calls | None = None
) -> int | None:
    for gradient in gradients:
        if len(gradient):
            return select_best(ssn, task, gradient, calls)
    return None


def schedulable_tasks(job: JobInfo) -> list[TaskInfo]:
    """Pending tasks allocate considers: not externally gated, not BestEffort."""
    pending = job.status_index.get(_PENDING)
    return _schedulable(pending.values()) if pending else []


def _schedulable(pending: Iterable[TaskInfo]) -> list[TaskInfo]:
    out = []
    for t in pending:
        gates = t.pod.spec.scheduling_gates
        if gates and [g.name for g in gates] != [QUEUE_GATE]:
            continue
        if t.resreq.is_empty():
            continue
        out.append(t)
    return out


@dataclass
class Within:
    """The nodes of one HyperNode a job is tried in (the network-topology path), and what to tell
    it after each task is placed."""

    rows: IntArray
    mask: np.ndarray  # over every node row: True inside
    placed: Callable[[TaskInfo, str], None]
    sub: SubJobInfo | None = None  # the sub-job placed (a job with a subGroupPolicy)

    def keep(self, gradients: tuple[IntArray, IntArray]) -> tuple[IntArray, IntArray] | None:
        inside = (gradients[0][self.mask[gradients[0]]], gradients[1][self.mask[gradients[1]]])
        return inside if len(inside[0]) or len(inside[1]) else None


def _ready(ssn: Session, job: JobInfo, within: Within | None, calls: Calls) -> bool:
    if within is not None and within.sub is not None:
        return ssn.sub_job_ready(job, within.sub)
    return calls.job_ready(job)


def _pipelined(ssn: Session, job: JobInfo, within: Within | None, calls: Calls) -> bool:
    if within is not None and within.sub is not None:
        return ssn.sub_job_pipelined(job, within.sub)
    return calls.job_pipelined(job)


def _has_fit_errors(job: JobInfo, task: TaskInfo, within: Within | None) -> bool:
    """Volcano's TaskHasFitErrors: a role already failed (within the same sub-job, if any)."""
    if within is None or within.sub is None:
        return job.task_has_fit_errors(task)
    tasks = within.sub.tasks
    return bool(task.role) and task.role in {tasks[t].role for t in job.fit_errors if t in tasks}


def _continue(job: JobInfo, within: Within | None) -> bool:
    """Volcano's NeedContinueAllocating(subJob): a sub-job that must place all its tasks stops at
    the first failure; other sub-jobs of a subGroupPolicy job go on."""
    if within is None or within.sub is None:
        return job.need_continue_allocating()
    return job.min_available != len(job.tasks) and within.sub.min_available < len(within.sub.tasks)


class AllocateAction(Action):
    name = "allocate"
    _all_nodes: tuple[Session, IntArray] | None = None  # see _candidate_nodes

    def execute(self, ssn: Session) -> None:
        self.caches = NodeCaches(ssn)
        self.calls = Calls.of(ssn)
        # Per task shape: the last failed filtering of every node and when (NodeTable.changes).
        self._failed: dict[bytes, tuple[int, Filtered]] = {}
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_order)
        jobs_by_queue: dict[str, PriorityQueue[JobInfo]] = {}
        worksheets: dict[str, PriorityQueue[TaskInfo]] = {}
        sheets: dict[str, JobWorksheet] = {}  # jobs with a subGroupPolicy, by sub-job
        # Precomputed order keys (framework/pq.py): allocate moves only the tasks of the job it
        # has popped, so the keys of the jobs waiting in a queue hold until they are popped.
        job_key = ssn.job_sort_key()
        job_valid = ssn.caller(P.JOB_VALID)  # asked of every job
        enqueues, backfills = "enqueue" in ssn.enabled_actions, "backfill" in ssn.enabled_actions
        for job in ssn.jobs.values():
            if job.is_pending():
                if enqueues:
                    continue
                job.phase = PodGroupPhase.INQUEUE
            invalid = job_valid(job)
            if invalid is not None:
                d = ssn.decision(job)
                d.outcome, d.reason = "invalid", invalid[1]
                job.job_fit_error = invalid[1]
                continue
            if job.queue not in ssn.queues:
                continue
            # Most jobs of a busy cluster have no pending task: nothing to sort out for them.
            pending = job.status_index.get(_PENDING)
            if not pending:
                continue
            tasks = _schedulable(pending.values())
            if not tasks:
                if not backfills:
                    best_effort = [t for t in pending.values() if t.resreq.is_empty() and not t.sch_gated]
                    if best_effort:
                        ssn.explain(job, best_effort_why(len(best_effort)))
                continue
            if job.queue not in jobs_by_queue:
                jobs_by_queue[job.queue] = PriorityQueue(ssn.job_order, key=job_key)
                queues.push(ssn.queues[job.queue])
            jobs_by_queue[job.queue].push(job)
            worksheets[job.uid] = PriorityQueue(ssn.task_order, tasks, key=ssn.task_sort_key(tasks))
            if job.sub_jobs is not None:
                sheets[job.uid] = organize(ssn, job, tasks)
        topology: dict[str, JobTopology] | None = None  # ssn.topology, read once a job is popped
        while not queues.empty():
            queue = queues.pop()
            if self.calls.overused(queue):
                # Dropped for the rest of the action (as in Volcano): its jobs wait this session.
                waiting = jobs_by_queue.get(queue.uid)
                while waiting is not None and not waiting.empty():
                    ssn.explain(waiting.pop(), ssn.why_overused(queue))
                continue
            jobs = jobs_by_queue.get(queue.uid)
            if jobs is None or jobs.empty():
                continue
            job = jobs.pop()
            worksheet = worksheets[job.uid]
            if topology is None:
                topology = ssn.topology
            topo = topology.get(job.uid) if topology else None
            sheet = sheets.get(job.uid)
            if sheet is not None:
                stmt = allocate_for_job(self, ssn, job, queue, sheet)
            elif topo is not None:
                stmt = allocate_in_hypernodes(self, ssn, job, queue, worksheet, topo)
            else:
                stmt = self.allocate_job(ssn, job, queue, worksheet)
            if stmt is not None and self.calls.job_ready(job):
                stmt.commit()
                ssn.decision(job).outcome = "allocated"
                if (not sheet.empty()) if sheet is not None else len(worksheet):
                    jobs.push(job)
            queues.push(queue)

    def allocate_job(
        self,
        ssn: Session,
        job: JobInfo,
        queue: QueueInfo,
        tasks: PriorityQueue[TaskInfo],
        within: Within | None = None,
    ) -> Statement | None:
        stmt = ssn.statement()
        decision = ssn.decision(job)
        calls = self.calls
        # Taken once a task gets past the queue's checks (on a full cluster no task may).
        all_nodes: IntArray | None = None if within is None else within.rows
        # The verdict names the last task the queue refused: written at the first refusal (its
        # place among the verdicts) and once more after the loop if others followed.
        refused: TaskInfo | None = None
        refusals = 0
        while not tasks.empty():
            task = tasks.pop()
            if not calls.allocatable(queue, task):
                if not refusals:
                    decision.verdicts["allocatable"] = f"queue {queue.name} has no room for {task.name}"
                refused, refusals = task, refusals + 1
                if decision.why is None:  # explain keeps the first reason: skip making the others
                    ssn.explain(job, partial(ssn.why_not_allocatable, queue, task))
                continue
            if task.sch_gated:
                continue
            if _has_fit_errors(job, task, within):
                job.fit_errors[task.uid] = FitErrors(
                    f"Task {task.name} with role spec {task.role} has already predicated failed, skip"
                )
                continue
            if all_nodes is None:
                all_nodes = self._candidate_nodes(ssn)
            err = calls.pre_predicate(task)
            if err is not None:
                fe = FitErrors(err)
                fe.add(err, len(all_nodes))
                job.fit_errors[task.uid] = fe
                ssn.explain(job, partial(pre_predicate_why, self.name, task, err))
                if _continue(job, within):
                    continue
                break
            decision.nodes_considered = max(decision.nodes_considered, len(all_nodes))
            gradients = self._candidates(ssn, task, windowed=within is None)
            if gradients is not None and within is not None:
                gradients = within.keep(gradients)
            if gradients is None:
                filtered = self._filter_every_node(ssn, task, all_nodes, within)
                if not len(filtered.passed):
                    job.fit_errors[task.uid] = filtered.errors
                    ssn.explain(job, partial(nodes_why, self.name, task, filtered.errors, len(all_nodes)))
                    if _continue(job, within):
                        continue
                    break
                passed = filtered.passed if within is not None else self._window(ssn, filtered.passed)
                now = fits(task, ssn.nodes.idle, passed)
                gradients = (passed[now], passed[~now])
            best = best_of_gradients(ssn, task, gradients, calls)
            if best is None:
                continue
            node = ssn.node_list[best]
            if len(gradients[0]):
                stmt.allocate(task, node)
            else:
                stmt.pipeline(task, node.name, False)
            decision.chosen[task.key] = node.name
            if within is not None:
                within.placed(task, node.name)
            if _ready(ssn, job, within, calls):
                break
        if refused is not None and refusals > 1:
            decision.verdicts["allocatable"] = f"queue {queue.name} has no room for {refused.name}"
        if _ready(ssn, job, within, calls):
            return stmt
        if _pipelined(ssn, job, within, calls):
            if within is None or within.sub is None:  # a sub-job's try is not the job's outcome
                decision.outcome = "pipelined"
            return stmt
        stmt.discard()
        if within is None or within.sub is None:
            decision.outcome = "discarded"
        return None

    def _candidate_nodes(self, ssn: Session) -> IntArray:
        """``ssn.candidate_nodes()``, taken once per session: every job that gets past its queue
        would take the same rows.  Read-only, as nothing may change it for the next job."""
        got = self._all_nodes
        if got is None or got[0] is not ssn:
            rows = ssn.candidate_nodes()
            rows.flags.writeable = False
            got = self._all_nodes = (ssn, rows)
        return got[1]

    def _filter_every_node(self, ssn: Session, task: TaskInfo, idx: IntArray, within: Within | None) -> Filtered:
        """``filter_nodes`` over every node, for the reasons each failed.  When no node passes and
        the verdicts are local, the outcome is kept for the task's shape until a node changes: a
        queue of identical jobs that fit nowhere (a full cluster) is then filtered once, not
        once per job."""
        cacheable = within is None and ssn.predicates_local(task)
        changes = len(ssn.nodes.changes)
        if cacheable:
            got = self._failed.get(task.template_key)
            if got is not None and got[0] == changes:
                return got[1]
        filtered = filter_nodes(ssn, task, idx)
        if cacheable and not len(filtered.passed):
            self._failed[task.template_key] = (changes, filtered)
        return filtered

    def _candidates(self, ssn: Session, task: TaskInfo, windowed: bool) -> tuple[IntArray, IntArray] | None:
        """Feasible nodes split by idle/future fit: the nominated node first if it passes,
        else the cached verdicts; None when none pass or the cache may not be used (the caller
        then filters every node again and records why each failed)."""
        nominated = self._nominated(ssn, task)
        if nominated is not None:
            # Volcano walks a one-node list for the nominated node: its index restarts at 0.
            ssn.snapshot.last_processed_node = 0
            now = fits(task, ssn.nodes.idle, nominated)
            return nominated[now], nominated[~now]
        got = self.caches.feasible_window(task) if windowed else self.caches.feasible(task)
        if got is None or not (len(got[0]) or len(got[1])):
            return None
        return got

    def _window(self, ssn: Session, feasible: IntArray) -> IntArray:
        """The feasible nodes Volcano's predicate walk would have kept (framework/nodewindow.py)."""
        snapshot = ssn.snapshot
        kept, snapshot.last_processed_node = window(feasible, len(ssn.node_list), snapshot.last_processed_node)
        return kept

    def _nominated(self, ssn: Session, task: TaskInfo) -> IntArray | None:
        name = task.pod.status.nominated_node_name
        node = ssn.nodes.by_name.get(name) if name else None
        if node is None:
            return None
        cols = task.fit_cols
        if not np.all(task.init_vec[cols] < ssn.nodes.future[node.index, cols] + 0.1):
            return None
        got = filter_nodes(ssn, task, np.array([node.index], dtype=np.intp), check_fit=False)
        return got.passed if len(got.passed) else None
