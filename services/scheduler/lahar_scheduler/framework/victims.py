"""Victims: the order in which they are evicted (Volcano's BuildVictimsPriorityQueue), and how
much a queue must free by evictions before a task becomes allocatable.

The least important victim comes first: within a job, reverse task order; across queues, the
plugins' victim queue order (reverse queue order by default); otherwise reverse job order, ties
broken by reverse task order.  Tasks whose job left the session go first, their PodGroup is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Generic, TypeVar

from lahar.api.resource import IGNORED_SCALARS, Resource, resource_max
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.pq import PriorityQueue

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import QueueInfo, TaskInfo
    from lahar_scheduler.framework.session import Session

T = TypeVar("T")


def victim_less(ssn: Session, preemptor: TaskInfo) -> Callable[[TaskInfo, TaskInfo], bool]:
    """``less(l, r)``: l is evicted before r."""
    preemptor_job = ssn.jobs.get(preemptor.job)

    def less(left: TaskInfo, right: TaskInfo) -> bool:
        if left.job == right.job:
            return not ssn.task_order(left, right)
        lj, rj = ssn.jobs.get(left.job), ssn.jobs.get(right.job)
        if lj is None or rj is None:
            return not ssn.task_order(left, right) if lj is None and rj is None else lj is None
        if preemptor_job is not None and lj.queue != rj.queue:
            queues = ssn.queues
            return ssn.victim_queue_order(queues[lj.queue], queues[rj.queue], queues[preemptor_job.queue])
        cmp = ssn.call(P.JOB_ORDER, lj, rj)
        if cmp:
            return cmp > 0
        return not ssn.task_order(left, right)

    return less


def victims_queue(ssn: Session, victims: Iterable[TaskInfo], preemptor: TaskInfo) -> PriorityQueue[TaskInfo]:
    return PriorityQueue(victim_less(ssn, preemptor), victims)


def kept_per_task(
    key: Callable[[TaskInfo], tuple[object, ...]], kept: dict[str, tuple[object, ...]]
) -> Callable[[TaskInfo], tuple[object, ...]]:
    """``key`` (``Session.task_sort_key``'s) with each task's value kept in ``kept``: a task's
    order key reads its priority, index, creation and uid, none of which moves in a session,
    and a node's remaining victims are sorted again for every preemptor that lands there."""

    def get(task: TaskInfo) -> tuple[object, ...]:
        got = kept.get(task.uid)
        if got is None:
            got = kept[task.uid] = key(task)
        return got

    return get


def in_victim_order(ssn: Session, victims: Iterable[TaskInfo], preemptor: TaskInfo) -> list[TaskInfo]:
    """Every victim, popped in eviction order."""
    queue = victims_queue(ssn, victims, preemptor)
    out = []
    while not queue.empty():
        out.append(queue.pop())
    return out


# -- what evictions could do for a queue --------------------------------------------------------
class AllocatableWithBound:
    """An allocatable callback that also says how much its queue must free before a task fits.

    ``shortfall(queue, task)`` is, per dimension the task requests, how much of the queue's own
    allocation has to be released (evicted) before the callback could accept the task; zero
    where nothing is needed, infinite when no eviction can help (a closed queue).  Freeing less
    than that on some dimension keeps the answer False.  Normal preemption uses it to skip,
    without evicting and rolling back, every node whose victims hold less than the shortfall.
    """

    __slots__ = ("check", "shortfall", "shortfall_key")

    def __init__(
        self,
        check: Callable[[QueueInfo, TaskInfo], bool],
        shortfall: Callable[[QueueInfo, TaskInfo], Resource],
        shortfall_key: Callable[[QueueInfo, TaskInfo], Hashable] | None = None,
    ) -> None:
        self.check = check
        self.shortfall = shortfall
        # Optional: a key naming everything ``shortfall`` reads (equal keys, equal shortfalls),
        # so a caller asking for every preemptor may keep the answers (``NeedMemo``).
        self.shortfall_key = shortfall_key

    def __call__(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return self.check(queue, task)


def excess(used: Resource, limit: Resource, request: Resource) -> Resource:
    """Per dimension ``request`` asks for (pods aside, as LessEqualWithDimension), how far
    ``used`` is above ``limit``."""
    out = Resource()
    names = [n for n in ("cpu", "memory") if request.get(n) > 0]
    names += [n for n, v in request.scalars.items() if v > 0 and n not in IGNORED_SCALARS]
    for name in names:
        over = used.get(name) - limit.get(name)
        if over > 0:
            out.set(name, over)
    return out


def eviction_need(ssn: Session, queue: QueueInfo, task: TaskInfo) -> Resource | None:
    """What evictions from ``queue`` must free before it may take ``task`` (the largest shortfall
    of its allocatable callbacks per dimension); None when some callback cannot tell."""
    need = Resource()
    for fn in ssn.callbacks(P.ALLOCATABLE):
        shortfall = getattr(fn, "shortfall", None)
        if shortfall is None:
            return None
        need = resource_max(need, shortfall(queue, task))
    return need


class NeedMemo(Generic[T]):
    """``eviction_need`` and what the caller derives from it (``derive``, e.g. its vector over
    the node dimensions), kept per the callbacks' ``shortfall_key``s: preempt asks for every
    preemptor, and a queue's allocation mostly comes back to the same few values (an eviction
    and a pipelined preemptor of one shape cancel out).  Without a key from every callback,
    nothing is kept."""

    LIMIT = 4096  # distinct keys kept before starting afresh (each holds a need and a vector)

    def __init__(self, ssn: Session, derive: Callable[[Resource], T]) -> None:
        self.ssn, self.derive = ssn, derive
        keys = [getattr(fn, "shortfall_key", None) for fn in ssn.callbacks(P.ALLOCATABLE)]
        self.keys: list[Callable[[QueueInfo, TaskInfo], Hashable]] | None = (
            [k for k in keys if k is not None] if all(k is not None for k in keys) else None
        )
        self._kept: dict[Hashable, tuple[Resource, T] | None] = {}

    def __call__(self, queue: QueueInfo, task: TaskInfo) -> tuple[Resource, T] | None:
        """The need and its derived value (None when some callback cannot tell); the values
        may be shared between calls: callers must not change them."""
        if self.keys is None:
            return self._fresh(queue, task)
        parts = []
        for k in self.keys:  # a loop: a generator would be a frame of its own
            parts.append(k(queue, task))
        key = tuple(parts)
        kept = self._kept
        if key in kept:
            return kept[key]
        if len(kept) >= self.LIMIT:
            kept.clear()
        got = kept[key] = self._fresh(queue, task)
        return got

    def _fresh(self, queue: QueueInfo, task: TaskInfo) -> tuple[Resource, T] | None:
        need = eviction_need(self.ssn, queue, task)
        return None if need is None else (need, self.derive(need))
