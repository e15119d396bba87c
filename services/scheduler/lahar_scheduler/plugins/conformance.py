"""conformance: never evict system-critical pods or anything in kube-system."""

from __future__ import annotations

from collections.abc import Callable

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.ceiling import shape_wise
from lahar_scheduler.framework.eviction import EvictionContext
from lahar_scheduler.framework.jobs import TaskInfo
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.types import Vote
from lahar_scheduler.plugins.base import NoArgs, Plugin

_CRITICAL = frozenset({"system-cluster-critical", "system-node-critical"})


def _ordinary(t: TaskInfo) -> bool:
    return t.pod.spec.priority_class_name not in _CRITICAL and t.namespace != "kube-system"


_ORDINARY = shape_wise(_ordinary)  # reads the priority class and the job's namespace only


class ConformancePlugin(Plugin):
    name = "conformance"
    Args = NoArgs

    def on_session_open(self, ssn: Session) -> None:
        ssn.add(P.PREEMPTABLE, self.evictable)
        ssn.add(P.RECLAIMABLE, self.evictable)
        ssn.add(P.UNIFIED_EVICTABLE, self.evictable)

    def evictable(self, _: TaskInfo | EvictionContext, evictees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        out = []
        for t in evictees:  # _ordinary, inline: asked for every node preempt walks
            if t.pod.spec.priority_class_name not in _CRITICAL and t.namespace != "kube-system":
                out.append(t)
        return out, Vote.PERMIT

    def victims_key(self, _: TaskInfo) -> str:
        return "conformance"

    def victim_ceiling_key(self, _: TaskInfo) -> str:
        """``victim_ceiling``'s key alone."""
        return "conformance"

    def victim_ceiling(self, _: TaskInfo) -> tuple[str, Callable[[TaskInfo], bool]]:
        return "conformance", _ORDINARY
