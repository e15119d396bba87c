"""``lahar bench sim`` (``register_bench``, hung under the shared ``lahar bench``): measure the
emulator's binding throughput with watchers attached and the time to list 50,000 pods."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register_bench(bench_sub: Any) -> None:
    """Add ``sim`` to a shared ``lahar bench`` command's subparsers."""
    _add(bench_sub.add_parser("sim", help="measure the Kubernetes API emulator (bindings/s, list time)"))


def _add(p: argparse.ArgumentParser) -> None:
    p.add_argument("--binds", type=int, default=10_000, help="pods to bind (default 10000)")
    p.add_argument("--list-pods", type=int, default=50_000, help="pods to create and list (default 50000)")
    p.add_argument("--watchers", type=int, default=5, help="watch streams attached while binding (default 5)")
    p.add_argument("--concurrency", type=int, default=32, help="client connections (default 32)")
    p.add_argument("--nodes", type=int, default=1000, help="simulated nodes (default 1000)")
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from lahar.sim.bench import BenchConfig
    from lahar.sim.bench import run as bench

    for name in ("binds", "list_pods", "concurrency", "nodes"):
        if getattr(args, name) < 1:
            print(f"lahar bench sim: --{name.replace('_', '-')}: must be at least 1", file=sys.stderr)
            return 2
    if args.watchers < 0:
        print("lahar bench sim: --watchers: must not be negative", file=sys.stderr)
        return 2
    result = bench(
        BenchConfig(
            list_pods=args.list_pods,
            binds=args.binds,
            watchers=args.watchers,
            concurrency=args.concurrency,
            nodes=args.nodes,
        )
    )
    if args.output == "json":
        print(json.dumps(result, indent=2))
    else:
        print(
            f"bindings/s with {result['watchers']} watchers: {result['bindings_per_second']:>10,.0f}"
            f"   ({result['bindings']} binds, {result['binding_errors']} errors, "
            "every watcher saw every bind: "
            f"{'yes' if result['watchers_saw_every_binding'] else 'NO'})"
        )
        print(
            f"list {result['list_pods']:,} pods:                 {result['list_50k_seconds']:>10.3f} s"
            f"   ({result['list_bytes'] / 1e6:.0f} MB; {result['list_50k_with_decode_seconds']:.3f} s with "
            "msgspec decoding to dicts)"
        )
        print(f"creates/s:                        {result['creates_per_second']:>10,.0f}")
    ok = result["watchers_saw_every_binding"] and not result["binding_errors"] and not result["create_errors"]
    return 0 if ok else 1
