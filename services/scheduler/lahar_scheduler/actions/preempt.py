"""preempt: starving jobs evict lower-priority tasks of their own queue (Volcano's preempt action).

Queue by queue (queue order), each starving job (job order) gets one statement: while it is
starving, its pending tasks (task order) try to preempt Bound/Running tasks of *other* jobs of the
same queue; the statement is committed only if the job is then pipelined.  After the queue's
jobs, each starving job's pending tasks may preempt tasks of their own job, one statement per
task, committed when the task got a node and stopping at the first that did not.

Preemption never binds: a preemptor is *pipelined* on its node, and lands in a later session once
its victims are gone.  The node is found by the normal path (nodes by score, evict in victim
order until the preemptor fits) or the topology-aware path (``preempt_topology``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from lahar.api.resource import Resource
from lahar_scheduler.actions.args import PreemptArgs, typed
from lahar_scheduler.actions.base import Action
from lahar_scheduler.actions.evictutil import (
    NEVER,
    NodePasses,
    TaskFilter,
    UnresolvableCache,
    VictimBound,
    need_vector,
    pending_tasks,
    preempt_nodes,
    preemptable_in_queue,
    shape_key,
)
from lahar_scheduler.actions.preempt_filters import OtherJobs, SameJob
from lahar_scheduler.actions.preempt_topology import topology_preempt
from lahar_scheduler.actions.preempt_walk import WalkMemo
from lahar_scheduler.actions.scalar_fit import EPSILON, fits_with_each
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.ceiling import VictimCeiling
from lahar_scheduler.framework.pq import PriorityQueue
from lahar_scheduler.framework.types import PREEMPTABLE_STATUSES
from lahar_scheduler.framework.victims import NeedMemo, kept_per_task, victims_queue

if TYPE_CHECKING:
    from lahar.api.objects import Pod
    from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
    from lahar_scheduler.framework.nodes import BoolArray, FloatArray, IntArray, NodeInfo
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.framework.statement import Statement


def pod_priority(pod: Pod) -> int:
    """kube's PodPriority: ``spec.priority``, 0 when unset (not the task priority's default 1)."""
    return pod.spec.priority if pod.spec.priority is not None else 0


def terminating_by_preemption(pod: Pod) -> bool:
    if pod.metadata.deletion_timestamp is None:
        return False
    for c in pod.status.conditions:
        if c.type == "DisruptionTarget":
            return c.status == "True" and c.reason == "PreemptionByScheduler"
    return False


def eligible(ssn: Session, task: TaskInfo) -> bool:
    """Volcano's taskEligibleToPreempt: preemptionPolicy Never, and the nominated-node checks."""
    if task.preemption_policy == NEVER:
        return False
    name = task.pod.status.nominated_node_name
    if not name:
        return True
    node = ssn.nodes.by_name.get(name)
    if node is None:
        return False
    verdict = ssn.call(P.PREDICATE, task, np.array([node.index], dtype=np.intp))
    if len(verdict.passed):
        return False  # the nominated node now takes the pod: nothing to preempt for
    if len(verdict.unresolvable):
        return True  # preemption on that node cannot help, so look elsewhere again
    mine = pod_priority(task.pod)
    # A lower-priority pod still terminating for an earlier preemption: wait for it.
    return not any(pod_priority(t.pod) < mine and terminating_by_preemption(t.pod) for t in node.tasks.values())


def other_jobs_filter(ssn: Session, preemptor: TaskInfo, queue: str) -> TaskFilter:
    return OtherJobs(ssn, preemptor, queue)


def same_job_filter(preemptor: TaskInfo) -> TaskFilter:
    return SameJob(preemptor)


NO_ROOM = (
    "no node where evicting lower-priority pods the plugins let it take makes room "
    "(priority: only lower-priority pods; gang: not below their job's minMember)"
)


