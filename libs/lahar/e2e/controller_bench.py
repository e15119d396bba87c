"""``lahar bench controller``: a burst of Volcano Jobs, Job creation → every PodGroup and pod made.

The whole stack runs (the controller makes PodGroups; the scheduler's enqueue admits them; only
then does the controller create the pods, as Volcano's does).  A generator process creates the
Jobs as fast as the API takes them; this process watches PodGroups and pods and records when the
last of each appeared.  Figures: Jobs/s and pods/s from the first Job create to the last pod.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop

NAMESPACE = "bench-jobs"
# The scheduler admits PodGroups (enqueue), which the controller waits for before it makes pods,
# as Volcano's does; placing and binding the pods is not what this benchmark measures, and on a
# small machine it would take the CPU the controller needs.  ``--schedule`` runs the default
# configuration instead.
ENQUEUE_ONLY = """actions: "enqueue"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: proportion
"""


@dataclass
class ControllerBenchConfig:
    jobs: int = 1000
    pods_per_job: int = 10
    nodes: int = 1000
    timeout: float = 300.0
    state_dir: str | None = None
    schedule: bool = False  # also place and bind the pods (the default scheduler configuration)


def job_object(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "minAvailable": replicas,
            "schedulerName": "volcano",
            "queue": "default",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def _generate(kubeconfig: str, jobs: int, replicas: int, report: Any) -> None:
    """The generator process: create every Job, report (first create, last create) times."""
    from lahar.adapters.kube import KubeClient, KubeConfig

    async def go() -> None:
        kube = KubeClient(KubeConfig.load(kubeconfig), max_connections=64)
        slots = asyncio.Semaphore(64)

        async def one(j: int) -> None:
            async with slots:
                await kube.create("jobs", NAMESPACE, job_object(f"job-{j:05d}", replicas))

        first = time.monotonic()
        await asyncio.gather(*(one(j) for j in range(jobs)))
        report.put((first, time.monotonic()))
        await kube.close()

    uvloop.run(go())


async def _count(kube: Any, kind: str, want: int, seen: dict[str, float]) -> None:
    """Record when each object of ``kind`` in the namespace first appears, until ``want`` have."""
    from lahar.adapters.kube import KubeError

    while len(seen) < want:
        try:
            items, rv = await kube.list(kind)
            for item in items:
                meta = json.loads(item.raw)["metadata"]
                if meta.get("namespace") == NAMESPACE:
                    seen.setdefault(meta["name"], time.monotonic())
            async for ev in kube.watch(kind, rv):
                if ev.type != "ADDED":
                    continue
                meta = json.loads(ev.item.raw)["metadata"]
                if meta.get("namespace") == NAMESPACE:
                    seen.setdefault(meta["name"], time.monotonic())
                if len(seen) >= want:
                    return
        except (OSError, KubeError):  # a broken or expired watch: list again
            await asyncio.sleep(0.1)  # a retry delay after a broken watch


async def _measure(stack: Any, cfg: ControllerBenchConfig) -> dict[str, Any]:
    from lahar.adapters.kube import KubeClient, KubeConfig
    from lahar.e2e.workload import ensure_queues

    kube = KubeClient(KubeConfig.load(stack.kubeconfig))
    await ensure_queues(kube, {"default": 1})
    pods: dict[str, float] = {}
    groups: dict[str, float] = {}
    watchers = [
        asyncio.create_task(_count(kube, "pods", cfg.jobs * cfg.pods_per_job, pods)),
        asyncio.create_task(_count(kube, "podgroups", cfg.jobs, groups)),
    ]
    ctx = multiprocessing.get_context("spawn")
    report = ctx.Queue()
    gen = ctx.Process(target=_generate, args=(stack.kubeconfig, cfg.jobs, cfg.pods_per_job, report), daemon=True)
    gen.start()
    await asyncio.wait(watchers, timeout=cfg.timeout)
    first, last_create = await asyncio.get_running_loop().run_in_executor(None, report.get, True, 60)
    gen.join(10)
    for task in watchers:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    await kube.close()
    end = max(pods.values(), default=first)
    seconds = max(end - first, 1e-9)
    return {
        "scheduling": "full" if cfg.schedule else "enqueue only",
        "jobs": cfg.jobs,
        "pods_per_job": cfg.pods_per_job,
        "podgroups_created": len(groups),
        "pods_created": len(pods),
        "complete": len(pods) >= cfg.jobs * cfg.pods_per_job and len(groups) >= cfg.jobs,
        "submit_seconds": round(last_create - first, 2),
        "podgroups_seconds": round(max(groups.values(), default=first) - first, 2),
        "seconds": round(seconds, 2),
        "jobs_per_second": round(cfg.jobs / seconds, 1),
        "pods_per_second": round(len(pods) / seconds, 1),
    }


def run_controller_bench(cfg: ControllerBenchConfig) -> dict[str, Any]:
    from lahar.up.stack import LocalStack, StackConfig

    state = Path(cfg.state_dir) if cfg.state_dir else Path(tempfile.mkdtemp(prefix="lahar-bench-controller-"))
    conf: str | None = None
    if not cfg.schedule:
        state.mkdir(parents=True, exist_ok=True)
        (state / "enqueue-only.conf").write_text(ENQUEUE_ONLY)
        conf = str(state / "enqueue-only.conf")
    stack = LocalStack(
        StackConfig(
            state_dir=state,
            scheduler_conf=conf,
            nodes=(f"{cfg.nodes}:cpu=32,memory=128Gi,pods=110",),
            sim_args=("--watch-cache-size", "200000"),
            traces=False,
        )
    )
    stack.start(timeout=120)
    try:
        return uvloop.run(_measure(stack, cfg))
    finally:
        stack.stop()


def register_bench(bench: Any) -> None:
    p = bench.add_parser("controller", help="a burst of Volcano Jobs: Job creation -> every PodGroup and pod")
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--pods-per-job", type=int, default=10)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--state-dir")
    p.add_argument("--schedule", action="store_true", help="also place and bind the pods (default: enqueue only)")
    p.add_argument("--output", choices=("text", "json"), default="text")
    p.set_defaults(handler=_cli)


def _cli(args: Any) -> int:
    for name in ("jobs", "pods_per_job", "nodes"):
        if getattr(args, name) < 1:
            print(f"lahar bench controller: --{name.replace('_', '-')}: must be at least 1", file=sys.stderr)
            return 2
    cfg = ControllerBenchConfig(args.jobs, args.pods_per_job, args.nodes, args.timeout, args.state_dir, args.schedule)
    result = run_controller_bench(cfg)
    if args.output == "json":
        print(json.dumps(result))
    else:
        print(
            f"{result['jobs']} Jobs x {result['pods_per_job']} pods: {result['podgroups_created']} PodGroups "
            f"(last after {result['podgroups_seconds']} s), {result['pods_created']} pods in {result['seconds']} s "
            f"from the first Job create: {result['jobs_per_second']} Jobs/s, {result['pods_per_second']} pods/s "
            f"(the Jobs were submitted in {result['submit_seconds']} s)"
        )
    return 0 if result["complete"] else 1
