"""The binder service process: any number of replicas, sharing one durable consumer."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from lahar.adapters.connect import connect_nats
from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.service import ServiceContext
from lahar.service.bus import BusSettings
from lahar.wire.access import owned_streams
from lahar.wire.names import Names
from lahar_binder.service import BinderService


class BinderSettings(BusSettings):
    max_in_flight: Annotated[int, Meta(ge=1, description="API calls running at once")] = 64
    max_attempts: Annotated[int, Meta(ge=1, description="deliveries of a failing decision before giving up")] = 5
    ack_wait: Annotated[float, Meta(gt=0, description="seconds before an unacknowledged decision is redelivered")] = (
        30.0
    )
    event_workers: Annotated[int, Meta(ge=1, description="tasks writing Kubernetes Events (best effort)")] = 2
    event_queue: Annotated[int, Meta(ge=1, description="Events waiting to be written; beyond, they are dropped")] = 1000


SETTINGS = BinderSettings


async def main(ctx: ServiceContext[BinderSettings]) -> None:
    opts = ctx.settings
    nc = await connect_nats(
        opts.nats_url, ca=opts.nats_ca, role="binder", name=f"lahar-binder-{opts.replica()}", max_reconnect_attempts=-1
    )
    names = Names(opts.prefix)
    kube = KubeClient(KubeConfig.load(opts.kubeconfig_path()), max_connections=max(opts.max_in_flight, 16))
    svc = BinderService(
        kube,
        nc.jetstream(),
        names,
        ctx.registry,
        max_in_flight=opts.max_in_flight,
        max_attempts=opts.max_attempts,
        ack_wait=opts.ack_wait,
        tracer=ctx.tracer,
        own=owned_streams(names, "binder"),
        event_workers=opts.event_workers,
        event_queue=opts.event_queue,
    )
    ctx.health.add_check("consuming", svc.ready.is_set)
    ctx.health.set_ready(True)
    try:
        await svc.run(ctx.stopping)
    finally:
        await kube.close()
        await nc.drain()
