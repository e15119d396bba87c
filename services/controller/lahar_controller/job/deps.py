"""Task ``dependsOn``: a task creates its missing pods only once the tasks it names are ready.

A task is ready when enough of its pods (``<job>-<task>-<i>``, i < replicas) are Succeeded, or
Running with every container ready, to reach its ``minAvailable`` (no minAvailable: ready at once).
``iteration: any`` with several names needs one ready task; otherwise all must be.
"""

from __future__ import annotations

from collections.abc import Mapping

from lahar_controller.job.view import Obj, name_of, phase_of, tasks


def _task(job: Obj, name: str) -> Obj | None:
    return next((t for t in tasks(job) if t.get("name") == name), None)


def _counts_as_up(pod: Obj) -> bool:
    phase = phase_of(pod)
    if phase == "Succeeded":
        return True
    if phase != "Running":
        return False
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return all(s.get("ready") for s in statuses)


def task_ready(job: Obj, task_name: str, pods_by_name: Mapping[str, Obj]) -> bool:
    task = _task(job, task_name)
    if task is None:
        return True  # an unknown task cannot hold anything back (admission rejects such jobs)
    wanted = task.get("minAvailable")
    if wanted is None:
        return True
    prefix = f"{name_of(job)}-{task_name}-"
    up = sum(
        1
        for i in range(int(task.get("replicas") or 0))
        if (pod := pods_by_name.get(f"{prefix}{i}")) is not None and _counts_as_up(pod)
    )
    return up >= int(wanted)


def depends_on_met(job: Obj, task: Obj, pods_by_name: Mapping[str, Obj]) -> bool:
    """Whether ``task`` may create its pods now."""
    depends = task.get("dependsOn")
    if not depends:
        return True
    names = list(depends.get("name") or [])
    if len(names) > 1 and depends.get("iteration") == "any":
        return any(task_ready(job, n, pods_by_name) for n in names)
    return all(task_ready(job, n, pods_by_name) for n in names)
