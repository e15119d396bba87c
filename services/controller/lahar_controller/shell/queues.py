"""The queue controller's shell: requests per queue through ``lahar_controller.queues.plan``.

A new queue gets a SyncQueue (which opens it); a PodGroup added, deleted, moved or changing phase
syncs its queue (the status counts, and Closing → Closed once the last PodGroup is gone).  Commands
OpenQueue / CloseQueue are executed once: deleted, then their action is queued.  ``root`` and
``default`` are created when missing.  Writes are merge patches (the scheduler patches the same
status with what it allocated; neither overwrites the other's fields).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from lahar.adapters.kube import KubeError
from lahar_controller.job.effects import Event
from lahar_controller.job.handlers import command_target
from lahar_controller.job.view import Obj, name_of, namespace_of
from lahar_controller.queues import SYNC_QUEUE, missing_queues, plan
from lahar_controller.shell.metrics import Metrics
from lahar_controller.shell.pool import Pool, Retry
from lahar_controller.shell.world import World
from lahar_controller.shell.writer import Deposed, Writer

log = logging.getLogger("lahar.controller")


@dataclass(frozen=True, slots=True)
class QueueCommand:
    key: str  # the Command's namespace/name
    uid: str


Item = str | QueueCommand  # an action (SyncQueue, OpenQueue, CloseQueue) or a Command to execute


def queue_of(podgroup: Obj | None) -> str | None:
    if podgroup is None:
        return None
    return str((podgroup.get("spec") or {}).get("queue") or "default")


def _phase(obj: Obj | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


class QueueController:
    def __init__(self, world: World, writer: Writer, metrics: Metrics, *, workers: int = 4) -> None:
        self.world, self.writer = world, writer
        self.pool: Pool[Item] = Pool("queues", self._handle, metrics, workers=workers)
        self.members: dict[str, set[str]] = {}  # queue -> keys of its PodGroups
        world.listen("queues", self.on_queue)
        world.listen("podgroups", self.on_podgroup)

    async def ensure_standard_queues(self) -> None:
        """Create ``root`` and ``default`` when the cluster has not got them (retried until done;
        a replica that lost its lease stops trying)."""
        delay = 0.1
        while True:
            try:
                for queue in missing_queues(list(self.world.of_kind("queues"))):
                    if await self.writer.create(queue):
                        log.info("created queue %s", name_of(queue))
                return
            except Deposed:
                return
            except KubeError as exc:
                log.warning("could not create the standard queues: %s", exc)
            await asyncio.sleep(delay)  # a retry delay, not a wait for a condition
            delay = min(delay * 2, 5.0)

    # -- events ------------------------------------------------------------------------------------
    def on_queue(self, old: Obj | None, new: Obj | None) -> None:
        if old is None and new is not None:
            self.pool.put(name_of(new), SYNC_QUEUE)

    def on_podgroup(self, old: Obj | None, new: Obj | None) -> None:
        key = f"{namespace_of(new or old or {})}/{name_of(new or old or {})}"
        before, after = queue_of(old), queue_of(new)
        if before is not None and before != after:
            self.members.get(before, set()).discard(key)
        if after is not None:
            self.members.setdefault(after, set()).add(key)
        if old is not None and new is not None and before == after and _phase(old) == _phase(new):
            return
        for queue in {before, after} - {None}:
            assert queue is not None
            self.pool.put(queue, SYNC_QUEUE)

    def on_command(self, cmd: Obj) -> None:
        target = str(command_target(cmd).get("name") or "")
        uid = str((cmd.get("metadata") or {}).get("uid") or "")
        self.pool.put(target, QueueCommand(f"{namespace_of(cmd)}/{name_of(cmd)}", uid))

    # -- work --------------------------------------------------------------------------------------
    async def _handle(self, name: str, item: Item) -> None:
        try:
            if isinstance(item, QueueCommand):
                await self._command(name, item)
            else:
                await self._serve(name, item)
        except KubeError as exc:
            raise Retry(str(exc)) from exc

    async def _command(self, name: str, ref: QueueCommand) -> None:
        cmd = self.world.get("commands", ref.key)
        if cmd is None or str((cmd.get("metadata") or {}).get("uid") or "") != ref.uid:
            return
        namespace, _, cmd_name = ref.key.partition("/")
        if await self.writer.delete("commands", namespace, cmd_name):
            action = str(cmd.get("action") or "")
            log.info("command %s: %s for queue %s", ref.key, action, name)
            self.pool.put(name, action)

    async def _serve(self, name: str, action: str) -> None:
        queue = self.world.get("queues", name)
        if queue is None:
            return
        podgroups = [pg for k in self.members.get(name, set()) if (pg := self.world.get("podgroups", k)) is not None]
        out = plan(queue, action, podgroups, list(self.world.of_kind("queues")))
        if out.error:
            raise Retry(out.error)
        for queue_name, notes in out.annotations.items():
            await self.writer.patch("queues", "", queue_name, {"metadata": {"annotations": notes}})
        if out.spec:
            await self.writer.patch("queues", "", name, {"spec": out.spec})
        if out.status:
            await self.writer.patch("queues", "", name, {"status": out.status}, sub="status")
            if "state" in out.status:
                log.info("queue %s is %s", name, out.status["state"])
        about = {
            "apiVersion": queue.get("apiVersion", ""),
            "kind": "Queue",
            "name": name,
            "uid": (queue.get("metadata") or {}).get("uid", ""),
        }
        for type_, reason, message in out.events:
            await self.writer.event(Event(about, type_, reason, message))
        for queue_name, follow_up in out.requests:
            self.pool.put(queue_name, follow_up)
