"""One job request end to end (Volcano's processNextReq), and a delayed action when it fires.

How the service drives the package:

1. informer events go to ``handlers.Handlers`` (which keeps the ``JobCache``); Commands accepted by
   ``is_job_command`` are executed once with ``command_step`` (delete, then a request);
2. a worker takes a request, reads ``JobCache.view(req.key)`` and builds a ``Context`` (queue,
   PodGroup, PVC names, ``now``, ``hooks.PluginRender``), calls ``process`` and executes the
   effects in order;
3. a timer calls ``DelayedActions.due(now)`` (next at ``next_due()``) and ``run``s each decision;
4. an outcome with an error is retried with backoff; after ``give_up`` says so the job gets
   ``TerminateJob`` and the request is dropped, as in Volcano.  A deleted job's waiting actions
   are dropped with ``DelayedActions.forget``.
"""

from __future__ import annotations

from lahar_controller.job import status as st
from lahar_controller.job.context import Context, Outcome
from lahar_controller.job.delays import DelayedActions
from lahar_controller.job.effects import event_about
from lahar_controller.job.policy import INTERNAL_ACTIONS, Decision, apply_policies
from lahar_controller.job.state import execute
from lahar_controller.job.view import SYNC_JOB, JobView, Request


def process(req: Request, view: JobView, ctx: Context, delays: DelayedActions) -> Outcome:
    delays.on_request(req)
    decision = apply_policies(view.job, req)
    if decision.delay > 0:
        effects = []
        if delays.add(decision, ctx.now):
            message = f"Execute action {decision.action} after {st.go_duration(decision.delay)}"
            effects.append(event_about(view.job, "Normal", "ExecuteAction", message))
        return Outcome(view.job, list(effects))
    return run(decision, view, ctx, delays)


def run(decision: Decision, view: JobView, ctx: Context, delays: DelayedActions) -> Outcome:
    """Execute a decision now (a request's, or a delayed one that came due)."""
    announce = []
    if decision.action != SYNC_JOB:
        announce.append(event_about(view.job, "Normal", "ExecuteAction", f"Start to execute action {decision.action}"))
    outcome = execute(view, decision.state_action(), ctx)
    outcome.effects[:0] = announce
    if not outcome.error and decision.action not in INTERNAL_ACTIONS:
        delays.after_executed(decision)
    return outcome


def give_up(attempts: int, limit: int) -> bool:
    """After ``limit`` failed retries (-1: never) the job is terminated instead of retried."""
    return limit != -1 and attempts >= limit
