"""The sync path: bring a job's objects in line with its spec, then let the phase rule decide.

First sync (phase "" or Pending): status initialised (Pending, ``minAvailable``), plugins set up,
volumes checked or claimed, PodGroup created.  Later syncs: plugins' update hooks, PodGroup updated.
Pods are created or deleted only once the PodGroup is past Pending (the scheduler admitted the job);
before that the phase rule reads the counts already stored.  Afterwards: missing replicas created
(a task with ``dependsOn`` only when its dependencies are ready), out-of-sync pods and pods beyond
``replicas`` deleted, counts recomputed.  The status is written only when it changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from lahar_controller.job import render
from lahar_controller.job import status as st
from lahar_controller.job.context import Context, Outcome, UpdateFn
from lahar_controller.job.deps import depends_on_met
from lahar_controller.job.effects import Create, Delete, Effect, JobError, Update, UpdateStatus, event_about
from lahar_controller.job.jsoncopy import copy_json
from lahar_controller.job.names import JOB_FORWARDING
from lahar_controller.job.view import (
    JobView,
    Obj,
    job_phase,
    meta,
    name_of,
    namespace_of,
    out_of_sync,
    spec,
    tasks,
    terminating,
)

T = TypeVar("T")


def sync_job(view: JobView, update: UpdateFn | None, ctx: Context) -> Outcome:
    job = copy_json(view.job)
    if meta(job).get("deletionTimestamp"):
        return Outcome(job)
    before = st.copied(job)
    effects: list[Effect] = []
    try:
        forwarding = _forwarding(job, ctx)
        _prepare(job, ctx, effects, forwarding)
    except JobError as exc:
        return _failed(job, before, effects, exc)
    pg = ctx.podgroup
    if pg is not None:
        effects.extend(podgroup_events(job, pg))
    if pg is None or str((pg.get("status") or {}).get("phase") or "") in ("", "Pending"):
        status = st.copied(job)
        if update is not None:
            update(status)
        return _write(job, before, status, effects, ctx)
    try:
        status = _sync_pods(view, job, pg, forwarding, ctx, effects)
    except JobError as exc:
        return _failed(job, before, effects, exc)
    if update is not None:
        update(status)
    return _write(job, before, status, effects, ctx)


def _failed(job: Obj, before: Obj, effects: list[Effect], exc: JobError) -> Outcome:
    """Stop part-way; what was set up so far (the first Pending, plugin marks) is still recorded."""
    if not st.same(job.get("status") or {}, before):
        effects.append(UpdateStatus(copy_json(job)))
    return Outcome(job, effects, str(exc))


def _write(job: Obj, before: Obj, status: Obj, effects: list[Effect], ctx: Context) -> Outcome:
    if st.same(status, before):
        job["status"] = status
        return Outcome(job, effects)
    if not st.same(status, st.copied(job)):  # the first sync's status already carries its stamp
        st.stamp(status, ctx.now)
    job["status"] = status
    effects.append(UpdateStatus(job))
    return Outcome(job, effects)


def _forwarding(job: Obj, ctx: Context) -> bool:
    queue_name = spec(job).get("queue") or "default"
    if ctx.queue is None:
        raise JobError(f'queue.scheduling.volcano.sh "{queue_name}" not found')
    if not (ctx.queue.get("spec") or {}).get("extendClusters"):
        return False
    meta(job).setdefault("annotations", {})[JOB_FORWARDING] = "true"
    return True


def _prepare(job: Obj, ctx: Context, effects: list[Effect], forwarding: bool) -> None:
    """Volcano's initiateJob (first sync) or initOnJobUpdate (later syncs)."""
    job.setdefault("status", {})
    changed_spec = forwarding
    if job_phase(job) in ("", "Pending"):
        _init_status(job, ctx)
        effects.extend(_guard(job, effects, "PluginError", "Execute plugin when job add failed", ctx.render.on_job_add))
        claims, named = _guard(job, effects, "PVCError", "Failed to create PVC", lambda j: _volumes(j, ctx))
        effects.extend(claims)
        changed_spec = changed_spec or named
    else:
        effects.extend(
            _guard(job, effects, "PluginError", "Execute plugin when job add failed", ctx.render.on_job_update)
        )
    if changed_spec:
        effects.append(Update(copy_json(job)))
    effects.extend(_guard(job, effects, "PodGroupError", "Failed to create PodGroup", lambda j: _podgroup(j, ctx)))


