"""``lahar bench``: benchmarks that measure the figures the issues name."""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import resource
import sys
import time
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="benchmarks (scheduler, ...)")
    bench = p.add_subparsers(dest="bench", metavar="BENCH")
    s = bench.add_parser("scheduler", help="sessions over a synthetic cluster until nothing more fits")
    s.add_argument("--nodes", type=int, default=5000)
    s.add_argument("--pods", type=int, default=50000)
    s.add_argument("--tasks-per-job", type=int, default=10)
    s.add_argument("--queues", type=int, default=4)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--conf", help="a volcano-scheduler.conf (default: the built-in configuration)")
    s.add_argument(
        "--variant",
        choices=("default", "gpushare-hypernode"),
        default="default",
        help="gpushare-hypernode: GPU jobs share cards by memory, nodes in a 3-tier HyperNode tree, "
        "some jobs with networkTopology; deviceshare and network-topology-aware configured",
    )
    s.add_argument("--profile", help="write a pyinstrument profile of the sessions to this HTML file")
    s.add_argument("--output", choices=("text", "json"), default="text")
    s.set_defaults(handler=bench_scheduler)
    pre = bench.add_parser("preempt", help="one preempt, reclaim and topology-aware preempt session on a full cluster")
    pre.add_argument("--nodes", type=int, default=5000, help="nodes, each full of low-priority tasks")
    pre.add_argument("--pending", type=int, default=5000, help="pending high-priority pods (gangs of 5)")
    pre.add_argument(
        "--only", choices=("preempt", "reclaim", "topology"), action="append", help="run only these sessions"
    )
    pre.add_argument("--output", choices=("text", "json"), default="text")
    pre.set_defaults(handler=bench_preempt)
    r = bench.add_parser("restart", help="a scheduler starting on a populated mirror, to its first decision published")
    r.add_argument("--nodes", type=int, default=5000)
    r.add_argument("--pods", type=int, default=50000, help="pods in the mirror, most of them running")
    r.add_argument("--pending", type=int, default=1000, help="of those, pods waiting in gangs of 10")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--timeout", type=float, default=120.0, help="seconds the scheduler may take")
    r.add_argument("--profile", help="write a pyinstrument profile of the measured start to this file (.txt: text)")
    r.add_argument(
        "--no-takeover", dest="takeover", action="store_false", help="do not time a standby's takeover afterwards"
    )
    r.add_argument("--output", choices=("text", "json"), default="text")
    r.set_defaults(handler=bench_restart)
    # Benchmarks of other parts register themselves here when their modules provide register_bench.
    for module in (
        "lahar.cli.benchsim",
        "lahar.cli.admission",
        "lahar.e2e.bench",
        "lahar.e2e.controller_bench",
        "lahar.cli.bench_subgroups",
    ):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        hook = getattr(mod, "register_bench", None)
        if hook is not None:
            hook(bench)
    p.set_defaults(handler=lambda args: _usage(p))


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 2


