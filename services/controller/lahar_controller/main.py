"""The controller service process: one replica acts, by leader election."""

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
from lahar_controller.service import ControllerService

SETTINGS = BusSettings


async def main(ctx: ServiceContext[BusSettings]) -> None:
    opts = ctx.settings
    names = Names(opts.prefix)
    nc = await nats.connect(opts.nats_url, name=f"lahar-controller-{opts.replica()}", max_reconnect_attempts=-1)
    rc = aioredis.from_url(opts.redis_url)
    kube = KubeClient(KubeConfig.load(opts.kubeconfig_path()))
    campaigning = asyncio.Event()  # ready only once the lease bucket is usable
    ctx.health.add_check("campaigning", campaigning.is_set)
    ctx.health.set_ready(True)

    async def act(ended: asyncio.Event, fence: int) -> None:
        svc = ControllerService(kube, nc.jetstream(), Mirror(rc, names.redis_prefix), names, ctx.registry)
        await svc.run(either(ended, ctx.stopping))

    try:
        await lead(nc.jetstream(), names, "controller", opts.replica(), opts.leader_ttl, ctx.stopping, act, campaigning)
    finally:
        await kube.close()
        await nc.close()
        await rc.aclose()