def _guard(job: Obj, effects: list[Effect], reason: str, what: str, step: Callable[[Obj], T]) -> T:
    """Run one set-up step; on failure record a Warning event and stop the sync."""
    try:
        return step(job)
    except JobError as exc:
        effects.append(event_about(job, "Warning", reason, f"{what}, err: {exc}"))
        raise


def _init_status(job: Obj, ctx: Context) -> None:
    status = job["status"]
    if st.phase(status):
        return
    st.set_phase(status, "Pending")
    status["minAvailable"] = int(spec(job).get("minAvailable") or 0)
    st.stamp(status, ctx.now)


def _podgroup(job: Obj, ctx: Context) -> list[Effect]:
    desired = ctx.render.podgroup(job, ctx.podgroup)
    if desired is None:
        return []
    return [Create(desired) if ctx.podgroup is None else Update(desired)]


def _volumes(job: Obj, ctx: Context) -> tuple[list[Effect], bool]:
    """Check named claims exist, name and create the others; True when the spec gained names."""
    resources = job["status"].setdefault("controlledResources", {})
    named, creates = False, list[Effect]()
    for volume in spec(job).get("volumes") or []:
        claim = volume.get("volumeClaimName") or ""
        if not claim:
            claim = _new_claim_name(job, ctx)
            volume["volumeClaimName"] = claim
            named = True
            if volume.get("volumeClaim") is not None:
                creates.append(Create(_pvc(job, claim, volume["volumeClaim"])))
        elif claim not in ctx.pvcs:
            raise JobError(f"pvc {claim} is not found, the job will be in the Pending state until the PVC is created")
        resources[f"volume-pvc-{claim}"] = claim
    return creates, named


def _new_claim_name(job: Obj, ctx: Context) -> str:
    while True:
        claim = f"{name_of(job)}-pvc-{ctx.new_suffix()}"
        if claim not in ctx.pvcs:
            return claim


def _pvc(job: Obj, name: str, claim: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace_of(job), "ownerReferences": [render.owner_ref(job)]},
        "spec": copy_json(claim),
    }


def podgroup_events(job: Obj, pg: Obj) -> list[Effect]:
    """A Warning on the job while its PodGroup's latest true condition is not Scheduled."""
    found = render.podgroup_event(job, pg)
    return [] if found is None else [event_about(job, *found)]


def _sync_pods(view: JobView, job: Obj, pg: Obj, forwarding: bool, ctx: Context, effects: list[Effect]) -> Obj:
    tally = st.Tally()
    creates: dict[str, list[Obj]] = {}
    deletes: list[Obj] = []
    for task in tasks(job):
        name = str(task.get("name", ""))
        existing = dict(view.pods.get(name, {}))
        creates[name] = []
        for i in range(int(task.get("replicas") or 0)):
            pod = existing.pop(f"{name_of(job)}-{name}-{i}", None)
            if pod is None:
                creates[name].append(_new_pod(job, task, i, forwarding, pg, ctx))
            elif terminating(pod):
                tally.counts["terminating"] += 1
            else:
                if out_of_sync(pod):
                    deletes.append(pod)
                tally.add(pod)
        deletes.extend(existing.values())  # beyond replicas (scale down) or foreign names
    pods_by_name = ctx.pods_by_name
    if pods_by_name is None:
        pods_by_name = {name_of(p): p for p in view.all_pods()}
    for task in tasks(job):
        if not creates[task.get("name", "")] or not depends_on_met(job, task, pods_by_name):
            continue
        for pod in creates[task.get("name", "")]:
            effects.append(Create(pod))
            tally.add_created(pod)
    for pod in deletes:
        effects.append(_delete_pod(pod))
        tally.counts["terminating"] += 1
    return _new_status(job, tally)


def _new_pod(job: Obj, task: Obj, index: int, forwarding: bool, pg: Obj, ctx: Context) -> Obj:
    pod = ctx.render.pod(job, task, index, forwarding=forwarding, podgroup=pg)
    ctx.render.on_pod_create(job, pod)
    return pod


def _delete_pod(pod: Obj) -> Effect:
    return Delete("v1", "Pod", namespace_of(pod), name_of(pod))


def _new_status(job: Obj, tally: st.Tally) -> Obj:
    old = job.get("status") or {}
    status: Obj = {"state": copy_json(old.get("state") or {})}
    tally.write(status)
    status["minAvailable"] = int(spec(job).get("minAvailable") or 0)
    for key in ("version", "controlledResources", "conditions", "retryCount", "runningDuration"):
        if key in old:
            status[key] = copy_json(old[key])
    return status
