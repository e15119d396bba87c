"""The cluster view backed by the Redis mirror (``lahar.wire.keys`` layout).

Rules need answers in microseconds and must not wait on the network, so the service answers
from a local snapshot (an ``InMemoryView``) that a background task refreshes from Redis: every
``refresh`` seconds it reads the mirror's ``seq`` and stream identity and, when either moved,
reloads the queues and namespaces (in one transaction with them).  When Redis cannot be read for
longer than ``max_staleness`` seconds the view reports itself unavailable and the service
answers by its ``--on-unavailable`` policy instead of from stale data.

A mirror that names no stream is empty, flushed, or being rebuilt by the cache
(docs/CONSISTENCY.md): its contents are not to be trusted, so lookups raise ``ViewUnavailable``
("not ready") rather than answer "not found".  After a miss in the snapshot, ``read_through``
reads the keys directly and waits briefly for them (read-your-writes; see ``readthrough``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from lahar.api.codec import dec_hook
from lahar.wire import keys
from lahar_admission.readthrough import Found, Missed
from lahar_admission.types import AdmissionConfig, Namespace, PodGroup, Queue
from lahar_admission.view import InMemoryView, ViewUnavailable

log = logging.getLogger("lahar.admission.mirror")
NOT_READY = (
    "the mirror is not ready: it names no stream (it is empty, flushed, or being rebuilt by the cache); "
    "try again in a few seconds"
)
READ_THROUGH_INTERVAL = 0.05
_queue_decoder = msgspec.json.Decoder(Queue, dec_hook=dec_hook)
_ns_decoder = msgspec.json.Decoder(Namespace, dec_hook=dec_hook)


def _decode_all(values: Iterable[bytes], decoder: msgspec.json.Decoder[Any], kind: str) -> list[Any]:
    out = []
    for raw in values:
        try:
            out.append(decoder.decode(raw))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            # One bad entry must not hide the rest of the mirror.
            log.warning("skipping undecodable %s in the mirror: %s", kind, exc)
    return out


def _decoded(name: str, raw: bytes | None, decoder: msgspec.json.Decoder[Any], kind: str) -> dict[str, Any]:
    """``{name: object}``, or nothing when the key is absent or undecodable."""
    objs = _decode_all([raw] if raw is not None else [], decoder, kind)
    return {name: objs[0]} if objs else {}


class MirrorView:
    """A ``ClusterView`` over the latest snapshot of the Redis mirror."""

    def __init__(
        self,
        redis: Any,
        prefix: str = keys.DEFAULT_PREFIX,
        refresh: float = 0.5,
        max_staleness: float = 5.0,
        config: Callable[[], AdmissionConfig | None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._redis = redis
        self._prefix = prefix
        self._refresh = refresh
        self._max_staleness = max_staleness
        self._config = config
        self._clock = clock
        self._snapshot: InMemoryView | None = None
        self._seq: bytes | None = None
        self._stream: bytes | None = None
        self._checked_at = float("-inf")
        self.last_error = "the mirror has not been read yet"

    # -- ClusterView ------------------------------------------------------------------
    def _current(self) -> InMemoryView:
        if self.age() > self._max_staleness:
            raise ViewUnavailable(self.last_error or "the mirror snapshot is too old")
        if self._snapshot is None:
            raise ViewUnavailable(NOT_READY)
        return self._snapshot

    def queue(self, name: str) -> Queue | None:
        return self._current().queue(name)

    def queues(self) -> Iterable[Queue]:
        return self._current().queues()

    def children(self, parent: str) -> list[Queue]:
        return self._current().children(parent)

    def namespace(self, name: str) -> Namespace | None:
        return self._current().namespace(name)

    def podgroup(self, namespace: str, name: str) -> PodGroup | None:
        # PodGroups are not loaded into the snapshot: no rule reads them, and there can be many.
        return None

    def admission_config(self) -> AdmissionConfig | None:
        return self._config()

    # -- refreshing -------------------------------------------------------------------
    def age(self) -> float:
        return self._clock() - self._checked_at

    @property
    def available(self) -> bool:
        """Redis answers.  A mirror that is not ready leaves the service ready: it answers each
        review with a clear "not ready" (by its --on-unavailable policy) rather than vanish from
        the Service's endpoints while the cache rebuilds."""
        return self.age() <= self._max_staleness

    @property
    def queue_count(self) -> int:
        return self._snapshot.queue_count if self._snapshot else 0

    async def refresh_once(self) -> bool:
        """Read the mirror once; True when it was readable (the snapshot may be unchanged)."""
        try:
            pipe = self._redis.pipeline(transaction=False)
            pipe.get(keys.seq_key(self._prefix))
            pipe.get(keys.stream_id_key(self._prefix))
            seq, stream = await pipe.execute()
            if stream is None:
                self._snapshot = self._seq = self._stream = None
            elif seq is None or seq != self._seq or stream != self._stream or self._snapshot is None:
                await self._load()
        except Exception as exc:  # any client failure means "unavailable", never a crash
            self.last_error = f"cannot read the mirror: {type(exc).__name__}: {exc}"
            return False
        self._checked_at = self._clock()
        self.last_error = ""
        return True

    async def _load(self) -> None:
        # One transaction: the objects are those of the identity and sequence read with them.
        pipe = self._redis.pipeline(transaction=True)
        pipe.get(keys.stream_id_key(self._prefix))
        pipe.get(keys.seq_key(self._prefix))
        pipe.hvals(keys.objects_key(self._prefix, "queues"))
        pipe.hvals(keys.objects_key(self._prefix, "namespaces"))
        stream, seq, queues_raw, namespaces_raw = await pipe.execute()
        if stream is None:
            self._snapshot = self._seq = self._stream = None
            return
        self._snapshot = InMemoryView(
            _decode_all(queues_raw, _queue_decoder, "queue"),
            _decode_all(namespaces_raw, _ns_decoder, "namespace"),
        )
        self._seq, self._stream = seq, stream

    # -- read-your-writes -------------------------------------------------------------
    async def catch_up(self) -> None:
        """Refresh at once when the snapshot is not ready: the cache may have sealed the mirror
        since the last periodic refresh.  One Redis round trip, and only while not ready."""
        if self._snapshot is None:
            await self.refresh_once()

    async def read_through(self, missed: Missed, wait: float) -> Found:
        """The missed objects, read from the mirror directly; those still absent are polled for
        until ``wait`` seconds have passed.  A Redis failure ends the wait with what was found."""
        deadline = time.monotonic() + wait
        found = Found()
        while True:
            try:
                await self._read_missing(missed, found)
            except Exception as exc:  # the snapshot's answer stands; the service never crashes
                log.warning("read-through of %s failed: %r", missed, exc)
                return found
            left = deadline - time.monotonic()
            if found.covers(missed) or left <= 0:
                return found
            await asyncio.sleep(min(READ_THROUGH_INTERVAL, left))

    async def _read_missing(self, missed: Missed, found: Found) -> None:
        queues = found.unsettled(missed.queues)
        namespaces = sorted(missed.namespaces - found.namespaces.keys())
        pipe = self._redis.pipeline(transaction=False)
        if queues:
            pipe.hmget(keys.objects_key(self._prefix, "queues"), queues)
        if namespaces:
            pipe.hmget(keys.objects_key(self._prefix, "namespaces"), namespaces)
        replies = iter(await pipe.execute())
        if queues:
            for name, raw in zip(queues, next(replies), strict=True):
                found.queues.update(_decoded(name, raw, _queue_decoder, "queue"))
        if namespaces:
            for name, raw in zip(namespaces, next(replies), strict=True):
                found.namespaces.update(_decoded(name, raw, _ns_decoder, "namespace"))

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh until ``stop`` is set."""
        while not stop.is_set():
            await self.refresh_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._refresh)
