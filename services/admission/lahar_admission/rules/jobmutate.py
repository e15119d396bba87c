"""``/jobs/mutate``: Volcano Job CREATE defaults."""

from __future__ import annotations

import copy
from typing import Any

from lahar_admission.review import Verdict
from lahar_admission.rules.common import CREATE, Ctx, decode, expect_resource
from lahar_admission.types import Job, TaskSpec

DEFAULT_QUEUE = "default"
DEFAULT_MAX_RETRY = 3
# Plugins that need the svc plugin; mpi also needs ssh.
NEEDS_SVC = ("tensorflow", "mpi", "pytorch", "ray")


def mutate(ctx: Ctx) -> Verdict:
    expect_resource(ctx.request, "batch.volcano.sh", "v1alpha1", "jobs")
    job = decode(ctx.request.object, Job)
    if ctx.op != CREATE:
        return Verdict.deny("expect operation to be 'CREATE' ")
    return Verdict.allow(job_patch(job, ctx.plain("object"), ctx.settings.scheduler_names[0]))


def job_patch(job: Job, plain: dict[str, Any], scheduler: str) -> list[dict[str, Any]]:
    spec = job.spec
    ops: list[dict[str, Any]] = []
    if not spec.queue:
        ops.append({"op": "add", "path": "/spec/queue", "value": DEFAULT_QUEUE})
    if not spec.scheduler_name:
        ops.append({"op": "add", "path": "/spec/schedulerName", "value": scheduler})
    if spec.max_retry == 0:
        ops.append({"op": "add", "path": "/spec/maxRetry", "value": DEFAULT_MAX_RETRY})
    raw_tasks = (plain.get("spec") or {}).get("tasks") or []
    tasks, changed = defaulted_tasks(spec.tasks, raw_tasks)
    if changed:
        ops.append({"op": "replace", "path": "/spec/tasks", "value": tasks})
    if spec.min_available == 0:
        ops.append({"op": "add", "path": "/spec/minAvailable", "value": sum(t["minAvailable"] for t in tasks)})
    if spec.plugins is not None:
        ops.append({"op": "replace", "path": "/spec/plugins", "value": defaulted_plugins(spec.plugins)})
    return ops


def _task_min_available(task: TaskSpec) -> int:
    pp = task.partition_policy
    # minPartitions omitted (0) falls back to replicas (upstream issue #5401).
    if pp is not None and pp.min_partitions > 0:
        return pp.min_partitions * pp.partition_size
    return task.replicas


def defaulted_tasks(tasks: list[TaskSpec], raw: list[Any]) -> tuple[list[dict[str, Any]], bool]:
    """The tasks with defaults filled in (every other field kept as sent), and whether any changed."""
    out: list[dict[str, Any]] = []
    changed = False
    for index, task in enumerate(tasks):
        item = copy.deepcopy(raw[index]) if index < len(raw) and isinstance(raw[index], dict) else {}
        if not task.name:
            item["name"] = f"default{index}"
            changed = True
        pod_spec = (item.get("template") or {}).get("spec") or {}
        if pod_spec.get("hostNetwork") is True and not pod_spec.get("dnsPolicy"):
            item.setdefault("template", {}).setdefault("spec", {})["dnsPolicy"] = "ClusterFirstWithHostNet"
            changed = True
        if task.min_available is None:
            item["minAvailable"] = _task_min_available(task)
            changed = True
        else:
            item["minAvailable"] = task.min_available
        if task.max_retry == 0:
            item["maxRetry"] = DEFAULT_MAX_RETRY
            changed = True
        out.append(item)
    return out, changed


def defaulted_plugins(plugins: dict[str, list[str] | None]) -> dict[str, list[str]]:
    out = {name: list(args or []) for name, args in plugins.items()}
    if any(name in plugins for name in NEEDS_SVC):
        out.setdefault("svc", [])
    if "mpi" in plugins:
        out.setdefault("ssh", [])
    return out