class PreemptAction(Action):
    name = "preempt"

    def execute(self, ssn: Session) -> None:
        self.args = typed(self.arguments, PreemptArgs)
        self.bound = VictimBound(ssn, preemptable_in_queue(ssn))
        self.ceiling = VictimCeiling(ssn, P.PREEMPTABLE, preemptable_in_queue(ssn), PREEMPTABLE_STATUSES)
        self.verdicts = UnresolvableCache(ssn)
        self.walks = WalkMemo(ssn, self.bound, self.ceiling, self.verdicts)
        # The ceiling only spares walking nodes that would fail; keeping it fresh costs a row
        # per change.  The normal path consults it once a walk wasted a node (and from then on):
        # while every preemptor settles on its first node, it would spare nothing.
        self.wasteful = False
        self.fits = PreemptorFits(ssn)
        # Points asked per preemptor or per node walked, their chains resolved once.
        self.starving = ssn.caller(P.JOB_STARVING)
        self.pre_predicate = ssn.caller(P.PRE_PREDICATE)
        self.victims = ssn.caller(P.PREEMPTABLE)
        self.needs: NeedMemo[FloatArray] = NeedMemo(ssn, lambda need: need_vector(ssn, need))
        self.salt = ssn.rng.getrandbits(32)
        # Per victim job, its tasks' sort key (None: none; see _victim_order).
        self._task_keys: dict[str, Callable[[TaskInfo], tuple[object, ...]] | None] = {}
        self._victim_keys: dict[str, tuple[object, ...]] = {}  # per task uid, its key's value
        self.miss: dict[str, str] = {}  # job → why its last preemptor found nothing to evict
        starving: dict[str, list[JobInfo]] = {}
        tasks: dict[str, PriorityQueue[TaskInfo]] = {}
        for job in ssn.jobs.values():
            if job.is_pending() or ssn.call(P.JOB_VALID, job) is not None or job.queue not in ssn.queues:
                continue
            if not ssn.call(P.JOB_STARVING, job) or _network_topology(job):
                continue
            starving.setdefault(job.queue, []).append(job)
            tasks[job.uid] = _task_queue(ssn, pending_tasks(job))
        key = ssn.job_sort_key()
        jobs = {name: _job_queue(ssn, members, key) for name, members in starving.items()}
        queues = PriorityQueue(ssn.queue_order, [ssn.queues[name] for name in jobs])
        while not queues.empty():
            queue = queues.pop()
            self.between_jobs(ssn, queue, jobs[queue.uid], tasks)
            for job in starving[queue.uid]:
                self.within_job(ssn, job)

    def between_jobs(
        self, ssn: Session, queue: QueueInfo, jobs: PriorityQueue[JobInfo], tasks: dict[str, PriorityQueue[TaskInfo]]
    ) -> None:
        while not jobs.empty():
            job = jobs.pop()
            stmt = ssn.statement()
            # Shapes that found no node since the state last changed: an identical task would
            # fail the same way, so it is not tried again (state changes only when one succeeds).
            failed: set[tuple[object, ...]] = set()
            pending = tasks[job.uid]
            while self.starving(job) and not pending.empty():
                preemptor = pending.pop()
                # The key is built only when it is asked (mostly no shape has failed): what it
                # reads of the pod does not change in a session.
                if failed and shape_key(preemptor, "jobs") in failed:
                    continue
                if self.preempt(ssn, stmt, preemptor, other_jobs_filter(ssn, preemptor, queue.uid)):
                    failed.clear()
                else:
                    failed.add(shape_key(preemptor, "jobs"))
            if ssn.call(P.JOB_PIPELINED, job):
                if stmt.has_evictions():
                    ssn.decision(job).verdicts["preempt"] = "evicted tasks of other jobs in the queue"
                    ssn.result.stats.evicting_commit("preempt")
                stmt.commit()
            else:
                self._discard(stmt)
                self._note_starving(ssn, job)

    def within_job(self, ssn: Session, job: JobInfo) -> None:
        """Pending tasks preempt lower-priority tasks of their own job; stop at the first failure."""
        pending = _task_queue(ssn, pending_tasks(job))
        while not pending.empty():
            preemptor = pending.pop()
            stmt = ssn.statement()
            if not self.preempt(ssn, stmt, preemptor, same_job_filter(preemptor)):
                self._discard(stmt)
                return
            if stmt.has_evictions():
                ssn.result.stats.evicting_commit("preempt")
            stmt.commit()

    def _discard(self, stmt: Statement) -> None:
        stmt.discard()

    def _note_starving(self, ssn: Session, job: JobInfo) -> None:
        miss = self.miss.get(job.uid)
        if miss is None:
            return
        placed = job.ready_num() + job.waiting_num()
        ssn.note(job, f"preempt: starving ({placed} of minMember {job.min_available} placed), {miss}")

    def _miss(self, preemptor: TaskInfo, text: str) -> bool:
        self.miss[preemptor.job] = f"task {preemptor.name} (asks {preemptor.resreq}): {text}"
        return False

    def preempt(self, ssn: Session, stmt: Statement, preemptor: TaskInfo, keep: TaskFilter) -> bool:
        if not eligible(ssn, preemptor):
            if preemptor.preemption_policy == NEVER:
                return self._miss(preemptor, "its preemptionPolicy is Never, so it evicts nothing")
            return self._miss(preemptor, "it waits for its nominated node to free up")
        err = self.pre_predicate(preemptor)
        if err is not None:
            return self._miss(preemptor, err)
        job = ssn.jobs[preemptor.job]
        remembered = self._remembered_walk(ssn, stmt, preemptor, keep, job.queue)
        if remembered is not None:
            return remembered
        possible = self.bound.candidates(preemptor, job.queue)
        if not possible.any():
            return self._miss(
                preemptor,
                f"no node where evicting every pod preempt may take (Running or Bound, preemptable, of queue "
                f"{job.queue}) would make room; pods of higher or equal priority are not evicted",
            )
        # Index arrays of candidate nodes are made only where they matter: topology-aware dry
        # runs, predicates that read more than their node, scores normalised over the set.
        local = not self.args.topology_aware and ssn.predicates_local(preemptor) and ssn.scores_local(preemptor)
        nodes = None if local else preempt_nodes(ssn, preemptor, self.verdicts)
        bound = possible  # before the ceiling: the queue's message below is about it alone
        if not isinstance(keep, SameJob) and not self.args.topology_aware and self.wasteful:
            ceiling = self.ceiling.fits(preemptor, job.queue)
            if ceiling is not None:
                # Nodes where no plugin could name enough victims: walking them finds nothing
                # (both paths skip a node whose victims cannot cover the preemptor).
                possible = possible & ceiling
        if self.args.topology_aware:
            # The ceiling is asked only by the dry runs that want it: the fast path dry-runs its
            # nodes from cached rows, where the ceiling would cost more than the nodes it spares.
            def narrow() -> BoolArray | None:
                return None if isinstance(keep, SameJob) else self.ceiling.fits(preemptor, job.queue)

            assert nodes is not None
            if topology_preempt(ssn, stmt, preemptor, keep, nodes, possible, self.args, self.salt, narrow):
                return True
            return self._miss(preemptor, "topology-aware preemption found no node whose victims make room")
        # The queue must free this much before the preemptor may join it: nodes whose evictable
        # tasks hold less can only fail (after evicting and rolling back), so they are skipped.
        needed = self.needs(ssn.queues[job.queue], preemptor)
        need, room = (None, None) if needed is None else needed
        if room is not None:
            covering = self.bound.covering(preemptor, job.queue, room)
            if not (bound & covering).any():
                return self._miss(preemptor, f"queue {job.queue} must free {need} first, and no node holds that much")
            possible = possible & covering
        if self.normal_preempt(ssn, stmt, preemptor, keep, nodes, possible, room):
            return True
        return self._miss(preemptor, NO_ROOM)

    def _remembered_walk(
        self, ssn: Session, stmt: Statement, preemptor: TaskInfo, keep: TaskFilter, queue: str
    ) -> bool | None:
        """The normal path through the walk memo (actions/preempt_walk.py); None when the memo
        does not apply or finds no possible node: the plain path then finds none either, and
        says why."""
        if self.args.topology_aware or not WalkMemo.applies(ssn, preemptor):
            return None
        needed = self.needs(ssn.queues[queue], preemptor)
        room = None if needed is None else needed[1]
        walk = self.walks.order(preemptor, queue, room, ceiling=not isinstance(keep, SameJob))
        if walk is None:
            return None
        return self._walk(ssn, stmt, preemptor, keep, iter(walk), room, walk.uncovered) or self._miss(
            preemptor, NO_ROOM
        )

    def normal_preempt(
        self,
        ssn: Session,
        stmt: Statement,
        preemptor: TaskInfo,
        keep: TaskFilter,
        nodes: IntArray | None,
        possible: BoolArray,
        room: FloatArray | None,
    ) -> bool:
        """Best-scored node first: evict victims in victim order until the preemptor fits, then
        pipeline it there; a node where it never fits keeps all its victims.  Scores are taken
        over every candidate node (kube normalises them over the set), nodes the victim bound
        rules out are then skipped."""
        if nodes is None:
            walk = _by_local_score(ssn, preemptor, possible & self._resolvable(ssn, preemptor))
        else:
            walk = _by_score(ssn, preemptor, nodes, possible)
        return self._walk(ssn, stmt, preemptor, keep, walk, room)

    def _walk(
        self,
        ssn: Session,
        stmt: Statement,
        preemptor: TaskInfo,
        keep: TaskFilter,
        walk: Iterator[int],
        room: FloatArray | None,
        uncovered: Callable[[int], None] | None = None,
    ) -> bool:
        """Evict on the walked nodes until the preemptor fits; ``uncovered(i)`` hears of each
        node whose victims could not cover it (the walk memo's lazy ceiling)."""
        queue = ssn.queues[ssn.jobs[preemptor.job].queue]
        select = keep.select if isinstance(keep, OtherJobs) else None
        for i in walk:
            node = ssn.node_list[i]
            tasks = node.tasks.values()
            victims = self.victims(preemptor, select(tasks) if select is not None else [t for t in tasks if keep(t)])
            ssn.result.stats.preemption_victims = len(victims)  # Volcano: per node considered
            # victims_cover (ValidateVictims), as its scalar twin.
            if not fits_with_each(preemptor, ssn.nodes.future[i], victims, self.walks.requests):
                self.wasteful = True
                if uncovered is not None:
                    uncovered(i)
                continue
            if room is not None and not _frees(victims, self.walks.needed(room)):
                self.wasteful = True
                continue  # these victims cannot free what the queue needs
            ssn.result.stats.preemption_attempts += 1  # a node whose victims were tried
            node_stmt = ssn.statement()
            evicted = Resource()
            fits = self.fits(queue, preemptor, node)
            order = None if fits else self._victim_order(ssn, victims, preemptor)
            while not fits and order is not None:
                victim = next(order, None)
                if victim is None:
                    break
                node_stmt.evict(victim, "preempt")
                evicted.add(victim.resreq)
                fits = self.fits(queue, preemptor, node)
            if fits:
                # Volcano's evictionOccurred ignores pods, so BestEffort victims do not count.
                node_stmt.pipeline(preemptor, node.name, not evicted.is_empty())
                stmt.merge(node_stmt)
                return True
            self._discard(node_stmt)
            self.wasteful = True
        return False

    def _resolvable(self, ssn: Session, task: TaskInfo) -> BoolArray:
        """``preempt_nodes`` as a mask over all nodes, for a task whose predicates are local:
        neither found UnschedulableAndUnresolvable by allocate nor by PredicateFn now."""
        ok = ~self.verdicts.get(task)
        job = ssn.jobs.get(task.job)
        err = job.fit_errors.get(task.uid) if job is not None else None
        if err is not None and err.unresolvable:
            by_name = ssn.nodes.by_name
            ok[[by_name[n].index for n in err.unresolvable if n in by_name]] = False
        return ok

    def _victim_order(self, ssn: Session, victims: list[TaskInfo], preemptor: TaskInfo) -> Iterator[TaskInfo]:
        """Volcano's victim queue, popped.  Victims of one job come out in reverse task order,
        which no eviction moves (task order reads the tasks alone, framework/victims.py): then
        one sort by the task key, an exact twin of the order ending with the uid, stands in for
        the heap's comparisons.  Otherwise the heap, which sees job orders as they move."""
        first = victims[0].job if victims else ""
        if _one_job(victims, first):
            key = self._task_keys.get(first, _UNKNOWN)
            if key is _UNKNOWN:
                # Made over all the job's tasks: every creation stamp a victim may carry parses.
                owner = ssn.jobs.get(first)
                key = self._task_keys[first] = ssn.task_sort_key(list(owner.tasks.values())) if owner else None
            if key is not None:
                return iter(sorted(victims, key=kept_per_task(key, self._victim_keys), reverse=True))
        return _popped(victims_queue(ssn, victims, preemptor))


