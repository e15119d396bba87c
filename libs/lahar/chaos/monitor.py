"""Watching the cluster during a chaos scenario: every node, PodGroup and pod event goes into the
``Ledger``, which checks the invariants at that event; binds are timed for recovery figures.

A watch that breaks (the API server is restarted, a 410 Gone) lists again and goes on; the
ledger keys objects by name, so the replay is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import msgspec

from lahar.adapters.kube import KubeClient, KubeError
from lahar.chaos.ledger import Ledger

log = logging.getLogger("lahar.chaos")


class Monitor:
    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.ledger = Ledger()
        self.started = time.monotonic()
        self.bind_times: list[float] = []  # seconds since start of every first bind of a pod
        self.bound_at: dict[str, float] = {}  # pod -> seconds since start of its first bind
        self.synced = {k: asyncio.Event() for k in ("nodes", "podgroups", "pods")}
        self._tasks: list[asyncio.Task[None]] = []

    def now(self) -> float:
        return time.monotonic() - self.started

    async def __aenter__(self) -> Monitor:
        for kind in self.synced:
            self._tasks.append(asyncio.create_task(self._follow(kind), name=f"chaos-watch-{kind}"))
        for event in self.synced.values():
            await asyncio.wait_for(event.wait(), 30)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def binds_after(self, t: float) -> int:
        return sum(1 for b in self.bind_times if b > t)

    def first_bind_after(self, t: float) -> float | None:
        return next((b for b in self.bind_times if b > t), None)

    async def _follow(self, kind: str) -> None:
        while True:
            try:
                items, rv = await self.kube.list(kind)
                for item in items:
                    self._event(kind, msgspec.json.decode(item.raw), False)
                self.synced[kind].set()
                async for ev in self.kube.watch(kind, rv):
                    if ev.type == "BOOKMARK":
                        continue
                    self._event(kind, msgspec.json.decode(ev.item.raw), ev.type == "DELETED")
            except (KubeError, OSError) as exc:
                log.info("watch %s broke (%r); listing again", kind, exc)
                await asyncio.sleep(0.2)  # a retry delay after a broken watch

    def _event(self, kind: str, obj: dict[str, Any], deleted: bool) -> None:
        handler: dict[str, Callable[..., None]] = {"nodes": self.ledger.node, "podgroups": self.ledger.podgroup}
        if kind in handler:
            handler[kind](obj, deleted)
            return
        key = f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
        before = key in self.ledger.ever_bound
        self.ledger.pod(obj, deleted, self.now())
        if not before and key in self.ledger.ever_bound:
            self.bind_times.append(self.now())
            self.bound_at[key] = self.now()
