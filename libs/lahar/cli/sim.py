"""``lahar sim``: serve the Kubernetes API emulator in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sim",
        help="serve an emulated Kubernetes API server with simulated nodes",
        description="Serve the Lahar Kubernetes API emulator until SIGTERM or SIGINT.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=6443, help="port to listen on; 0 picks a free one (default 6443)")
    p.add_argument("--kubeconfig-out", metavar="PATH", help="write a kubeconfig for the emulator here once it serves")
    p.add_argument(
        "--nodes",
        action="append",
        default=[],
        metavar="SPEC",
        help="COUNT:key=value,... e.g. 100:cpu=32,memory=128Gi,nvidia.com/gpu=8,label.zone=a,"
        "taint.dedicated=gpu:NoSchedule,name=gpu (nodes gpu-0001...); repeatable",
    )
    p.add_argument(
        "--nodes-file",
        action="append",
        default=[],
        metavar="FILE",
        help="a YAML file of Node objects; repeatable",
    )
    p.add_argument(
        "--watch-cache-size",
        type=int,
        default=10_000,
        metavar="N",
        help="events kept per resource for watch replay; older resourceVersions get 410 Gone",
    )
    p.add_argument(
        "--start-delay",
        type=float,
        default=0.1,
        metavar="SECONDS",
        help="time from binding to Running (default 0.1)",
    )
    p.add_argument(
        "--bookmark-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="time between watch bookmarks when clients allow them (default 5)",
    )
    p.add_argument(
        "--latency",
        action="append",
        default=[],
        metavar="VERB=DURATION",
        help="inject latency, e.g. binding=50ms; verbs: get list watch create update patch delete "
        "deletecollection binding eviction status *",
    )
    p.add_argument(
        "--error-rate",
        action="append",
        default=[],
        metavar="VERB=RATE[:CODES]",
        help="inject 500/429 errors, e.g. binding=0.01 or create=0.1:429",
    )
    p.add_argument(
        "--webhook-service",
        action="append",
        default=[],
        metavar="NS/NAME=HOST:PORT",
        help="where a webhook clientConfig.service is reachable",
    )
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    p.set_defaults(handler=run)


def config_from_args(args: argparse.Namespace) -> Any:
    from lahar.sim.server import SimConfig

    services = {}
    for item in args.webhook_service:
        ref, sep, where = item.partition("=")
        if not sep or "/" not in ref or ":" not in where:
            raise ValueError(f"--webhook-service {item!r}: expected NS/NAME=HOST:PORT")
        services[ref] = where
    if args.watch_cache_size < 1:
        raise ValueError("--watch-cache-size: must be at least 1")
    if args.start_delay < 0:
        raise ValueError("--start-delay: must not be negative")
    if args.bookmark_interval <= 0:
        raise ValueError("--bookmark-interval: must be positive")
    return SimConfig(
        host=args.host,
        port=args.port,
        nodes=args.nodes,
        nodes_files=args.nodes_file,
        watch_cache_size=args.watch_cache_size,
        start_delay=args.start_delay,
        bookmark_interval=args.bookmark_interval,
        latency=args.latency,
        error_rate=args.error_rate,
        webhook_services=services,
        log_level=args.log_level,
    )


def run(args: argparse.Namespace) -> int:
    from lahar.sim.faults import FaultSpecError
    from lahar.sim.nodes import NodeSpecError
    from lahar.sim.server import Emulator

    try:
        emulator = Emulator(config_from_args(args))
    except (NodeSpecError, FaultSpecError, ValueError) as exc:
        print(f"lahar sim: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"lahar sim: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1

    def ready() -> None:
        if args.kubeconfig_out:
            emulator.write_kubeconfig(args.kubeconfig_out)
        nodes = len(emulator.api.table(emulator.api.rtype("", "nodes")).objects)
        print(
            f"lahar sim: serving {emulator.url} with {nodes} nodes"
            + (f"; kubeconfig {args.kubeconfig_out}" if args.kubeconfig_out else ""),
            file=sys.stderr,
            flush=True,
        )

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, emulator.request_stop)
        await emulator.serve(ready)

    import uvloop

    uvloop.run(main())
    print("lahar sim: stopped", file=sys.stderr)
    return 0
