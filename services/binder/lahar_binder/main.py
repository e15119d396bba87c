"""The binder service process: any number of replicas, sharing one durable consumer."""

from __future__ import annotations

import asyncio
import logging

import nats
from prometheus_client import CollectorRegistry

from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.adapters.otel import setup_tracing
from lahar.servicekit import HealthServer, ServiceOptions
from lahar.wire.names import Names
from lahar_binder.service import BinderService

log = logging.getLogger("lahar.binder")


async def serve(opts: ServiceOptions, stop: asyncio.Event) -> None:
    names = Names(opts.prefix)
    provider = setup_tracing("binder", opts.otel_exporter or None, set_global=True)
    registry = CollectorRegistry()
    nc = await nats.connect(opts.nats_url, name=f"lahar-binder-{opts.identity}", max_reconnect_attempts=-1)
    in_flight = int(opts.extra.get("max-in-flight", 64))
    kube = KubeClient(KubeConfig.load(opts.kubeconfig or None), max_connections=max(in_flight, 16))
    svc = BinderService(
        kube,
        nc.jetstream(),
        names,
        registry,
        max_in_flight=in_flight,
        max_attempts=int(opts.extra.get("max-attempts", 5)),
        ack_wait=float(opts.extra.get("ack-wait", 30.0)),
        tracer=provider.get_tracer("lahar.binder"),
    )
    health = HealthServer(registry, svc.ready.is_set)
    port = await health.start(opts.http_host, opts.http_port)
    log.info("binder %s serving health and metrics on port %d", opts.identity, port)
    try:
        await svc.run(stop)
    finally:
        await health.stop()
        await kube.close()
        await nc.drain()
        provider.shutdown()
