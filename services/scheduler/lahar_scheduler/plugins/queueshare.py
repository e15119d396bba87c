"""Queue accounting shared by proportion and capacity: allocated, request, inqueue, elastic."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from lahar.api.resource import (
    CPU,
    MEMORY,
    PODS,
    Resource,
    exceeded_part,
    is_scalar_resource_name,
    max_share,
)
from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
from lahar_scheduler.framework.types import ALLOCATED_STATUSES, PodGroupPhase, TaskStatus

S = TaskStatus


def inqueue_resource(job: JobInfo, allocated: Resource) -> Resource:
    """What an admitted job still reserves: per dimension of minResources, max(0, min − allocated)."""
    pg = job.podgroup
    assert pg is not None and pg.spec.min_resources is not None
    minimum = _min_resources(job)
    out = Resource()
    for name in pg.spec.min_resources:
        if name == CPU:
            out.milli_cpu = max(0.0, minimum.milli_cpu - allocated.milli_cpu)
        elif name == MEMORY:
            out.memory = max(0.0, minimum.memory - allocated.memory)
        elif name == PODS:
            left = minimum.scalars.get(PODS, 0.0) - allocated.scalars.get(PODS, 0.0)
            if left > 0:
                out.scalars[PODS] = left
        elif not name.startswith("count/") and is_scalar_resource_name(name):
            want = minimum.scalars.get(name, 0.0)
            if name not in allocated.scalars:
                out.scalars[name] = want
            elif want - allocated.scalars[name] > 0:
                out.scalars[name] = want - allocated.scalars[name]
    return deduct_gated(job, out)


def gated_resources(job: JobInfo) -> Resource:
    out = Resource()
    for t in job.tasks.values():
        gates = t.pod.spec.scheduling_gates
        if gates and not (len(gates) == 1 and gates[0].name == "scheduling.volcano.sh/queue-allocation-gate"):
            out.add(t.resreq)
    return out


def deduct_gated(job: JobInfo, r: Resource) -> Resource:
    gated = gated_resources(job)
    if gated.is_empty():
        return r
    out = r.clone()
    out.milli_cpu = max(out.milli_cpu - gated.milli_cpu, 0.0)
    out.memory = max(out.memory - gated.memory, 0.0)
    for name, amount in r.scalars.items():
        if name in gated.scalars:
            out.scalars[name] = max(amount - gated.scalars[name], 0.0)
    return out


def min_resources(job: JobInfo) -> Resource:
    pg = job.podgroup
    if pg is None or pg.spec.min_resources is None:
        return Resource()
    return _min_resources(job).clone()


def _min_resources(job: JobInfo) -> Resource:
    """``Resource.from_list`` of the PodGroup's minResources, as the job made it when it took
    the PodGroup (``JobInfo.set_podgroup``; nothing changes it since): not made again for each
    job at every session's open.  Read only."""
    assert job.min_resources is not None
    return job.min_resources


def elastic_resources(job: JobInfo) -> Resource:
    return exceeded_part(job.allocated, min_resources(job))


def job_inqueue(job: JobInfo) -> Resource | None:
    """The inqueue reservation a job contributes at session open, or None."""
    pg = job.podgroup
    if pg is None or pg.spec.min_resources is None:
        return None
    if job.phase == PodGroupPhase.INQUEUE:
        return inqueue_resource(job, job.allocated)
    if job.phase == PodGroupPhase.RUNNING and job.allocated_num() >= pg.spec.min_member:
        return inqueue_resource(job, job.allocated)
    return None


def job_usage(job: JobInfo) -> tuple[Resource, Resource]:
    """(allocated, request): allocated tasks, and allocated plus pending tasks."""
    allocated = Resource()
    request = Resource()
    for status, bucket in job.status_index.items():
        if status in ALLOCATED_STATUSES:
            for r, n in request_runs(bucket.values()):
                allocated.add_times(r, n)
                request.add_times(r, n)
        elif status == S.PENDING:
            for r, n in request_runs(bucket.values()):
                request.add_times(r, n)
    return allocated, request


def request_runs(tasks: Iterable[TaskInfo]) -> Iterator[tuple[Resource, int]]:
    """The tasks' requests as (request, how many tasks in a row hold that very object): the
    tasks of one shape share one, so summing a job's tasks with ``Resource.add_times`` takes a
    few adds (the same sums as one add per task)."""
    last: Resource | None = None
    n = 0
    for t in tasks:
        r = t.resreq
        if r is last:
            n += 1
            continue
        if last is not None:
            yield last, n
        last, n = r, 1
    if last is not None:
        yield last, n


def dominant_share(allocated: Resource, deserved: Resource) -> float:
    return max_share(allocated, deserved, deserved.names())
