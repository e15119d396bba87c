"""capacity: queues with an explicit ``spec.deserved`` share, optionally as a tree.

A queue may allocate and admit jobs up to its real capability (for itself and, in a tree, every
ancestor); it may reclaim while below deserved on some dimension it asks for; its tasks can be
reclaimed while it is above deserved on a dimension they use, but never below its guarantee.
Queue order: ``spec.priority``, then the lower share (allocated / deserved), queues with a
deserved first on ties.  The accounting lives in ``capacity_queues``, the reclaim rules in
``capacity_victims``.

DRA quotas (``deviceclass/...`` names) and the queue-allocation-gate reservation cache (behind a
feature gate that is off by default) are not modelled.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import msgspec

from lahar.api.resource import Resource, resource_max
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.cyclestate import Allocations, CycleState, LazyCopy, copy_allocations
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.stats import QueueNumbers
from lahar_scheduler.framework.types import Vote
from lahar_scheduler.framework.victims import AllocatableWithBound, excess
from lahar_scheduler.framework.why import Why, capability_why, queue_state_why
from lahar_scheduler.plugins.base import Plugin
from lahar_scheduler.plugins.capacity_queues import (
    Attrs,
    CapacityAttr,
    HierarchyError,
    build_flat,
    build_tree,
    common_level,
    flat_attr,
)
from lahar_scheduler.plugins.capacity_victims import CapacityVictims
from lahar_scheduler.plugins.queueshare import deduct_gated, min_resources

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo

STATE_KEY = "capacity"


class CapacityArgs(msgspec.Struct, forbid_unknown_fields=True):
    ancestor_reclaim_level: int = msgspec.field(default=0, name="ancestorReclaimLevel")
    # Accepted for compatibility; DRA quotas are not modelled.
    dra: bool = msgspec.field(default=False, name="capacity.DynamicResourceAllocationEnable")
    dra_capacity: bool = msgspec.field(default=False, name="capacity.DRAConsumableCapacityEnable")


def compare_share(left: CapacityAttr, right: CapacityAttr) -> int:
    """Lower share first; on equal shares a queue with a deserved goes before a best-effort one."""
    if left.share != right.share:
        return -1 if left.share < right.share else 1
    lhas, rhas = not left.deserved.is_empty(), not right.deserved.is_empty()
    if lhas == rhas:
        return 0
    return -1 if lhas else 1


def fits_chain(attrs: Attrs, queue: str, task: TaskInfo, allocations: Allocations | None = None) -> bool:
    """allocated + request ≤ realCapability, on the request's dimensions, for the queue and
    every ancestor (leaf first); ``allocations`` overrides the queues' allocated (dry runs)."""
    attr = attrs.get(queue)
    if attr is None:
        return False
    for name in reversed([*attr.ancestors, queue]):
        a = attrs[name]
        used = allocations[name] if allocations is not None else a.allocated
        ok, _ = used.clone().add(task.resreq).less_equal_in(a.real_capability, task.resreq)
        if not ok:
            return False
    return True


