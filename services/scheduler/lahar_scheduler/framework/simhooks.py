"""Labelled callbacks, so topology-aware preemption can tell when a dry run is plain arithmetic.

Topology-aware preemption dry-runs victims on every candidate node through the simulate hooks
(see cyclestate.py).  When every hook consulted for a preemptor is one of the labelled kinds
below, and each says its part is trivial or vector arithmetic for that preemptor, the dry run
on a node is arithmetic on the victims' request vectors and can be done for many nodes at once
(actions/preempt_topology_fast.py).  An unlabelled hook (another plugin's) keeps the exact
per-node dry run.

The victim lists themselves are cached per node (actions/preempt_topology_cache.py) when the
victim callbacks say what of the preemptor their answer depends on (``victims_key``) and the
order callbacks compare two jobs or tasks by their own state only (``pair_local``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from lahar_scheduler.framework.pq import ByKey

if TYPE_CHECKING:
    from lahar_scheduler.framework.cyclestate import CycleState
    from lahar_scheduler.framework.jobs import QueueInfo, TaskInfo
    from lahar_scheduler.framework.nodes import NodeInfo

F = TypeVar("F", bound=Callable[..., Any])
Move = Callable[["CycleState", "TaskInfo", "TaskInfo", "NodeInfo"], "str | None"]

VIEW = "view"  # changes only the predicates plugin's affinity view, read only by its SimPredicate
QUEUE = "queue"  # moves the task's request out of / into its queue's allocation (a QueueRoom's state)


class TaskMove:
    """A SimulateAddTask/SimulateRemoveTask hook with what it changes (VIEW or QUEUE).  A QUEUE
    move never fails for a task of a job whose queue the state holds."""

    __slots__ = ("fn", "kind")

    def __init__(self, kind: str, fn: Move) -> None:
        self.kind = kind
        self.fn = fn

    def __call__(self, state: CycleState, preemptor: TaskInfo, task: TaskInfo, node: NodeInfo) -> str | None:
        return self.fn(state, preemptor, task, node)


class SimPredicate:
    """A SimulatePredicate hook that can say, before a dry run, that it passes ``task`` on every
    node whatever the dry run removes or adds (``skips``)."""

    __slots__ = ("fn", "skips")

    def __init__(
        self,
        fn: Callable[[CycleState, TaskInfo, NodeInfo], str | None],
        skips: Callable[[CycleState, TaskInfo], bool],
    ) -> None:
        self.fn = fn
        self.skips = skips

    def __call__(self, state: CycleState, task: TaskInfo, node: NodeInfo) -> str | None:
        return self.fn(state, task, node)


@dataclass(frozen=True)
class Room:
    """A queue check as vectors over (milli cpu, memory): with ``allocated`` the queue's
    allocation in the dry run's state (victims of the queue moved out, reprieved ones back in),
    the check passes when ``allocated + request <= deserved`` on every ``checked`` column."""

    allocated: tuple[float, float]
    request: tuple[float, float]
    deserved: tuple[float, float]
    checked: tuple[bool, bool]


class QueueRoom:
    """A SimulateAllocatable hook that is the ``Room`` test on the state QUEUE moves change.
    ``room`` gives the vectors for a preemptor, or None when the test is not that simple for it
    (then the dry run stays exact)."""

    __slots__ = ("fn", "room")

    def __init__(
        self,
        fn: Callable[[CycleState, QueueInfo, TaskInfo], bool],
        room: Callable[[CycleState, QueueInfo, TaskInfo], Room | None],
    ) -> None:
        self.fn = fn
        self.room = room

    def __call__(self, state: CycleState, queue: QueueInfo, task: TaskInfo) -> bool:
        return self.fn(state, queue, task)


# -- victim lists ---------------------------------------------------------------------------------
_PAIR_LOCAL: set[object] = set()


def pair_local(fn: F) -> F:
    """Mark a JobOrder/TaskOrder callback whose answer depends only on the two jobs' (tasks')
    own state, which changes only through the session's allocate/deallocate events."""
    _PAIR_LOCAL.add(fn)
    return fn


def is_pair_local(fn: object) -> bool:
    # A key-based order (framework/pq.py ByKey) compares each item's own key: pair-local.
    return isinstance(fn, ByKey) or getattr(fn, "__func__", fn) in _PAIR_LOCAL


def victims_key_of(fn: object) -> Callable[[TaskInfo], Hashable] | None:
    """A PreemptableFn's ``victims_key(preemptor)`` (on a bound method's owner, or on the callable,
    as ceiling.py finds ``victim_ceiling``): its answer on candidates none of which is of the
    preemptor's job depends only on the candidates, the state of their jobs (changed only through
    the session's allocate/deallocate events), and that key."""
    owner = getattr(fn, "__self__", None)
    got = getattr(owner if owner is not None else fn, "victims_key", None)
    return got if callable(got) else None
