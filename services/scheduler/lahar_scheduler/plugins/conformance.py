"""conformance: never evict system-critical pods or anything in kube-system."""

from __future__ import annotations

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.eviction import EvictionContext
from lahar_scheduler.framework.jobs import TaskInfo
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.types import Vote
from lahar_scheduler.plugins.base import NoArgs, Plugin

_CRITICAL = frozenset({"system-cluster-critical", "system-node-critical"})


def evictable(_: TaskInfo | EvictionContext, evictees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
    victims = [t for t in evictees if t.pod.spec.priority_class_name not in _CRITICAL and t.namespace != "kube-system"]
    return victims, Vote.PERMIT


class ConformancePlugin(Plugin):
    name = "conformance"
    Args = NoArgs

    def on_session_open(self, ssn: Session) -> None:
        ssn.add(P.PREEMPTABLE, evictable)
        ssn.add(P.RECLAIMABLE, evictable)
        ssn.add(P.UNIFIED_EVICTABLE, evictable)
