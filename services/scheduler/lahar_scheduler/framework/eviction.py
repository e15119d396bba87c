"""Who asks for victims in gang-aware eviction (Volcano's EvictionContext).

The ``unified_evictable`` point hands plugins a whole job's candidate victims at once, with the
kind of eviction, so one callback serves gangpreempt and gangreclaim and plugins branch on it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import JobInfo


class EvictionKind(enum.Enum):
    GANG_PREEMPT = "gangpreempt"
    GANG_RECLAIM = "gangreclaim"


@dataclass(frozen=True)
class EvictionContext:
    kind: EvictionKind
    job: JobInfo  # the job the victims would make room for
    domain: str  # the hyper-node (or the whole cluster) the victims are looked for in
