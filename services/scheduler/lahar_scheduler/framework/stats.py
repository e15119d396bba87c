"""The numbers a session leaves for Volcano's metrics: pure data, filled by plugins and actions.

Volcano's plugins set Prometheus gauges as they compute; here they record the same numbers in
the session result and the scheduler service turns them into series (``lahar_scheduler.volcano``).
Timings need a clock, which the core never reads: the caller may hand one in (``Stopwatch``), and
the results are the same with or without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lahar.api.resource import Resource

ON_SESSION_OPEN, ON_SESSION_CLOSE = "OnSessionOpen", "OnSessionClose"  # Volcano's OnSession label values


@dataclass
class QueueNumbers:
    """One queue as the queue-share plugin (proportion or capacity) saw it at session close."""

    name: str
    weight: int
    deserved: Resource
    allocated: Resource
    request: Resource
    inqueue: Resource
    real_capability: Resource
    capability: Resource | None  # None: the queue sets none
    share: float
    overused: bool


@dataclass
class JobNumbers:
    """One job's numbers: its drf share, and what gang found unschedulable."""

    name: str
    namespace: str
    queue: str
    share: float | None = None
    unschedulable_tasks: int | None = None  # minMember short of placeable; None: not counted
    retried: bool = False  # gang found it unschedulable again (Volcano's job_retry_counts)


@dataclass
class SessionStats:
    queues: dict[str, QueueNumbers] = field(default_factory=dict)
    jobs: dict[str, JobNumbers] = field(default_factory=dict)  # by job uid
    namespace_shares: dict[str, float] = field(default_factory=dict)
    unschedulable_jobs: int | None = None  # None: gang is not configured
    preemption_attempts: int = 0
    # Committed statements that evicted, by action (Volcano's eviction_transactions_total)
    eviction_transactions: dict[str, int] = field(default_factory=dict)
    preemption_victims: int | None = None  # the last candidate node's victim count, as Volcano
    open_seconds: float | None = None  # None: no stopwatch
    plugin_seconds: dict[tuple[str, str], float] = field(default_factory=dict)  # (plugin, OnSession*)
    action_seconds: dict[str, float] = field(default_factory=dict)

    def evicting_commit(self, action: str) -> None:
        self.eviction_transactions[action] = self.eviction_transactions.get(action, 0) + 1

    def job(self, uid: str, name: str, namespace: str, queue: str) -> JobNumbers:
        got = self.jobs.get(uid)
        if got is None:
            got = self.jobs[uid] = JobNumbers(name, namespace, queue)
        return got


class Stopwatch:
    """Times parts of a session with a clock the caller supplies; without one it does nothing."""

    def __init__(self, clock: Callable[[], float] | None) -> None:
        self.clock = clock

    def now(self) -> float | None:
        return self.clock() if self.clock is not None else None

    def since(self, start: float | None) -> float | None:
        if start is None or self.clock is None:
            return None
        return max(0.0, self.clock() - start)
