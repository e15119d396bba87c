"""The cache service: list and watch the cluster, publish every change, mirror it into Redis.

Per kind, a watcher lists, then watches from the list's resourceVersion, resuming from the last
version it saw after a disconnect and listing again after 410 Gone (the relist is diffed against
what the mirror holds, so deletions missed meanwhile are published too).  Deltas go through one
queue to a batcher that publishes them to JetStream with asynchronous acks and ``Nats-Msg-Id``
for deduplication, then writes the batch to Redis together with the last stream sequence.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Iterable

import msgspec
from nats.js.client import JetStreamContext
from opentelemetry import propagate, trace
from prometheus_client import CollectorRegistry, Counter, Histogram

from lahar.adapters.bus import Outgoing, ensure_streams, publish_batch
from lahar.adapters.kube import Gone, KubeClient, KubeError, TransientKubeError
from lahar.adapters.mirror import Mirror
from lahar.service.metrics import ServiceMetrics
from lahar.wire.messages import Delta, encode
from lahar.wire.names import DELTA_KINDS, Names
from lahar_cache.reducer import SCHEDULER_NAMES, Known, on_event, relist

log = logging.getLogger("lahar.cache")


class _Meta(msgspec.Struct):
    resourceVersion: str = ""


class _Obj(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


_meta = msgspec.json.Decoder(_Obj)


class Metrics(ServiceMetrics):
    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.deltas = Counter("lahar_cache_deltas_total", "Deltas published", ["kind", "op"], registry=registry)
        self.relists = Counter(
            "lahar_cache_relists_total", "Lists after 410 Gone or start", ["kind"], registry=registry
        )
        self.watch_errors = Counter("lahar_cache_watch_errors_total", "Watch failures", ["kind"], registry=registry)
        self.batch = Histogram(
            "lahar_cache_batch_size", "Deltas per published batch", buckets=(1, 10, 100, 1000), registry=registry
        )
        self.flush = Histogram("lahar_cache_flush_seconds", "Publish + mirror write per batch", registry=registry)


class CacheService:
    def __init__(
        self,
        kube: KubeClient,
        js: JetStreamContext,
        mirror: Mirror,
        names: Names,
        registry: CollectorRegistry,
        *,
        kinds: Iterable[str] = DELTA_KINDS,
        scheduler_names: frozenset[str] = SCHEDULER_NAMES,
        tracer: trace.Tracer | None = None,
        batch_max: int = 512,
        batch_wait: float = 0.005,
    ) -> None:
        self.kube = kube
        self.js = js
        self.mirror = mirror
        self.names = names
        self.kinds = list(kinds)
        self.scheduler_names = scheduler_names
        self.tracer = tracer or trace.get_tracer("lahar.cache")
        self.metrics = Metrics.of(registry)
        self.batch_max = batch_max
        self.batch_wait = batch_wait
        self.known = Known()
        self.queue: asyncio.Queue[Delta] = asyncio.Queue()
        self.ready = asyncio.Event()
        self._listed: set[str] = set()

    async def run(self, stop: asyncio.Event) -> None:
        await ensure_streams(self.js, self.names)
        await self._load_known()
        batcher = asyncio.create_task(self._batcher(), name="cache-batcher")
        watchers = [asyncio.create_task(self._watch(kind), name=f"watch-{kind}") for kind in self.kinds]
        await stop.wait()
        for w in watchers:
            w.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        await self.queue.join()  # everything already seen is published and mirrored
        batcher.cancel()
        await asyncio.gather(batcher, return_exceptions=True)

    async def _load_known(self) -> None:
        """What the mirror holds, so restarts publish only real changes."""
        _, objects = await self.mirror.load(self.kinds)
        for kind, held in objects.items():
            versions = self.known.of(kind)
            for key, raw in held.items():
                versions[key] = _meta.decode(raw).metadata.resourceVersion

    # -- watching --------------------------------------------------------------------------
    async def _watch(self, kind: str) -> None:
        backoff = _Backoff()
        while True:
            try:
                items, rv = await self.kube.list(kind)
            except KubeError as exc:
                log.warning("list %s failed: %s", kind, exc, extra={"kind": kind})
                self.metrics.watch_errors.labels(kind).inc()
                await backoff.wait()
                continue
            self.metrics.relists.labels(kind).inc()
            for d in relist(self.known, kind, items, self.scheduler_names):
                self._enqueue(d)
            self._listed.add(kind)
            if self._listed >= set(self.kinds):
                self.ready.set()
            backoff.reset()
            await self._follow(kind, rv, backoff)

    async def _follow(self, kind: str, rv: str, backoff: _Backoff) -> None:
        """Watch from ``rv`` until it is too old (then return, so the caller lists again)."""
        while True:
            try:
                seen = 0
                async for ev in self.kube.watch(kind, rv):
                    rv = ev.item.meta.resourceVersion or rv
                    d = on_event(self.known, kind, ev, self.scheduler_names)
                    if d is not None:
                        self._enqueue(d)
                    seen += 1
                    if seen % 256 == 0:
                        await asyncio.sleep(0)  # buffered events never yield; let the batcher publish
                backoff.reset()
            except Gone:
                log.info("watch %s from %s expired (410); listing again", kind, rv, extra={"kind": kind})
                return
            except (TransientKubeError, KubeError) as exc:
                log.warning("watch %s failed: %s", kind, exc, extra={"kind": kind})
                self.metrics.watch_errors.labels(kind).inc()
                await backoff.wait()
            except msgspec.DecodeError as exc:
                log.error("watch %s sent an undecodable event: %s", kind, exc, extra={"kind": kind})
                self.metrics.watch_errors.labels(kind).inc()
                return

    def _enqueue(self, d: Delta) -> None:
        self.known.remember(d)
        self.queue.put_nowait(d)

    # -- publishing --------------------------------------------------------------------------
    async def _batcher(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self.queue.get()]
            deadline = loop.time() + self.batch_wait
            while len(batch) < self.batch_max:
                if not self.queue.empty():
                    batch.append(self.queue.get_nowait())
                    continue
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self.queue.get(), left))
                except TimeoutError:
                    break
            await self._flush(batch)
            for _ in batch:
                self.queue.task_done()

    async def _flush(self, batch: list[Delta]) -> None:
        started = time.perf_counter()
        outgoing = [self._outgoing(d) for d in batch]
        backoff = _Backoff()
        while True:
            try:
                seqs = await publish_batch(self.js, outgoing)
                break
            except Exception as exc:
                log.warning("publishing %d deltas failed: %s", len(batch), exc)
                await backoff.wait()
        while True:
            try:
                await self.mirror.apply(batch, max(seqs))
                break
            except Exception as exc:
                log.warning("writing %d deltas to the mirror failed: %s", len(batch), exc)
                await backoff.wait()
        for (kind, op), n in collections.Counter((d.kind, d.op) for d in batch).items():
            self.metrics.deltas.labels(kind, op).inc(n)
        self.metrics.batch.observe(len(batch))
        self.metrics.flush.observe(time.perf_counter() - started)

    def _outgoing(self, d: Delta) -> Outgoing:
        """One span per published change; its context travels in the message headers."""
        attrs = {"lahar.kind": d.kind, "lahar.op": d.op, "lahar.key": d.key, "lahar.rv": d.rv}
        if d.kind == "pods":
            attrs["lahar.pod"] = d.key
        # start_span and an explicit context, not start_as_current_span: nothing runs inside the
        # span, and skipping the context switch halves its cost on the cache's hottest path.
        span = self.tracer.start_span("cache.delta", kind=trace.SpanKind.PRODUCER, attributes=attrs)
        headers: dict[str, str] = {"Nats-Msg-Id": f"{d.kind}/{d.key}/{d.rv}/{d.op}"}
        propagate.inject(headers, context=trace.set_span_in_context(span))
        span.end()
        return Outgoing(self.names.delta_subject(d.kind), encode(d), headers)


class _Backoff:
    """Exponential backoff with a cap, for reconnect loops."""

    def __init__(self, first: float = 0.1, cap: float = 5.0) -> None:
        self.first, self.cap, self.current = first, cap, first

    def reset(self) -> None:
        self.current = self.first

    async def wait(self) -> None:
        await asyncio.sleep(self.current)  # a retry delay, not a wait for a condition
        self.current = min(self.current * 2, self.cap)
