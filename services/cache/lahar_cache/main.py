"""The cache service process: leadership, then ``CacheService.run`` while leading."""

from __future__ import annotations

import asyncio

import nats
import redis.asyncio as aioredis

from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.adapters.mirror import Mirror
from lahar.leadership import either, lead
from lahar.service import ServiceContext
from lahar.service.bus import BusSettings
from lahar.wire.names import Names
from lahar_cache.service import CacheService

SETTINGS = BusSettings


async def main(ctx: ServiceContext[BusSettings]) -> None:
    opts = ctx.settings
    names = Names(opts.prefix)
    nc = await nats.connect(opts.nats_url, name=f"lahar-cache-{opts.replica()}", max_reconnect_attempts=-1)
    rc = aioredis.from_url(opts.redis_url)
    kube = KubeClient(KubeConfig.load(opts.kubeconfig_path()))
    current: list[CacheService] = []
    leading = {"now": False}
    # A standby is ready (it is waiting its turn); a leader once it has listed every kind.
    ctx.health.add_check("watching", lambda: not leading["now"] or current[-1].ready.is_set())
    campaigning = asyncio.Event()  # ready only once the lease bucket is usable
    ctx.health.add_check("campaigning", campaigning.is_set)
    ctx.health.set_ready(True)

    async def act(ended: asyncio.Event, fence: int) -> None:
        svc = CacheService(kube, nc.jetstream(), Mirror(rc, names.redis_prefix), names, ctx.registry, tracer=ctx.tracer)
        current.append(svc)
        leading["now"] = True
        try:
            await svc.run(either(ended, ctx.stopping))
        finally:
            leading["now"] = False

    try:
        await lead(nc.jetstream(), names, "cache", opts.replica(), opts.leader_ttl, ctx.stopping, act, campaigning)
    finally:
        await kube.close()
        await nc.close()
        await rc.aclose()
