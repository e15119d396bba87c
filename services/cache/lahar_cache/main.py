"""The cache service process: connections, leadership, health, then ``CacheService.run``."""

from __future__ import annotations

import asyncio
import logging

import nats
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.adapters.mirror import Mirror
from lahar.adapters.otel import setup_tracing
from lahar.leadership import either, lead
from lahar.servicekit import HealthServer, ServiceOptions
from lahar.wire.names import Names
from lahar_cache.service import CacheService

log = logging.getLogger("lahar.cache")


async def serve(opts: ServiceOptions, stop: asyncio.Event) -> None:
    names = Names(opts.prefix)
    provider = setup_tracing("cache", opts.otel_exporter or None, set_global=True)
    registry = CollectorRegistry()
    nc = await nats.connect(opts.nats_url, name=f"lahar-cache-{opts.identity}", max_reconnect_attempts=-1)
    js = nc.jetstream()
    rc = aioredis.from_url(opts.redis_url)
    kube = KubeClient(KubeConfig.load(opts.kubeconfig or None))
    state: dict[str, CacheService] = {}
    health = HealthServer(registry, lambda: "svc" in state and state["svc"].ready.is_set())
    port = await health.start(opts.http_host, opts.http_port)
    log.info("cache %s serving health and metrics on port %d", opts.identity, port)

    async def act(ended: asyncio.Event, fence: int) -> None:
        svc = CacheService(
            kube, js, Mirror(rc, names.redis_prefix), names, registry, tracer=provider.get_tracer("lahar.cache")
        )
        state["svc"] = svc
        await svc.run(either(ended, stop))

    try:
        await lead(js, names, "cache", opts.identity, opts.leader_ttl, stop, act)
    finally:
        await health.stop()
        await kube.close()
        await nc.close()
        await rc.aclose()
        provider.shutdown()
