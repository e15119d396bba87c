"""The cache service process: leadership, then ``CacheService.run`` while leading.

A lost or replaced mirror (``MirrorLost``) starts a new ``CacheService``, which rebuilds it; a
refused write (``MirrorFenced``: a newer leader writes now) ends the process, which must not
act on a lease it no longer truly holds (its supervisor starts it again as a standby).
"""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis

from lahar.adapters.connect import connect_nats
from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.adapters.mirror import Mirror, MirrorLost
from lahar.leadership import either, lead
from lahar.service import ServiceContext
from lahar.service.bus import BusSettings
from lahar.service.supervise import LoopDied
from lahar.wire.access import owned_streams
from lahar.wire.names import Names
from lahar_cache.service import CacheService

SETTINGS = BusSettings
log = logging.getLogger("lahar.cache")


async def main(ctx: ServiceContext[BusSettings]) -> None:
    opts = ctx.settings
    names = Names(opts.prefix)
    own = owned_streams(names, "cache")
    nc = await connect_nats(
        opts.nats_url, ca=opts.nats_ca, role="cache", name=f"lahar-cache-{opts.replica()}", max_reconnect_attempts=-1
    )
    rc = aioredis.from_url(opts.redis_url)
    mirror = Mirror(rc, names.redis_prefix)
    kube = KubeClient(KubeConfig.load(opts.kubeconfig_path()))
    current: list[CacheService] = []
    leading = {"now": False}
    # A standby is ready (it is waiting its turn); a leader once its mirror is sealed.
    ctx.health.add_check("watching", lambda: not leading["now"] or current[-1].ready.is_set())
    campaigning = asyncio.Event()  # ready only once the lease bucket is usable
    ctx.health.add_check("campaigning", campaigning.is_set)
    ctx.health.set_ready(True)

    async def act(ended: asyncio.Event, fence: int) -> None:
        await mirror.record_epoch("cache", fence)
        stop = either(ended, ctx.stopping)
        leading["now"] = True
        try:
            while not stop.is_set():
                svc = CacheService(
                    kube, nc.jetstream(), mirror, names, ctx.registry, tracer=ctx.tracer, fence=fence, own=own
                )
                current.append(svc)
                del current[:-1]
                try:
                    await svc.run(stop, drain=ctx.stopping.is_set)
                    return
                except (MirrorLost, LoopDied) as exc:
                    # A loop that found the mirror lost ends the service with LoopDied: rebuild,
                    # as for MirrorLost itself; any other dead loop ends the process.
                    lost = exc if isinstance(exc, MirrorLost) else exc.__cause__
                    if not isinstance(lost, MirrorLost):
                        raise
                    log.warning("%s; rebuilding the mirror", lost)
        finally:
            leading["now"] = False

    try:
        await lead(
            nc.jetstream(),
            names,
            "cache",
            opts.replica(),
            opts.leader_ttl,
            ctx.stopping,
            act,
            campaigning,
            epoch_floor=mirror.epoch_floor,
        )
    finally:
        await kube.close()
        await nc.close()
        await rc.aclose()
