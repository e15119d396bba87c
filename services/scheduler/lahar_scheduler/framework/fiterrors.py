"""Why a task fits no node: per-node reasons aggregated into Volcano's histogram message."""

from __future__ import annotations

from collections import Counter

from lahar_scheduler.framework.types import Code


class FitErrors:
    """Reasons per node for one task, or a single job-level message.

    ``reasons`` counts how many nodes gave each reason; ``unresolvable`` holds the nodes whose
    failure preemption cannot fix (UnschedulableAndUnresolvable).
    """

    __slots__ = ("message", "nodes", "reasons", "unresolvable")

    def __init__(self, message: str = "") -> None:
        self.message = message
        self.nodes = 0
        self.reasons: Counter[str] = Counter()
        self.unresolvable: set[str] = set()

    def add(self, reason: str, count: int = 1) -> None:
        self.reasons[reason] += count

    def add_nodes(self, count: int) -> None:
        self.nodes += count

    def mark(self, node: str, code: Code) -> None:
        if code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            self.unresolvable.add(node)

    def error(self, total_nodes: int | None = None) -> str:
        """``F/N nodes are unavailable: 2 Insufficient cpu, 1 node(s) had untolerated taint …``."""
        head = self.message
        if not head:
            n = total_nodes if total_nodes is not None else self.nodes
            head = f"{self.nodes}/{n} nodes are unavailable"
        if not self.reasons:
            return head
        parts = sorted(f"{count} {reason}" for reason, count in self.reasons.items())
        return f"{head}: {', '.join(parts)}"
