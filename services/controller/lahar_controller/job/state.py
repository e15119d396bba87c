"""The job state machine: one handler per stored phase, each mapping an action to a kill or a sync
and a phase rule (Volcano's pkg/controllers/job/state).

Per stored phase (SKIPPED.md §2.1 has the full table):

* Pending, Running: RestartJob → kill(None), retry+1, Restarting; RestartTask/Pod/Partition → kill
  the target, retry+1, Restarting; Abort/Terminate/CompleteJob → kill(Soft), Aborting /
  Terminating / Completing; anything else → sync and the phase rule.
* Restarting: SyncJob → sync; RestartTask/Pod/Partition → kill the target; else kill(None); then
  the restart rule (Failed at maxRetry, Pending once enough replicas are back).
* Aborting, Aborted: ResumeJob → kill(Soft), retry+1, Restarting; else kill(Soft) (Aborting becomes
  Aborted once nothing lives).
* Completing, Terminating: kill(Soft); Completed / Terminated once nothing lives.
* Completed, Failed, Terminated: kill(Soft); final.

Every phase change adds a Normal event on the job naming the new phase.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lahar_controller.job import status as st
from lahar_controller.job.context import Context, Outcome, UpdateFn
from lahar_controller.job.effects import event_about
from lahar_controller.job.kill import RETAIN_NONE, RETAIN_SOFT, kill_job, kill_target
from lahar_controller.job.sync import sync_job
from lahar_controller.job.view import (
    ABORT_JOB,
    COMPLETE_JOB,
    RESTART_JOB,
    RESTART_PARTITION,
    RESTART_POD,
    RESTART_TASK,
    RESUME_JOB,
    SYNC_JOB,
    TERMINATE_JOB,
    Action,
    JobView,
    Obj,
    Target,
    job_phase,
    spec,
)

TARGETED = frozenset({RESTART_TASK, RESTART_POD, RESTART_PARTITION})
_STOPS = {ABORT_JOB: "Aborting", TERMINATE_JOB: "Terminating", COMPLETE_JOB: "Completing"}

Handler = Callable[[JobView, Action, Context], Outcome]


def to_phase(phase: str, *, retry: bool = False) -> UpdateFn:
    def update(status: Obj) -> bool:
        st.set_phase(status, phase)
        if retry:
            status["retryCount"] = int(status.get("retryCount") or 0) + 1
        return True

    return update


def when_drained(phase: str) -> UpdateFn:
    """Move to ``phase`` once no pod is pending, running or terminating."""

    def update(status: Obj) -> bool:
        if any(st.count(status, c) for c in ("terminating", "pending", "running")):
            return False
        st.set_phase(status, phase)
        return True

    return update


def _target(action: Action) -> Target:
    """The action's kill target; without one (a bare Command) nothing is killed, as in Volcano."""
    return action.target if action.target is not None else Target("")


def _restart_or_stop(view: JobView, action: Action, ctx: Context) -> Outcome | None:
    """The actions Pending and Running handle alike; None for the rest."""
    if action.name == RESTART_JOB:
        return kill_job(view, RETAIN_NONE, to_phase("Restarting", retry=True), ctx)
    if action.name in TARGETED:
        return kill_target(view, _target(action), to_phase("Restarting", retry=True), ctx)
    if action.name in _STOPS:
        return kill_job(view, RETAIN_SOFT, to_phase(_STOPS[action.name]), ctx)
    return None


def pending(view: JobView, action: Action, ctx: Context) -> Outcome:
    done = _restart_or_stop(view, action, ctx)
    if done is not None:
        return done
    floor = int(spec(view.job).get("minAvailable") or 0)

    def update(status: Obj) -> bool:
        if floor <= sum(st.count(status, c) for c in ("running", "succeeded", "failed")):
            st.set_phase(status, "Running")
            return True
        return False

    return sync_job(view, update, ctx)


def running(view: JobView, action: Action, ctx: Context) -> Outcome:
    done = _restart_or_stop(view, action, ctx)
    if done is not None:
        return done
    return sync_job(view, lambda status: running_rule(view.job, status), ctx)