class CapacityPlugin(Plugin):
    name = "capacity"
    Args = CapacityArgs

    def on_session_open(self, ssn: Session) -> None:
        args: CapacityArgs = self.args or CapacityArgs()
        opt = ssn.conf.plugin(self.name)
        self.ssn = ssn
        self.hierarchy = opt is not None and opt.flags.get("enableHierarchy", False)
        self.level = max(0, args.ancestor_reclaim_level)
        jobs = list(ssn.jobs.values())
        self.ready, self.reason = True, ""
        try:
            attrs = (build_tree if self.hierarchy else build_flat)(ssn.queues, jobs, ssn.total_resource)
        except HierarchyError as exc:
            # Volcano's readyToSchedule = false: the plugin refuses everything this session.
            self.ready, self.reason = False, str(exc)
            attrs = {}
        self.attrs = attrs
        victims = CapacityVictims(ssn, attrs, self.ready, self.hierarchy, self.level)
        ssn.add(P.QUEUE_ORDER, self.queue_order)
        if self.hierarchy:
            ssn.add(P.VICTIM_QUEUE_ORDER, self.victim_queue_order)
        ssn.add(P.RECLAIMABLE, victims.reclaimable)
        ssn.add(P.UNIFIED_EVICTABLE, victims.unified_evictable)
        ssn.add(P.PREEMPTIVE, victims.preemptive)
        ssn.add(P.ALLOCATABLE, AllocatableWithBound(self.allocatable, self.shortfall))
        ssn.add(P.JOB_ENQUEUEABLE, self.enqueueable)
        ssn.add(P.JOB_ENQUEUED, self.enqueued)
        ssn.add(P.CYCLE_STATE, self.cycle_state)
        ssn.add(P.SIMULATE_ADD_TASK, lambda state, _, task, node: self._simulate_move(state, task, +1))
        ssn.add(P.SIMULATE_REMOVE_TASK, lambda state, _, task, node: self._simulate_move(state, task, -1))
        ssn.add(P.SIMULATE_ALLOCATABLE, self.simulate_allocatable)
        ssn.add_event_handler(EventHandler(lambda t: self._account(t, +1), lambda t: self._account(t, -1)))

    def on_session_close(self, ssn: Session) -> None:
        """Every queue's numbers for Volcano's queue metrics.  Flat, a queue without jobs has no
        attributes: it is measured as Volcano does, its spec's deserved and nothing held."""
        total_guarantee = Resource()
        for q in ssn.queues.values():
            spec = q.queue.spec
            if spec.guarantee is not None and spec.guarantee.resource:
                total_guarantee.add(Resource.from_list(spec.guarantee.resource))
        for q in ssn.queues.values():
            attr = self.attrs.get(q.uid) or flat_attr(q, ssn.total_resource, total_guarantee)
            has_cap = self.hierarchy or bool(q.queue.spec.capability)
            ssn.result.stats.queues[q.name] = QueueNumbers(
                q.name,
                q.weight,
                attr.deserved.clone(),
                attr.allocated.clone(),
                attr.request.clone(),
                attr.inqueue.clone(),
                attr.real_capability.clone(),
                attr.capability.clone() if has_cap else None,
                attr.share,
                attr.share > 1,  # Volcano's capacity: overused once the share passes 1
            )

    # -- ordering -----------------------------------------------------------------------------
    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        if left.priority != right.priority:
            return right.priority - left.priority
        la, ra = self.attrs.get(left.uid), self.attrs.get(right.uid)
        if la is None or ra is None:
            return 0
        if not self.hierarchy:
            return compare_share(la, ra)
        if la.is_leaf() != ra.is_leaf():
            return -1 if la.is_leaf() else 1
        if not la.is_leaf():
            return compare_share(la, ra)
        # Two leaves: compare the subtrees where their paths part.
        level = common_level(la, ra)
        lp = la.ancestors[level + 1] if level + 1 < len(la.ancestors) else la.name
        rp = ra.ancestors[level + 1] if level + 1 < len(ra.ancestors) else ra.name
        return compare_share(self.attrs[lp], self.attrs[rp])

    def victim_queue_order(self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo) -> int:
        """Victims from queues closer to the preemptor's in the tree go first."""
        la, ra, pa = self.attrs.get(left.uid), self.attrs.get(right.uid), self.attrs.get(preemptor.uid)
        if la is None or ra is None or pa is None:
            return 0
        ll, rl = common_level(la, pa), common_level(ra, pa)
        if ll == rl:
            return 0
        return -1 if ll > rl else 1

    # -- allocation and admission ---------------------------------------------------------------
    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if not queue.is_open() or not self.ready:
            return False
        if self.hierarchy and not self.attrs[queue.uid].is_leaf():
            return False
        return fits_chain(self.attrs, queue.uid, task)

    def why_not_allocatable(self, queue: QueueInfo, task: TaskInfo) -> Why | None:
        """Why allocatable refused ``task``: the first queue on its chain (leaf first) whose real
        capability it would exceed, or a queue that may not allocate at all."""
        if not self.ready:
            return Why("allocate", self.name, f"queue hierarchy unusable: {self.reason}", "fix the queue tree")
        attr = self.attrs.get(queue.uid)
        if attr is None:
            return None
        if self.hierarchy and not attr.is_leaf():
            return Why("allocate", self.name, f"queue {queue.name} is not a leaf queue", "submit to a leaf queue")
        if not queue.is_open():
            return queue_state_why("allocate", self.name, queue.name, queue.state)
        for name in reversed([*attr.ancestors, queue.uid]):
            a = self.attrs[name]
            ok, names = a.allocated.clone().add(task.resreq).less_equal_in(a.real_capability, task.resreq)
            if not ok:
                return capability_why("allocate", self.name, a, task.resreq, a.allocated, names)
        return None

    def shortfall(self, queue: QueueInfo, task: TaskInfo) -> Resource:
        """How much the queue must free first: the largest excess of allocated + request over
        realCapability along the queue and its ancestors (evictions from a leaf shrink them
        all); unbounded when the queue may not allocate at all."""
        attr = self.attrs.get(queue.uid)
        if not queue.is_open() or not self.ready or attr is None or (self.hierarchy and not attr.is_leaf()):
            return Resource(math.inf, math.inf)
        need = Resource()
        for name in [*attr.ancestors, queue.uid]:
            a = self.attrs[name]
            need = resource_max(need, excess(a.allocated.clone().add(task.resreq), a.real_capability, task.resreq))
        return need

    def enqueueable(self, job: JobInfo) -> Vote:
        if not self.ready:
            job.job_fit_error = f"capacity: queue hierarchy unusable: {self.reason}"
            return Vote.REJECT
        attr = self.attrs[job.queue]
        if self.hierarchy and not attr.is_leaf():
            job.job_fit_error = f"queue {job.queue} is not a leaf queue"
            return Vote.REJECT
        queue = self.ssn.queues[job.queue]
        if not queue.is_open():
            job.job_fit_error = f"queue {queue.name} is {queue.state}"
            self.ssn.explain(job, queue_state_why("enqueue", self.name, queue.name, queue.state))
            return Vote.REJECT
        if job.min_resources is None:
            return Vote.PERMIT
        minimum = min_resources(job)
        for name in reversed([*attr.ancestors, job.queue]):
            a = self.attrs[name]
            used = a.allocated.clone().add(a.inqueue).sub(a.elastic)
            ok, short = used.clone().add(minimum).less_equal_in(a.real_capability, minimum)
            if not ok:
                job.job_fit_error = f"queue resource quota insufficient: insufficient {', '.join(short)}"
                self.ssn.explain(job, capability_why("enqueue", self.name, a, minimum, used, short))
                return Vote.REJECT
        return Vote.PERMIT

    def enqueued(self, job: JobInfo) -> None:
        attr = self.attrs.get(job.queue)
        if attr is None or job.min_resources is None:
            return
        reserved = deduct_gated(job, min_resources(job))
        attr.inqueue.add(reserved)
        if self.hierarchy:
            for name in attr.ancestors:
                self.attrs[name].inqueue.add(reserved)

    def _chain(self, task: TaskInfo) -> list[str] | None:
        """The queues a task's request counts in: its own and, in a tree, every ancestor."""
        job = self.ssn.jobs.get(task.job)
        attr = self.attrs.get(job.queue) if job is not None else None
        if attr is None:
            return None
        return [attr.name, *attr.ancestors] if self.hierarchy else [attr.name]

    def _account(self, task: TaskInfo, sign: int) -> None:
        chain = self._chain(task)
        if chain is None:
            return
        for name in chain:
            _shift(self.attrs[name].allocated, task.resreq, sign)
        # Only the leaf's share is refreshed, as in Volcano (ancestors' shares stay as opened).
        self.attrs[chain[0]].update_share()

    # -- simulation (topology-aware preemption) -------------------------------------------------
    def _allocations(self) -> Allocations:
        return {name: a.allocated for name, a in self.attrs.items()}

    def cycle_state(self, task: TaskInfo, state: CycleState) -> None:
        # Only the allocations change in a dry run; the rest of the accounting is read live.
        state.write(STATE_KEY, LazyCopy(self._allocations, copy_allocations))

    def _state(self, state: CycleState) -> Allocations | None:
        got = state.read(STATE_KEY)
        return got.get() if isinstance(got, LazyCopy) else None

    def _simulate_move(self, state: CycleState, task: TaskInfo, sign: int) -> str | None:
        allocations, chain = self._state(state), self._chain(task)
        if allocations is None or chain is None:
            return f"capacity: no queue state for task {task.key}"
        for name in chain:
            _shift(allocations[name], task.resreq, sign)
        return None

    def simulate_allocatable(self, state: CycleState, queue: QueueInfo, task: TaskInfo) -> bool:
        allocations = self._state(state)
        if allocations is None or not self.ready:
            return False
        if self.hierarchy and not self.attrs[queue.uid].is_leaf():
            return False
        return fits_chain(self.attrs, queue.uid, task, allocations)


def _shift(target: Resource, amount: Resource, sign: int) -> None:
    if sign > 0:
        target.add(amount)
    else:
        target.sub(amount)


__all__ = ["CapacityPlugin", "compare_share", "fits_chain"]
