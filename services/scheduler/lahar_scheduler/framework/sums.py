"""Sums of one request taken many times, kept for the requests and counts a session meets.

At a session's open, plugins sum what each job holds and asks.  Nearly every job's tasks of a
status share one request object (one pod shape), so the sum is ``Resource().add_times(r, n)``
for a few distinct ``(r, n)``: computed once each here, not once per job (``add_times`` checks
that its amounts are whole numbers each time it is called).
"""

from __future__ import annotations

from collections.abc import Iterable

from lahar.api.resource import Resource
from lahar_scheduler.framework.jobs import TaskInfo
from lahar_scheduler.framework.types import TaskStatus

# What a job without such tasks sums to.  Read only.
NOTHING = Resource()


class RunSums:
    """Per-job sums of one run of one request, shared: callers read them (``add`` them into
    their own, or clone them), never change them."""

    def __init__(self) -> None:
        # Keyed by the request's id; the request is kept, so its id cannot be reused meanwhile.
        self._sums: dict[tuple[int, int], tuple[Resource, Resource]] = {}

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
        first: Resource | None = None
        for t in found.values():
            if first is None:
                first = t.resreq
            elif t.resreq is not first:
                return None
        assert first is not None
        return self.times(first, len(found))
