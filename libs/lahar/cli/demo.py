"""``lahar demo`` (``make demo``): the whole system on the embedded default.

It starts NATS, Valkey, the Kubernetes API emulator and every service as separate processes on a
small cluster, submits twice as many gang jobs as fit over two queues weighted 2:1, the way a
training operator does (a PodGroup, then its pods), and shows the cluster split 2:1 while
contended; the pods run a few seconds, so the rest follow.  One gang can never fit: ``lahar
explain`` says why.  Then a Volcano Job runs to Completed.  Exit 0 when all of that happened.
``--offline`` instead schedules a bundled example cluster with the scheduling core alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from lahar.cli._help import DefaultsHelp

QUEUES = {"research": 2, "production": 1}
# Small on purpose: the jobs want twice what it has, so the queues' weights decide who runs.
DEMO_NODES = ("8:cpu=16,memory=64Gi,pods=110",)
RUN_SECONDS = 4.0  # how long each demo pod runs in the emulator's kubelet


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the main job on the embedded default", formatter_class=DefaultsHelp)
    p.add_argument("--state-dir", default=".lahar/demo", help="logs, kubeconfig and traces (relative: to this folder)")
    p.add_argument("--jobs", type=int, default=32, help="gang jobs to submit (half per queue)")
    p.add_argument("--tasks-per-job", type=int, default=8, help="pods per gang job")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the jobs to be bound")
    p.add_argument("--offline", action="store_true", help="simulate a bundled cluster with the core alone")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.offline:
        return offline()
    from lahar.up.stack import LocalStack, StackConfig

    stack = LocalStack(StackConfig(state_dir=Path(args.state_dir).resolve(), binders=2, nodes=DEMO_NODES))
    print(
        "Starting NATS, Valkey, the Kubernetes API emulator (8 nodes of 16 cpu), admission, cache, controller, "
        "scheduler and 2 binders..."
    )
    started = time.monotonic()
    try:
        stack.start()
    except RuntimeError as exc:
        print(f"lahar demo: {exc}", file=sys.stderr)
        stack.stop()
        return 1
    print(f"Up in {time.monotonic() - started:.1f}s; KUBECONFIG={stack.kubeconfig}\n")
    try:
        return asyncio.run(_demo(stack, args))
    finally:
        print("\nStopping everything...")
        stack.stop()


def workload(jobs: int, tasks: int) -> list[Any]:
    """Gang jobs of 1-cpu tasks, alternating between the queues (neither is served first by
    arriving first), and one gang too big to ever fit."""
    from lahar.e2e.workload import JobSpec

    out = []
    names = list(QUEUES)
    for j in range(jobs):
        queue = names[j % len(names)]
        out.append(JobSpec(f"{queue[:5]}-{j:03d}", queue, tasks, cpu="1", memory="2Gi", run_seconds=RUN_SECONDS))
    out.append(JobSpec("too-big", "production", 4, cpu="100", memory="8Gi"))
    return out


async def _demo(stack: Any, args: argparse.Namespace) -> int:
    from lahar.adapters.kube import KubeClient, KubeConfig
    from lahar.e2e.workload import Tracker, ensure_namespace, ensure_queues, submit, watch_binds

    kube = KubeClient(KubeConfig.load(stack.kubeconfig))
    tracker = Tracker()
    await ensure_namespace(kube, "demo")
    await ensure_queues(kube, QUEUES)
    watcher = asyncio.create_task(watch_binds(kube, tracker))
    jobs = workload(args.jobs, args.tasks_per_job)
    fits = sum(j.tasks for j in jobs if j.name != "too-big")
    print(
        f"Submitting {len(jobs)} gang jobs ({sum(j.tasks for j in jobs)} pods of 1 cpu, {RUN_SECONDS:g} s each; "
        f"the cluster has 128 cpu) over queues {', '.join(f'{q} (weight {w})' for q, w in QUEUES.items())}, "
        "with the nodes cordoned until all are in:"
    )
    nodes = await _cordon(kube, True)
    await submit(kube, "demo", jobs, tracker)
    await _cordon(kube, False, nodes)
    deadline = time.monotonic() + args.timeout
    split = await _first_wave(tracker, jobs, deadline)
    while len(tracker.bound) < fits and time.monotonic() < deadline:
        _progress(tracker, jobs)
        await asyncio.sleep(0.25)  # refresh rate of the progress display
    _progress(tracker, jobs, final=True)
    watcher.cancel()
    await kube.close()
    ok = len(tracker.bound) >= fits
    _summary(tracker, stack, split, fits)
    _explain(stack)
    completed = await _volcano_job(stack, args.timeout)
    return 0 if ok and completed else 1


async def _cordon(kube: Any, on: bool, names: list[str] | None = None) -> list[str]:
    """Cordon (or uncordon) the nodes.  Submitting takes a few sessions' time on a busy machine:
    were the nodes open, the jobs that arrive first would take the cluster before the rest of
    the demand is known, and the split would show arrival order instead of the weights."""
    if names is None:
        items, _ = await kube.list("nodes")
        names = [item.meta.name for item in items]
    await asyncio.gather(*(kube.patch("nodes", "", n, {"spec": {"unschedulable": on}}) for n in names))
    return names


async def _first_wave(tracker: Any, jobs: list[Any], deadline: float) -> dict[str, int]:
    """Pods bound per queue when the cluster first fills (no new bind for a second, before any
    demo pod has finished): while both queues want more, the weights decide the split."""
    last, still_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        _progress(tracker, jobs)
        if len(tracker.bound) != last:
            last, still_since = len(tracker.bound), time.monotonic()
        elif last > 0 and time.monotonic() - still_since > 1.0:
            break
        if tracker.bound and time.monotonic() - min(tracker.bound.values()) > RUN_SECONDS:
            break  # pods start finishing: what is bound now is the first wave
        await asyncio.sleep(0.1)  # refresh rate of the progress display
    return {q: sum(1 for k in tracker.bound if tracker.queue_of.get(k) == q) for q in QUEUES}


def volcano_job() -> dict[str, Any]:
    """A Volcano Job as users write them: a master and 3 workers started together (gang), the
    ``svc`` plugin (a headless Service and hosts for every task) and ``env`` (task indexes); the
    emulator's kubelet ends each pod after 3 s, so the job completes."""
    finish = {"sim.lahar.io/run-seconds": "3"}

    def task(name: str, replicas: int) -> dict[str, Any]:
        container = {"name": name, "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
        return {
            "name": name,
            "replicas": replicas,
            "template": {
                "metadata": {"annotations": finish},
                "spec": {"restartPolicy": "Never", "containers": [container]},
            },
        }

    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "mpi-demo", "namespace": "demo"},
        "spec": {
            "minAvailable": 4,
            "schedulerName": "volcano",
            "queue": "research",
            "plugins": {"svc": [], "env": []},
            "tasks": [task("master", 1), task("worker", 3)],
        },
    }