def running_rule(job: Obj, status: Obj) -> bool:
    """Running → Completed / Failed / Pending, from the recounted status (SKIPPED.md §2.1.1)."""
    replicas = st.total_replicas(job)
    if replicas == 0:
        return False
    min_success = spec(job).get("minSuccess")
    succeeded, failed = st.count(status, "succeeded"), st.count(status, "failed")
    if min_success is not None and succeeded >= int(min_success):
        st.set_phase(status, "Completed")
        return True
    if succeeded + failed == replicas:
        st.set_phase(status, _finished_phase(job, status, min_success))
        return True
    if st.count(status, "pending") > replicas - st.min_available(job):
        st.set_phase(status, "Pending")
        return True
    return False


def _finished_phase(job: Obj, status: Obj, min_success: Any) -> str:
    """Every pod finished: Completed when enough succeeded, at job and task level."""
    if st.min_available(job) >= st.total_task_min_available(job):
        for task in spec(job).get("tasks") or []:
            wanted = task.get("minAvailable")
            done = st.task_succeeded(status, str(task.get("name", "")))
            if wanted is not None and done is not None and done < int(wanted):
                return "Failed"
    succeeded = st.count(status, "succeeded")
    if min_success is not None and succeeded < int(min_success):
        return "Failed"
    return "Completed" if succeeded >= st.min_available(job) else "Failed"


def restarting(view: JobView, action: Action, ctx: Context) -> Outcome:
    max_retry = int(spec(view.job).get("maxRetry") or 0)
    replicas = st.total_replicas(view.job)

    def update(status: Obj) -> bool:
        if int(status.get("retryCount") or 0) >= max_retry:
            st.set_phase(status, "Failed")
            return True
        if replicas - st.count(status, "terminating") >= st.count(status, "minAvailable"):
            st.set_phase(status, "Pending")
            return True
        return False

    if action.name == SYNC_JOB:
        return sync_job(view, update, ctx)
    if action.name in TARGETED:
        return kill_target(view, _target(action), update, ctx)
    return kill_job(view, RETAIN_NONE, update, ctx)


def aborting(view: JobView, action: Action, ctx: Context) -> Outcome:
    if action.name == RESUME_JOB:
        return kill_job(view, RETAIN_SOFT, to_phase("Restarting", retry=True), ctx)
    return kill_job(view, RETAIN_SOFT, when_drained("Aborted"), ctx)


def aborted(view: JobView, action: Action, ctx: Context) -> Outcome:
    if action.name == RESUME_JOB:
        return kill_job(view, RETAIN_SOFT, to_phase("Restarting", retry=True), ctx)
    return kill_job(view, RETAIN_SOFT, None, ctx)


def completing(view: JobView, action: Action, ctx: Context) -> Outcome:
    return kill_job(view, RETAIN_SOFT, when_drained("Completed"), ctx)


def terminating(view: JobView, action: Action, ctx: Context) -> Outcome:
    return kill_job(view, RETAIN_SOFT, when_drained("Terminated"), ctx)


def finished(view: JobView, action: Action, ctx: Context) -> Outcome:
    return kill_job(view, RETAIN_SOFT, None, ctx)


HANDLERS: dict[str, Handler] = {
    "Pending": pending,
    "Running": running,
    "Restarting": restarting,
    "Aborting": aborting,
    "Aborted": aborted,
    "Completing": completing,
    "Terminating": terminating,
    "Completed": finished,
    "Failed": finished,
    "Terminated": finished,
}


def handler_for(job: Obj) -> Handler:
    """The handler for the job's stored phase (an empty or unknown phase is handled as Pending)."""
    return HANDLERS.get(job_phase(job), pending)


def execute(view: JobView, action: Action, ctx: Context) -> Outcome:
    """Run the stored phase's handler for ``action``; a phase change is announced by an event."""
    outcome = handler_for(view.job)(view, action, ctx)
    old, new = job_phase(view.job), job_phase(outcome.job)
    if new and new != old:
        message = f"Job phase changed from {old or 'none'} to {new} on {action.name}"
        outcome.effects.append(event_about(outcome.job, "Normal", new, message))
    return outcome
