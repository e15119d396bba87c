"""cdp (cooldown protection): an elastic pod that has just started is not a victim again.

Elastic jobs grow into idle capacity and are preempted when others need it; without a cooldown
a pod could be preempted moments after it (re)started, again and again.  A pod that carries
``volcano.sh/cooldown-time`` (label, else annotation; a Go duration) is kept out of the victims
of preempt and reclaim while it is Running and its PodScheduled condition turned True less than
that long ago.  Time is the session's (``session.now``), never a clock read here.
"""

from __future__ import annotations

from lahar.api.objects import Pod
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import TaskInfo
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.snapshot import parse_time
from lahar_scheduler.framework.types import Vote
from lahar_scheduler.plugins.base import NoArgs, Plugin
from lahar_scheduler.plugins.sla import parse_go_duration

COOLDOWN_TIME_KEY = "volcano.sh/cooldown-time"


def cooldown_time(pod: Pod) -> float | None:
    """The pod's cooldown in seconds, or None when it has none or it does not parse."""
    meta = pod.metadata
    raw = meta.labels.get(COOLDOWN_TIME_KEY)
    if raw is None:
        raw = meta.annotations.get(COOLDOWN_TIME_KEY)
    return None if raw is None else parse_go_duration(raw)


def cooling(pod: Pod, now: float) -> bool:
    """Whether the pod is still within its cooldown: Running, scheduled less than cooldown ago.

    Volcano reads the first PodScheduled condition and stops there, True or not."""
    cooldown = cooldown_time(pod)
    if cooldown is None or pod.status.phase != "Running":
        return False
    for c in pod.status.conditions:
        if c.type == "PodScheduled":
            return c.status == "True" and parse_time(c.last_transition_time) + cooldown > now
    return False


class CdpPlugin(Plugin):
    name = "cdp"
    Args = NoArgs

    def on_session_open(self, ssn: Session) -> None:
        self.now = ssn.now
        ssn.add(P.PREEMPTABLE, self.victims)
        ssn.add(P.RECLAIMABLE, self.victims)

    def victims(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        return [t for t in candidates if not cooling(t.pod, self.now)], Vote.PERMIT
