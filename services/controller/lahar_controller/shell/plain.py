"""PodGroups for plain pods (Volcano's podgroup controller), the shell around
``lahar_controller.podgroups``.

A pod for our schedulers without a group gets one (created, kept if it exists) and is annotated
with its name; a ReplicaSet or StatefulSet added or changed brings its group up to date with its
first current pod, or deletes it when scaled to 0.  Owners are read from the world (the cache
mirrors the workloads whose pods are ours).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

from lahar.adapters.kube import KubeError
from lahar_controller.job.view import Obj, name_of, namespace_of
from lahar_controller.podgroups import Options, for_pod, for_workload, group_name, needs_group
from lahar_controller.shell.metrics import Metrics
from lahar_controller.shell.pool import Pool, Retry
from lahar_controller.shell.world import World
from lahar_controller.shell.writer import Done, Writer

log = logging.getLogger("lahar.controller")

SCHEDULER_NAMES = frozenset({"volcano", "lahar"})
# the workload kinds whose events refresh a group, as the rules name them
WORKLOADS = {"replicasets": "ReplicaSet", "statefulsets": "StatefulSet"}
# owner kinds -> the world's kinds
OWNERS = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets", "Job": "batchjobs"}


class PlainPodGroups:
    def __init__(
        self, world: World, writer: Writer, metrics: Metrics, *, workers: int = 8, options: Options | None = None
    ) -> None:
        self.world, self.writer = world, writer
        self.options = options or Options(scheduler_names=SCHEDULER_NAMES)
        self.pool: Pool[str] = Pool("podgroups", self._handle, metrics, workers=workers)
        world.listen("pods", self.on_pod)
        world.index_by_namespace("pods")
        for kind in WORKLOADS:
            world.listen(kind, partial(self.on_workload, kind))

    def on_pod(self, old: Obj | None, new: Obj | None) -> None:
        if new is not None and needs_group(new, self.options):
            self.pool.put(f"{namespace_of(new)}/{name_of(new)}", "pods")

    def on_workload(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        if new is not None:
            self.pool.put(f"{kind}:{namespace_of(new)}/{name_of(new)}", kind)

    def _lookup(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        world_kind = OWNERS.get(kind)
        return self.world.get(world_kind, f"{namespace}/{name}") if world_kind else None

    async def _handle(self, key: str, kind: str) -> None:
        try:
            if kind == "pods":
                pod = self.world.get("pods", key)
                if pod is not None:
                    await self._group(pod, refresh=False)
            else:
                await self._workload(kind, key.partition(":")[2])
        except KubeError as exc:
            raise Retry(str(exc)) from exc

    async def _workload(self, kind: str, key: str) -> None:
        workload = self.world.get(kind, key)
        if workload is None:
            return
        namespace = namespace_of(workload)
        out = for_workload(WORKLOADS[kind], workload, self.world.in_namespace("pods", namespace), self.options)
        if out.delete:
            await self.writer.delete("podgroups", namespace, out.delete)
        if out.pod is not None:
            await self._group(dict(out.pod), refresh=True)

    async def _group(self, pod: Obj, *, refresh: bool) -> None:
        namespace = namespace_of(pod)
        existing = self.world.get("podgroups", f"{namespace}/{group_name(pod)}")
        out = for_pod(
            pod,
            existing,
            self.options,
            self._lookup,
            refresh=refresh,
            namespace=self.world.get("namespaces", namespace),
        )
        if out.create is not None and await self.writer.create(out.create):
            log.info("created PodGroup %s/%s for pod %s", namespace, out.group, name_of(pod))
        if out.update is not None:
            await self.writer.update(out.update, Done())
        if out.annotate:
            await self.writer.patch("pods", namespace, name_of(pod), {"metadata": {"annotations": out.annotate}})
