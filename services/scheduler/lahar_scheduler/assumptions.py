"""What the scheduler assumes about binds the cluster does not show yet (pure: time comes in).

A bind is *assumed* from the moment a decision is published: the pod counts as placed on its
node, so no later session gives its room away.  An assumption ends only when it is safe:

* the cache shows the pod bound (or deleted): the snapshot itself now says where it is;
* a binder reports that it did *not* bind it (stale, expired, conflict, failed, gone): roll back;
* no report came, and the decision's deadline has passed by ``margin`` seconds: no binder can
  still execute it (binders refuse decisions past their deadline; the margin covers clock skew).

A binder's report that it *did* bind (``done``) keeps the assumption until the cache shows the
pod, and makes one where there was none: that is how a new leader, or a standby, learns the binds
of an older epoch that the mirror does not show yet.  Nothing ends on time alone while a decision
can still be executed: that was the over-commit of issue 8 (assumptions expired after 60 s while
their decisions still waited in the queue, and were then executed after the room was reused).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

MARGIN = 10.0  # seconds past a decision's deadline before it is assumed never to run

Effect = tuple[Literal["place"], str] | tuple[Literal["release"]] | None
NOT_DONE = frozenset({"stale", "expired", "conflict", "failed", "gone"})


@dataclass(slots=True)
class Assumption:
    node: str
    deadline: float  # after this no binder executes the decision; 0 when a binder reported it done
    done: bool = False  # a binder bound it; the cache has not shown it yet


class Assumptions:
    def __init__(self, margin: float = MARGIN) -> None:
        self.margin = margin
        self._held: dict[str, Assumption] = {}

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, key: object) -> bool:
        return key in self._held

    def node(self, key: str) -> str | None:
        held = self._held.get(key)
        return held.node if held is not None else None

    def items(self) -> Iterator[tuple[str, str]]:
        """(pod, node) of every assumption, to place again after the snapshot is reloaded."""
        for key, held in self._held.items():
            yield key, held.node

    def assume(self, key: str, node: str, deadline: float) -> None:
        """A bind decision was published."""
        self._held[key] = Assumption(node, deadline)

    def result(self, key: str, outcome: str, node: str, pod_node: str | None) -> Effect:
        """A binder's report.  ``pod_node`` is where the snapshot has the pod ("" pending, None absent)."""
        held = self._held.get(key)
        if outcome == "done":
            if pod_node is None or pod_node:  # gone, or the cache already shows it bound
                self._held.pop(key, None)
                return None
            self._held[key] = Assumption(node, 0.0, done=True)
            return ("place", node) if held is None or held.node != node else None
        if outcome in NOT_DONE and held is not None and not held.done and held.node == node:
            del self._held[key]
            return ("release",)
        return None

    def observe(self, key: str, pod_node: str | None) -> Effect:
        """The snapshot's pod changed (a delta).  Bound or gone: the assumption has served.  Still
        pending: place it again (applying the delta put it back to pending)."""
        held = self._held.get(key)
        if held is None:
            return None
        if pod_node is None or pod_node:
            del self._held[key]
            return None
        return ("place", held.node)

    def expire(self, now: float) -> list[str]:
        """Assumptions whose decision can no longer run and that no report settled; removed."""
        gone = [k for k, a in self._held.items() if not a.done and a.deadline and now > a.deadline + self.margin]
        for key in gone:
            del self._held[key]
        return gone