_UNKNOWN: Any = object()


def _one_job(victims: list[TaskInfo], job: str) -> bool:
    """Every victim of ``job``, each with a task index (a loop: a generator would be a frame
    of its own, on Python 3.11)."""
    for v in victims:  # noqa: SIM110 - see above
        if v.job != job or v.index is None:
            return False
    return True


def _popped(order: PriorityQueue[TaskInfo]) -> Iterator[TaskInfo]:
    while not order.empty():
        yield order.pop()


def _frees(victims: list[TaskInfo], needs: list[tuple[int, float]]) -> bool:
    """``covers(Σ victims, room)`` in Python floats, on the dimensions the queue needs
    (``WalkMemo.needed``: the same sums in the same order; a sum is never below a zero need)."""
    for c, need in needs:
        held = 0.0
        for v in victims:
            held += v.res_vec[c]
        if not held >= need:
            return False
    return True


class PreemptorFits:
    """Whether a preemptor fits a node: its future idle holds it, the queue may take it, and
    PredicateFn accepts it.  All three tests are pure (a conjunction), so the cheapest goes
    first: before the first eviction the node is full.  Callbacks are resolved once."""

    __slots__ = ("allocatable", "needs", "nodes", "passes")

    def __init__(self, ssn: Session) -> None:
        self.allocatable = ssn.caller(P.ALLOCATABLE)
        self.passes = NodePasses(ssn)
        self.nodes = ssn.nodes
        # Per preemptor, the columns ``fits_vector`` reads and its request on them as floats:
        # asked twice or more per preemptor, numpy's scalar reads were most of the check.
        self.needs: dict[str, list[tuple[int, float]]] = {}

    def __call__(self, queue: QueueInfo, preemptor: TaskInfo, node: NodeInfo) -> bool:
        need = self.needs.get(preemptor.uid)
        if need is None:
            init = preemptor.init_vec.tolist()
            need = self.needs[preemptor.uid] = [(c, init[c]) for c in preemptor.fit_cols.tolist()]
        have = self.nodes.future[node.index].tolist()
        # fits_vector, on the same float64 values (a Python float is one).
        for c, amount in need:
            if not amount < have[c] + EPSILON:
                return False
        if not self.allocatable(queue, preemptor):
            return False
        return self.passes(preemptor, node.index)


