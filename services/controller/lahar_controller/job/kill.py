"""Killing a job's pods: the whole job (by retain rule) or one target (task, pod, partition).

Each killed pod is first marked out-of-sync (so its later events are not read as failures) and
then deleted.  The counts written afterwards hold what the kill saw: killed and already
terminating pods as ``terminating``; on a whole-job kill, retained (finished) pods by their phase,
as Volcano's killJob counts them (so a Completed job still shows its succeeded pods).
A whole-job kill bumps ``status.version`` (pods of older versions no longer trigger policies) and
deletes the PodGroup; a targeted kill keeps the PodGroup so the scheduler need not re-admit the job.
Plugins' clean-up hooks run on every kill, before the status is written, as in Volcano.
"""

from __future__ import annotations

from datetime import datetime

from lahar_controller.job import status as st
from lahar_controller.job.context import Context, Outcome, UpdateFn
from lahar_controller.job.effects import Annotate, Delete, Effect, UpdateStatus, delete_of
from lahar_controller.job.jsoncopy import copy_json
from lahar_controller.job.names import OUT_OF_SYNC, PARTITION_ID
from lahar_controller.job.view import (
    JobView,
    Obj,
    Target,
    labels_of,
    meta,
    name_of,
    namespace_of,
    phase_of,
    spec,
    terminating,
)

RETAIN_NONE: frozenset[str] = frozenset()
RETAIN_SOFT: frozenset[str] = frozenset({"Succeeded", "Failed"})


def kill_job(view: JobView, retain: frozenset[str], update: UpdateFn | None, ctx: Context) -> Outcome:
    return kill_pods(view, retain, None, update, ctx)


def kill_target(view: JobView, target: Target, update: UpdateFn | None, ctx: Context) -> Outcome:
    return kill_pods(view, RETAIN_NONE, target, update, ctx)


def targeted(view: JobView, target: Target) -> list[Obj]:
    pods = view.pods.get(target.task, {})
    if target.type == "task":
        return list(pods.values())
    if target.type == "pod":
        return [pods[target.pod]] if target.pod in pods else []
    if target.type == "partition":
        return [p for p in pods.values() if labels_of(p).get(PARTITION_ID) == target.partition]
    return []


def _whole_job(view: JobView, retain: frozenset[str], tally: st.Tally) -> list[Obj]:
    status = view.job.get("status") or {}
    # the last retry keeps finished pods whatever the action asked
    last_retry = int(status.get("retryCount") or 0) >= int(spec(view.job).get("maxRetry") or 0) - 1
    keep = RETAIN_SOFT if last_retry else retain
    victims = []
    for pod in view.all_pods():
        if terminating(pod):
            tally.counts["terminating"] += 1
        elif phase_of(pod) not in keep:
            victims.append(pod)
        else:
            tally.add(pod)  # retained: counted by phase, as Volcano's killJob does
    return victims


def kill_pods(
    view: JobView, retain: frozenset[str], target: Target | None, update: UpdateFn | None, ctx: Context
) -> Outcome:
    job = copy_json(view.job)
    if meta(job).get("deletionTimestamp"):
        return Outcome(job)  # being deleted: garbage collection finishes it
    tally = st.Tally()
    status = st.copied(job)
    if target is None:
        status["version"] = int(status.get("version") or 0) + 1
        victims = _whole_job(view, retain, tally)
    else:
        victims = targeted(view, target)
    effects: list[Effect] = []
    for pod in victims:
        ref = ("v1", "Pod", namespace_of(pod), name_of(pod))
        effects.append(Annotate(*ref, annotations={OUT_OF_SYNC: "true"}))
        if not terminating(pod):
            effects.append(Delete(*ref))
        tally.counts["terminating"] += 1
    tally.write(status)
    _finish(job, status, update, ctx.now)
    job["status"] = status
    effects.extend(ctx.render.on_job_delete(job))
    effects.append(UpdateStatus(job))
    if target is None and ctx.podgroup is not None:
        effects.append(delete_of(ctx.podgroup))
    return Outcome(job, effects)


def _finish(job: Obj, status: Obj, update: UpdateFn | None, now: datetime) -> None:
    if update is not None and update(status):
        st.stamp(status, now)
    created = st.parse_time(str(meta(job).get("creationTimestamp") or ""))
    moved = st.parse_time(str((status.get("state") or {}).get("lastTransitionTime") or ""))
    if created is not None and moved is not None:
        status["runningDuration"] = st.go_duration((moved - created).total_seconds())