def bench_scheduler(args: argparse.Namespace) -> int:
    from pathlib import Path

    from lahar_scheduler.core import load_conf, run_session
    from lahar_scheduler.framework.snapshot import Snapshot
    from lahar_scheduler.synthetic import make_jobs, make_nodes, make_queues, priority_classes

    for name in ("nodes", "pods", "tasks_per_job", "queues"):
        if getattr(args, name) < 1:
            print(f"lahar bench scheduler: --{name.replace('_', '-')}: must be at least 1", file=sys.stderr)
            return 2
    from lahar_scheduler import synthetic_topology as topo

    variant = args.variant == "gpushare-hypernode"
    text = Path(args.conf).read_text() if args.conf else (topo.CONF if variant else None)
    conf = load_conf(text)
    t0 = time.perf_counter()
    groups, pods = make_jobs(args.pods, args.tasks_per_job, args.queues, seed=args.seed)
    nodes = make_nodes(args.nodes, seed=args.seed)
    hypernodes = []
    if variant:
        topo.share_gpus(nodes)
        topo.constrain_jobs(groups, pods, seed=args.seed)
        hypernodes = topo.hypernodes(nodes)
    snapshot = Snapshot(nodes, pods, groups, make_queues(args.queues), priority_classes(), hypernodes=hypernodes)
    build = time.perf_counter() - t0
    from lahar_scheduler.gcpause import collector_paused

    # As the live scheduler runs (live.py, service.py): what its load made is frozen, and the
    # cyclic collector waits through each session until its decisions are out.
    gc.freeze()
    profiler = _profiler(args.profile)
    placed = sessions = 0
    seconds = 0.0
    while True:
        start = time.perf_counter()
        with collector_paused():
            result = run_session(snapshot, conf, seed=args.seed + sessions, uid=f"bench-{sessions}")
        seconds += time.perf_counter() - start
        sessions += 1
        placed += len(result.binds)
        if not result.binds:
            break
    gc.unfreeze()  # the objects go back to the collector (this may run inside a test process)
    if profiler is not None:
        profiler.stop()
        Path(args.profile).write_text(profiler.output_html())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    report = {
        "variant": args.variant,
        "nodes": args.nodes,
        "pods": len(pods),
        "pods_placed": placed,
        "sessions": sessions,
        "seconds": round(seconds, 3),
        "pods_per_second": round(placed / seconds, 1) if seconds else 0.0,
        "snapshot_build_seconds": round(build, 3),
        "peak_rss_bytes": rss,
    }
    if args.output == "json":
        print(json.dumps(report))
    else:
        print(
            f"placed {placed}/{len(pods)} pods on {args.nodes} nodes in {sessions} sessions: "
            f"{seconds:.2f} s of sessions, {report['pods_per_second']} pods/s; "
            f"snapshot built in {build:.2f} s; peak RSS {rss / 2**20:.0f} MiB"
        )
    return 0


def bench_preempt(args: argparse.Namespace) -> int:
    from lahar_scheduler.bench_preempt import report

    for name in ("nodes", "pending"):
        if getattr(args, name) < 1:
            print(f"lahar bench preempt: --{name}: must be at least 1", file=sys.stderr)
            return 2
    kinds = tuple(args.only or ("preempt", "reclaim", "topology"))
    result = report(args.nodes, args.pending, kinds)
    result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if args.output == "json":
        print(json.dumps(result))
        return 0
    for key in ("preempt", "reclaim", "topology_preempt"):
        if f"{key}_session_seconds" in result:
            print(
                f"{key.replace('_', ' ')}: one session on {args.nodes} full nodes with {args.pending} pending pods: "
                f"{result[f'{key}_session_seconds']} s, {result['evictions'][key]} evictions"
            )
    return 0


def bench_restart(args: argparse.Namespace) -> int:
    from lahar_scheduler.bench_restart import RestartConfig, run

    for name in ("nodes", "pods"):
        if getattr(args, name) < 1:
            print(f"lahar bench restart: --{name}: must be at least 1", file=sys.stderr)
            return 2
    if args.pending < 1 or args.pending > args.pods:
        print("lahar bench restart: --pending: must be between 1 and --pods", file=sys.stderr)
        return 2
    report = run(
        RestartConfig(args.nodes, args.pods, args.pending, args.seed, args.timeout, args.profile, args.takeover)
    )
    if args.output == "json":
        print(json.dumps(report))
        return 0
    print(
        f"restart on {report['nodes']} nodes / {report['pods']} pods ({report['pending_pods']} pending): "
        f"first decision after {report['seconds_to_first_decision']} s; snapshot loaded after "
        f"{report['snapshot_load_seconds']} s (mirror read {report['mirror_read_seconds']} s); "
        f"first session {report['first_session_seconds']} s ({report['binds_first_session']} binds); "
        f"peak RSS {report['peak_rss_bytes'] / 2**20:.0f} MiB"
    )
    if args.takeover:
        print(
            f"standby takeover: first decision {report['takeover_seconds_to_first_decision']} s after the leader "
            f"stopped (its first session {report['takeover_first_session_seconds']} s, "
            f"{report['takeover_reloads']} reloads)"
        )
    return 0


def _profiler(path: str | None) -> Any:
    if not path:
        return None
    from pyinstrument import Profiler

    profiler = Profiler()
    profiler.start()
    return profiler
