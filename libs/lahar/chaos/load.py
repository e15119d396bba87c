"""The chaos workload: gangs arriving at a steady rate, each pod running for a while and then
finishing (the emulator's kubelets honour ``sim.lahar.io/run-seconds``), so the cluster stays
busy and fragmented, and a scheduler that double-places a pod over-commits a node at once."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from lahar.adapters.kube import KubeClient
from lahar.e2e.workload import JobSpec, Tracker, ensure_queues, submit


@dataclass
class Load:
    kube: KubeClient
    namespace: str = "chaos"
    gang: int = 10
    cpu: str = "1"
    memory: str = "1Gi"
    rate: float = 3.0  # gangs per second
    run_seconds: float = 30.0
    tracker: Tracker = field(default_factory=Tracker)
    submitted: set[str] = field(default_factory=set)
    _task: asyncio.Task[None] | None = None
    _count: int = 0

    async def start(self) -> Load:
        await ensure_queues(self.kube, {"default": 1})
        self._task = asyncio.create_task(self._run(), name="chaos-load")
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def burst(self, gangs: int) -> None:
        """Submit ``gangs`` at once (and wait for the creates)."""
        first = self._count + 1
        self._count += gangs
        await asyncio.gather(*(self._one(n) for n in range(first, first + gangs)))

    async def _run(self) -> None:
        started = time.monotonic()
        pending: set[asyncio.Task[None]] = set()
        while True:
            due = int((time.monotonic() - started) * self.rate) + 1
            while self._count < due:
                self._count += 1  # counted here: the task below runs only after this loop yields
                task = asyncio.create_task(self._one(self._count))
                pending.add(task)
                task.add_done_callback(pending.discard)
            await asyncio.sleep(max(0.0, (self._count / self.rate) - (time.monotonic() - started)))

    async def _one(self, n: int) -> None:
        job = JobSpec(f"g{n:05d}", "default", self.gang, self.cpu, self.memory, self.run_seconds)
        self.submitted.update(f"{self.namespace}/{job.name}-worker-{i}" for i in range(self.gang))
        await submit(self.kube, self.namespace, [job], self.tracker, parallel=self.gang)
