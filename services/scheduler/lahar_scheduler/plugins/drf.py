"""drf: dominant-resource fairness between jobs, and between queues when ``enableHierarchy`` is on.

A job's share is the largest, over the cluster's resources, of what it holds divided by the
cluster total.  Smaller shares go first, and a preemptor may evict from a job whose share after
the eviction is still at least the preemptor's share after it is placed.

With ``enableHierarchy`` (HDRF, plugins/hdrf.py) queues are ordered by their place in the
``volcano.sh/hierarchy`` tree, and reclaim may take from a queue that would still be ahead of
the reclaimer's after the move.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import msgspec

from lahar.api.resource import Resource
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.ceiling import shape_wise
from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
from lahar_scheduler.framework.pq import ByKey
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.simhooks import pair_local
from lahar_scheduler.framework.sums import RunSums, add_equal_runs
from lahar_scheduler.framework.types import ALLOCATED_STATUSES, Vote
from lahar_scheduler.plugins.base import Plugin
from lahar_scheduler.plugins.hdrf import Attr, Node, Tree, dominant_share
from lahar_scheduler.plugins.queueshare import request_runs

SHARE_DELTA = 1e-6
# What a job holds, summed status by status in the set's own order (as it always was).
_HELD = tuple(ALLOCATED_STATUSES)


class DrfArgs(msgspec.Struct, forbid_unknown_fields=True):
    pass


class DrfPlugin(Plugin):
    name = "drf"
    Args = DrfArgs

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.total = ssn.total_resource
        self.names = self.total.names()
        self.attrs: dict[str, Attr] = {}
        self._floors: dict[bytes, float] = {}  # per task shape, for preempt_ceiling
        sums = ssn.open_sums or RunSums()
        shares: dict[int, float] = {}  # per shared sum (by id; sums keeps them alive)
        attrs = self.attrs
        for job in ssn.jobs.values():
            one = sums.held(job)
            if one is None:
                held = Resource()
                for status in _HELD:
                    for r, n in request_runs(job.tasks_in(status)):
                        held.add_times(r, n)  # as an add per task
                attrs[job.uid] = _JobAttr(held, self.dominant(held), self.dominant)
                continue
            share = shares.get(id(one))
            if share is None:
                share = shares[id(one)] = self.dominant(one)
            attrs[job.uid] = _JobAttr(one.clone(), share, self.dominant)
        opt = ssn.conf.plugin(self.name)
        self.tree: Tree | None = None
        if opt is not None and opt.flags.get("enableHierarchy", False):
            self.tree = self._build_tree()
            ssn.add(P.QUEUE_ORDER, self.queue_order)
            ssn.add(P.RECLAIMABLE, self.reclaimable)
        ssn.add(P.PREEMPTABLE, _Preemptable(self))
        # Smaller share first.  A job's share changes only when its own tasks move, so queues
        # may compare it precomputed (framework/pq.py).
        ssn.add(P.JOB_ORDER, ByKey(self.share_of))
        ssn.add_event_handler(EventHandler(self.on_allocate, self.on_deallocate))

    # -- the share of each job ----------------------------------------------------------------
    @property
    def shares(self) -> dict[str, float]:
        return {uid: attr.share for uid, attr in self.attrs.items()}

    def dominant(self, held: Resource) -> float:
        return dominant_share(held, self.total, self.names)

    def share_of(self, job: JobInfo) -> float:
        return self.attrs[job.uid].share

    @pair_local
    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        attrs = self.attrs
        ls, rs = attrs[left.uid].share, attrs[right.uid].share
        return 0 if ls == rs else (-1 if ls < rs else 1)

    def preemptable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        mine = self.attrs.get(preemptor.job)
        if mine is None:
            return [], Vote.PERMIT
        ls = self.dominant(mine.allocated.clone().add(preemptor.resreq))
        left: dict[str, Resource] = {}
        victims = []
        for t in preemptees:
            if t.job not in self.attrs:
                continue
            held = left.setdefault(t.job, self.attrs[t.job].allocated.clone())
            held.sub(t.resreq)
            rs = self.dominant(held)
            if ls < rs or abs(ls - rs) <= SHARE_DELTA:
                victims.append(t)
        return victims, Vote.PERMIT

    def _floor(self, preemptor: TaskInfo) -> float:
        # The floor reads the request and the cluster's total alone: once per task shape.
        floor = self._floors.get(preemptor.template_key)
        if floor is None:
            floor = self._floors[preemptor.template_key] = self.dominant(preemptor.resreq) - SHARE_DELTA
        return floor

    def preempt_ceiling_key(self, preemptor: TaskInfo) -> Hashable:
        """``preempt_ceiling``'s key alone."""
        return ("drf", self._floor(preemptor))

    def preempt_ceiling(self, preemptor: TaskInfo) -> tuple[Hashable, Callable[[TaskInfo], bool]]:
        """Could name: tasks whose job's share without them is at least the preemptor's request
        alone (its share once placed can only be larger); see framework/ceiling.py."""
        floor = self._floor(preemptor)
        attrs = self.attrs
        # One answer per job and request over the node dimensions (the only ones the share
        # reads); a test lives for one ceiling computation, during which no share changes.
        seen: dict[tuple[str, bytes], bool] = {}

        def could_name(t: TaskInfo) -> bool:
            key = (t.job, t.res_vec.tobytes())
            got = seen.get(key)
            if got is None:
                attr = attrs.get(t.job)
                got = attr is not None and self.dominant(attr.allocated.clone().sub(t.resreq)) >= floor
                seen[key] = got
            return got

        return ("drf", floor), shape_wise(could_name)

    def on_allocate(self, task: TaskInfo) -> None:
        attr = self.attrs.get(task.job)
        if attr is not None:
            attr.allocated.add(task.resreq)
            self._moved(task, attr, +1)

    def on_deallocate(self, task: TaskInfo) -> None:
        attr = self.attrs.get(task.job)
        if attr is not None:
            attr.allocated.sub(task.resreq)
            self._moved(task, attr, -1)

    def _moved(self, task: TaskInfo, attr: Attr, sign: int) -> None:
        tree = self.tree
        if tree is None and isinstance(attr, _JobAttr):
            attr.stale()
            return
        attr.share = self.dominant(attr.allocated)
        if tree is not None:
            (tree.allocated.add if sign > 0 else tree.allocated.sub)(task.resreq)
            tree.refresh(self._place(tree, self.ssn.jobs[task.job], attr))

    # -- the hierarchy ------------------------------------------------------------------------
    def _build_tree(self) -> Tree:
        tree = Tree(self.total)
        for job in self.ssn.jobs.values():
            attr = self.attrs[job.uid]
            tree.allocated.add(attr.allocated)
            self._place(tree, job, attr)
        tree.refresh()
        return tree

    def _place(self, tree: Tree, job: JobInfo, attr: Attr) -> Node:
        queue = self.ssn.queues[job.queue]
        return tree.place(job.uid, attr, job.total_request, queue.hierarchy, queue.hierarchy_weights)

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        assert self.tree is not None
        ret = self.tree.compare(left.hierarchy, right.hierarchy)
        return 0 if ret == 0 else (-1 if ret < 0 else 1)

    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        """Victims whose queue would still come after the reclaimer's once the reclaimer holds
        its task and the victim has lost its own, each victim weighed on its own."""
        assert self.tree is not None
        ljob = self.ssn.jobs.get(reclaimer.job)
        if ljob is None or reclaimer.job not in self.attrs:
            return [], Vote.PERMIT
        lqueue = self.ssn.queues[ljob.queue]
        tree = self.tree.clone()
        mine = self.attrs[ljob.uid].clone()
        mine.allocated.add(reclaimer.resreq)
        mine.share = self.dominant(mine.allocated)
        tree.allocated.add(reclaimer.resreq)
        tree.refresh(self._place(tree, ljob, mine))
        victims = []
        for t in reclaimees:
            rjob = self.ssn.jobs.get(t.job)
            if rjob is None or t.job not in self.attrs:
                continue
            rqueue = self.ssn.queues[rjob.queue]
            theirs = self.attrs[rjob.uid].clone()
            self._shift(tree, rjob, theirs, t.resreq, -1)
            ret = tree.compare(lqueue.hierarchy, rqueue.hierarchy)
            self._shift(tree, rjob, theirs, t.resreq, +1)
            if ret < 0:
                victims.append(t)
        return victims, Vote.PERMIT

    def _shift(self, tree: Tree, job: JobInfo, attr: Attr, resreq: Resource, sign: int) -> None:
        (attr.allocated.add if sign > 0 else attr.allocated.sub)(resreq)
        (tree.allocated.add if sign > 0 else tree.allocated.sub)(resreq)
        attr.share = self.dominant(attr.allocated)
        tree.refresh(self._place(tree, job, attr))

    # -- metrics ------------------------------------------------------------------------------
    def on_session_close(self, ssn: Session) -> None:
        """Each job's share (Volcano's job_share) and each namespace's: the dominant share of
        what its jobs hold together (namespace_share)."""
        by_namespace: dict[str, list[Resource]] = {}
        stats = ssn.result.stats
        numbers_of, jobs = stats.jobs, ssn.jobs
        shares: dict[tuple[object, ...], float] = {}  # stale shares by what their jobs hold
        for uid, attr in self.attrs.items():
            job = jobs[uid]
            numbers = numbers_of.get(uid)
            if numbers is None:
                numbers = stats.job(uid, job.name, job.namespace, job.queue)
            numbers.share = _fresh_share(attr, shares)
            held = by_namespace.get(job.namespace)
            if held is None:
                held = by_namespace[job.namespace] = []
            held.append(attr.allocated)
        for namespace, allocations in by_namespace.items():
            total = Resource()
            add_equal_runs(total, allocations)
            stats.namespace_shares[namespace] = self.dominant(total)


