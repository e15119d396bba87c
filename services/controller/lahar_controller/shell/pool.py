"""Keyed work for a fixed number of workers (Kubernetes' workqueue, in asyncio).

Items are queued under a key (a job, a queue, a pod); the items of one key are handled one at a
time and in order, so two workers never act on the same job at once, while different keys run in
parallel on ``workers`` tasks.  An item equal to one already waiting under its key collapses into it.

An item whose handler raises ``Retry`` is queued again after an exponential backoff; after
``limit`` retries (-1: never) it is handed to ``give_up`` instead.  Any other exception is poison:
counted, logged and dropped, so one bad object never stops a worker.  ``Deposed`` (the replica
lost its lease) drops the item quietly: the next leader starts from the cluster as it is.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from lahar_controller.shell.metrics import Metrics
from lahar_controller.shell.writer import Deposed

log = logging.getLogger("lahar.controller")

T = TypeVar("T", bound=Hashable)


class Retry(Exception):
    """The item failed in a way worth trying again (a write failed, a dependency is missing)."""


class Pool(Generic[T]):
    def __init__(
        self,
        name: str,
        handle: Callable[[str, T], Awaitable[None]],
        metrics: Metrics,
        *,
        workers: int = 16,
        first: float = 0.05,
        cap: float = 10.0,
        limit: int = 15,
        give_up: Callable[[str, T, str], Awaitable[None]] | None = None,
    ) -> None:
        self.name, self.handle, self.metrics = name, handle, metrics
        self.workers, self.first, self.cap, self.limit = workers, first, cap, limit
        self.give_up = give_up
        self._lanes: dict[str, dict[T, None]] = {}  # key -> items waiting, in order (a dict dedupes)
        self._ready: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()  # keys in _ready
        self._active: set[str] = set()  # keys a worker handles now
        self._attempts: dict[tuple[str, T], int] = {}
        self._timers: set[asyncio.TimerHandle] = set()

    def put(self, key: str, item: T) -> None:
        self._lanes.setdefault(key, {})[item] = None
        self._schedule(key)

    def put_after(self, delay: float, key: str, item: T) -> None:
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.discard(handle)
            self.put(key, item)

        handle = loop.call_later(max(delay, 0.0), fire)
        self._timers.add(handle)

    def pending(self) -> int:
        return len(self._lanes)

    def _schedule(self, key: str) -> None:
        if key not in self._active and key not in self._queued and self._lanes.get(key):
            self._queued.add(key)
            self._ready.put_nowait(key)

    async def run(self) -> None:
        """The workers; never returns."""
        try:
            async with asyncio.TaskGroup() as group:
                for i in range(self.workers):
                    group.create_task(self._worker(), name=f"{self.name}-{i}")
        finally:
            for timer in self._timers:
                timer.cancel()

    async def _worker(self) -> None:
        while True:
            key = await self._ready.get()
            self._queued.discard(key)
            lane = self._lanes.get(key)
            if not lane:
                self._lanes.pop(key, None)
                continue
            item = next(iter(lane))
            del lane[item]
            self._active.add(key)
            try:
                await self._one(key, item)
            finally:
                self._active.discard(key)
                if not self._lanes.get(key):
                    self._lanes.pop(key, None)
                self._schedule(key)
                self.metrics.waiting.labels(self.name).set(len(self._lanes))

    async def _one(self, key: str, item: T) -> None:
        started = time.perf_counter()
        outcome = "done"
        try:
            await self.handle(key, item)
            self._attempts.pop((key, item), None)
        except Retry as why:
            outcome = await self._retry(key, item, str(why))
        except Deposed:
            outcome = "deposed"
            self._attempts.pop((key, item), None)
        except Exception:  # poison: contained to this item
            outcome = "failed"
            self._attempts.pop((key, item), None)
            log.exception("%s: dropping %s %r, which cannot be handled", self.name, key, item)
        self.metrics.handled.labels(self.name, outcome).inc()
        self.metrics.seconds.labels(self.name).observe(time.perf_counter() - started)

    async def _retry(self, key: str, item: T, why: str) -> str:
        n = self._attempts.get((key, item), 0) + 1
        if self.limit != -1 and n > self.limit:
            self._attempts.pop((key, item), None)
            log.warning("%s: %s failed %d times, giving up: %s", self.name, key, n, why)
            if self.give_up is not None:
                try:
                    await self.give_up(key, item, why)
                except Deposed:
                    pass
                except Exception:
                    log.exception("%s: giving up on %s failed too", self.name, key)
            return "given_up"
        self._attempts[(key, item)] = n
        delay = min(self.first * 2 ** (n - 1), self.cap)
        log.info("%s: %s failed (attempt %d), again in %.2f s: %s", self.name, key, n, delay, why)
        self.put_after(delay, key, item)
        return "retried"