def _by_score(ssn: Session, task: TaskInfo, nodes: IntArray, possible: BoolArray) -> Iterator[int]:
    """Highest score first (Volcano's SortNodes), equal scores in node order; only possible nodes.

    Scores are taken over every node of ``nodes`` (normalised over the set), then only possible
    nodes are kept: a stable order keeps their relative order.  Most preemptors settle on the
    first node, so that one is found with an argmax (the first of the highest scores, which
    the stable sort would put first) and the rest are sorted only if it is needed."""
    keep = possible[nodes]
    if not keep.any():
        return
    if len(nodes) == 1:
        yield int(nodes[0])
        return
    scores = ssn.call(P.NODE_ORDER, task, nodes)[keep]
    nodes = nodes[keep]
    first = int(np.argmax(scores))
    yield int(nodes[first])
    for j in np.argsort(-scores, kind="stable").tolist():
        if j != first:
            yield int(nodes[j])


def _job_queue(
    ssn: Session, members: list[JobInfo], key: Callable[[JobInfo], tuple[object, ...]] | None
) -> PriorityQueue[JobInfo]:
    """A queue's starving jobs in job order.  Keys computed once per push hold only while no
    waiting job's tasks move: one without Running or Bound tasks loses none to eviction (preempt
    evicts only those) and gains only once it is popped, so then the keyed heap pops exactly
    what the comparator's would; otherwise the comparator sees each job as it is now."""
    if key is not None and all(job.count(*PREEMPTABLE_STATUSES) == 0 for job in members):
        return PriorityQueue(ssn.job_order, members, key=key)
    queue: PriorityQueue[JobInfo] = PriorityQueue(ssn.job_order)
    for job in members:  # pushed one by one, as before: the same heap if an order moves
        queue.push(job)
    return queue


