"""The scheduler service process: every replica follows the deltas (a warm snapshot); only the
leader runs sessions and publishes decisions."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

import nats
import redis.asyncio as aioredis
from msgspec import Meta

from lahar.adapters.mirror import Mirror
from lahar.leadership import lead
from lahar.service import ServiceContext
from lahar.service.bus import BusSettings
from lahar.wire.names import Names
from lahar_scheduler.service import ConfSource, SchedulerService


class SchedulerSettings(BusSettings):
    conf: Annotated[str, Meta(description="volcano-scheduler.conf file, reloaded when it changes")] = ""
    schedule_period: Annotated[float, Meta(gt=0, description="seconds between sessions")] = 1.0
    seed: Annotated[int, Meta(description="seed for tie-breaking between equal nodes")] = 0


SETTINGS = SchedulerSettings


async def main(ctx: ServiceContext[SchedulerSettings]) -> None:
    opts = ctx.settings
    names = Names(opts.prefix)
    conf = ConfSource(opts.conf or None)
    nc = await nats.connect(opts.nats_url, name=f"lahar-scheduler-{opts.replica()}", max_reconnect_attempts=-1)
    js = nc.jetstream()
    rc = aioredis.from_url(opts.redis_url)
    svc = SchedulerService(
        nc,
        js,
        Mirror(rc, names.redis_prefix),
        names,
        ctx.registry,
        conf,
        period=opts.schedule_period,
        seed=opts.seed,
        tracer=ctx.tracer,
    )
    leading = {"now": False}
    svc.is_leader = lambda: leading["now"]
    ctx.health.add_check("snapshot", svc.ready.is_set)
    campaigning = asyncio.Event()  # ready only once the lease bucket is usable
    ctx.health.add_check("campaigning", campaigning.is_set)
    ctx.health.set_ready(True)
    runner = asyncio.create_task(svc.run(ctx.stopping))

    async def act(ended: asyncio.Event, fence: int) -> None:
        await svc.ready.wait()
        await svc.resync()  # drop what a previous leader assumed; start from the mirror
        svc.fence = fence
        leading["now"] = True
        svc.trigger.set()
        await ended.wait()
        leading["now"] = False

    try:
        await lead(js, names, "scheduler", opts.replica(), opts.leader_ttl, ctx.stopping, act, campaigning)
        await runner
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        await nc.close()
        await rc.aclose()
