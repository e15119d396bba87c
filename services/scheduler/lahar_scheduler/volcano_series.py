"""Volcano's queue and job gauges, computed from a session's numbers (pure: no clock, no I/O).

Volcano's plugins set gauges as they go and delete a queue's or job's series when the object
goes.  Here the series are *derived* at scrape time from the last session's ``SessionStats`` and
the per-job scheduling times kept by the service: a queue or job that is no longer in the
snapshot is simply not in the next session's numbers, so its series go with it.

Units follow Volcano: cpu in millicores, memory in bytes, other resources (GPUs, …) by name in
their own unit; ``pods`` is a slot count Volcano keeps apart, so it is not a scalar series.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from lahar.api.resource import Resource
from lahar_scheduler.framework.stats import QueueNumbers, SessionStats

NOT_SCALARS = frozenset({"pods"})
# (series stem, QueueNumbers field).  Volcano's design doc spells capacity's cpu "mill_cpu"; its
# code (what dashboards scrape) says "milli_cpu", as here.
QUEUE_RESOURCES = (
    ("allocated", "allocated"),
    ("request", "request"),
    ("deserved", "deserved"),
    ("inqueue", "inqueue"),
    ("capacity", "capability"),
    ("real_capacity", "real_capability"),
)

Sample = tuple[str, dict[str, str], float]  # series name, labels, value


@dataclass
class JobTimes:
    """When a job (its PodGroup) was created and when the scheduler last placed tasks of it."""

    name: str
    namespace: str
    queue: str
    created: float  # epoch seconds
    duration_ms: float | None = None  # creation → the last task assumed
    last: float | None = None  # epoch seconds of the last task assumed


def resource_samples(stem: str, queue: str, r: Resource) -> Iterator[Sample]:
    labels = {"queue_name": queue}
    yield f"volcano_queue_{stem}_milli_cpu", labels, r.milli_cpu
    yield f"volcano_queue_{stem}_memory_bytes", labels, r.memory
    for name, amount in sorted(r.scalars.items()):
        if name not in NOT_SCALARS:
            yield f"volcano_queue_{stem}_scalar_resources", {"queue_name": queue, "resource": name}, amount


def queue_samples(q: QueueNumbers) -> Iterator[Sample]:
    for stem, attr in QUEUE_RESOURCES:
        r: Resource | None = getattr(q, attr)
        if r is not None:  # a queue without a capability has no capacity series
            yield from resource_samples(stem, q.name, r)
    labels = {"queue_name": q.name}
    yield "volcano_queue_share", labels, q.share
    yield "volcano_queue_weight", labels, float(q.weight)
    yield "volcano_queue_overused", labels, 1.0 if q.overused else 0.0


def session_samples(stats: SessionStats) -> Iterator[Sample]:
    """The gauges one session's numbers give."""
    for q in stats.queues.values():
        yield from queue_samples(q)
    for job in stats.jobs.values():
        if job.share is not None:
            yield "volcano_job_share", {"job_ns": job.namespace, "job_id": job.name}, job.share
        if job.unschedulable_tasks is not None:
            yield "volcano_unschedule_task_count", {"job_id": job.name}, float(job.unschedulable_tasks)
    for namespace, share in stats.namespace_shares.items():
        yield "volcano_namespace_share", {"namespace_name": namespace}, share
    if stats.unschedulable_jobs is not None:
        yield "volcano_unschedule_job_count", {}, float(stats.unschedulable_jobs)


def job_time_samples(times: JobTimes) -> Iterator[Sample]:
    labels = {"job_name": times.name, "queue": times.queue, "job_namespace": times.namespace}
    yield "volcano_e2e_job_scheduling_start_time", labels, times.created
    if times.duration_ms is not None:
        yield "volcano_e2e_job_scheduling_duration", labels, times.duration_ms
    if times.last is not None:
        yield "volcano_e2e_job_scheduling_last_time", labels, times.last


# Every gauge family this module can emit, with Volcano's help text.
GAUGES: dict[str, str] = {
    **{
        f"volcano_queue_{stem}_{unit}": f"{stem.replace('_', ' ').capitalize()} {what} for one queue"
        for stem, _ in QUEUE_RESOURCES
        for unit, what in (("milli_cpu", "CPU count"), ("memory_bytes", "memory"), ("scalar_resources", "scalars"))
    },
    "volcano_queue_share": "Share for one queue",
    "volcano_queue_weight": "Weight for one queue",
    "volcano_queue_overused": "If one queue is overused",
    "volcano_job_share": "Share for one job",
    "volcano_namespace_share": "Share for one namespace",
    "volcano_unschedule_task_count": "Number of tasks could not be scheduled",
    "volcano_unschedule_job_count": "Number of jobs could not be scheduled",
    "volcano_e2e_job_scheduling_start_time": "E2E job scheduling start time",
    "volcano_e2e_job_scheduling_duration": "Per-job duration from job creation to last task assumed, in milliseconds",
    "volcano_e2e_job_scheduling_last_time": "E2E job scheduling last time",
}
