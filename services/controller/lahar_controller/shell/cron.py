"""Volcano CronJobs, the shell around ``lahar_controller.cron.sync``: a CronJob is synced when it
changes, when one of its Jobs changes, and on a timer at its next due time.  A sync's deletions
come first (foreground), then the run's Job is created and its UID written into the CronJob's
active list, then the status (PUT with the CronJob's resourceVersion: a stale one is retried)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from lahar.adapters.kube import KubeError
from lahar_controller.cron import API_VERSION, sync
from lahar_controller.job.effects import event_about
from lahar_controller.job.view import Obj, controller_ref, name_of, namespace_of
from lahar_controller.shell.metrics import Metrics
from lahar_controller.shell.pool import Pool, Retry
from lahar_controller.shell.world import World
from lahar_controller.shell.writer import Done, Writer

log = logging.getLogger("lahar.controller")
SYNC = "sync"


class CronController:
    def __init__(
        self, world: World, writer: Writer, metrics: Metrics, clock: Callable[[], datetime], *, workers: int = 4
    ) -> None:
        self.world, self.writer, self.clock = world, writer, clock
        self.pool: Pool[str] = Pool("cronjobs", self._handle, metrics, workers=workers)
        world.listen("cronjobs", self.on_cronjob)
        world.listen("jobs", self.on_job)
        world.index_by_namespace("jobs")

    def on_cronjob(self, old: Obj | None, new: Obj | None) -> None:
        if new is not None:
            self.pool.put(f"{namespace_of(new)}/{name_of(new)}", SYNC)

    def on_job(self, old: Obj | None, new: Obj | None) -> None:
        job = new if new is not None else old
        assert job is not None
        ref = controller_ref(job)
        if ref is not None and ref.get("kind") == "CronJob" and ref.get("apiVersion") == API_VERSION:
            self.pool.put(f"{namespace_of(job)}/{ref.get('name', '')}", SYNC)

    async def _handle(self, key: str, _: str) -> None:
        cronjob = self.world.get("cronjobs", key)
        if cronjob is None:
            return
        try:
            await self._sync(key, cronjob)
        except KubeError as exc:
            raise Retry(str(exc)) from exc

    async def _sync(self, key: str, cronjob: Obj) -> None:
        namespace = namespace_of(cronjob)
        out = sync(cronjob, self.world.in_namespace("jobs", namespace), self.clock())
        for name in out.delete:
            await self.writer.delete("jobs", namespace, name, propagation="Foreground")
        if out.create is not None:
            done = Done()
            if not await self.writer.create(out.create, done):
                # the Job exists already but the world has not shown it yet: look again when it does
                raise Retry(f"job {name_of(out.create)} exists already")
            created = done.written.get(("jobs", namespace, name_of(out.create)), {})
            uid = str((created.get("metadata") or {}).get("uid") or "")
            for ref in out.status.get("active") or []:
                if ref.get("name") == name_of(out.create) and not ref.get("uid"):
                    ref["uid"] = uid
            log.info("cronjob %s started job %s", key, name_of(out.create))
        for type_, reason, message in out.events:
            await self.writer.event(event_about(cronjob, type_, reason, message))
        if out.status_updated:
            await self.writer.update({**cronjob, "status": out.status}, Done(), sub="status")
        if out.error:
            raise Retry(out.error)
        if out.requeue_after is not None:
            self.pool.put_after(out.requeue_after.total_seconds(), key, SYNC)
