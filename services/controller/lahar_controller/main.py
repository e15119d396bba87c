"""The controller service process."""

from __future__ import annotations

import asyncio
import logging

import nats
import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.adapters.mirror import Mirror
from lahar.leadership import either, lead
from lahar.servicekit import HealthServer, ServiceOptions
from lahar.wire.names import Names
from lahar_controller.service import ControllerService

log = logging.getLogger("lahar.controller")


async def serve(opts: ServiceOptions, stop: asyncio.Event) -> None:
    names = Names(opts.prefix)
    registry = CollectorRegistry()
    nc = await nats.connect(opts.nats_url, name=f"lahar-controller-{opts.identity}", max_reconnect_attempts=-1)
    js = nc.jetstream()
    rc = aioredis.from_url(opts.redis_url)
    kube = KubeClient(KubeConfig.load(opts.kubeconfig or None))
    state: dict[str, ControllerService] = {}
    health = HealthServer(registry, lambda: "svc" in state and state["svc"].ready.is_set())
    port = await health.start(opts.http_host, opts.http_port)
    log.info("controller %s serving health and metrics on port %d", opts.identity, port)

    async def act(ended: asyncio.Event, fence: int) -> None:
        svc = ControllerService(kube, js, Mirror(rc, names.redis_prefix), names, registry)
        state["svc"] = svc
        await svc.run(either(ended, stop))

    try:
        await lead(js, names, "controller", opts.identity, opts.leader_ttl, stop, act)
    finally:
        await health.stop()
        await kube.close()
        await nc.close()
        await rc.aclose()
