"""The controller service: Volcano's job, queue, podgroup, garbage-collector (TTL), cronjob and
jobflow/jobtemplate controllers, as one process.

It follows the cluster like the scheduler (``Follower``: the mirror at S, the CLUSTER stream from
S+1, gaps and replaced streams reloaded, bad deltas dead-lettered) into a ``World`` that hands
informer events (old and new object) to each controller's rules; the requests they queue are
handled by bounded pools of workers, one key (a job, a queue, a pod) at a time, and their effects
performed through the API (``Writer``).  One replica acts, by leader election; it writes only
while its lease holds (``may_write``), so a deposed controller stops writing at once.  One object
that cannot be handled is counted and skipped, never fatal; every loop runs supervised.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from datetime import UTC, datetime

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
from lahar_controller.job.view import Obj
from lahar_controller.shell.cron import CronController
from lahar_controller.shell.flows import FlowController
from lahar_controller.shell.jobs import JobController
from lahar_controller.shell.metrics import Metrics
from lahar_controller.shell.plain import PlainPodGroups
from lahar_controller.shell.queues import QueueController
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
)


def _utc_now() -> datetime:
    return datetime.now(UTC)


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
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.js, self.names = js, names
        self.own = own  # the streams this service may make (lahar.wire.access); None: all
        self.metrics = Metrics.of(registry)
        self.world = World(KINDS, self.metrics.bad)
        self.writer = Writer(kube, may_write, self.metrics, identity=identity, clock=clock)
        args = (self.world, self.writer, self.metrics)
        self.jobs = JobController(*args, workers=workers, max_requeue=max_requeue, clock=clock)
        self.queues = QueueController(*args)
        self.podgroups = PlainPodGroups(*args)
        self.ttl = TTLController(*args, clock)
        self.cron = CronController(*args, clock)
        self.flows = FlowController(*args, clock)
        self.world.listen("commands", self._on_command)
        self.follower = Follower(
            js,
            mirror,
            names,
            kinds=KINDS,
            source="controller",
            load=self._load,
            apply=self._apply,
            applied=self.jobs.flush,
            bad=self.metrics.bad,
            own=own,
        )
        self.ready = self.follower.ready

    async def run(self, stop: asyncio.Event) -> None:
        await ensure_streams(self.js, self.names, own=self.own, need=[self.names.cluster_stream])
        loops = {
            "follow": self.follower.run(),
            "jobs": self.jobs.run(),
            "queues": self._queues(),
            "podgroups": self.podgroups.pool.run(),
            "ttl": self.ttl.pool.run(),
            "cronjobs": self.cron.pool.run(),
            "jobflows": self.flows.pool.run(),
        }
        await supervised(stop.wait(), loops)

    async def _queues(self) -> None:
        await self.follower.ready.wait()
        await self.queues.ensure_standard_queues()
        await self.queues.pool.run()

    def _load(self, state: MirrorState) -> None:
        self.world.load(state)
        self.jobs.flush()

    def _apply(self, delta: Delta, headers: dict[str, str] | None) -> None:
        self.world.apply(delta)

    def _on_command(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None or new is None:
            return  # a Command is acted on once, when it appears
        target = command_target(new)
        if is_job_command(new):
            self.jobs.on_command(new)
        elif target.get("kind") == "Queue":
            self.queues.on_command(new)
