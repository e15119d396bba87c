"""proportion's what-if hooks for preemption.

Topology-aware preemption: the CycleState holds a copy of the queues' allocations (the
state Volcano's PrePredicate writes); the dry run moves victims' requests out of (and reprieved
ones back into) their queue's ``allocated`` and asks whether the preemptor's queue may then take
it: allocated + request ≤ deserved on the request's dimensions.  A missing state (the plugin's
enablePredicate off) makes every simulated check fail.

Normal preemption: the allocatable callback also says how much the queue must free before the
task fits (see ``AllocatableWithBound``): only the queue's own allocation shrinks with its
evicted tasks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from lahar.api.resource import IGNORED_SCALARS, Resource
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.cyclestate import Allocations, CycleState, LazyCopy, copy_allocations
from lahar_scheduler.framework.simhooks import QUEUE, QueueRoom, Room, TaskMove
from lahar_scheduler.framework.victims import AllocatableWithBound, excess

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import QueueInfo, TaskInfo
    from lahar_scheduler.framework.nodes import NodeInfo
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.plugins.proportion import QueueAttr

STATE_KEY = "proportion"
Attrs = dict[str, "QueueAttr"]


def allocatable_callback(attrs: Attrs, check: Callable[[QueueInfo, TaskInfo], bool]) -> AllocatableWithBound:
    """proportion's allocatable, with how much the queue must free first: allocated + request
    above deserved on the requested dimensions (nothing frees a closed queue)."""

    def shortfall(queue: QueueInfo, task: TaskInfo) -> Resource:
        attr = attrs.get(queue.uid)
        if attr is None:
            return Resource()
        if not queue.is_open():
            return Resource(math.inf, math.inf)
        return excess(attr.allocated.clone().add(task.resreq), attr.deserved, task.resreq)

    def shortfall_key(queue: QueueInfo, task: TaskInfo) -> Hashable:
        # What shortfall reads: the queue's state and allocation, the request (a queue's
        # deserved is fixed once the session opened).
        attr = attrs.get(queue.uid)
        if attr is None:
            return (queue.uid, None)
        return (queue.uid, queue.is_open(), _values(attr.allocated), _values(task.resreq))

    return AllocatableWithBound(check, shortfall, shortfall_key)


def _values(r: Resource) -> tuple[float, float, tuple[tuple[str, float], ...]]:
    # Equal tuples, equal resources (scalars compared in their own order: a different order
    # only misses the memo).
    return (r.milli_cpu, r.memory, tuple(r.scalars.items()))


def register_simulation(ssn: Session, attrs: Attrs) -> None:
    # Only ``allocated`` changes in a dry run; deserved is fixed for the session.
    def allocations() -> Allocations:
        return {name: a.allocated for name, a in attrs.items()}

    def own(state: CycleState) -> Allocations | None:
        got = state.read(STATE_KEY)
        return got.get() if isinstance(got, LazyCopy) else None

    def cycle_state(_: TaskInfo, state: CycleState) -> None:
        state.write(STATE_KEY, LazyCopy(allocations, copy_allocations))

    def allocatable(state: CycleState, queue: QueueInfo, task: TaskInfo) -> bool:
        allocated = (own(state) or {}).get(queue.uid)
        if allocated is None:
            return False
        ok, _ = allocated.clone().add(task.resreq).less_equal_in(attrs[queue.uid].deserved, task.resreq)
        return ok

    def move(state: CycleState, task: TaskInfo, sign: int) -> str | None:
        job = ssn.jobs.get(task.job)
        mine = own(state)
        if job is None or mine is None or job.queue not in mine:
            return f"proportion: no queue state for task {task.key}"
        if sign > 0:
            mine[job.queue].add(task.resreq)
        else:
            mine[job.queue].sub(task.resreq)
        return None

    def add_task(state: CycleState, _: TaskInfo, task: TaskInfo, node: NodeInfo) -> str | None:
        return move(state, task, +1)

    def remove_task(state: CycleState, _: TaskInfo, task: TaskInfo, node: NodeInfo) -> str | None:
        return move(state, task, -1)

    def room(state: CycleState, queue: QueueInfo, task: TaskInfo) -> Room | None:
        """``allocatable`` as vectors: cpu and memory only, so a request with another dimension
        to check (a scalar other than pods) keeps the exact path."""
        allocated = (own(state) or {}).get(queue.uid)
        if allocated is None:
            return None
        req = task.resreq
        if any(v > 0 for n, v in req.scalars.items() if n not in IGNORED_SCALARS):
            return None
        deserved = attrs[queue.uid].deserved
        return Room(
            (allocated.milli_cpu, allocated.memory),
            (req.milli_cpu, req.memory),
            (deserved.milli_cpu, deserved.memory),
            (req.milli_cpu > 0, req.memory > 0),
        )

    ssn.add(P.CYCLE_STATE, cycle_state)
    ssn.add(P.SIMULATE_ALLOCATABLE, QueueRoom(allocatable, room))
    ssn.add(P.SIMULATE_ADD_TASK, TaskMove(QUEUE, add_task))
    ssn.add(P.SIMULATE_REMOVE_TASK, TaskMove(QUEUE, remove_task))
