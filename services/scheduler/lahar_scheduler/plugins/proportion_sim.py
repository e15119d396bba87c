"""proportion's simulate hooks for topology-aware preemption.

Pre_predicate stores a copy of the queue accounting in the preemptor's CycleState; the dry run
moves victims' requests out of (and reprieved ones back into) their queue's ``allocated`` and asks
whether the preemptor's queue may then take it: allocated + request ≤ deserved on the request's
dimensions.  A missing state (pre_predicate disabled) makes every simulated check fail.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from lahar_scheduler.framework.cyclestate import CycleState, LazyCopy

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import QueueInfo, TaskInfo
    from lahar_scheduler.framework.nodes import NodeInfo
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.plugins.proportion import QueueAttr

STATE_KEY = "proportion"
Attrs = dict[str, "QueueAttr"]


def copy_attrs(attrs: Attrs) -> Attrs:
    return {
        name: dataclasses.replace(
            a,
            guarantee=a.guarantee.clone(),
            real_capability=a.real_capability.clone(),
            capability=a.capability.clone() if a.capability is not None else None,
            deserved=a.deserved.clone(),
            allocated=a.allocated.clone(),
            request=a.request.clone(),
            inqueue=a.inqueue.clone(),
            elastic=a.elastic.clone(),
        )
        for name, a in attrs.items()
    }


def register_simulation(ssn: Session, attrs: Attrs) -> None:
    def state_attrs(state: CycleState) -> Attrs | None:
        got = state.read(STATE_KEY)
        return got.get() if isinstance(got, LazyCopy) else None

    def pre_predicate(task: TaskInfo) -> None:
        ssn.cycle_state(task).write(STATE_KEY, LazyCopy(lambda: attrs, copy_attrs))
        return None

    def allocatable(state: CycleState, queue: QueueInfo, task: TaskInfo) -> bool:
        attr = (state_attrs(state) or {}).get(queue.uid)
        if attr is None:
            return False
        ok, _ = attr.allocated.clone().add(task.resreq).less_equal_in(attr.deserved, task.resreq)
        return ok

    def move(state: CycleState, task: TaskInfo, sign: int) -> str | None:
        job = ssn.jobs.get(task.job)
        own = state_attrs(state)
        if job is None or own is None or job.queue not in own:
            return f"proportion: no queue state for task {task.key}"
        attr = own[job.queue]
        if sign > 0:
            attr.allocated.add(task.resreq)
        else:
            attr.allocated.sub(task.resreq)
        attr.update_share()
        return None

    def add_task(state: CycleState, _: TaskInfo, task: TaskInfo, node: NodeInfo) -> str | None:
        return move(state, task, +1)

    def remove_task(state: CycleState, _: TaskInfo, task: TaskInfo, node: NodeInfo) -> str | None:
        return move(state, task, -1)

    ssn.add("pre_predicate", pre_predicate)
    ssn.add("simulate_allocatable", allocatable)
    ssn.add("simulate_add_task", add_task)
    ssn.add("simulate_remove_task", remove_task)
