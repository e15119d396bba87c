"""Deleting finished Jobs once ``ttlSecondsAfterFinished`` has passed (the shell around
``lahar_controller.ttl``): a finished Job is looked at when it finishes and again when its TTL
runs out; it is deleted after a fresh read still says so, in the foreground and only if it is the
same incarnation (its UID as precondition)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from lahar.adapters.kube import KubeError, NotFound
from lahar_controller.job.view import Obj, name_of, namespace_of
from lahar_controller.shell.metrics import Metrics
from lahar_controller.shell.pool import Pool, Retry
from lahar_controller.shell.world import World
from lahar_controller.shell.writer import Writer
from lahar_controller.ttl import TTLError, check, needs_cleanup

log = logging.getLogger("lahar.controller")


class TTLController:
    def __init__(
        self, world: World, writer: Writer, metrics: Metrics, clock: Callable[[], datetime], *, workers: int = 4
    ) -> None:
        self.world, self.writer, self.clock = world, writer, clock
        self.pool: Pool[str] = Pool("ttl", self._handle, metrics, workers=workers)
        world.listen("jobs", self.on_job)

    def on_job(self, old: Obj | None, new: Obj | None) -> None:
        if new is not None and needs_cleanup(new):
            self._look(f"{namespace_of(new)}/{name_of(new)}", new)

    def _look(self, key: str, job: Obj) -> bool:
        """Queue the deletion if due, or a look when it will be; True when due now."""
        try:
            verdict = check(job, self.clock())
        except TTLError as exc:
            log.warning("job %s: %s", key, exc)
            return False
        if verdict.delete:
            self.pool.put(key, "delete")
        elif verdict.recheck_after is not None:
            self.pool.put_after(verdict.recheck_after.total_seconds(), key, "delete")
        return verdict.delete

    async def _handle(self, key: str, _: str) -> None:
        job = self.world.get("jobs", key)
        if job is None or not needs_cleanup(job):
            return
        namespace, name = namespace_of(job), name_of(job)
        try:
            fresh = await self.writer.get("jobs", namespace, name)
            if not needs_cleanup(fresh) or not self._due(fresh):
                return
            uid = str((fresh.get("metadata") or {}).get("uid") or "")
            if await self.writer.delete("jobs", namespace, name, uid=uid, propagation="Foreground"):
                log.info("deleted job %s: finished more than ttlSecondsAfterFinished ago", key)
        except NotFound:
            return
        except KubeError as exc:
            raise Retry(str(exc)) from exc

    def _due(self, job: Obj) -> bool:
        try:
            verdict = check(job, self.clock())
        except TTLError:
            return False
        if not verdict.delete and verdict.recheck_after is not None:
            self.pool.put_after(verdict.recheck_after.total_seconds(), f"{namespace_of(job)}/{name_of(job)}", "delete")
        return verdict.delete
