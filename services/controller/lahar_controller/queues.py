"""Queue lifecycle rules (pure), after Volcano's queue controller.

A queue is Open, Closing, Closed or Unknown (``status.state``; empty counts as Open).  A request
(an action — OpenQueue, CloseQueue or SyncQueue — for one queue) is served by the handler of the
queue's stored state; a state with no handler drops the request.  Closing a queue that still has
PodGroups leaves it Closing; a later sync closes it once none remain.  Closing a parent queue
closes its open children (marked "closed by parent"), and reopening the parent reopens exactly
those.  ``default`` and ``root`` always exist.

Nothing here does I/O: :func:`plan` takes the queue, its PodGroups and every queue, and returns
what to write and which further requests to queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

OPEN, CLOSING, CLOSED, UNKNOWN = "Open", "Closing", "Closed", "Unknown"
OPEN_QUEUE, CLOSE_QUEUE, SYNC_QUEUE = "OpenQueue", "CloseQueue", "SyncQueue"
ROOT = "root"
CLOSED_BY_PARENT = "volcano.sh/closed-by-parent"

DEFAULT_QUEUE: dict[str, Any] = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "default"},
    "spec": {"weight": 1, "reclaimable": True},
}
ROOT_QUEUE: dict[str, Any] = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": ROOT},
    "spec": {"weight": 1, "reclaimable": False},
}
# PodGroup phase -> the status counter it adds to
_COUNTERS = {
    "Pending": "pending",
    "Running": "running",
    "Unknown": "unknown",
    "Inqueue": "inqueue",
    "Completed": "completed",
}


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def stored_state(queue: Mapping[str, Any]) -> str:
    return str((queue.get("status") or {}).get("state") or "")


def _annotations(queue: Mapping[str, Any]) -> Mapping[str, Any]:
    return (queue.get("metadata") or {}).get("annotations") or {}


def _parent(queue: Mapping[str, Any]) -> str:
    return str((queue.get("spec") or {}).get("parent") or "")


def desired_state(queue: dict[str, Any]) -> str | None:
    """The state to write for a queue seen for the first time, or None when its state is set."""
    return OPEN if not stored_state(queue) else None


def missing_queues(queues: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The standard queues (``root``, ``default``) that do not exist yet, to create."""
    names = {_name(q) for q in queues}
    return [dict(q) for q in (ROOT_QUEUE, DEFAULT_QUEUE) if _name(q) not in names]


def handler_for(state: str) -> str | None:
    """The handler serving a stored state; None: no handler, the request is dropped."""
    if state in ("", OPEN):
        return OPEN
    return state if state in (CLOSED, CLOSING, UNKNOWN) else None


def _after_sync(handler: str, stored: str, busy: bool) -> str:
    """SyncQueue (and any action a handler does not name): keep what is stored, if it can be."""
    if stored == OPEN or (stored == "" and handler == OPEN):
        return OPEN
    if stored == CLOSED and handler != CLOSING:
        return CLOSING if busy and handler != CLOSED else CLOSED
    if stored == CLOSING and handler == CLOSING:
        return CLOSING if busy else CLOSED
    return UNKNOWN


def next_state(handler: str, action: str, stored: str, busy: bool) -> str:
    """The state the ``handler`` gives a queue whose stored state is ``stored`` (Volcano's tests
    call a handler with any stored state), ``busy`` when PodGroups remain in it."""
    if action == OPEN_QUEUE:
        return OPEN
    if action == CLOSE_QUEUE:
        # the Closed handler only re-syncs; the others close, or wait for the PodGroups to go
        return CLOSED if handler == CLOSED or not busy else CLOSING
    return _after_sync(handler, stored, busy)


def _operation(handler: str, action: str) -> str:
    """Which of Volcano's three queue operations the handler runs: open, close or sync."""
    if action == OPEN_QUEUE and handler != OPEN:
        return "open"
    if action == CLOSE_QUEUE and handler in (OPEN, UNKNOWN):
        return "close"
    return "sync"


def status_counts(podgroups: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The queue's status counters: its PodGroups by phase."""
    counts = dict.fromkeys(_COUNTERS.values(), 0)
    for pg in podgroups:
        key = _COUNTERS.get(str((pg.get("status") or {}).get("phase") or ""))
        if key:
            counts[key] += 1
    return counts


@dataclass
class QueuePlan:
    """What serving one request for one queue asks for."""

    state: str | None = None  # the queue's new state (None: the request was dropped)
    status: dict[str, Any] = field(default_factory=dict)  # status fields to write ({}: nothing)
    spec: dict[str, Any] = field(default_factory=dict)  # spec fields to write (the default parent)
    annotations: dict[str, dict[str, str]] = field(default_factory=dict)  # queue -> annotations to set
    requests: list[tuple[str, str]] = field(default_factory=list)  # (queue, action) to queue next
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)
    error: str = ""  # why the request failed (it is retried later)


