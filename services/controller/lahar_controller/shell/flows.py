"""JobFlows and JobTemplates (``flow.volcano.sh``), the shell around ``lahar_controller.flow``.

A flow is synced when it is added or updated (its own status writes included: the Succeed →
delete-its-Jobs step needs the sync after the one that wrote Succeed), and whenever a Job it
controls changes; a template when it is added and when a Job made from it is added.  A sync's
effects are performed in order; a failed one, or a step whose template is missing, is retried
with backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from lahar.adapters.kube import KubeError
from lahar_controller.flow import FAILED, SUCCEED, flow_key_of_job, sync_flow, sync_template, template_key_of_job
from lahar_controller.job.view import Obj, name_of, namespace_of
from lahar_controller.shell.metrics import Metrics
from lahar_controller.shell.pool import Pool, Retry
from lahar_controller.shell.world import World
from lahar_controller.shell.writer import Writer

log = logging.getLogger("lahar.controller")

FLOW, TEMPLATE = "jobflows", "jobtemplates"  # the pool's items: which kind the key names


class FlowController:
    def __init__(
        self, world: World, writer: Writer, metrics: Metrics, clock: Callable[[], datetime], *, workers: int = 4
    ) -> None:
        self.world, self.writer, self.clock = world, writer, clock
        self.pool: Pool[str] = Pool("jobflows", self._handle, metrics, workers=workers)
        world.listen(FLOW, self.on_flow)
        world.listen(TEMPLATE, self.on_template)
        world.listen("jobs", self.on_job)
        for kind in (TEMPLATE, "jobs"):
            world.index_by_namespace(kind)

    def on_flow(self, old: Obj | None, new: Obj | None) -> None:
        if new is not None:
            self.pool.put(_key(new), FLOW)

    def on_template(self, old: Obj | None, new: Obj | None) -> None:
        if old is None and new is not None:
            self.pool.put(_key(new), TEMPLATE)

    def on_job(self, old: Obj | None, new: Obj | None) -> None:
        job = new if new is not None else old
        assert job is not None
        flow = flow_key_of_job(job)
        if flow is not None:
            self.pool.put(flow, FLOW)
        template = template_key_of_job(job) if old is None else None
        if template is not None:
            self.pool.put(template, TEMPLATE)

    async def _handle(self, key: str, kind: str) -> None:
        obj = self.world.get(kind, key)
        if obj is None:
            return
        try:
            if kind == FLOW:
                await self._flow(key, obj)
            else:
                await self._template(obj)
        except KubeError as exc:
            raise Retry(str(exc)) from exc

    async def _flow(self, key: str, flow: Obj) -> None:
        ns = namespace_of(flow)
        plan = sync_flow(flow, self.world.in_namespace(TEMPLATE, ns), self.world.in_namespace("jobs", ns), self.clock())
        done = await self.writer.run(plan.effects)
        if done.error or plan.error:
            raise Retry(done.error or plan.error)
        if plan.phase != plan.previous and plan.phase in (SUCCEED, FAILED):
            log.info("jobflow %s: %s", key, plan.phase)

    async def _template(self, template: Obj) -> None:
        plan = sync_template(template, self.world.in_namespace("jobs", namespace_of(template)))
        done = await self.writer.run(plan.effects)
        if done.error:
            raise Retry(done.error)


def _key(obj: Obj) -> str:
    return f"{namespace_of(obj)}/{name_of(obj)}"
