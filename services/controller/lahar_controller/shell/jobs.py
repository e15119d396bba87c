"""The job controller's shell: informer events into ``job.handlers``, requests through workers.

It follows the recipe in ``job.worker``'s docstring: events update the ``JobCache`` and queue
requests; a worker (one job at a time: the pool's key is the job) builds the ``Context`` from the
world, calls ``process`` and performs the effects in order; a failed step is retried with backoff
and, after ``max_requeue`` retries, the job gets ``TerminateJob``, as in Volcano.  A timer hands
delayed policy actions to the job's worker when they come due.  Commands for a Job are executed
once: deleted (one already gone was executed elsewhere), then their request is queued.

What the step wrote is taken back into the cache at once (the Job as the API returned it, pods it
created), so the next request of the job does not act on what it has already changed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from lahar_controller.job import render
from lahar_controller.job.context import Context
from lahar_controller.job.delays import DelayedActions
from lahar_controller.job.effects import event_about
from lahar_controller.job.handlers import Handlers, command_step, command_target, pod_ident
from lahar_controller.job.hooks import PluginRender
from lahar_controller.job.policy import Decision, apply_policies
from lahar_controller.job.view import TERMINATE_JOB, Obj, Request, name_of, namespace_of, spec
from lahar_controller.job.worker import process, run
from lahar_controller.kubetime import parse_time
from lahar_controller.shell.metrics import Metrics
from lahar_controller.shell.pool import Pool, Retry
from lahar_controller.shell.world import World
from lahar_controller.shell.writer import Done, Writer

log = logging.getLogger("lahar.controller")


@dataclass(frozen=True, slots=True)
class Due:
    """A delayed policy action whose time has come."""

    decision: Decision


@dataclass(frozen=True, slots=True)
class CommandRef:
    """A Command for the job (``namespace/name`` and uid: read again when its turn comes)."""

    key: str
    uid: str


Item = Request | Due | CommandRef


def _utc_now() -> datetime:
    return datetime.now(UTC)


class JobController:
    def __init__(
        self,
        world: World,
        writer: Writer,
        metrics: Metrics,
        *,
        workers: int = 64,
        max_requeue: int = 15,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.world, self.writer, self.clock, self.metrics = world, writer, clock, metrics
        self.handlers = Handlers()
        self.delays = DelayedActions()
        self.priorities: dict[str, int] = {}
        self.pool: Pool[Item] = Pool(
            "jobs", self._handle, metrics, workers=workers, limit=max_requeue, give_up=self._give_up
        )
        self._timer: asyncio.TimerHandle | None = None
        world.listen("jobs", self.on_job)
        world.listen("pods", self.on_pod)
        world.listen("podgroups", self.on_podgroup)
        world.listen("priorityclasses", self._on_priority_class)
        world.index_by_namespace("persistentvolumeclaims")

    async def run(self) -> None:
        try:
            await self.pool.run()
        finally:
            if self._timer is not None:
                self._timer.cancel()

    # -- events ------------------------------------------------------------------------------------
    def on_job(self, old: Obj | None, new: Obj | None) -> None:
        if new is None:
            assert old is not None
            self.handlers.delete_job(old)
            self.delays.forget(f"{namespace_of(old)}/{name_of(old)}")
        elif old is None:
            self.handlers.add_job(new)
        else:
            self.handlers.update_job(old, new)

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        if new is None:
            assert old is not None
            self.handlers.delete_pod(old)
        elif old is None:
            self.handlers.add_pod(new)
        else:
            self.handlers.update_pod(old, new)

    def on_podgroup(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None and new is not None:
            self.handlers.update_podgroup(old, new)

    def on_command(self, cmd: Obj) -> None:
        target = str(command_target(cmd).get("name") or "")
        ref = CommandRef(f"{namespace_of(cmd)}/{name_of(cmd)}", str((cmd.get("metadata") or {}).get("uid") or ""))
        self.pool.put(f"{namespace_of(cmd)}/{target}", ref)

    def _on_priority_class(self, old: Obj | None, new: Obj | None) -> None:
        if new is None:
            assert old is not None
            self.priorities.pop(name_of(old), None)
        else:
            self.priorities[name_of(new)] = int(new.get("value") or 0)

    def flush(self) -> None:
        """Hand the requests the events queued to the workers (after each batch of deltas)."""
        for req in self.handlers.take():
            self.pool.put(req.key, req)

    # -- work --------------------------------------------------------------------------------------
    def context(self, job: Obj) -> Context:
        ns = namespace_of(job)
        podgroup = self.world.get("podgroups", f"{ns}/{render.podgroup_name(job)}")
        if podgroup is None:
            podgroup = self.world.get("podgroups", f"{ns}/{name_of(job)}")
        return Context(
            now=self.clock(),
            render=PluginRender(self.priorities),
            queue=self.world.get("queues", str(spec(job).get("queue") or "default")),
            podgroup=podgroup,
            pvcs=self.world.names_in("persistentvolumeclaims", ns),
        )

    async def _handle(self, key: str, item: Item) -> None:
        if isinstance(item, CommandRef):
            await self._command(key, item)
            return
        view = self.handlers.cache.view(key)
        if view is None:
            return  # the job is gone (or not seen yet: its add event queues a request)
        ctx = self.context(view.job)
        if isinstance(item, Due):
            outcome = run(item.decision, view, ctx, self.delays)
        else:
            outcome = process(item, view, ctx, self.delays)
        self._arm()
        done = await self.writer.run(outcome.effects)
        self._adopt(done)
        self._pod_latency(view.job, done)
        error = done.error or outcome.error
        if error:
            raise Retry(error)

    def _pod_latency(self, job: Obj, done: Done) -> None:
        """Volcano's controller_job_to_pod_creation_latency: Job creation → each pod created,
        both as the API server stamped them."""
        job_created = (job.get("metadata") or {}).get("creationTimestamp")
        if not job_created:
            return
        start = parse_time(str(job_created))
        for ref in done.created:
            pod_created = (
                (done.written[ref].get("metadata") or {}).get("creationTimestamp") if ref[0] == "pods" else None
            )
            if pod_created:
                took = (parse_time(str(pod_created)) - start).total_seconds()
                self.metrics.job_to_pod.observe(max(0.0, took) * 1000)

    def _adopt(self, done: Done) -> None:
        """What the API returned becomes the cache's view (a newer Job, pods just created)."""
        cache = self.handlers.cache
        for (resource, ns, _), obj in done.written.items():
            if resource == "jobs" and cache.newer(obj):
                cache.put_job(obj)
            elif resource == "pods":
                ident = pod_ident(obj)
                key = f"{ns}/{ident.job_name}" if ident is not None else ""
                if ident is not None and not cache.has_pod(key, obj):
                    cache.put_pod(key, obj)

    async def _command(self, key: str, ref: CommandRef) -> None:
        cmd = self.world.get("commands", ref.key)
        if cmd is None or str((cmd.get("metadata") or {}).get("uid") or "") != ref.uid:
            return  # executed (and deleted) already
        view = self.handlers.cache.view(key)
        effects, req = command_step(cmd, view.job if view is not None else None)
        namespace, _, name = ref.key.partition("/")
        if not await self.writer.delete("commands", namespace, name):
            return  # another replica executed it
        await self.writer.run(effects[1:])
        log.info("command %s: %s for job %s", ref.key, req.action, key)
        self.pool.put(key, req)

    async def _give_up(self, key: str, item: Item, why: str) -> None:
        """Volcano's answer to a request that keeps failing: terminate the job."""
        if isinstance(item, CommandRef):
            return
        view = self.handlers.cache.view(key)
        if view is None:
            return
        req = item if isinstance(item, Request) else item.decision.request
        action = item.decision.action if isinstance(item, Due) else apply_policies(view.job, req).action
        message = f"Job failed on action {action} for retry limit reached"
        outcome = run(Decision(req, TERMINATE_JOB), view, self.context(view.job), self.delays)
        done = await self.writer.run([event_about(view.job, "Warning", "ExecuteAction", message), *outcome.effects])
        self._adopt(done)
        log.warning("job %s terminated after repeated failures (%s); last: %s", key, done.error or "ok", why)

    # -- delayed actions -----------------------------------------------------------------------------
    def _arm(self) -> None:
        """One timer, for the earliest waiting action."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due = self.delays.next_due()
        if due is None:
            return
        delay = max((due - self.clock()).total_seconds(), 0.0)
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        for decision in self.delays.due(self.clock()):
            self.pool.put(decision.request.key, Due(decision))
        self._arm()
