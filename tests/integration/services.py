"""Helpers to run the cache, scheduler, binder and controller services in one test's event loop.

Each service gets its own NATS and Redis connections, as separate processes would.  Used by
the integration tests of the distributed scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from lahar.adapters.connect import connect_nats
from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.adapters.mirror import Mirror
from lahar.wire.names import Names
from lahar_binder.service import BinderService
from lahar_cache.service import CacheService
from lahar_controller.service import ControllerService
from lahar_scheduler.service import ConfSource, SchedulerService


def kube_for(url: str) -> KubeClient:
    return KubeClient(KubeConfig(host=url, verify=False, cert=None, headers={}))


CLOSE_TIMEOUT = 10.0
STOP_TIMEOUT = 20.0


@dataclass
class Running:
    """A started service: its object, its stop event and its task."""

    service: Any
    stop: asyncio.Event
    task: asyncio.Task[None]
    closers: list[Callable[[], Any]] = field(default_factory=list)

    async def close(self) -> None:
        """Stop it; AssertionError (after closing its clients) if it did not stop in time."""
        self.stop.set()
        stopped = await bounded(self.task, STOP_TIMEOUT)
        await self._close_clients()
        if not stopped:
            raise AssertionError(f"{type(self.service).__name__} did not stop within {STOP_TIMEOUT:g} s of its stop")

    async def kill(self) -> None:
        """Abrupt end: the task is cancelled mid-work and connections dropped without cleanup."""
        self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task
        await self._close_clients()

    async def _close_clients(self) -> None:
        for close in reversed(self.closers):
            with contextlib.suppress(Exception):
                got = close()
                if asyncio.iscoroutine(got):
                    # bounded: a client that cannot close (its server gone) must not hang the test
                    await bounded(got, CLOSE_TIMEOUT)


async def bounded(work: Awaitable[Any], timeout: float) -> bool:
    """Wait for ``work`` at most ``timeout`` seconds, then cancel it and go on; whether it ended.
    Not ``asyncio.wait_for``: on a timeout it also waits for the cancelled work to finish, and
    work that swallows its cancellation never does (the cache's batcher did, through nats-py: the
    test then hung until pytest's 300 s, the event loop idle)."""
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        task.cancel()
        return False
    if not task.cancelled():
        task.exception()  # retrieved: a failed close is no news to report
    return True


# A cluster: the emulator's URL (no authentication), or a function giving the client of a role
# ("cache", "binder", ...), e.g. ``Cluster.client``: on a real control plane each service then
# acts with its own ServiceAccount's token.
Kube = str | Callable[[str], KubeClient]


class Stack:
    """cache + scheduler + binders against one cluster, one NATS, one Redis."""

    def __init__(
        self, kube: Kube, nats_url: str, redis_url: str, prefix: str, traces: str | None = None, nats_ca: str = ""
    ) -> None:
        self.kube_for: Callable[[str], KubeClient] = (lambda role: kube_for(kube)) if isinstance(kube, str) else kube
        self.nats_url, self.redis_url, self.nats_ca = nats_url, redis_url, nats_ca
        self.names = Names(prefix)
        self.running: list[Running] = []
        self.traces = traces
        self.providers: list[Any] = []

    def tracer(self, service: str) -> Any:
        """A tracer writing finished spans straight to the shared JSON-lines file, if one is set."""
        if self.traces is None:
            return None
        from lahar.adapters.otel import setup_tracing

        provider = setup_tracing(service, f"jsonl:{self.traces}", batch=False)
        self.providers.append(provider)
        return provider.get_tracer(f"lahar.{service}")

    async def _deps(self, role: str) -> tuple[Any, Any, aioredis.Redis, KubeClient]:
        nc = await connect_nats(self.nats_url, ca=self.nats_ca)
        js = nc.jetstream()
        rc = aioredis.from_url(self.redis_url)
        return nc, js, rc, self.kube_for(role)

    async def _start(self, service: Any, nc: Any, rc: Any, kube: KubeClient | None) -> Running:
        stop = asyncio.Event()
        task = asyncio.create_task(service.run(stop))
        closers: list[Callable[[], Any]] = [nc.close, rc.aclose]
        if kube is not None:
            closers.append(kube.close)
        run = Running(service, stop, task, closers)
        self.running.append(run)
        await _ready(service, task)
        return run

    async def cache(self, **options: Any) -> Running:
        nc, js, rc, kube = await self._deps("cache")
        svc = CacheService(
            kube,
            js,
            Mirror(rc, self.names.redis_prefix),
            self.names,
            CollectorRegistry(),
            tracer=self.tracer("cache"),
            **options,
        )
        return await self._start(svc, nc, rc, kube)

    async def scheduler(self, conf: str | None = None, period: float = 1.0, identity: str = "scheduler") -> Running:
        nc, js, rc, kube = await self._deps("scheduler")
        await kube.close()
        svc = SchedulerService(
            nc,
            js,
            Mirror(rc, self.names.redis_prefix),
            self.names,
            CollectorRegistry(),
            ConfSource(conf),
            period=period,
            tracer=self.tracer("scheduler"),
            identity=identity,  # replicas need their own: the lease's holder is named by it
        )
        return await self._start(svc, nc, rc, None)

    async def binder(self, max_in_flight: int = 64) -> Running:
        nc, js, rc, kube = await self._deps("binder")
        svc = BinderService(
            kube,
            js,
            self.names,
            CollectorRegistry(),
            max_in_flight=max_in_flight,
            ack_wait=5.0,
            tracer=self.tracer("binder"),
        )
        return await self._start(svc, nc, rc, kube)

    async def controller(self, **options: Any) -> Running:
        nc, js, rc, kube = await self._deps("controller")
        svc = ControllerService(
            kube, js, Mirror(rc, self.names.redis_prefix), self.names, CollectorRegistry(), **options
        )
        return await self._start(svc, nc, rc, kube)

    async def close(self) -> None:
        slow: list[str] = []
        for run in reversed(self.running):
            try:
                await run.close()
            except AssertionError as exc:  # the others are stopped all the same
                slow.append(str(exc))
        for provider in self.providers:
            provider.shutdown()
        assert not slow, slow


async def _ready(service: Any, task: asyncio.Task[None], timeout: float = 20.0) -> None:
    ready = service.ready
    waiter = asyncio.create_task(ready.wait())
    done, _ = await asyncio.wait({waiter, task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        waiter.cancel()
        task.result()  # raises what the service died of
        raise AssertionError("service stopped before it was ready")
    if waiter not in done:
        waiter.cancel()
        raise AssertionError("service not ready in time")


@contextlib.asynccontextmanager
async def stack(
    kube: Kube, nats_url: str, redis_url: str, prefix: str, traces: str | None = None, nats_ca: str = ""
) -> AsyncIterator[Stack]:
    s = Stack(kube, nats_url, redis_url, prefix, traces, nats_ca)
    try:
        yield s
    finally:
        await s.close()


async def poll(check: Callable[[], Any], timeout: float, interval: float = 0.02) -> Any:
    """Call ``check`` (sync or async) until it returns something truthy, or fail at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got = check()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)  # the polling interval of a deadline-bounded wait


def small_up_stack(state_dir: Any, infra: Any, prefix: str, nodes: tuple[str, ...], conf: str) -> Any:
    """``lahar up``'s own stack (services as processes) on the session's NATS and Valkey: one
    binder, no webhook, sessions every 0.3 s, the scheduler given ``conf`` (written beside it)."""
    from pathlib import Path

    from lahar.up.stack import LocalStack, StackConfig

    path = Path(state_dir) / "scheduler.conf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(conf)
    cfg = StackConfig(
        state_dir=Path(state_dir) / "s",
        nats_url=infra.nats_url,
        nats_ca=infra.nats_ca,
        redis_url=infra.redis_url,
        prefix=prefix,
        nodes=nodes,
        binders=1,
        max_binders=1,
        period=0.3,
        admission=False,
        scheduler_conf=str(path),
    )
    return LocalStack(cfg).start(timeout=120)
