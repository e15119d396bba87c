"""proportion: weighted fair share between queues.

Each queue's *deserved* resources come from weighted water-filling over the cluster, capped by
its real capability and its request and floored by its guarantee.  Queues under their share go
first; a queue at or over it in every dimension is overused; a queue may only take resources up
to its deserved share (allocatable) and admit jobs whose minResources fit its real capability.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import msgspec

from lahar.api.resource import Dim, Resource, exceeded_part, resource_max, same
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.stats import QueueNumbers
from lahar_scheduler.framework.sums import NOTHING, AddRuns, RunSums
from lahar_scheduler.framework.types import TaskStatus, Vote
from lahar_scheduler.framework.why import Pool, Why, amount, capability_why, queue_state_why, quota_why, shortages
from lahar_scheduler.plugins.base import Plugin
from lahar_scheduler.plugins.proportion_sim import allocatable_callback, register_simulation
from lahar_scheduler.plugins.queueshare import (
    deduct_gated,
    dominant_share,
    elastic_resources,
    job_inqueue,
    job_usage,
    min_resources,
)

S = TaskStatus
# job_usage's pending statuses (its held ones: sums.HELD, summed bucket by bucket).
_PENDING = (S.PENDING,)
_PENDING_STATUS = S.PENDING  # read per job (an enum class's member lookup is slow on 3.11)


class ProportionArgs(msgspec.Struct, forbid_unknown_fields=True):
    pass


@dataclass
class QueueAttr:
    name: str
    weight: int
    guarantee: Resource
    real_capability: Resource
    capability: Resource | None
    deserved: Resource = field(default_factory=Resource)
    allocated: Resource = field(default_factory=Resource)
    request: Resource = field(default_factory=Resource)
    inqueue: Resource = field(default_factory=Resource)
    elastic: Resource = field(default_factory=Resource)
    pool: Pool | None = None  # what real_capability is carved from (for explanations)
    # The dominant share as of the last ``update_share``, None until it is read: allocate and
    # evict events move ``allocated`` thousands of times a session and the share is read far
    # less.  Computed from the same two values the eager update read (every change of them is
    # followed by ``update_share``), so it is the same float.
    _share: float | None = field(default=0.0, repr=False)

    @property
    def share(self) -> float:
        if self._share is None:
            self._share = dominant_share(self.allocated, self.deserved)
        return self._share

    def update_share(self) -> None:
        self._share = None


def _real_capability(total: Resource, total_guarantee: Resource, queue: QueueInfo) -> tuple[Resource, Resource | None]:
    guarantee = queue.guarantee.clone() if queue.guarantee is not None else Resource()
    real = exceeded_part(total, total_guarantee).add(guarantee)
    capability = None
    if queue.capability is not None:
        capability = queue.capability.clone()
        if capability.milli_cpu <= 0:
            capability.milli_cpu = math.inf
        if capability.memory <= 0:
            capability.memory = math.inf
        real.min_dimension(capability, Dim.INFINITY)
    return real, capability


def water_fill(attrs: dict[str, QueueAttr], total: Resource) -> None:
    """Weighted water-filling of ``total`` into each queue's ``deserved``."""
    remaining = total.clone()
    met: set[str] = set()
    while True:
        weight = sum(a.weight for a in attrs.values() if a.name not in met)
        if weight == 0:
            break
        old_remaining = remaining.clone()
        increased, decreased = Resource(), Resource()
        for a in attrs.values():
            if a.name in met:
                continue
            old = a.deserved.clone()
            a.deserved.add(remaining.clone().multi(a.weight / weight))
            a.deserved.min_dimension(a.real_capability, Dim.INFINITY)
            a.deserved.min_dimension(a.request, Dim.ZERO)
            a.deserved = resource_max(a.deserved, a.guarantee)
            a.update_share()
            if a.request.less_equal(a.deserved, Dim.ZERO) or same(a.deserved, old):
                met.add(a.name)
            inc, dec = a.deserved.diff(old, Dim.ZERO)
            increased.add(inc)
            decreased.add(dec)
        remaining = exceeded_part(remaining.clone().add(decreased), increased)
        if remaining.is_empty() or same(remaining, old_remaining):
            break


def _usage(sums: RunSums, job: JobInfo) -> tuple[Resource, Resource]:
    """``job_usage(job)``, from ``sums`` when the job's held or pending tasks are one run of one
    request (so the sums are one ``add_times`` each); the pair is then shared, to be read only."""
    idx = job.status_index
    held = sums.held(job)
    if held is not None:
        pending = idx.get(_PENDING_STATUS)
        if not pending:
            return held, held  # request = held + nothing pending: the same add_times
        if held is NOTHING:
            asked = sums.one_run(idx, _PENDING)
            if asked is not None:
                return NOTHING, asked
    return job_usage(job)


def _add_positive(total: Resource, r: Resource) -> None:
    """``total.add(exceeded_part(r, Resource()))``: each amount of ``r`` above zero, every other
    one as 0.0 (cpu and memory) or left out (scalars), as ``Resource.diff`` makes them."""
    total.milli_cpu += r.milli_cpu if r.milli_cpu > 0.0 else 0.0
    total.memory += r.memory if r.memory > 0.0 else 0.0
    scalars = total.scalars
    for name, held in r.scalars.items():
        if held > 0.0:
            scalars[name] = scalars.get(name, 0.0) + held


