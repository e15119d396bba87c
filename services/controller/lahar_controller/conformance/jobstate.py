"""Runner for the job-lifecycle areas: job-state-machine, job-kill, job-sync, job-status,
job-dependson, job-policy and job-handlers (``check(case) -> differences``).

Each step runs the pure functions of ``lahar_controller.job`` on the case's objects; effects are
applied to an in-memory cluster, which is then compared with ``expect``.  Facts under
``expect.derived`` are checked too and reported with a ``derived`` prefix.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lahar_controller.conformance.jobstate_expect import (
    MISSING,
    Cluster,
    count_differences,
    differences,
    object_differences,
)
from lahar_controller.job import render
from lahar_controller.job.context import Context
from lahar_controller.job.deps import task_ready
from lahar_controller.job.handlers import Handlers, pod_ident
from lahar_controller.job.hooks import PluginRender
from lahar_controller.job.kill import RETAIN_NONE, RETAIN_SOFT, kill_pods
from lahar_controller.job.policy import apply_policies
from lahar_controller.job.state import execute
from lahar_controller.job.status import append_condition, go_duration, parse_time
from lahar_controller.job.view import Action, JobView, Request, Target, name_of, spec

Obj = dict[str, Any]

PENDING: dict[str, str] = {}

_CLOCK = datetime(2025, 1, 1, tzinfo=UTC)


def _now(case: Obj) -> datetime:
    clock = (case.get("given") or {}).get("clock")
    return parse_time(str(clock)) or _CLOCK if clock else _CLOCK


def _job(cluster: Cluster, ref: str) -> Obj:
    namespace, _, name = ref.rpartition("/")
    job = cluster.get("Job", namespace, name)
    if job is None:
        raise LookupError(f"no Job {ref} in given.objects")
    return job


def view_of(cluster: Cluster, job: Obj) -> JobView:
    """The job and the pods it controls, as the controller's cache would hold them."""
    namespace = (job.get("metadata") or {}).get("namespace") or ""
    pods = []
    for pod in cluster.of_kind("Pod", namespace):
        ident = pod_ident(pod)
        if ident is not None and ident.job_name == name_of(job):
            pods.append(pod)
    return JobView.of(job, pods)


def context_of(cluster: Cluster, job: Obj, now: datetime) -> Context:
    """What a job step reads from the cluster besides the job's own pods."""
    namespace = (job.get("metadata") or {}).get("namespace") or ""
    podgroups = {name_of(pg): pg for pg in cluster.of_kind("PodGroup", namespace)}
    priorities = {name_of(pc): int(pc.get("value") or 0) for pc in cluster.of_kind("PriorityClass")}
    return Context(
        now=now,
        render=PluginRender(priorities),
        queue=cluster.get("Queue", "", str(spec(job).get("queue") or "default")),
        podgroup=render.find_podgroup(job, podgroups),
        pvcs=frozenset(name_of(p) for p in cluster.of_kind("PersistentVolumeClaim", namespace)),
        pods_by_name={name_of(p): p for p in cluster.of_kind("Pod", namespace)},
    )


def _retain(text: str) -> frozenset[str]:
    return RETAIN_SOFT if text == "Soft" else RETAIN_NONE


def _target(raw: Obj | None) -> Target | None:
    if not raw:
        return None
    return Target(str(raw.get("type", "")), str(raw.get("task", "")), str(raw.get("pod", "")))


def _execute_action(case: Obj, cluster: Cluster) -> Obj:
    step = case["step"]
    job = _job(cluster, step["job"])
    outcome = execute(view_of(cluster, job), Action(step["action"]), context_of(cluster, job, _now(case)))
    cluster.apply(outcome.effects)
    return {"error": outcome.error or None}


def _kill(case: Obj, cluster: Cluster) -> Obj:
    step = case["step"]
    job = _job(cluster, step["job"])
    target = _target(step.get("target")) if step["kind"] == "killPods" else None
    ctx = context_of(cluster, job, _now(case))
    outcome = kill_pods(view_of(cluster, job), _retain(str(step.get("retainPhases", "None"))), target, None, ctx)
    cluster.apply(outcome.effects)
    return {"error": outcome.error or None}


def _depends_on_ready(case: Obj, cluster: Cluster) -> Obj:
    step = case["step"]
    job = _job(cluster, step["job"])
    namespace = (job.get("metadata") or {}).get("namespace") or ""
    pods = {name_of(p): p for p in cluster.of_kind("Pod", namespace)}
    return {"ready": task_ready(job, step["task"], pods)}


