"""Victim bundles for gang-aware eviction (Volcano's actions/utils bundle.go).

A victim job's candidate tasks split into two bundles: *safe* tasks, whose eviction leaves the
job gang-ready (above minMember, and above each role's minTaskMember when roles are enforced),
and the *whole* rest, which may only go all together since taking any of them breaks the gang
(and so costs the job everything it holds).  Bundles are ranked safe before whole, then by the
victim job (or queue) order, then by return on investment: how much of the preemptor's need a
bundle frees locally against what its eviction costs globally.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import cmp_to_key
from typing import TYPE_CHECKING

from lahar.api.resource import Dim, Resource

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo


class BundleType(enum.IntEnum):
    SAFE = 0
    WHOLE = 1


@dataclass
class Bundle:
    type: BundleType
    job: JobInfo | None
    tasks: list[TaskInfo]
    local: Resource = field(default_factory=Resource)  # what these tasks hold here
    global_: Resource = field(default_factory=Resource)  # what evicting them costs the job (whole only)


def total_resreq(tasks: Iterable[TaskInfo]) -> Resource:
    out = Resource()
    for t in tasks:
        out.add(t.resreq)
    return out


def job_bundles(job: JobInfo, local: list[TaskInfo]) -> list[Bundle]:
    """Split a victim job's candidates, lowest task priority first, into safe and whole."""
    if not local:
        return []
    local = sorted(local, key=lambda t: (t.priority, t.uid))
    surplus = job.ready_num() - job.min_available
    if surplus < 0:
        # Already short of its gang: evicting more cannot break it further.
        return [Bundle(BundleType.SAFE, job, local, total_resreq(local))]
    # Roles count only when minMember covers their minimums (gang's CheckTaskReady bypass).
    enforce_roles = job.min_available >= job.task_min_total
    ready = job.allocated_roles() if enforce_roles else {}
    role_surplus = {role: ready.get(role, 0) - m for role, m in job.task_min_available.items()} if enforce_roles else {}
    safe: list[TaskInfo] = []
    whole: list[TaskInfo] = []
    for t in local:
        bounded = t.role in role_surplus
        if surplus > 0 and (not bounded or role_surplus[t.role] > 0):
            safe.append(t)
            surplus -= 1
            if bounded:
                role_surplus[t.role] -= 1
        else:
            whole.append(t)
    out = []
    if safe:
        out.append(Bundle(BundleType.SAFE, job, safe, total_resreq(safe)))
    if whole:
        out.append(Bundle(BundleType.WHOLE, job, whole, total_resreq(whole), total_resreq(job.tasks.values())))
    return out


def flatten(bundles: Iterable[Bundle]) -> list[TaskInfo]:
    return [t for b in bundles for t in b.tasks]


def apply_allowed(bundles: Iterable[Bundle], allowed: set[str]) -> list[Bundle]:
    """Keep what the plugins allowed: a whole bundle all or nothing, a safe one shrunk."""
    out = []
    for b in bundles:
        if not b.tasks:
            continue
        kept = [t for t in b.tasks if t.uid in allowed]
        if b.type is BundleType.WHOLE:
            if len(kept) == len(b.tasks):
                out.append(b)
        elif kept:
            out.append(replace(b, tasks=kept, local=total_resreq(kept)))
    return out


def select(bundles: Iterable[Bundle], need: Resource, allow_whole: bool) -> list[Bundle]:
    """Bundles in order until what they free covers ``need``."""
    out = []
    freed = Resource()
    for b in bundles:
        if b.type is BundleType.WHOLE and not allow_whole:
            continue
        out.append(b)
        freed.add(b.local)
        if need.less_equal(freed, Dim.ZERO):
            break
    return out


def _score(res: Resource, need: Resource, cap: bool) -> float:
    total = 0.0
    for name in need.names():
        n = need.get(name)
        if n <= 0:
            continue
        v = res.get(name)
        total += (min(v, n) if cap else v) / n
    return total


def roi(b: Bundle, need: Resource) -> float:
    """Local help (capped at the need) over global cost; a bundle that costs nothing is infinite."""
    cost = _score(b.global_, need, False)
    return math.inf if cost == 0 else _score(b.local, need, True) / cost


def _first_uid(b: Bundle) -> str:
    return b.tasks[0].uid if b.tasks else ""


def _stable(left: Bundle, right: Bundle) -> int:
    lk = (left.job.uid if left.job else "", _first_uid(left), len(left.tasks))
    rk = (right.job.uid if right.job else "", _first_uid(right), len(right.tasks))
    return -1 if lk < rk else (1 if lk > rk else 0)


def _sort(bundles: list[Bundle], need: Resource, before: Callable[[Bundle, Bundle], bool | None]) -> None:
    """Type, then ``before`` (None when it cannot tell), then ROI, then a stable key."""

    def cmp(left: Bundle, right: Bundle) -> int:
        if left.type != right.type:
            return -1 if left.type < right.type else 1
        decided = before(left, right)
        if decided is not None:
            return -1 if decided else 1
        lr, rr = roi(left, need), roi(right, need)
        if lr != rr:
            return -1 if lr > rr else 1
        return _stable(left, right)

    bundles.sort(key=cmp_to_key(cmp))


def sort_for_preempt(
    bundles: list[Bundle], need: Resource, victim_first: Callable[[JobInfo, JobInfo], bool] | None
) -> None:
    """Victim jobs by ``victim_first`` (the reverse of job order) when it tells them apart."""

    def before(left: Bundle, right: Bundle) -> bool | None:
        lj, rj = left.job, right.job
        if victim_first is None or lj is None or rj is None or lj.uid == rj.uid:
            return None
        ij, ji = victim_first(lj, rj), victim_first(rj, lj)
        return ij if ij != ji else None

    _sort(bundles, need, before)


def sort_for_reclaim(
    bundles: list[Bundle],
    need: Resource,
    queue_first: Callable[[QueueInfo, QueueInfo], bool] | None,
    queues: dict[str, QueueInfo],
) -> None:
    """Victim queues by ``queue_first`` (victim queue order) when it tells them apart."""

    def before(left: Bundle, right: Bundle) -> bool | None:
        if queue_first is None or left.job is None or right.job is None:
            return None
        lq, rq = queues.get(left.job.queue), queues.get(right.job.queue)
        if lq is None or rq is None or lq.uid == rq.uid:
            return None
        ij, ji = queue_first(lq, rq), queue_first(rq, lq)
        return ij if ij != ji else None

    _sort(bundles, need, before)
