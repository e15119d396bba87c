"""capacity's reclaim rules: which queues may reclaim, and which running tasks they may take.

Preemptive (may this queue reclaim?): the queue is Open, allocated + requests stay within its
realCapability on the requested dimensions, and on at least one requested dimension (ignoring
dimensions zero on both sides) allocated + requests ≤ deserved — or, with
``ancestorReclaimLevel`` L > 0, that holds for one of its non-root ancestors up to L levels up.

Reclaimable (victims, walked in victim order, each queue's allocation reduced as victims are
taken): skip a reclaimee sharing no requested dimension with the reclaimer, or whose removal
would drop its queue below guarantee; take it if its request touches no dimension its queue's
deserved defines ("immediate victim"), or if its queue's allocated exceeds deserved on a
dimension the reclaimee uses and deserved defines.  With L > 0 in a tree, every reclaimee
ancestor up to L levels that the reclaimer does not share (root excepted) must also be over its
deserved that way, and an immediate victim under an ancestor shared with the reclaimer is spared
when the reclaimer's own leaf has no relevant deserved either (no real contention).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lahar.api.resource import Dim, Resource, intersection
from lahar_scheduler.framework.eviction import EvictionContext, EvictionKind
from lahar_scheduler.framework.types import Vote
from lahar_scheduler.framework.victims import in_victim_order
from lahar_scheduler.plugins.capacity_queues import ROOT, Attrs, CapacityAttr, ancestor_at, ancestors_within

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import QueueInfo, TaskInfo
    from lahar_scheduler.framework.session import Session


def relevant_deserved(task: TaskInfo, deserved: Resource) -> bool:
    """Whether the task requests any dimension the deserved share names (pods included)."""
    return bool(intersection(task.resreq, deserved, ignore_pods=False))


def over_deserved(allocated: Resource, deserved: Resource, task: TaskInfo) -> bool:
    """allocated > deserved on a dimension the task uses and deserved defines."""
    over, _ = allocated.greater_partly_in_relevant(deserved, task.resreq)
    return over


class CapacityVictims:
    def __init__(self, ssn: Session, attrs: Attrs, ready: bool, hierarchy: bool, level: int) -> None:
        self.ssn = ssn
        self.attrs = attrs
        self.ready = ready
        self.level = level if hierarchy else 0

    # -- may a queue reclaim ------------------------------------------------------------------
    def preemptive(self, queue: QueueInfo, tasks: list[TaskInfo]) -> bool:
        if not self.ready or not queue.is_open():
            return False
        attr = self.attrs.get(queue.uid)
        if attr is None:
            return False
        want = Resource()
        for t in tasks:
            want.add(t.resreq)
        future = attr.allocated.clone().add(want)
        within, _ = future.less_equal_in(attr.real_capability, want)
        if not within:
            return False
        if future.less_equal_partly_in_nonzero(attr.deserved, want)[0]:
            return True
        for depth in range(1, self.level + 1):
            name = ancestor_at(attr, depth)
            up = self.attrs.get(name) if name is not None and name != ROOT else None
            if up is not None and up.allocated.clone().add(want).less_equal_partly_in_nonzero(up.deserved, want)[0]:
                return True
        return False

    # -- which tasks ----------------------------------------------------------------------------
    def reclaimable(self, reclaimer: TaskInfo, reclaimees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        if not self.ready:
            return [], Vote.REJECT
        job = self.ssn.jobs.get(reclaimer.job)
        mine = self.attrs.get(job.queue) if job is not None else None
        if mine is None:
            return [], Vote.REJECT
        allocations: dict[str, Resource] = {}
        victims = []
        for reclaimee in in_victim_order(self.ssn, reclaimees, reclaimer):
            if self._take(reclaimer, mine, reclaimee, allocations):
                victims.append(reclaimee)
        return victims, Vote.PERMIT

    def unified_evictable(self, ctx: EvictionContext, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        """Gang-aware eviction: preempt stays inside a queue, so capacity lets every candidate go;
        reclaim takes, in the order given, candidates whose queue stays at or above its guarantee
        and that either touch nothing its deserved names or find it over deserved where they do
        (Volcano skips the no-shared-dimension test here: a gang rarely shares none)."""
        if ctx.kind is EvictionKind.GANG_PREEMPT:
            return candidates, Vote.PERMIT
        if not self.ready:
            return [], Vote.REJECT
        allocations: dict[str, Resource] = {}
        victims = []
        for t in candidates:
            job = self.ssn.jobs.get(t.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if attr is None:
                continue
            allocated = allocations.setdefault(attr.name, attr.allocated.clone())
            if not attr.guarantee.less_equal(allocated.clone().sub(t.resreq), Dim.ZERO):
                continue
            if not relevant_deserved(t, attr.deserved) or over_deserved(allocated, attr.deserved, t):
                allocated.sub(t.resreq)
                victims.append(t)
        return victims, Vote.PERMIT

    def _take(
        self, reclaimer: TaskInfo, mine: CapacityAttr, reclaimee: TaskInfo, allocations: dict[str, Resource]
    ) -> bool:
        """Decide one reclaimee; when taken, its request leaves the running allocations."""
        job = self.ssn.jobs.get(reclaimee.job)
        attr = self.attrs.get(job.queue) if job is not None else None
        if attr is None or not intersection(reclaimee.resreq, reclaimer.init_resreq):
            return False
        allocated = allocations.setdefault(attr.name, attr.allocated.clone())
        if not attr.guarantee.less_equal(allocated.clone().sub(reclaimee.resreq), Dim.ZERO):
            return False
        if not relevant_deserved(reclaimee, attr.deserved):
            if self._no_contention(reclaimer, mine, attr):
                return False
        elif not over_deserved(allocated, attr.deserved, reclaimee):
            return False
        ancestors = self._ancestor_allocations(mine, attr, reclaimee, allocations)
        if ancestors is None:
            return False
        for a in (allocated, *ancestors):
            a.sub(reclaimee.resreq)
        return True

    def _no_contention(self, reclaimer: TaskInfo, mine: CapacityAttr, theirs: CapacityAttr) -> bool:
        """Both leaves under a shared ancestor (within the level) without relevant deserved."""
        if self.level <= 0:
            return False
        shared = set(ancestors_within(mine, self.level).values()) & set(ancestors_within(theirs, self.level).values())
        return bool(shared - {ROOT}) and not relevant_deserved(reclaimer, mine.deserved)

    def _ancestor_allocations(
        self, mine: CapacityAttr, theirs: CapacityAttr, reclaimee: TaskInfo, allocations: dict[str, Resource]
    ) -> list[Resource] | None:
        """The reclaimee's ancestors' running allocations that must shrink with it, or None
        when one of them (not shared with the reclaimer, not root) is not over its deserved."""
        out: dict[str, Resource] = {}
        for depth in range(1, self.level + 1):
            name = ancestor_at(theirs, depth)
            if name is None or name == ROOT or ancestor_at(mine, depth) == name:
                continue
            up = self.attrs.get(name)
            if up is None:
                return None
            allocated = out[name] = allocations.setdefault(name, up.allocated.clone())
            if relevant_deserved(reclaimee, up.deserved) and not over_deserved(allocated, up.deserved, reclaimee):
                return None
        return list(out.values())