async def _volcano_job(stack: Any, timeout: float) -> bool:
    """Submit the Volcano Job and print its phases until it completes."""
    from lahar.adapters.kube import KubeClient, KubeConfig

    kube = KubeClient(KubeConfig.load(stack.kubeconfig))
    try:
        print("\nSubmitting a Volcano Job (batch.volcano.sh/v1alpha1): mpi-demo, 1 master + 3 workers, svc and env:")
        await kube.create("jobs", "demo", volcano_job())
        started, seen = time.monotonic(), ""
        while time.monotonic() - started < timeout:
            job = json.loads(await kube.get("jobs", "demo", "mpi-demo"))
            status = job.get("status") or {}
            phase = (status.get("state") or {}).get("phase") or "Pending"
            if phase != seen:
                seen = phase
                counts = ", ".join(f"{k} {status.get(k, 0)}" for k in ("pending", "running", "succeeded", "failed"))
                print(f"  {time.monotonic() - started:5.1f}s  {phase:<10} ({counts})")
            if phase in ("Completed", "Failed", "Aborted", "Terminated"):
                return phase == "Completed"
            await asyncio.sleep(0.25)  # refresh rate of the phase display
        print(f"  mpi-demo did not complete within {timeout:.0f}s (last phase {seen})")
        return False
    finally:
        await kube.close()


def _bar(done: int, total: int, width: int = 30) -> str:
    filled = int(width * done / total) if total else width
    return "[" + "#" * filled + "." * (width - filled) + f"] {done}/{total}"


def _progress(tracker: Any, jobs: list[Any], final: bool = False) -> None:
    lines = []
    for queue in QUEUES:
        total = sum(j.tasks for j in jobs if j.queue == queue)
        done = sum(1 for k in tracker.bound if tracker.queue_of.get(k) == queue)
        lines.append(f"  {queue:<11} {_bar(done, total)}")
    if sys.stdout.isatty() and not final:
        print("\n".join(lines) + f"\033[{len(lines)}A\r", end="", flush=True)
    elif final:
        print("\n".join(lines))


def _summary(tracker: Any, stack: Any, split: dict[str, int], fits: int) -> None:
    s = tracker.summary()
    total = max(sum(split.values()), 1)
    weights = sum(QUEUES.values())
    print(f"\nWhile the cluster was full ({total} pods running):")
    for queue, weight in QUEUES.items():
        print(
            f"  queue {queue:<11} weight {weight}: {split[queue]:3d} pods, {100 * split[queue] / total:.0f}% "
            f"(its share by weight: {100 * weight / weights:.0f}%)"
        )
    print(f"{s['pods_bound']} of {fits} pods that fit were bound in the end (the gang 'too-big' cannot fit).")
    print(
        f"Scheduling latency (pod created → bound): p50 {s['p50_latency_seconds']:.3f}s, "
        f"p99 {s['p99_latency_seconds']:.3f}s"
    )
    print(f"Traces (one span per line, JSON): {stack.traces}; follow a bind with `lahar trace demo/POD -f FILE`")
    print(f"Metrics: Volcano's series on each service's /metrics (table: docs/METRICS.md); {_dashboard()}")


def _dashboard() -> str:
    path = Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "lahar-volcano.json"
    return f"Grafana dashboard: {path}" if path.exists() else "Grafana dashboard: deploy/grafana/lahar-volcano.json"


def _explain(stack: Any) -> None:
    """Why 'too-big' waits, as `lahar explain` tells it from the live mirror."""
    print("\n$ lahar explain podgroup demo/too-big")
    done = subprocess.run(
        [sys.executable, "-m", "lahar", "explain", "podgroup", "demo/too-big"],
        capture_output=True,
        text=True,
        env=stack.env(),
        timeout=60,
    )
    print("\n".join(f"  {line}" for line in (done.stdout or done.stderr).splitlines()))


def offline() -> int:
    from lahar.api.files import load_file
    from lahar.cli.simulate import print_table
    from lahar_scheduler.core import load_conf
    from lahar_scheduler.simulation import simulate

    path = resources.files("lahar.examples") / "cluster.yaml"
    with resources.as_file(path) as real:
        loaded = load_file(real)
    pods = sum(1 for o in loaded.objects if o.kind == "Pod")
    print(f"Scheduling the example cluster ({pods} pods) with the scheduling core alone.\n")
    outcome = simulate(loaded.objects, load_conf(None), cycles=2)
    print_table(outcome)
    return 0
