"""``lahar infra``: run NATS and a Redis-compatible server in the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

from lahar.infra import Infra, InfraError

STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
WATCH_INTERVAL = 1.0  # seconds between checks that the servers are still alive


def register(sub: Any) -> None:
    p = sub.add_parser(
        "infra",
        help="run NATS (JetStream) and Redis (Valkey) in the foreground and print their URLs",
        description="Starts nats-server and valkey-server on free loopback ports, prints "
        "LAHAR_NATS_URL=... and LAHAR_REDIS_URL=... lines, and stops both on Ctrl-C or SIGTERM. "
        "A server whose LAHAR_*_URL is already set is used as it is, not started.",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="keep the servers' data here, under nats/ and redis/ (default: a temporary folder, removed on exit)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        infra = Infra(args.data_dir)  # checks LAHAR_NATS_URL / LAHAR_REDIS_URL
    except InfraError as exc:
        print(f"lahar infra: {exc}", file=sys.stderr)
        return 2
    try:
        infra.start()
    except InfraError as exc:
        print(f"lahar infra: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C while starting: start() has already stopped what it started
        return 130
    try:
        # Blocked signals wait for sigtimedwait() below instead of interrupting us.  Blocked only
        # now, after the servers started: children inherit the signal mask, and a server that
        # blocks SIGTERM could not be stopped politely.
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        # Admin's URLs (every service has a user of its own: Infra.client_env).
        print(f"LAHAR_NATS_URL={infra.nats_url}\nLAHAR_REDIS_URL={infra.redis_url}", flush=True)
        if infra.nats_ca:
            print(f"LAHAR_NATS_CA={infra.nats_ca}", flush=True)
        print(f"lahar infra: {describe(infra)}; stop with Ctrl-C", file=sys.stderr, flush=True)
        return wait_for_stop(infra)
    finally:
        infra.stop()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def wait_for_stop(infra: Infra) -> int:
    """0 after SIGINT/SIGTERM; 1 if a server we started dies first."""
    while signal.sigtimedwait(STOP_SIGNALS, WATCH_INTERVAL) is None:
        dead = [s for s in infra.servers if not s.running]
        if dead:
            print(f"lahar infra: a server exited unexpectedly: {dead}", file=sys.stderr)
            return 1
    print("lahar infra: stopping", file=sys.stderr, flush=True)
    return 0


def describe(infra: Infra) -> str:
    parts = zip(("nats", "redis"), infra.servers, strict=True)
    return ", ".join(f"{name} {f'pid {s.pid}' if s.pid else 'external'}" for name, s in parts)
