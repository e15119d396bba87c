"""Sums of one request taken many times, kept for the requests and counts a session meets.

At a session's open, plugins sum what each job holds and asks.  Nearly every job's tasks of a
status share one request object (one pod shape), so the sum is ``Resource().add_times(r, n)``
for a few distinct ``(r, n)``: computed once each here, not once per job (``add_times`` checks
that its amounts are whole numbers each time it is called).
"""

from __future__ import annotations

from collections.abc import Iterable

from lahar.api.resource import Resource
from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
from lahar_scheduler.framework.types import ALLOCATED_STATUSES, TaskStatus

# What a job without such tasks sums to.  Read only.
NOTHING = Resource()
# What a job holds, summed status by status in the set's own order (as drf and proportion do).
HELD = tuple(ALLOCATED_STATUSES)
_UNSEEN = Resource()  # ``held``'s marker for a job not asked yet


class RunSums:
    """Per-job sums of one run of one request, shared: callers read them (``add`` them into
    their own, or clone them), never change them."""

    def __init__(self) -> None:
        # Keyed by the request's id; the request is kept, so its id cannot be reused meanwhile.
        self._sums: dict[tuple[int, int], tuple[Resource, Resource]] = {}
        self._held: dict[str, Resource | None] = {}  # ``held`` per job uid

    def held(self, job: JobInfo) -> Resource | None:
        """``one_run(job.status_index, HELD)``, kept per job: drf and proportion both ask it of
        every job as a session opens (``Session.open_sums``), while no task moves."""
        got = self._held.get(job.uid, _UNSEEN)
        if got is _UNSEEN:
            got = self._held[job.uid] = self.one_run(job.status_index, HELD)
        return got

    def times(self, r: Resource, n: int) -> Resource:
        """``Resource().add_times(r, n)``."""
        key = (id(r), n)
        got = self._sums.get(key)
        if got is None:
            got = self._sums[key] = (r, Resource().add_times(r, n))
        return got[1]

    def one_run(self, index: dict[TaskStatus, dict[str, TaskInfo]], statuses: Iterable[TaskStatus]) -> Resource | None:
        """What summing the tasks of ``statuses`` bucket by bucket, a run of one request object
        at a time, into a new Resource gives, when that is at most one ``add_times``: NOTHING
        when no such task, ``times(r, n)`` when they are one bucket of one request; else None
        (the caller sums them itself)."""
        found: dict[str, TaskInfo] | None = None
        for status in statuses:
            bucket = index.get(status)
            if bucket:
                if found is not None:
                    return None
                found = bucket
        if found is None:
            return NOTHING
        tasks = iter(found.values())
        first = next(tasks).resreq
        for t in tasks:
            if t.resreq is not first:
                return None
        return self.times(first, len(found))


class AddRuns:
    """``total.add(r)`` for each ``r`` given, in order, taken as one ``add_times`` per run of the
    very same object (the same floats bit for bit: see ``Resource.add_times``).  At a session's
    open most jobs hold one shared sum (``RunSums.times``), so a queue's total is a few adds.
    ``flush`` adds the run still open: call it before reading ``total``."""

    __slots__ = ("_last", "_n", "total")

    def __init__(self, total: Resource) -> None:
        self.total = total
        self._last: Resource | None = None
        self._n = 0

    def add(self, r: Resource) -> None:
        if r is self._last:
            self._n += 1
            return
        if self._last is not None:
            self.total.add_times(self._last, self._n)
        self._last, self._n = r, 1

    def flush(self) -> None:
        if self._last is not None:
            self.total.add_times(self._last, self._n)
            self._last, self._n = None, 0


def add_equal_runs(total: Resource, resources: Iterable[Resource]) -> None:
    """``total.add(r)`` for each ``r`` in order, one ``add_times`` per run of equal amounts (a
    session's jobs mostly hold one of a few sums).  The same floats as the adds one by one
    when ``total`` holds no -0.0 (a new Resource): no partial sum is then -0.0, and adding
    -0.0 or 0.0 (equal amounts) to any other number gives the same; equal scalars name the
    same resources, and the first's order is the order the adds would insert them in."""
    last: Resource | None = None
    n = 0
    for r in resources:
        if last is not None and (
            r is last or (r.milli_cpu == last.milli_cpu and r.memory == last.memory and r.scalars == last.scalars)
        ):
            n += 1
            continue
        if last is not None:
            total.add_times(last, n)
        last, n = r, 1
    if last is not None:
        total.add_times(last, n)
