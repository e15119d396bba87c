"""Submitting gang jobs the way a training operator does (a PodGroup, then its pods) and
measuring when each pod gets bound, by watching the API server.

Used by ``lahar demo`` and ``lahar bench e2e``.  Latency of a pod = from its creation request to
the watch event showing it bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from lahar.adapters.kube import Conflict, KubeClient, KubeError, NotFound

GROUP = "scheduling.k8s.io/group-name"


@dataclass(frozen=True)
class JobSpec:
    name: str
    queue: str
    tasks: int
    cpu: str = "1"
    memory: str = "1Gi"
    run_seconds: float | None = None


@dataclass
class Tracker:
    """Creation and bind times of every pod the workload submitted."""

    created: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    node: dict[str, str] = field(default_factory=dict)
    queue_of: dict[str, str] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    expected: int = 0

    def latencies(self) -> list[float]:
        return sorted(self.bound[k] - self.created[k] for k in self.bound if k in self.created)

    def summary(self) -> dict[str, Any]:
        lat = self.latencies()
        first = min(self.created.values(), default=0.0)
        last = max(self.bound.values(), default=first)
        seconds = max(last - first, 1e-9)
        return {
            "pods_bound": len(self.bound),
            "seconds": round(seconds, 3),
            "pods_per_second": round(len(self.bound) / seconds, 1) if self.bound else 0.0,
            "p50_latency_seconds": round(_pct(lat, 0.50), 3),
            "p99_latency_seconds": round(_pct(lat, 0.99), 3),
            # How long submitting took: the end-to-end rate cannot beat the rate pods arrive at.
            "creation_seconds": round(max(self.created.values(), default=first) - first, 3),
        }


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(q * len(values)))]


def queue_object(name: str, weight: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight, "reclaimable": True},
        "status": {"state": "Open"},
    }


def podgroup_object(ns: str, job: JobSpec) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": job.name, "namespace": ns},
        "spec": {"minMember": job.tasks, "queue": job.queue},
    }


def pod_object(ns: str, job: JobSpec, index: int) -> dict[str, Any]:
    annotations = {GROUP: job.name}
    if job.run_seconds is not None:
        annotations["sim.lahar.io/run-seconds"] = str(job.run_seconds)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job.name}-worker-{index}",
            "namespace": ns,
            "annotations": annotations,
            "labels": {"lahar.io/job": job.name},
        },
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": job.cpu, "memory": job.memory}},
                }
            ],
        },
    }


async def ensure_namespace(kube: KubeClient, ns: str, account_timeout: float = 0.0) -> None:
    """Create ``ns``; with ``account_timeout``, also wait for its ``default`` ServiceAccount: on
    Kubernetes, kube-controller-manager adds it a moment later and pods are refused until then."""
    with contextlib.suppress(Conflict):
        await kube.create("namespaces", "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    deadline = time.monotonic() + account_timeout
    while account_timeout:
        try:
            await kube.get("serviceaccounts", ns, "default")
            return
        except NotFound:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)  # polling interval of a deadline-bounded wait


async def ensure_queues(kube: KubeClient, weights: dict[str, int]) -> None:
    for name, weight in weights.items():
        with contextlib.suppress(Conflict):
            await kube.create("queues", "", queue_object(name, weight))


async def submit(kube: KubeClient, ns: str, jobs: Iterable[JobSpec], tracker: Tracker, parallel: int = 64) -> None:
    """Create each job's PodGroup, then its pods, ``parallel`` requests at a time."""
    slots = asyncio.Semaphore(parallel)

    async def create(kind: str, obj: dict[str, Any], key: str | None = None, queue: str = "") -> None:
        async with slots:
            for attempt in range(5):
                try:
                    if key is not None:
                        tracker.created[key] = time.monotonic()
                        tracker.queue_of[key] = queue
                    await kube.create(kind, ns, obj)
                    return
                except Conflict:
                    return
                except KubeError:
                    await asyncio.sleep(0.05 * 2**attempt)  # a retry delay after a refused create

    async def one(job: JobSpec) -> None:
        await create("podgroups", podgroup_object(ns, job))
        await asyncio.gather(
            *(
                create("pods", pod_object(ns, job, i), f"{ns}/{job.name}-worker-{i}", job.queue)
                for i in range(job.tasks)
            )
        )

    jobs = list(jobs)
    tracker.expected += sum(j.tasks for j in jobs)
    await asyncio.gather(*(one(j) for j in jobs))


class _Spec(msgspec.Struct):
    nodeName: str = ""


class _Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""


class _Pod(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _Spec = msgspec.field(default_factory=_Spec)


_pod = msgspec.json.Decoder(_Pod)


async def watch_binds(kube: KubeClient, tracker: Tracker) -> None:
    """Record when each tracked pod first shows a node; set ``tracker.done`` when all have one."""
    _, rv = await kube.list("nodes")
    while True:
        try:
            async for ev in kube.watch("pods", rv):
                rv = ev.item.meta.resourceVersion or rv
                if ev.type not in ("ADDED", "MODIFIED"):
                    continue
                pod = _pod.decode(ev.item.raw)
                key = f"{pod.metadata.namespace}/{pod.metadata.name}"
                if pod.spec.nodeName and key not in tracker.bound and key in tracker.created:
                    tracker.bound[key] = time.monotonic()
                    tracker.node[key] = pod.spec.nodeName
                    if tracker.expected and len(tracker.bound) >= tracker.expected:
                        tracker.done.set()
        except KubeError:
            _, rv = await kube.list("nodes")
