"""The scheduler service process: every replica follows the deltas and the binders' reports (a
warm snapshot); only the leader, once settled, runs sessions and publishes decisions."""

from __future__ import annotations

from typing import Annotated

import redis.asyncio as aioredis
from msgspec import Meta

from lahar.adapters.connect import connect_nats
from lahar.adapters.mirror import LOAD_READ_SIZE, Mirror
from lahar.service import ServiceContext
from lahar.service.bus import BusSettings
from lahar.wire.access import owned_streams
from lahar.wire.names import Names
from lahar_scheduler.service import ConfSource, SchedulerService


class SchedulerSettings(BusSettings):
    conf: Annotated[str, Meta(description="volcano-scheduler.conf file, reloaded when it changes")] = ""
    schedule_period: Annotated[float, Meta(gt=0, description="seconds between sessions")] = 1.0
    seed: Annotated[int, Meta(description="seed for tie-breaking between equal nodes")] = 0
    decision_ttl: Annotated[
        float, Meta(gt=0, description="seconds a decision may wait for a binder before none may run it")
    ] = 30.0


SETTINGS = SchedulerSettings


async def main(ctx: ServiceContext[SchedulerSettings]) -> None:
    opts = ctx.settings
    names = Names(opts.prefix)
    conf = ConfSource(opts.conf or None)
    nc = await connect_nats(
        opts.nats_url,
        ca=opts.nats_ca,
        role="scheduler",
        name=f"lahar-scheduler-{opts.replica()}",
        max_reconnect_attempts=-1,
    )
    js = nc.jetstream()
    rc = aioredis.from_url(opts.redis_url, socket_read_size=LOAD_READ_SIZE)
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
        identity=opts.replica(),
        leader_ttl=opts.leader_ttl,
        decision_ttl=opts.decision_ttl,
        own=owned_streams(names, "scheduler"),
    )
    ctx.health.add_check("snapshot", svc.ready.is_set)
    ctx.health.add_check("campaigning", svc.campaigning.is_set)  # ready only once the lease bucket is usable
    # A new leader is not ready while it settles (older decisions queued, reports or deltas unread).
    ctx.health.add_check("settled", lambda: not svc.settling)
    ctx.health.set_ready(True)
    try:
        await svc.run(ctx.stopping)
    finally:
        await nc.close()
        await rc.aclose()