def _apply_policies(case: Obj, cluster: Cluster) -> Obj:
    step = case["step"]
    job = _job(cluster, step["job"])
    raw = step.get("request") or {}
    namespace, _, name = step["job"].rpartition("/")
    req = Request(
        namespace,
        name,
        job_uid=str(raw.get("jobUid") or ""),
        task_name=str(raw.get("taskName") or ""),
        event=str(raw.get("event") or ""),
        exit_code=int(raw.get("exitCode") or 0),
        action=str(raw.get("action") or ""),
        job_version=int(raw.get("jobVersion") or 0),
    )
    decision = apply_policies(job, req)
    return {"action": decision.action, "delay": go_duration(decision.delay)}


def _append_condition(case: Obj, cluster: Cluster) -> Obj:
    given = list((case.get("given") or {}).get("conditions") or [])
    result = append_condition(given, case["step"]["condition"])
    return {
        "conditionCount": len(result),
        "lastConditionStatus": result[-1].get("status") if result else None,
        "conditionStatuses": [c.get("status") for c in result],
    }


_OPS: dict[str, Callable[[Handlers, Obj], None]] = {
    "addJob": lambda h, e: h.add_job(e["object"]),
    "updateJob": lambda h, e: h.update_job(e["old"], e["object"]),
    "deleteJob": lambda h, e: h.delete_job(e["object"]),
    "addPod": lambda h, e: h.add_pod(e["object"]),
    "updatePod": lambda h, e: h.update_pod(e["old"], e["object"]),
    "deletePod": lambda h, e: h.delete_pod(e["object"]),
    "addCommand": lambda h, e: h.add_command(e["object"]),
    "updatePodGroup": lambda h, e: h.update_podgroup(e["old"], e["object"]),
}


def _request_view(req: Request) -> Obj:
    return {
        "job": req.key,
        "task": req.task_name,
        "pod": req.pod_name,
        "event": req.event,
        "exitCode": req.exit_code,
        "action": req.action,
        "jobUid": req.job_uid,
        "jobVersion": req.job_version,
    }


def _job_view(handlers: Handlers, key: str) -> Obj:
    view = handlers.cache.view(key)
    if view is None:
        return {"job": key, "present": False}
    phase = ((view.job.get("status") or {}).get("state") or {}).get("phase") or ""
    pods = {t: {n: ((p.get("status") or {}).get("phase") or "") for n, p in ps.items()} for t, ps in view.pods.items()}
    return {
        "job": key,
        "present": True,
        "phase": phase,
        "podsPerTask": {t: len(ps) for t, ps in view.pods.items()},
        "pods": pods,
    }


def _deliver_events(case: Obj, cluster: Cluster) -> Obj:
    handlers = Handlers()
    for event in case["step"]["events"]:
        _OPS[event["op"]](handlers, event)
    requests = [_request_view(r) for r in handlers.requests]
    expected_view = (case.get("expect") or {}).get("jobView") or {}
    return {
        "jobView": _job_view(handlers, str(expected_view.get("job", ""))),
        "queuedRequests": requests,
        "queuedCommands": len(handlers.commands),
        "lastRequest": requests[-1] if requests else None,
    }


_STEPS: dict[str, Callable[[Obj, Cluster], Obj]] = {
    "executeAction": _execute_action,
    "killJob": _kill,
    "killPods": _kill,
    "dependsOnReady": _depends_on_ready,
    "applyPolicies": _apply_policies,
    "appendCondition": _append_condition,
    "deliverEvents": _deliver_events,
}


def _compare(expect: Obj, result: Obj, cluster: Cluster, prefix: str) -> list[str]:
    out: list[str] = []
    for key, want in expect.items():
        if key == "derived":
            continue
        if key == "objects":
            found = object_differences(want, cluster)
        elif key == "counts":
            found = count_differences(want, cluster)
        elif key == "queuedRequests":
            found = _requests(want, result.get(key, MISSING))
        else:
            found = differences(want, result.get(key, MISSING), key)
        out.extend(f"{prefix}{d}" for d in found)
    return out


def _requests(want: list[Obj], have: Any) -> list[str]:
    """Queued requests in order; an item's ``$derived`` part is a weaker fact, compared all the same."""
    plain = [{k: v for k, v in item.items() if k != "$derived"} for item in want]
    out = differences(plain, have, "queuedRequests")
    if out or not isinstance(have, list):
        return out
    for i, item in enumerate(want):
        if "$derived" in item:
            out.extend(f"derived {d}" for d in differences(item["$derived"], have[i], f"queuedRequests[{i}]"))
    return out


def check(case: Obj) -> list[str]:
    cluster = Cluster(list((case.get("given") or {}).get("objects") or []))
    kind = case["step"]["kind"]
    run = _STEPS.get(kind)
    if run is None:
        return [f"step kind {kind!r} is not a job-lifecycle step"]
    result = run(case, cluster)
    expect = case.get("expect") or {}
    out = _compare(expect, result, cluster, "")
    out.extend(_compare(expect.get("derived") or {}, result, cluster, "derived "))
    return out
