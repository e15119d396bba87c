"""The cache service: list and watch the cluster, publish every change, mirror it into Redis.

Per kind, a watcher lists, then watches from the list's resourceVersion, resuming from the last
version it saw after a disconnect and listing again after 410 Gone (the relist is diffed against
what the mirror holds, so deletions missed meanwhile are published too).  Deltas go through one
queue to a batcher that publishes them to JetStream with asynchronous acks and ``Nats-Msg-Id``
for deduplication, then writes the batch to Redis together with the last stream sequence.

State has an identity (docs/CONSISTENCY.md).  At start the mirror must reflect the live CLUSTER
stream (same identity, not ahead of it); otherwise (a ``FLUSHALL``, lost JetStream storage, an
empty Redis) it is rebuilt: emptied and unidentified, every kind listed again and published,
then sealed with the stream's identity once every initial list is mirrored.  While running, a
guard checks both identities every ``guard_period``; a mismatch raises ``MirrorLost`` and the
caller starts a new service, which rebuilds.  Every mirror write carries this leader's epoch, so
a deposed leader cannot overwrite what its successor wrote (``MirrorFenced``).

A kind the API server does not serve (404 on list: an API group or CRD not installed, e.g. apps/v1
on a bare emulator) is mirrored as empty, logged once and listed again every
``unserved_recheck`` seconds; it never holds back the seal.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Collection, Iterable
from typing import Any

import msgspec
from nats.js.client import JetStreamContext
from opentelemetry import propagate, trace
from prometheus_client import CollectorRegistry, Counter, Histogram

from lahar.adapters.bus import (
    MISSING,
    Outgoing,
    StreamIdentity,
    cluster_identity,
    ensure_streams,
    publish_batch,
    raise_if_cancelled,
)
from lahar.adapters.kube import Gone, KubeClient, KubeError, NotFound, TransientKubeError
from lahar.adapters.mirror import Mirror, MirrorError, MirrorLost
from lahar.service.metrics import ServiceMetrics
from lahar.service.supervise import supervised
from lahar.wire.messages import Delta, encode
from lahar.wire.names import DELTA_KINDS, Names
from lahar_cache.reducer import SCHEDULER_NAMES, Known, on_event, relist, wanted

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
        self.rebuilds = Counter(
            "lahar_cache_mirror_rebuilds_total", "Mirror rebuilds (lost, unidentified or ahead)", registry=registry
        )
        self.bad = Counter(
            "lahar_cache_bad_objects_total", "Watched objects that could not be read", ["kind"], registry=registry
        )


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
        fence: int = 0,
        guard_period: float = 1.0,
        own: Collection[str] | None = None,
        unserved_recheck: float = 30.0,
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
        self.fence = fence
        self.guard_period = guard_period
        self.own = own  # the streams this service may make (lahar.wire.access); None: all
        self.known = Known()
        self.queue: asyncio.Queue[Delta | None] = asyncio.Queue()  # None: every kind is listed
        self.ready = asyncio.Event()  # the mirror is sealed: it reflects the cluster and the stream
        self.stream = StreamIdentity("", 0, 0)
        self.building = False
        self._listed: set[str] = set()
        self._unserved: set[str] = set()  # kinds the API server answered 404 for
        self.unserved_recheck = unserved_recheck

    async def run(self, stop: asyncio.Event, *, drain: Callable[[], bool] = lambda: True) -> None:
        """Mirror the cluster until ``stop``; then, if ``drain()``, publish what was already seen
        (a graceful stop), else drop it (leadership lost: the next leader relists)."""
        await self._open()
        loops = {"batcher": self._batcher(), "guard": self._guard()}
        loops |= {f"watch-{kind}": self._watch(kind) for kind in self.kinds}
        await supervised(stop.wait(), loops)
        if drain() and not self.building:
            async with asyncio.timeout(10.0):  # not wait_for: see _batcher
                await self._drain()

    async def _open(self) -> None:
        """Adopt the mirror if it reflects the live stream, else start rebuilding it."""
        await ensure_streams(self.js, self.names, own=self.own, need=[self.names.cluster_stream])
        live = await cluster_identity(self.js, self.names)
        assert live is not None  # just ensured
        self.stream = live
        held, seq = await self.mirror.identity()
        if held and held == live.id and seq <= live.last_seq:
            await self._load_known()
            return
        why = "unidentified (empty, flushed or mid-rebuild)" if not held else "of another stream or ahead of it"
        log.warning("the mirror is %s; rebuilding it from a full list (stream %s)", why, live.id)
        self.metrics.rebuilds.inc()
        self.building = True
        await self.mirror.reset(fence=self.fence, seq=live.last_seq)

    async def _load_known(self) -> None:
        """What the mirror holds, so restarts publish only real changes."""
        state = await self.mirror.load(self.kinds)
        for kind, held in state.objects.items():
            versions = self.known.of(kind)
            for key, raw in held.items():
                try:
                    versions[key] = _meta.decode(raw).metadata.resourceVersion
                except msgspec.DecodeError:  # unreadable: unknown, so the relist writes it again
                    self.metrics.bad.labels(kind).inc()

    async def _guard(self) -> None:
        """Notice a replaced stream or a lost mirror even when nothing changes in the cluster."""
        while True:
            await asyncio.sleep(self.guard_period)  # the guard's period
            live = await cluster_identity(self.js, self.names)
            if live is None or live.id != self.stream.id:
                raise MirrorLost(f"the CLUSTER stream was replaced ({self.stream.id} -> {live and live.id})")
            held, _ = await self.mirror.identity()
            if not self.building and held != self.stream.id:
                raise MirrorLost(f"the mirror no longer reflects stream {self.stream.id} (found {held!r})")

    async def _drain(self) -> None:
        while not self.queue.empty():
            await self._flush([d for d in _take_all(self.queue) if d is not None])

    # -- watching --------------------------------------------------------------------------
    async def _watch(self, kind: str) -> None:
        backoff = _Backoff()
        while True:
            try:
                items, rv = await self.kube.list(kind)
            except NotFound:
                await self._not_served(kind)
                continue
            except KubeError as exc:
                log.warning("list %s failed: %s", kind, exc, extra={"kind": kind})
                self.metrics.watch_errors.labels(kind).inc()
                await backoff.wait()
                continue
            if kind in self._unserved:
                self._unserved.discard(kind)
                log.info("the API server now serves %s", kind, extra={"kind": kind})
            self._listed_all(kind, items)
            backoff.reset()
            await self._follow(kind, rv, backoff)

    def _listed_all(self, kind: str, items: list[Any]) -> None:
        self.metrics.relists.labels(kind).inc()
        for d in self._relist(kind, items):
            self._enqueue(d)
        if kind not in self._listed:
            self._listed.add(kind)
            if self._listed >= set(self.kinds):
                self.queue.put_nowait(None)  # after every initial list: seal when flushed

    async def _not_served(self, kind: str) -> None:
        """A kind the API server does not serve (its CRD or API group is not installed): mirrored
        as empty, said once, and listed again now and then in case it is installed later."""
        if kind not in self._unserved:
            self._unserved.add(kind)
            log.warning("the API server does not serve %s; mirroring none until it does", kind, extra={"kind": kind})
        self._listed_all(kind, [])
        await asyncio.sleep(self.unserved_recheck)  # a re-check period, not a wait for a condition

    async def _follow(self, kind: str, rv: str, backoff: _Backoff) -> None:
        """Watch from ``rv`` until it is too old (then return, so the caller lists again)."""
        while True:
            try:
                seen = 0
                async for ev in self.kube.watch(kind, rv):
                    rv = ev.item.meta.resourceVersion or rv
                    d = self._on_event(kind, ev)
                    if d is not None:
                        self._enqueue(d)
                    seen += 1
                    if seen % 256 == 0:
                        await asyncio.sleep(0)  # buffered events never yield; let the batcher publish
                backoff.reset()
            except Gone:
                log.info("watch %s from %s expired (410); listing again", kind, rv, extra={"kind": kind})
                return
            except NotFound:  # the kind is no longer served (its CRD was removed): list again
                return
            except (TransientKubeError, KubeError) as exc:
                log.warning("watch %s failed: %s", kind, exc, extra={"kind": kind})
                self.metrics.watch_errors.labels(kind).inc()
                await backoff.wait()
            except msgspec.DecodeError as exc:
                log.error("watch %s sent an undecodable event: %s", kind, exc, extra={"kind": kind})
                self.metrics.watch_errors.labels(kind).inc()
                return

    def _relist(self, kind: str, items: list[Any]) -> list[Delta]:
        try:
            return relist(self.known, kind, items, self.scheduler_names)
        except msgspec.DecodeError:  # one unreadable object: diff the others, skip it
            readable = [it for it in items if self._readable(kind, it.raw)]
            return relist(self.known, kind, readable, self.scheduler_names)

    def _on_event(self, kind: str, ev: Any) -> Delta | None:
        try:
            return on_event(self.known, kind, ev, self.scheduler_names)
        except msgspec.DecodeError as exc:
            self.metrics.bad.labels(kind).inc()
            log.error("skipping an unreadable %s %s: %s", kind, ev.item.key, exc, extra={"kind": kind})
            return None

    def _readable(self, kind: str, raw: bytes) -> bool:
        try:
            wanted(kind, raw, self.scheduler_names)
        except msgspec.DecodeError:
            self.metrics.bad.labels(kind).inc()
            return False
        return True

    def _enqueue(self, d: Delta) -> None:
        self.known.remember(d)
        self.queue.put_nowait(d)

    # -- publishing --------------------------------------------------------------------------
    async def _batcher(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            raise_if_cancelled()  # a cancellation swallowed in the last flush still ends the loop
            batch = [await self.queue.get()]
            deadline = loop.time() + self.batch_wait
            while len(batch) < self.batch_max and batch[-1] is not None:
                if not self.queue.empty():
                    batch.append(self.queue.get_nowait())
                    continue
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the result when
                    # the get completes as the task is cancelled, swallowing the cancellation; the
                    # batcher then outlived its TaskGroup and held up the cache's stop for 12 s.
                    async with asyncio.timeout(left):
                        batch.append(await self.queue.get())
                except TimeoutError:
                    break
            deltas = [d for d in batch if d is not None]
            if deltas:
                await self._flush(deltas)
            if batch[-1] is None:
                await self._seal()
            for _ in batch:
                self.queue.task_done()

    async def _seal(self) -> None:
        """Every initial list is mirrored: readers may trust the mirror from now on."""
        if self.building:
            await self.mirror.seal(stream=self.stream.id, fence=self.fence)
            self.building = False
            log.info("mirror rebuilt and sealed for stream %s", self.stream.id)
        self.ready.set()

    async def _flush(self, batch: list[Delta]) -> None:
        started = time.perf_counter()
        outgoing = [self._outgoing(d) for d in batch]
        backoff = _Backoff()
        while True:
            try:
                seqs = await publish_batch(self.js, outgoing)
                break
            except MISSING as exc:  # the stream is gone: the mirror reflects a stream that is no more
                await ensure_streams(self.js, self.names, own=self.own, need=[self.names.cluster_stream])
                raise MirrorLost(f"the CLUSTER stream was lost: {exc!r}") from exc
            except Exception as exc:
                log.warning("publishing %d deltas failed: %s", len(batch), exc)
                await backoff.wait()
        while True:
            try:
                await self.mirror.apply(
                    batch, max(seqs), stream=self.stream.id, fence=self.fence, building=self.building
                )
                break
            except MirrorError:
                raise
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
        headers: dict[str, str] = {"Nats-Msg-Id": f"{d.kind}/{d.key}/{d.rv}/{d.op}/{self.fence}"}
        propagate.inject(headers, context=trace.set_span_in_context(span))
        span.end()
        d.epoch = self.fence
        return Outgoing(self.names.delta_subject(d.kind), encode(d), headers)


def _take_all(queue: asyncio.Queue[Delta | None]) -> list[Delta | None]:
    out = []
    while not queue.empty():
        out.append(queue.get_nowait())
        queue.task_done()
    return out


class _Backoff:
    """Exponential backoff with a cap, for reconnect loops."""

    def __init__(self, first: float = 0.1, cap: float = 5.0) -> None:
        self.first, self.cap, self.current = first, cap, first

    def reset(self) -> None:
        self.current = self.first

    async def wait(self) -> None:
        await asyncio.sleep(self.current)  # a retry delay, not a wait for a condition
        self.current = min(self.current * 2, self.cap)
