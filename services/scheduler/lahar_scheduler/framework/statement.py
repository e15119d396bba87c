"""Statement: an undo log of allocate / pipeline / evict over the session.

Gang atomicity rests on it: an action gathers one job's operations in a statement and commits
them only if the job is ready (or pipelined), otherwise discards them in reverse order.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lahar_scheduler.framework.types import TaskStatus

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import NodeInfo
    from lahar_scheduler.framework.session import Session

S = TaskStatus


class Op(enum.Enum):
    EVICT = "evict"
    PIPELINE = "pipeline"
    ALLOCATE = "allocate"


@dataclass(slots=True)
class Operation:
    op: Op
    task: TaskInfo
    reason: str = ""


class Statement:
    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.operations: list[Operation] = []

    def __len__(self) -> int:
        return len(self.operations)

    def has_evictions(self) -> bool:
        return any(o.op is Op.EVICT for o in self.operations)

    # -- tentative operations ----------------------------------------------------------------
    def allocate(self, task: TaskInfo, node: NodeInfo) -> None:
        self.ssn.move(task, S.ALLOCATED, node.name)
        self.ssn.fire_allocate(task)
        self.operations.append(Operation(Op.ALLOCATE, task))

    def pipeline(self, task: TaskInfo, node_name: str, eviction_occurred: bool) -> None:
        self.ssn.move(task, S.PIPELINED, node_name)
        task.eviction_occurred = eviction_occurred
        self.ssn.fire_allocate(task)
        self.operations.append(Operation(Op.PIPELINE, task))

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.ssn.release(task)  # to Releasing on its node, out of the scorers' view
        self.ssn.fire_deallocate(task)
        self.operations.append(Operation(Op.EVICT, task, reason))

    # -- undo ----------------------------------------------------------------------------------
    def _unallocate(self, task: TaskInfo) -> None:
        self.ssn.move(task, S.PENDING, "")
        self.ssn.fire_deallocate(task)

    def _unevict(self, task: TaskInfo) -> None:
        # Volcano has a defect here: a victim restored by Discard is not put back into the
        # predicates plugin's node view, so later scores in the session still see it gone.  We do
        # not copy it: the restored victim is scored again.
        self.ssn.move(task, S.RUNNING, task.node_name)
        self.ssn.set_scored(task, True)
        self.ssn.fire_allocate(task)

    def unpipeline(self, task: TaskInfo) -> None:
        self._unallocate(task)

    def discard(self) -> None:
        for o in reversed(self.operations):
            o.task.last_status = o.task.status
            o.task.last_node = o.task.node_name
            if o.op is Op.EVICT:
                self._unevict(o.task)
            else:
                self._unallocate(o.task)
        self.operations = []

    def commit(self) -> None:
        for o in self.operations:
            o.task.last_status = None
            if o.op is Op.EVICT:
                self.ssn.evict_committed(o.task, o.reason)
            elif o.op is Op.ALLOCATE:
                self.ssn.dispatch(o.task)
        self.operations = []

    def merge(self, *others: Statement) -> None:
        for other in others:
            self.operations.extend(other.operations)
            other.operations = []
