"""HyperNode discovery from node labels (the shell around ``lahar_controller.hypernodes``).

Off unless topology types are configured (``LAHAR_HYPERNODE_DISCOVERY``).  Any node or HyperNode
change queues one full pass (one key, so a burst of node changes costs one pass, as Volcano's
rate-limited queue does); the pass plans from the followed world and writes the difference.
"""

from __future__ import annotations

import logging

from lahar.adapters.kube import KubeError, NotFound
from lahar_controller.hypernodes import plan
from lahar_controller.job.view import Obj
from lahar_controller.shell.metrics import Metrics
from lahar_controller.shell.pool import Pool, Retry
from lahar_controller.shell.world import World
from lahar_controller.shell.writer import Done, Writer

log = logging.getLogger("lahar.controller")
KEY = "label"


class HyperNodeDiscovery:
    def __init__(self, world: World, writer: Writer, metrics: Metrics, types: dict[str, list[str]]) -> None:
        self.world, self.writer, self.types = world, writer, types
        self.pool: Pool[str] = Pool("hypernodes", self._handle, metrics, workers=1)
        if types:
            world.listen("nodes", self._changed)
            world.listen("hypernodes", self._changed)
            self.pool.put(KEY, KEY)

    def _changed(self, old: Obj | None, new: Obj | None) -> None:
        self.pool.put(KEY, KEY)

    async def _handle(self, key: str, _: str) -> None:
        todo = plan(self.types, self.world.of_kind("nodes"), self.world.of_kind("hypernodes"))
        try:
            for obj in todo.create:
                await self.writer.create(obj)
            for obj in todo.replace:
                name = obj["metadata"]["name"]
                try:
                    current = await self.writer.get("hypernodes", "", name)
                except NotFound:
                    await self.writer.create(obj)
                    continue
                rv = (current.get("metadata") or {}).get("resourceVersion")
                wanted = {**obj, "metadata": {**obj["metadata"], "resourceVersion": rv}}
                await self.writer.update(wanted, Done())
            for name in todo.delete:
                await self.writer.delete("hypernodes", "", name)
        except KubeError as exc:
            raise Retry(str(exc)) from exc
        if todo.create or todo.replace or todo.delete:
            log.info(
                "hypernodes from node labels: %d created, %d updated, %d deleted",
                len(todo.create),
                len(todo.replace),
                len(todo.delete),
            )