def plan(
    queue: Mapping[str, Any],
    action: str,
    podgroups: Iterable[Mapping[str, Any]],
    queues: Iterable[Mapping[str, Any]] = (),
) -> QueuePlan:
    """Serve ``action`` for ``queue``.  ``podgroups`` are the queue's PodGroups, ``queues`` every
    queue (parents and children are looked up there)."""
    handler = handler_for(stored_state(queue))
    if handler is None:
        return QueuePlan()
    return plan_with(handler, queue, action, list(podgroups), {_name(q): q for q in queues})


def plan_with(
    handler: str,
    queue: Mapping[str, Any],
    action: str,
    podgroups: list[Mapping[str, Any]],
    queues: Mapping[str, Mapping[str, Any]],
) -> QueuePlan:
    """:func:`plan` with the handler chosen by the caller."""
    stored = stored_state(queue)
    state = next_state(handler, action, stored, bool(podgroups))
    out = QueuePlan(state=state)
    op = _operation(handler, action)
    if op == "open":
        _open(queue, stored, queues, out)
    elif op == "close":
        _close(queue, stored, queues, out)
    else:
        _sync(queue, podgroups, queues, out)
    if out.error or out.state is None:
        return out
    if state != stored:
        out.status["state"] = state
        if op == "close":
            out.events.append(("Normal", CLOSE_QUEUE, "Close queue succeed"))
    current = queue.get("status") or {}
    out.status = {k: v for k, v in out.status.items() if current.get(k) != v}  # write only what changes
    return out


def _sync(
    queue: Mapping[str, Any],
    podgroups: list[Mapping[str, Any]],
    queues: Mapping[str, Mapping[str, Any]],
    out: QueuePlan,
) -> None:
    name = _name(queue)
    parent = _parent(queue)
    if name != ROOT and not parent:
        out.spec["parent"] = parent = ROOT
    out.status.update(status_counts(podgroups))
    if name == ROOT or out.state is None:
        return
    parent_queue = queues.get(parent)
    if parent_queue is None:
        return  # the parent may appear later; the child keeps its own state meanwhile
    parent_state = stored_state(parent_queue)
    closed = out.state in (CLOSED, CLOSING)
    if parent_state in (CLOSED, CLOSING) and not closed:
        out.annotations[name] = {CLOSED_BY_PARENT: "true"}
        out.requests.append((name, CLOSE_QUEUE))
    elif parent_state in ("", OPEN) and closed and _annotations(queue).get(CLOSED_BY_PARENT) == "true":
        out.requests.append((name, OPEN_QUEUE))


def _open(queue: Mapping[str, Any], stored: str, queues: Mapping[str, Mapping[str, Any]], out: QueuePlan) -> None:
    name = _name(queue)
    if stored != OPEN:
        parent = _parent(queue)
        if parent and parent != ROOT:
            parent_queue = queues.get(parent)
            if parent_queue is None:
                out.error = f"failed to get parent queue {parent} of queue {name}"
                return
            if stored_state(parent_queue) in (CLOSED, CLOSING):
                out.error = (
                    f"failed to open queue {name} because its parent queue {parent} is closing or "
                    "closed; open the parent queue first"
                )
                return
        for child in _children(name, queues):
            if _annotations(child).get(CLOSED_BY_PARENT) == "true":
                out.requests.append((_name(child), OPEN_QUEUE))
    if _annotations(queue).get(CLOSED_BY_PARENT) != "false":
        out.annotations[name] = {CLOSED_BY_PARENT: "false"}


def _close(queue: Mapping[str, Any], stored: str, queues: Mapping[str, Mapping[str, Any]], out: QueuePlan) -> None:
    name = _name(queue)
    if stored in (CLOSED, CLOSING):
        return
    if name == ROOT:
        out.state = None  # the root queue is never closed
        out.events.append(("Warning", CLOSE_QUEUE, "Root queue cannot be closed"))
        return
    for child in _children(name, queues):
        if stored_state(child) not in (CLOSED, CLOSING):
            out.annotations[_name(child)] = {CLOSED_BY_PARENT: "true"}
            out.requests.append((_name(child), CLOSE_QUEUE))


def _children(name: str, queues: Mapping[str, Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [q for q in queues.values() if _parent(q) == name]