class ProportionPlugin(Plugin):
    name = "proportion"
    Args = ProportionArgs

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.total = ssn.total_resource
        self.total_guarantee = Resource()
        for q in ssn.queues.values():
            if q.guarantee is not None:
                self.total_guarantee.add(q.guarantee)
        self.attrs = self._queue_attrs(ssn)
        # why_not_allocatable's answers by queue, request and the queue's numbers.
        self._refusals: dict[tuple[object, ...], tuple[Why, str] | Literal[False]] = {}
        water_fill(self.attrs, self.total)
        ssn.add(P.QUEUE_ORDER, self.queue_order)
        ssn.add(P.RECLAIMABLE, self.reclaimable)
        ssn.add(P.OVERUSED, self.overused)
        ssn.add(P.ALLOCATABLE, allocatable_callback(self.attrs, self.task_allocatable))
        ssn.add(P.PREEMPTIVE, self.queue_allocatable)
        ssn.add(P.JOB_ENQUEUEABLE, self.enqueueable)
        ssn.add(P.JOB_ENQUEUED, self.enqueued)
        ssn.add_event_handler(EventHandler(self.on_allocate, self.on_deallocate))
        register_simulation(ssn, self.attrs)

    def _queue_attrs(self, ssn: Session) -> dict[str, QueueAttr]:
        """Each queue with jobs: what it holds, asks and has admitted."""
        attrs: dict[str, QueueAttr] = {}
        sums = ssn.open_sums or RunSums()
        # Per queue, its held and asked sums (flushed below, before anything reads them).
        adds: dict[str, tuple[AddRuns, AddRuns]] = {}
        for job in ssn.jobs.values():
            attr = attrs.get(job.queue)
            if attr is None:
                attr = attrs[job.queue] = self._new_attr(ssn.queues[job.queue])
                attr.pool = Pool("the cluster", self.total, self.total_guarantee)
                adds[job.queue] = (AddRuns(attr.allocated), AddRuns(attr.request))
            allocated, request = _usage(sums, job)
            held, asked = adds[job.queue]
            held.add(allocated)
            asked.add(request)
            if job.min_resources is None:
                _add_positive(attr.elastic, job.allocated)  # elastic_resources without a minimum
                continue  # job_inqueue is None without a minimum
            inqueue = job_inqueue(job)
            if inqueue is not None:
                attr.inqueue.add(inqueue)
            attr.elastic.add(elastic_resources(job))
        for held, asked in adds.values():
            held.flush()
            asked.flush()
        return attrs

    def _new_attr(self, q: QueueInfo) -> QueueAttr:
        real, cap = _real_capability(self.total, self.total_guarantee, q)
        guarantee = q.guarantee.clone() if q.guarantee is not None else Resource()
        return QueueAttr(q.name, q.weight, guarantee, real, cap)

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        if left.priority != right.priority:
            return right.priority - left.priority
        ls, rs = self.attrs[left.uid].share, self.attrs[right.uid].share
        return 0 if ls == rs else (-1 if ls < rs else 1)

    def reclaimable(self, _: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        left: dict[str, Resource] = {}
        victims = []
        for t in reclaimees:
            job = self.ssn.jobs.get(t.job)
            if job is None or job.queue not in self.attrs:
                continue
            attr = self.attrs[job.queue]
            allocated = left.setdefault(job.queue, attr.allocated.clone())
            if not allocated.less_equal(attr.deserved, Dim.ZERO):
                allocated.sub(t.resreq)
                victims.append(t)
        return victims, Vote.PERMIT

    def overused(self, queue: QueueInfo) -> bool:
        attr = self.attrs[queue.uid]
        return attr.deserved.less_equal(attr.allocated, Dim.ZERO)

    def queue_allocatable(self, queue: QueueInfo, tasks: list[TaskInfo]) -> bool:
        if not queue.is_open():
            return False
        attr = self.attrs[queue.uid]
        req = Resource()
        for t in tasks:
            req.add(t.resreq)
        ok, _ = attr.allocated.clone().add(req).less_equal_in(attr.deserved, req)
        return ok

    def task_allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """``queue_allocatable`` for one task (allocate asks per task): its request as is, which
        is what summing it into an empty request gives."""
        if not queue.is_open():
            return False
        attr = self.attrs[queue.uid]
        return attr.allocated.fits_after(task.resreq, attr.deserved)

    def enqueueable(self, job: JobInfo) -> Vote:
        queue = self.ssn.queues[job.queue]
        if not queue.is_open():
            job.job_fit_error = f"queue {queue.name} is {queue.state}"
            self.ssn.explain(job, queue_state_why("enqueue", self.name, queue.name, queue.state))
            return Vote.REJECT
        if job.min_resources is None:
            return Vote.PERMIT
        attr = self.attrs[job.queue]
        minimum = min_resources(job)
        used = attr.allocated.clone().add(attr.inqueue).sub(attr.elastic)
        ok, short = used.clone().add(minimum).less_equal_in(attr.real_capability, minimum)
        if ok:
            return Vote.PERMIT
        job.job_fit_error = f"queue resource quota insufficient: insufficient {', '.join(short)}"
        self.ssn.explain(job, capability_why("enqueue", self.name, attr, minimum, used, short))
        return Vote.REJECT

    def enqueued(self, job: JobInfo) -> None:
        if job.min_resources is None or job.queue not in self.attrs:
            return
        self.attrs[job.queue].inqueue.add(deduct_gated(job, min_resources(job)))

    def on_allocate(self, task: TaskInfo) -> None:
        job = self.ssn.jobs.get(task.job)
        if job is not None and job.queue in self.attrs:
            attr = self.attrs[job.queue]
            attr.allocated.add(task.resreq)
            attr.update_share()

    def on_deallocate(self, task: TaskInfo) -> None:
        job = self.ssn.jobs.get(task.job)
        if job is not None and job.queue in self.attrs:
            attr = self.attrs[job.queue]
            attr.allocated.sub(task.resreq)
            attr.update_share()

    def on_session_close(self, ssn: Session) -> None:
        """Every queue's numbers for Volcano's queue metrics; a queue without jobs holds and asks
        nothing (Volcano sets its allocated, request and inqueue to zero)."""
        for q in ssn.queues.values():
            attr = self.attrs.get(q.uid)
            if attr is None:
                attr = self._new_attr(q)
                overused = False  # Volcano asks overused only of queues with jobs
            else:
                overused = attr.deserved.less_equal(attr.allocated, Dim.ZERO)
            ssn.result.stats.queues[q.name] = QueueNumbers(
                q.name,
                attr.weight,
                attr.deserved.clone(),
                attr.allocated.clone(),
                attr.request.clone(),
                attr.inqueue.clone(),
                attr.real_capability.clone(),
                q.capability.clone() if q.capability is not None else None,
                attr.share,
                overused,
            )

    def why_overused(self, queue: QueueInfo) -> Why | None:
        """The queue already holds its deserved share in every dimension it has one."""
        attr = self.attrs.get(queue.uid)
        if attr is None or not attr.deserved.less_equal(attr.allocated, Dim.ZERO):
            return None
        names = [n for n in attr.deserved.names() if attr.deserved.get(n) > 0]
        held = ", ".join(
            f"{n} {amount(n, attr.allocated.get(n))} of deserved {amount(n, attr.deserved.get(n))}" for n in names
        )
        return Why(
            "allocate",
            self.name,
            f"queue {queue.name} holds its deserved share ({held}): allocate skips the queue this session",
            "wait until its running jobs finish, raise its weight or guarantee, or add nodes",
        )

    def why_not_allocatable(self, queue: QueueInfo, task: TaskInfo) -> Why | None:
        """Why allocatable refused ``task``: a closed queue, or its deserved share is used up."""
        if not queue.is_open():
            return queue_state_why("allocate", self.name, queue.name, queue.state)
        attr = self.attrs.get(queue.uid)
        if attr is None:
            return None
        # A full cluster refuses every pending job alike: the text is made once per refusal.
        # What else it reads, deserved and real capability, is fixed once the session opened.
        key = (queue.uid, _amounts(task.resreq), _amounts(attr.allocated))
        refusals = self._refusals
        got = refusals.get(key)
        if got is None:
            got = refusals[key] = self._refusal(queue, attr, task.resreq)
        if got is False:
            return None
        why, asks = got
        return Why(why.action, why.plugin, why.summary, why.remedy, [*why.details, f"task {task.name} asks {asks}"])

    def _refusal(self, queue: QueueInfo, attr: QueueAttr, resreq: Resource) -> tuple[Why, str] | Literal[False]:
        """Why ``queue`` refuses a request of ``resreq`` (False: it does not), and the
        request as the explanation prints it."""
        ok, names = attr.allocated.clone().add(resreq).less_equal_in(attr.deserved, resreq)
        if ok:
            return False
        short = shortages(resreq, attr.allocated, attr.deserved, names)
        never = [s for s in short if s.requested > attr.real_capability.get(s.name)]
        if never:
            caps = ", ".join(f"{amount(s.name, attr.real_capability.get(s.name))} {s.name}" for s in never)
            remedy = f"it can never fit: the queue may hold at most {caps}; add nodes or request less"
        else:
            remedy = "raise its weight or guarantee (deserved is its weighted share of the cluster), add nodes"
        why = quota_why("allocate", self.name, queue.name, short, "deserved", remedy, freeable=not never)
        return why, str(resreq)


def _amounts(r: Resource) -> tuple[object, ...]:
    """A key for what ``r`` holds, equal only where its amounts compare and print alike (the
    sign of a zero is part of it: -0.0 == 0.0, but one prints as "-0")."""
    cpu, memory, scalars = r.milli_cpu, r.memory, r.scalars
    key = (cpu, memory, *scalars.items())
    if cpu and memory and all(scalars.values()):
        return key
    return (key, tuple(math.copysign(1.0, v) for v in (cpu, memory, *scalars.values())))