def _fresh_share(attr: Attr, shares: dict[tuple[object, ...], float]) -> float:
    """``attr.share``; a share gone stale (its job's tasks moved) taken from ``shares`` when a
    job holding the same amounts computed it (the dominant share reads the amounts alone, and
    compares them as numbers: -0.0 is 0.0 to it)."""
    if not isinstance(attr, _JobAttr) or not attr.is_stale():
        return attr.share
    held = attr.allocated
    key = (held.milli_cpu, held.memory, *held.scalars.items())
    share = shares.get(key)
    if share is None:
        share = shares[key] = attr.share
    else:
        attr.share = share
    return share


class _JobAttr(Attr):
    """A job's Attr whose share, once its allocation moved, is computed when next read: a
    session's allocate and evict events move it thousands of times, and the job order and
    the victim tests read it far less.  The same function of the same allocation (every move
    of it marks the share stale), so the same float as computing it at each move."""

    def __init__(self, allocated: Resource, share: float, dominant: Callable[[Resource], float]) -> None:
        # What Attr's __init__ sets (allocated, and the share through its setter), set directly:
        # a session opens with one per job.
        self.allocated = allocated
        self._share: float | None = share
        self._dominant = dominant

    @property
    def share(self) -> float:
        if self._share is None:
            self._share = self._dominant(self.allocated)
        return self._share

    @share.setter
    def share(self, value: float) -> None:
        self._share = value

    def stale(self) -> None:
        self._share = None

    def is_stale(self) -> bool:
        return self._share is None


class _Preemptable:
    """drf's PreemptableFn with its victim ceiling.  A callable of its own, not a bound method:
    the ceiling is looked up on a bound method's owner, and the plugin's other victim callback
    (HDRF reclaim) has different rules, so the plugin itself must not carry one."""

    def __init__(self, plugin: DrfPlugin) -> None:
        self.plugin = plugin

    def __call__(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        return self.plugin.preemptable(preemptor, preemptees)

    def victim_ceiling(self, preemptor: TaskInfo) -> tuple[Hashable, Callable[[TaskInfo], bool]]:
        return self.plugin.preempt_ceiling(preemptor)

    def victim_ceiling_key(self, preemptor: TaskInfo) -> Hashable:
        return self.plugin.preempt_ceiling_key(preemptor)

    def victims_key(self, preemptor: TaskInfo) -> Hashable:
        """The answer depends on the preemptor's share once placed (and the candidates' jobs)."""
        mine = self.plugin.attrs.get(preemptor.job)
        if mine is None:
            return ("drf", None)
        return ("drf", self.plugin.dominant(mine.allocated.clone().add(preemptor.resreq)))
