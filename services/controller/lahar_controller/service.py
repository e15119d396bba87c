"""The controller service (first part): queue states.

It follows the cluster like the scheduler (``Follower``: the mirror at S, the CLUSTER stream from
S+1, gaps and replaced streams reloaded, bad deltas dead-lettered) and writes to the API: a new
queue is opened, and the ``default`` queue is created when missing.  One replica acts, by leader
election; it writes only while its lease holds (``may_write``), so a deposed controller stops
writing at once.  One queue that cannot be handled is counted and skipped, never fatal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection
from typing import Any

import msgspec
from nats.js.client import JetStreamContext
from prometheus_client import CollectorRegistry, Counter

from lahar.adapters.bus import ensure_streams
from lahar.adapters.follow import Follower
from lahar.adapters.kube import Conflict, KubeClient, KubeError, NotFound
from lahar.adapters.mirror import Mirror, MirrorState
from lahar.service.metrics import ServiceMetrics
from lahar.service.supervise import supervised
from lahar.wire.messages import Delta
from lahar.wire.names import Names
from lahar_controller.queues import DEFAULT_QUEUE, desired_state

log = logging.getLogger("lahar.controller")


class Metrics(ServiceMetrics):
    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.writes = Counter("lahar_controller_writes_total", "API writes", ["kind"], registry=registry)
        self.bad = Counter(
            "lahar_controller_bad_deltas_total", "Deltas or objects skipped, by why", ["why"], registry=registry
        )


class ControllerService:
    def __init__(
        self,
        kube: KubeClient,
        js: JetStreamContext,
        mirror: Mirror,
        names: Names,
        registry: CollectorRegistry,
        *,
        may_write: Callable[[], bool] = lambda: True,
        own: Collection[str] | None = None,
    ) -> None:
        self.kube, self.js, self.mirror, self.names = kube, js, mirror, names
        self.may_write = may_write
        self.own = own  # the streams this service may make (lahar.wire.access); None: all
        self.metrics = Metrics.of(registry)
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.follower = Follower(
            js,
            mirror,
            names,
            kinds=("queues",),
            source="controller",
            load=self._load,
            apply=self._apply,
            bad=self.metrics.bad,
            own=own,
        )
        self.ready = self.follower.ready

    async def run(self, stop: asyncio.Event) -> None:
        await ensure_streams(self.js, self.names, own=self.own, need=[self.names.cluster_stream])
        if self.may_write():
            with contextlib.suppress(Conflict):
                await self.kube.create("queues", "", DEFAULT_QUEUE)
        await supervised(stop.wait(), {"follow": self.follower.run(), "work": self._work()})

    def _load(self, state: MirrorState) -> None:
        for raw in state.objects.get("queues", {}).values():
            self.queue.put_nowait(raw)

    def _apply(self, delta: Delta, headers: dict[str, str] | None) -> None:
        if delta.op != "DELETED":
            self.queue.put_nowait(bytes(delta.obj))

    async def _work(self) -> None:
        while True:
            raw = await self.queue.get()
            try:
                await self._handle(raw)
            except Exception as exc:  # one queue we cannot handle must not stop the others
                self.metrics.bad.labels("object").inc()
                log.error("skipping a queue that cannot be handled: %r", exc)

    async def _handle(self, raw: bytes) -> None:
        q = msgspec.json.decode(raw)
        if not isinstance(q, dict):
            raise ValueError(f"a queue must be an object, got {type(q).__name__}")
        state = desired_state(q)
        name = str((q.get("metadata") or {}).get("name", ""))
        if state is None or not name or not self.may_write():
            return
        try:
            await self.kube.patch("queues", "", name, {"status": {"state": state}}, sub="status")
            self.metrics.writes.labels("queue").inc()
            log.info("queue %s is %s", name, state)
        except NotFound:
            pass
        except KubeError as exc:
            log.warning("could not set queue %s to %s: %s", name, state, exc)
