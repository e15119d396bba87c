"""The controller service: Volcano's job, queue, podgroup, garbage-collector (TTL), cronjob and
jobflow/jobtemplate controllers, as one process.

Every replica follows the cluster all the time, leader or not (``Follower``: the mirror at S, the
CLUSTER stream from S+1, gaps and replaced streams reloaded, bad deltas dead-lettered) into one
``World``, so a standby is warm.  When a replica comes to lead (``act``), a fresh set of
controllers is attached to the world and the world is replayed to them as a first load would;
the requests they queue are handled by bounded pools of workers, one key (a job, a queue, a pod)
at a time, and their effects performed through the API (``Writer``).  When the term ends the
controllers are dropped, with what they had queued; the world follows on.  A replica writes only
while its lease holds (``may_write``), so a deposed controller stops writing at once.  One object
that cannot be handled is counted and skipped, never fatal; every loop runs supervised.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Coroutine
from datetime import UTC, datetime
from typing import Any

from nats.js.client import JetStreamContext
from prometheus_client import CollectorRegistry

from lahar.adapters.bus import ensure_streams
from lahar.adapters.follow import Follower
from lahar.adapters.kube import KubeClient
from lahar.adapters.mirror import Mirror, MirrorState
from lahar.service.supervise import supervised
from lahar.wire.messages import Delta
from lahar.wire.names import Names
from lahar_controller.job.handlers import command_target, is_job_command
from lahar_controller.job.view import Obj, name_of, namespace_of
from lahar_controller.queues import status_counts
from lahar_controller.shell.cron import CronController
from lahar_controller.shell.flows import FlowController
from lahar_controller.shell.hypernodes import HyperNodeDiscovery
from lahar_controller.shell.jobs import JobController
from lahar_controller.shell.metrics import Metrics
from lahar_controller.shell.plain import PlainPodGroups
from lahar_controller.shell.queues import QueueController, queue_of
from lahar_controller.shell.ttl import TTLController
from lahar_controller.shell.world import World
from lahar_controller.shell.writer import Writer

log = logging.getLogger("lahar.controller")

# What the controller follows, in the order a (re)load hands them over: what a Job step looks up
# first, then Jobs, their pods, and what acts on them.
KINDS = (
    "namespaces",
    "priorityclasses",
    "persistentvolumeclaims",
    "queues",
    "podgroups",
    "replicasets",
    "statefulsets",
    "daemonsets",
    "batchjobs",
    "jobs",
    "pods",
    "commands",
    "cronjobs",
    "jobtemplates",
    "jobflows",
    # HyperNode discovery from node labels
    "nodes",
    "hypernodes",
)


SETTLE_SECONDS = 2.0  # at most, before a new leader acts on a world that may lag the stream a little
Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Controllers:
    """One term's controllers, attached to the world (they listen from their constructors)."""

    def __init__(
        self,
        world: World,
        writer: Writer,
        metrics: Metrics,
        *,
        workers: int,
        max_requeue: int,
        clock: Clock,
        hypernode_types: dict[str, list[str]] | None = None,
    ) -> None:
        args = (world, writer, metrics)
        self.jobs = JobController(*args, workers=workers, max_requeue=max_requeue, clock=clock)
        self.queues = QueueController(*args)
        self.podgroups = PlainPodGroups(*args)
        self.ttl = TTLController(*args, clock)
        self.cron = CronController(*args, clock)
        self.flows = FlowController(*args, clock)
        self.hypernodes = HyperNodeDiscovery(*args, hypernode_types or {})
        world.listen("commands", self._on_command)

    def loops(self) -> dict[str, Coroutine[Any, Any, None]]:
        return {
            "jobs": self.jobs.run(),
            "queues": self._queues(),
            "podgroups": self.podgroups.pool.run(),
            "ttl": self.ttl.pool.run(),
            "cronjobs": self.cron.pool.run(),
            "jobflows": self.flows.pool.run(),
            "hypernodes": self.hypernodes.pool.run(),
        }

    async def _queues(self) -> None:
        await self.queues.ensure_standard_queues()
        await self.queues.pool.run()

    def _on_command(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None or new is None:
            return  # a Command is acted on once, when it appears
        target = command_target(new)
        if is_job_command(new):
            self.jobs.on_command(new)
        elif target.get("kind") == "Queue":
            self.queues.on_command(new)


class ControllerService:
    def __init__(
        self,
        kube: KubeClient,
        js: JetStreamContext,
        mirror: Mirror,
        names: Names,
        registry: CollectorRegistry,
        *,
        may_write: Callable[[], bool] = lambda: True,
        own: Collection[str] | None = None,
        identity: str = "lahar-controller",
        workers: int = 64,
        max_requeue: int = 15,
        clock: Clock = _utc_now,
        settle: float = SETTLE_SECONDS,
        hypernode_types: dict[str, list[str]] | None = None,
    ) -> None:
        self.hypernode_types = hypernode_types or {}
        self.kube, self.js, self.names = kube, js, names
        self.may_write, self.identity, self.clock = may_write, identity, clock
        self.workers, self.max_requeue, self.settle = workers, max_requeue, settle
        self.own = own  # the streams this service may make (lahar.wire.access); None: all
        self.metrics = Metrics.of(registry)
        self.world = World(KINDS, self.metrics.bad)
        self.acting: Controllers | None = None  # this term's, while leading
        self.terms = 0
        self.follower = Follower(
            js,
            mirror,
            names,
            kinds=KINDS,
            source="controller",
            load=self._load,
            apply=self._apply,
            applied=self._flush,
            bad=self.metrics.bad,
            own=own,
        )
        self.ready = self.follower.ready

    async def run(self, stop: asyncio.Event) -> None:
        """Follow and act until ``stop`` (one replica that always leads)."""
        await supervised(self.act(stop), {"follow": self.follow()})

    async def follow(self) -> None:
        """Follow the cluster; never returns (a standby runs this too)."""
        await ensure_streams(self.js, self.names, own=self.own, need=[self.names.cluster_stream])
        await self.follower.run()

    async def act(self, ended: asyncio.Event) -> None:
        """One term: controllers attached to the followed world until ``ended``."""
        if await _until_set(self.follower.ready.wait(), ended):
            return
        await self._settle(ended)
        writer = Writer(self.kube, self.may_write, self.metrics, identity=self.identity, clock=self.clock)
        acting = Controllers(
            self.world,
            writer,
            self.metrics,
            workers=self.workers,
            max_requeue=self.max_requeue,
            clock=self.clock,
            hypernode_types=self.hypernode_types,
        )
        self.acting = acting
        self.terms += 1
        self.metrics.podgroup_counts.source = self.queue_counts
        self.metrics.job_phases.source = self.job_phases
        self.world.replay()
        acting.jobs.flush()
        jobs, pods = len(self.world.objects["jobs"]), len(self.world.objects["pods"])
        log.info("controller: term %d acts on a warm world of %d jobs, %d pods", self.terms, jobs, pods)
        try:
            await supervised(ended.wait(), acting.loops())
        finally:
            self.world.forget_listeners()
            self.acting = None
            self.metrics.podgroup_counts.source = None  # the next leader's to export
            self.metrics.job_phases.source = None

    def queue_counts(self) -> dict[str, dict[str, int]]:
        """Every queue's PodGroups by phase (Volcano's queue_pod_group_*_count)."""
        members: dict[str, list[Obj]] = {name_of(q): [] for q in self.world.of_kind("queues")}
        for pg in self.world.of_kind("podgroups"):
            group = members.get(queue_of(pg) or "")
            if group is not None:
                group.append(pg)
        return {queue: status_counts(pgs) for queue, pgs in members.items()}

    def job_phases(self) -> list[tuple[str, str, str]]:
        """Every Volcano Job's namespace/name, queue and phase."""
        out = []
        for job in self.world.of_kind("jobs"):
            queue = str((job.get("spec") or {}).get("queue") or "default")  # admission's default
            phase = str(((job.get("status") or {}).get("state") or {}).get("phase") or "")
            out.append((f"{namespace_of(job)}/{name_of(job)}", queue, phase))
        return out

    async def _settle(self, ended: asyncio.Event) -> None:
        """Apply what the stream holds before acting on it (briefly: the writes are optimistic)."""
        deadline = time.monotonic() + self.settle
        while not ended.is_set() and time.monotonic() < deadline:
            if await self.follower.caught_up():
                return
            await asyncio.sleep(0.02)

    def _load(self, state: MirrorState) -> None:
        self.world.load(state)
        self._flush()

    def _apply(self, delta: Delta, headers: dict[str, str] | None) -> None:
        self.world.apply(delta)

    def _flush(self) -> None:
        self.metrics.world_seq.set(self.follower.seq)
        if self.acting is not None:
            self.acting.jobs.flush()


async def _until_set(work: Awaitable[object], ended: asyncio.Event) -> bool:
    """Await ``work`` unless ``ended`` is set first; True when it was."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(ended.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    for pending in (task, waiter):
        pending.cancel()
    return ended.is_set()
