"""Read-your-writes for one review: the names a decision looked up and did not find, and a view
that adds the objects found for them afterwards.

The service answers from a snapshot of the mirror refreshed every half second, so an object
created just before (a Queue and a PodGroup naming it in one ``kubectl apply``) is often not in
it yet.  A review runs the rules over a ``ReviewView`` that records each miss; when there were
misses, the service reads those keys from the mirror directly (waiting a little for them to
appear) and runs the rules again over the snapshot plus what it found.  Pure: no I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from lahar_admission.types import AdmissionConfig, Namespace, PodGroup, Queue
from lahar_admission.view import ClusterView


@dataclass
class Missed:
    """Names looked up and not found."""

    queues: set[str] = field(default_factory=set)
    namespaces: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.queues or self.namespaces)

    def without(self, other: Missed) -> Missed:
        return Missed(self.queues - other.queues, self.namespaces - other.namespaces)

    def add(self, other: Missed) -> None:
        self.queues |= other.queues
        self.namespaces |= other.namespaces


@dataclass
class Found:
    """Objects read directly from the mirror after a miss."""

    queues: dict[str, Queue] = field(default_factory=dict)
    namespaces: dict[str, Namespace] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.queues or self.namespaces)

    def covers(self, missed: Missed) -> bool:
        return not self.unsettled(missed.queues) and missed.namespaces <= self.namespaces.keys()

    def unsettled(self, names: Iterable[str]) -> list[str]:
        """Of these queues, those not found yet or found without a state."""
        return sorted(n for n in names if n not in self.queues or not settled(self.queues[n]))

    def add(self, other: Found) -> None:
        self.queues.update(other.queues)
        self.namespaces.update(other.namespaces)


def settled(queue: Queue) -> bool:
    """A queue the controller has given a state.  A queue created a moment ago has none yet (it
    is opened right after); the rules would deny a PodGroup for it, so it is waited for like a
    missing one, and denied only if it stays without a state."""
    return bool(queue.status.state)


class ReviewView:
    """A ``ClusterView`` for one review: ``base`` plus ``found``, recording what it misses."""

    def __init__(self, base: ClusterView, found: Found | None = None) -> None:
        self.base = base
        self.found = found or Found()
        self.missed = Missed()

    def queue(self, name: str) -> Queue | None:
        found = self.found.queues.get(name)
        queue = found if found is not None and settled(found) else (self.base.queue(name) or found)
        if queue is None or not settled(queue):
            self.missed.queues.add(name)
        return queue

    def queues(self) -> Iterable[Queue]:
        known = list(self.base.queues())
        names = {q.metadata.name for q in known}
        return known + [q for name, q in self.found.queues.items() if name not in names]

    def children(self, parent: str) -> list[Queue]:
        known = self.base.children(parent)
        names = {q.metadata.name for q in known}
        extra = [q for name, q in self.found.queues.items() if q.spec.parent == parent and name not in names]
        return known + extra

    def namespace(self, name: str) -> Namespace | None:
        namespace = self.base.namespace(name) or self.found.namespaces.get(name)
        if namespace is None:
            self.missed.namespaces.add(name)
        return namespace

    def podgroup(self, namespace: str, name: str) -> PodGroup | None:
        return self.base.podgroup(namespace, name)

    def admission_config(self) -> AdmissionConfig | None:
        return self.base.admission_config()
