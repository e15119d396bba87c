"""``lahar bench e2e``: the distributed system against the emulator (or, with ``--control-plane
kube``, a real kube-apiserver with KWOK nodes), first pod created → last bind.

The stack (infra, emulator, admission, cache, controller, scheduler, binders) runs as separate
processes.  A load generator in its own process submits the jobs (so it does not compete with the
measuring watcher for this process's event loop); this process watches the pods and records
when each one is bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop


@dataclass
class E2EConfig:
    nodes: int = 1000
    jobs: int = 500
    tasks_per_job: int = 20
    binders: int = 2
    max_in_flight: int = 64
    bind_latency_ms: int = 0
    timeout: float = 300.0
    state_dir: str | None = None
    traces: bool = True
    control_plane: str = "sim"


def _generate(kubeconfig: str, jobs: int, tasks: int, created: Any) -> None:
    """The load generator process: create every PodGroup and pod, report creation times."""
    from lahar.adapters.kube import KubeClient, KubeConfig
    from lahar.e2e.workload import JobSpec, Tracker, submit

    async def go() -> None:
        kube = KubeClient(KubeConfig.load(kubeconfig), max_connections=128)
        tracker = Tracker()
        specs = [JobSpec(f"job-{j:05d}", "default", tasks, cpu="1", memory="1Gi") for j in range(jobs)]
        await submit(kube, "bench", specs, tracker, parallel=128)
        await kube.close()
        created.put(tracker.created)

    uvloop.run(go())  # the load generator shares the machine with the system: keep it cheap


async def _measure(stack: Any, cfg: E2EConfig) -> dict[str, Any]:
    from lahar.adapters.kube import KubeClient, KubeConfig
    from lahar.e2e.workload import Tracker, ensure_namespace, ensure_queues, watch_binds

    kube = KubeClient(KubeConfig.load(stack.kubeconfig))
    await ensure_namespace(kube, "bench", account_timeout=60.0 if cfg.control_plane == "kube" else 0.0)
    await ensure_queues(kube, {"default": 1})
    tracker = Tracker(expected=cfg.jobs * cfg.tasks_per_job)
    # Every pod the generator creates is tracked: mark them all expected up front.
    for j in range(cfg.jobs):
        for t in range(cfg.tasks_per_job):
            tracker.created[f"bench/job-{j:05d}-worker-{t}"] = float("inf")
    watcher = asyncio.create_task(watch_binds(kube, tracker))
    ctx = multiprocessing.get_context("spawn")
    created = ctx.Queue()
    gen = ctx.Process(target=_generate, args=(stack.kubeconfig, cfg.jobs, cfg.tasks_per_job, created), daemon=True)
    gen.start()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(tracker.done.wait(), cfg.timeout)
    times = await asyncio.get_running_loop().run_in_executor(None, created.get, True, 60)
    gen.join(10)
    watcher.cancel()
    await kube.close()
    # CLOCK_MONOTONIC is one clock for every process on the machine, so the generator's creation
    # times and this process's bind times compare directly.
    tracker.created = dict(times)
    return tracker.summary()


def run_e2e(cfg: E2EConfig) -> dict[str, Any]:
    from lahar.up.stack import LocalStack, StackConfig

    state = Path(cfg.state_dir) if cfg.state_dir else Path(tempfile.mkdtemp(prefix="lahar-e2e-"))
    sim_args: tuple[str, ...] = ("--watch-cache-size", "200000")
    if cfg.bind_latency_ms:
        sim_args += ("--latency", f"binding={cfg.bind_latency_ms}ms")
    nodes = (f"{cfg.nodes}:cpu=32,memory=128Gi,pods=110",)
    stack = LocalStack(
        StackConfig(
            state_dir=state,
            nodes=nodes,
            binders=cfg.binders,
            max_binders=cfg.binders,
            max_in_flight=cfg.max_in_flight,
            sim_args=sim_args,
            traces=cfg.traces,
            control_plane=cfg.control_plane,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    )
    stack.start(timeout=120)
    try:
        result = uvloop.run(_measure(stack, cfg))
    finally:
        stack.stop()
    result.update(
        {
            "nodes": cfg.nodes,
            "jobs": cfg.jobs,
            "tasks_per_job": cfg.tasks_per_job,
            "binders": cfg.binders,
            "traces_exported": cfg.traces,
            "control_plane": cfg.control_plane,
        }
    )
    return result


def register_bench(bench: Any) -> None:
    p = bench.add_parser("e2e", help="the distributed system end to end against the emulator or real Kubernetes")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=500)
    p.add_argument("--tasks-per-job", type=int, default=20)
    p.add_argument("--binders", type=int, default=2)
    p.add_argument("--max-in-flight", type=int, default=64)
    p.add_argument("--bind-latency-ms", type=int, default=0)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--state-dir")
    p.add_argument("--output", choices=("text", "json"), default="text")
    p.add_argument(
        "--control-plane",
        choices=("sim", "kube"),
        default="sim",
        help="sim: Lahar's API emulator; kube: kube-apiserver + etcd + KWOK nodes (see `lahar kube`)",
    )
    p.add_argument(
        "--no-traces",
        dest="traces",
        action="store_false",
        help="do not export spans to the state dir's traces.jsonl (they are still made and propagated)",
    )
    p.set_defaults(handler=_cli)


def _cli(args: Any) -> int:
    for name in ("nodes", "jobs", "tasks_per_job", "binders", "max_in_flight"):
        if getattr(args, name) < 1:
            print(f"lahar bench e2e: --{name.replace('_', '-')}: must be at least 1", file=sys.stderr)
            return 2
    cfg = E2EConfig(
        args.nodes,
        args.jobs,
        args.tasks_per_job,
        args.binders,
        args.max_in_flight,
        args.bind_latency_ms,
        args.timeout,
        args.state_dir,
        args.traces,
        args.control_plane,
    )
    result = run_e2e(cfg)
    if args.output == "json":
        print(json.dumps(result))
    else:
        print(
            f"{result['pods_bound']}/{cfg.jobs * cfg.tasks_per_job} pods bound on {cfg.nodes} nodes "
            f"({cfg.control_plane}) in "
            f"{result['seconds']} s: {result['pods_per_second']} pods/s; latency p50 "
            f"{result['p50_latency_seconds']} s, p99 {result['p99_latency_seconds']} s; "
            f"submitting took {result['creation_seconds']} s"
        )
    return 0
