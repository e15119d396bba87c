"""The scheduler service process: every replica follows the deltas (a warm snapshot); only the
leader runs sessions and publishes decisions."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import nats
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from lahar.adapters.mirror import Mirror
from lahar.adapters.otel import setup_tracing
from lahar.leadership import lead
from lahar.servicekit import HealthServer, ServiceOptions
from lahar.wire.names import Names
from lahar_scheduler.service import ConfSource, SchedulerService

log = logging.getLogger("lahar.scheduler")


async def serve(opts: ServiceOptions, stop: asyncio.Event) -> None:
    names = Names(opts.prefix)
    conf = ConfSource(opts.extra.get("conf") or None)
    provider = setup_tracing("scheduler", opts.otel_exporter or None, set_global=True)
    registry = CollectorRegistry()
    nc = await nats.connect(opts.nats_url, name=f"lahar-scheduler-{opts.identity}", max_reconnect_attempts=-1)
    js = nc.jetstream()
    rc = aioredis.from_url(opts.redis_url)
    svc = SchedulerService(
        nc,
        js,
        Mirror(rc, names.redis_prefix),
        names,
        registry,
        conf,
        period=float(opts.extra.get("period", 1.0)),
        seed=int(opts.extra.get("seed", 0)),
        tracer=provider.get_tracer("lahar.scheduler"),
    )
    leading = {"now": False}
    svc.is_leader = lambda: leading["now"]
    health = HealthServer(registry, svc.ready.is_set)
    port = await health.start(opts.http_host, opts.http_port)
    log.info("scheduler %s serving health and metrics on port %d", opts.identity, port)
    runner = asyncio.create_task(svc.run(stop))

    async def act(ended: asyncio.Event, fence: int) -> None:
        await svc.ready.wait()
        await svc.resync()  # drop what a previous leader assumed; start from the mirror
        svc.fence = fence
        leading["now"] = True
        svc.trigger.set()
        await ended.wait()
        leading["now"] = False

    try:
        await lead(js, names, "scheduler", opts.identity, opts.leader_ttl, stop, act)
        await runner
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        await health.stop()
        await nc.close()
        await rc.aclose()
        provider.shutdown()
