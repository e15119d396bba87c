"""The cluster view backed by the Redis mirror (``lahar.wire.keys`` layout).

Rules need answers in microseconds and must not wait on the network, so the service answers
from a local snapshot (an ``InMemoryView``) that a background task refreshes from Redis: every
``refresh`` seconds it reads the mirror's ``seq`` key and, when it moved (or the mirror has no
``seq``), reloads the queues and namespaces.  When Redis cannot be read for longer than
``max_staleness`` seconds the view reports itself unavailable and the service answers by its
``--on-unavailable`` policy instead of from stale data.
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
from lahar_admission.types import AdmissionConfig, Namespace, PodGroup, Queue
from lahar_admission.view import InMemoryView, ViewUnavailable

log = logging.getLogger("lahar.admission.mirror")
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
        self._checked_at = float("-inf")
        self.last_error = "the mirror has not been read yet"

    # -- ClusterView ------------------------------------------------------------------
    def _current(self) -> InMemoryView:
        if self._snapshot is None or self.age() > self._max_staleness:
            raise ViewUnavailable(self.last_error or "the mirror snapshot is too old")
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
        return self._snapshot is not None and self.age() <= self._max_staleness

    @property
    def queue_count(self) -> int:
        return self._snapshot.queue_count if self._snapshot else 0

    async def refresh_once(self) -> bool:
        """Read the mirror once; True when it was readable (the snapshot may be unchanged)."""
        try:
            seq = await self._redis.get(keys.seq_key(self._prefix))
            if seq is None or seq != self._seq or self._snapshot is None:
                self._snapshot = await self._load()
                self._seq = seq
        except Exception as exc:  # any client failure means "unavailable", never a crash
            self.last_error = f"cannot read the mirror: {type(exc).__name__}: {exc}"
            return False
        self._checked_at = self._clock()
        self.last_error = ""
        return True

    async def _load(self) -> InMemoryView:
        pipe = self._redis.pipeline(transaction=True)
        pipe.hvals(keys.objects_key(self._prefix, "queues"))
        pipe.hvals(keys.objects_key(self._prefix, "namespaces"))
        queues_raw, namespaces_raw = await pipe.execute()
        return InMemoryView(
            _decode_all(queues_raw, _queue_decoder, "queue"),
            _decode_all(namespaces_raw, _ns_decoder, "namespace"),
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh until ``stop`` is set."""
        while not stop.is_set():
            await self.refresh_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._refresh)
