"""The controller service (first part): queue states.

It follows the CLUSTER stream like the scheduler and writes to the API: a new queue is opened,
and the ``default`` queue is created when missing.  One replica acts, by leader election.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import msgspec
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext
from prometheus_client import CollectorRegistry, Counter

from lahar.adapters.bus import ensure_streams
from lahar.adapters.kube import Conflict, KubeClient, KubeError, NotFound
from lahar.adapters.mirror import Mirror
from lahar.service.metrics import ServiceMetrics
from lahar.wire.messages import BadMessage, decode_delta
from lahar.wire.names import Names
from lahar_controller.queues import DEFAULT_QUEUE, desired_state

log = logging.getLogger("lahar.controller")


class Metrics(ServiceMetrics):
    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.writes = Counter("lahar_controller_writes_total", "API writes", ["kind"], registry=registry)


class ControllerService:
    def __init__(
        self, kube: KubeClient, js: JetStreamContext, mirror: Mirror, names: Names, registry: CollectorRegistry
    ) -> None:
        self.kube, self.js, self.mirror, self.names = kube, js, mirror, names
        self.metrics = Metrics.of(registry)
        self.ready = asyncio.Event()
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def run(self, stop: asyncio.Event) -> None:
        await ensure_streams(self.js, self.names)
        with contextlib.suppress(Conflict):
            await self.kube.create("queues", "", DEFAULT_QUEUE)
        seq, objects = await self.mirror.load(["queues"])
        for raw in objects["queues"].values():
            self.queue.put_nowait(msgspec.json.decode(raw))
        sub = await self.js.subscribe(
            self.names.delta_subject("queues"),
            stream=self.names.cluster_stream,
            cb=self._on_delta,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            config=_start(seq + 1),
        )
        worker = asyncio.create_task(self._work())
        self.ready.set()
        await stop.wait()
        worker.cancel()
        await sub.unsubscribe()

    async def _on_delta(self, msg: Msg) -> None:
        try:
            d = decode_delta(msg.data)
        except BadMessage as exc:
            log.error("unusable delta: %s", exc)
            return
        if d.op != "DELETED" and d.has_object:
            self.queue.put_nowait(msgspec.json.decode(d.obj))

    async def _work(self) -> None:
        while True:
            q = await self.queue.get()
            state = desired_state(q)
            name = str((q.get("metadata") or {}).get("name", ""))
            if state is None or not name:
                continue
            try:
                await self.kube.patch("queues", "", name, {"status": {"state": state}}, sub="status")
                self.metrics.writes.labels("queue").inc()
                log.info("queue %s is %s", name, state)
            except NotFound:
                pass
            except KubeError as exc:
                log.warning("could not set queue %s to %s: %s", name, state, exc)


def _start(seq: int) -> ConsumerConfig:
    return ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=seq)
