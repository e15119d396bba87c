"""The controller service process: every replica follows the cluster; one acts, by leader election."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import redis.asyncio as aioredis
from msgspec import Meta

from lahar.adapters.connect import connect_nats
from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.adapters.leader import LeaderElection
from lahar.adapters.mirror import Mirror
from lahar.leadership import either, lead
from lahar.service import ServiceContext
from lahar.service.bus import BusSettings
from lahar.service.settings import Check
from lahar.service.supervise import supervised
from lahar.wire.access import owned_streams
from lahar.wire.names import Names
from lahar_controller.hypernodes import parse_types
from lahar_controller.service import ControllerService


def _discovery(text: str) -> str | None:
    try:
        parse_types(json.loads(text) if text else {})
    except (ValueError, AttributeError) as exc:
        return f"expected JSON {{type: [label key, ..., kubernetes.io/hostname]}}: {exc}"
    return None


class ControllerSettings(BusSettings):
    hypernode_discovery: Annotated[
        str,
        Check(_discovery),
        Meta(
            description="HyperNodes from node labels, as Volcano's label discoverer: JSON "
            '{"type": ["widest label key", ..., "kubernetes.io/hostname"]} (default: off)'
        ),
    ] = ""

    def hypernode_types(self) -> dict[str, list[str]]:
        return parse_types(json.loads(self.hypernode_discovery)) if self.hypernode_discovery else {}


SETTINGS = ControllerSettings


async def main(ctx: ServiceContext[ControllerSettings]) -> None:
    opts = ctx.settings
    names = Names(opts.prefix)
    nc = await connect_nats(
        opts.nats_url,
        ca=opts.nats_ca,
        role="controller",
        name=f"lahar-controller-{opts.replica()}",
        max_reconnect_attempts=-1,
    )
    rc = aioredis.from_url(opts.redis_url)
    mirror = Mirror(rc, names.redis_prefix)
    kube = KubeClient(KubeConfig.load(opts.kubeconfig_path()))
    campaigning = asyncio.Event()  # ready only once the lease bucket is usable
    ctx.health.add_check("campaigning", campaigning.is_set)
    ctx.health.set_ready(True)
    elections: list[LeaderElection] = []
    # One world per process, followed by every replica: a standby takes over warm.
    svc = ControllerService(
        kube,
        nc.jetstream(),
        mirror,
        names,
        ctx.registry,
        may_write=lambda: bool(elections) and elections[0].is_leader,
        own=owned_streams(names, "controller"),
        identity=opts.replica(),
        hypernode_types=opts.hypernode_types(),
    )
    # A standby is ready (it waits its turn); a leader once it follows the cluster.
    ctx.health.add_check("following", lambda: svc.acting is None or svc.ready.is_set())

    async def act(ended: asyncio.Event, fence: int) -> None:
        await mirror.record_epoch("controller", fence)
        await svc.act(either(ended, ctx.stopping))

    campaign = lead(
        nc.jetstream(),
        names,
        "controller",
        opts.replica(),
        opts.leader_ttl,
        ctx.stopping,
        act,
        campaigning,
        epoch_floor=mirror.epoch_floor,
        on_start=elections.append,
    )
    try:
        await supervised(campaign, {"follow": svc.follow()})
    finally:
        await kube.close()
        await nc.close()
        await rc.aclose()
