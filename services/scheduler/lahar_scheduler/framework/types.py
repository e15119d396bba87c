"""Task statuses, votes and the status sets Volcano's counters are built from."""

from __future__ import annotations

import enum


class TaskStatus(enum.IntEnum):
    PENDING = 1
    ALLOCATED = 2
    PIPELINED = 3
    BINDING = 4
    BOUND = 5
    RUNNING = 6
    RELEASING = 7
    SUCCEEDED = 8
    FAILED = 9
    UNKNOWN = 10

    def __str__(self) -> str:
        return self.name.capitalize()


S = TaskStatus
ALLOCATED_STATUSES = frozenset({S.BOUND, S.BINDING, S.RUNNING, S.ALLOCATED})
SCHEDULED_STATUSES = frozenset({S.RUNNING, S.BOUND, S.FAILED, S.SUCCEEDED})
PREEMPTABLE_STATUSES = frozenset({S.BOUND, S.RUNNING})
READY_STATUSES = frozenset({S.BOUND, S.BINDING, S.RUNNING, S.ALLOCATED, S.SUCCEEDED})
VALID_STATUSES = frozenset({S.BOUND, S.BINDING, S.RUNNING, S.ALLOCATED, S.SUCCEEDED, S.PIPELINED, S.PENDING})
TERMINAL_STATUSES = frozenset({S.SUCCEEDED, S.FAILED})


def allocated_status(status: TaskStatus) -> bool:
    return status in ALLOCATED_STATUSES


class Vote(enum.IntEnum):
    """Plugin votes for enqueue/pipelined decisions."""

    REJECT = -1
    ABSTAIN = 0
    PERMIT = 1


class PodGroupPhase(enum.StrEnum):
    PENDING = "Pending"
    INQUEUE = "Inqueue"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    COMPLETED = "Completed"


class QueueState(enum.StrEnum):
    OPEN = "Open"
    CLOSED = "Closed"
    CLOSING = "Closing"
    UNKNOWN = "Unknown"


class Code(enum.IntEnum):
    """Predicate status codes (kube-scheduler's framework codes that Volcano uses)."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5


GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC_KEY = "volcano.sh/task-spec"
PREEMPTABLE_KEY = "volcano.sh/preemptable"
TASK_PRIORITY_KEY = "volcano.sh/task-priority"
SLA_WAITING_TIME_KEY = "sla-waiting-time"
VOLCANO_SLA_WAITING_TIME_KEY = "volcano.sh/sla-waiting-time"
REVOCABLE_ZONE_KEY = "volcano.sh/revocable-zone"
HIERARCHY_KEY = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS_KEY = "volcano.sh/hierarchy-weights"