def _task_queue(ssn: Session, tasks: list[TaskInfo]) -> PriorityQueue[TaskInfo]:
    # A pending task's order keys (priority, index, creation) do not move while it waits, so
    # the heap may compare them precomputed (framework/pq.py); jobs keep the comparator: a
    # waiting job's share and readiness move when preempt evicts its running tasks.
    return PriorityQueue(ssn.task_order, tasks, key=ssn.task_sort_key(tasks))


def _by_local_score(ssn: Session, task: TaskInfo, possible: BoolArray) -> Iterator[int]:
    """``_by_score`` when scores are local (``Session.scores_local``): a node scores the same
    over all nodes as over the candidates, so one argmax over all finds the best possible node
    (the first of equal scores, as the stable sort puts it), and the rest are sorted if needed."""
    first = int(possible.argmax())
    if not possible[first]:
        return
    if possible.sum() == 1:
        yield first
        return
    scores = ssn.call(P.NODE_ORDER, task, ssn.candidate_nodes())
    best = int(np.where(possible, scores, -np.inf).argmax())
    yield best
    nodes = np.flatnonzero(possible)
    for j in np.argsort(-scores[nodes], kind="stable").tolist():
        if int(nodes[j]) != best:
            yield int(nodes[j])


def _network_topology(job: JobInfo) -> bool:
    # Jobs with a network topology are not preempted for (volcano-sh/volcano#4374).
    return job.podgroup is not None and job.podgroup.spec.network_topology is not None


__all__ = ["PreemptAction", "PreemptorFits", "eligible", "pod_priority"]
