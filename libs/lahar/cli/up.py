"""``lahar up``: the whole system as separate processes, with a live status line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from lahar.cli._help import DefaultsHelp

T = TypeVar("T")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "up",
        help="start infra, the emulator and every service; Ctrl-C stops all",
        formatter_class=DefaultsHelp,
    )
    add_stack_options(p)
    p.set_defaults(handler=run)


def add_stack_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--state-dir", default=".lahar", help="where logs, the kubeconfig and traces go (relative: to this folder)"
    )
    p.add_argument("--kubeconfig", help="use this cluster instead of starting the emulator")
    p.add_argument(
        "--control-plane",
        choices=("sim", "kube"),
        default="sim",
        help="sim: Lahar's API emulator (default); kube: a real kube-apiserver, etcd, "
        "kube-controller-manager and KWOK nodes (built once with Go; see `lahar kube`), "
        "each service running as its deploy/ ServiceAccount",
    )
    p.add_argument("--nats-url", help="use this NATS server instead of starting one")
    p.add_argument("--redis-url", help="use this Redis/Valkey server instead of starting one")
    p.add_argument("--binders", type=int, default=2, help="binder replicas at start (they scale up on load)")
    p.add_argument("--max-binders", type=int, default=8)
    p.add_argument("--max-in-flight", type=int, default=64, help="API calls per binder")
    p.add_argument("--nodes", action="append", help="emulated nodes, COUNT:key=value,... (repeatable)")
    p.add_argument("--period", type=float, default=1.0, help="seconds between scheduling sessions")
    p.add_argument("--conf", help="a volcano-scheduler.conf for the scheduler")
    p.add_argument("--no-admission", action="store_true", help="do not run the admission webhook")
    p.add_argument("--replicas", type=int, default=1, help="replicas of cache, controller, scheduler (one leads)")
    p.add_argument("--leader-ttl", type=float, default=2.0, help="seconds a leader's lease lasts without renewal")


def stack_config(args: argparse.Namespace) -> Any:
    from lahar.up.stack import DEFAULT_NODES, StackConfig

    return StackConfig(
        state_dir=Path(args.state_dir).resolve(),
        kubeconfig=args.kubeconfig,
        nats_url=args.nats_url,
        redis_url=args.redis_url,
        nodes=tuple(args.nodes) if args.nodes else DEFAULT_NODES,
        binders=args.binders,
        max_binders=max(args.max_binders, args.binders),
        max_in_flight=args.max_in_flight,
        period=args.period,
        admission=not args.no_admission,
        scheduler_conf=str(Path(args.conf).resolve()) if args.conf else None,
        replicas=args.replicas,
        leader_ttl=args.leader_ttl,
        control_plane=args.control_plane,
        progress=_say,
    )


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def validate(args: argparse.Namespace) -> list[str]:
    errors = []
    if args.binders < 1:
        errors.append("--binders: must be at least 1")
    if args.max_in_flight < 1:
        errors.append("--max-in-flight: must be at least 1")
    if args.period <= 0:
        errors.append("--period: must be positive")
    if args.replicas < 1:
        errors.append("--replicas: must be at least 1")
    if args.leader_ttl < 0.5:
        errors.append("--leader-ttl: must be at least 0.5 seconds")
    if args.kubeconfig and args.control_plane == "kube":
        errors.append("--control-plane kube: starts a cluster of its own; it cannot be used with --kubeconfig")
    if args.kubeconfig and not Path(args.kubeconfig).exists():
        errors.append(f"--kubeconfig: {args.kubeconfig} does not exist")
    if args.conf:
        errors += _conf_errors(args.conf)
    return errors


def _conf_errors(path: str) -> list[str]:
    """The scheduler would refuse a bad configuration seconds after start, in a log line: check
    it here, before anything starts, with the scheduler's own parser."""
    from lahar_scheduler.core import load_conf
    from lahar_scheduler.framework.conf import ConfError

    try:
        load_conf(Path(path).read_text())
    except OSError as exc:
        return [f"--conf: {path}: cannot read: {exc.strerror}"]
    except ConfError as exc:
        return [f"--conf: {path}: {exc}"]
    return []


class _Interrupts:
    """SIGINT and SIGTERM for the whole of ``lahar up``: the first one raises KeyboardInterrupt
    while starting (start() stops what it started) or sets the watch loop's stop event once
    running; any later one is ignored, so the bounded stop that follows is never cut short (that
    would leave children behind and print a traceback).  Installed in place of Python's default
    handler, it also keeps asyncio.run from taking SIGINT over inside start()."""

    def __init__(self) -> None:
        self.count = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self.event: asyncio.Event | None = None

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)

    def attach(self, loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
        self.loop, self.event = loop, event
        if self.count:
            event.set()

    def _on_signal(self, signum: int, frame: object) -> None:
        self.count += 1
        if self.count > 1:
            return
        if self.loop is not None and self.event is not None:
            self.loop.call_soon_threadsafe(self.event.set)
            return
        raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    from lahar.up.stack import LocalStack

    errors = validate(args)
    if errors:
        print("lahar up: " + "; ".join(errors), file=sys.stderr)
        return 2
    stack = LocalStack(stack_config(args))
    interrupts = _Interrupts()
    interrupts.install()
    cluster = {"sim": "the emulator, ", "kube": "Kubernetes (kube-apiserver, etcd, KWOK), "}[args.control_plane]
    print(f"starting infra, {'' if args.kubeconfig else cluster}and the services...", file=sys.stderr)
    try:
        stack.start()  # on any failure, Ctrl-C included, it has stopped what it started
    except RuntimeError as exc:
        print(f"lahar up: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nlahar up: interrupted while starting; everything it started is stopped", file=sys.stderr)
        return 130
    try:
        _print_ready(stack)
        return asyncio.run(_watch(stack, interrupts))
    except KeyboardInterrupt:  # between start() and the watch loop
        return 130
    finally:
        stack.stop()


def _print_ready(stack: Any) -> None:
    print(f"ready: KUBECONFIG={stack.kubeconfig}", file=sys.stderr)
    env = stack.env()
    urls = " ".join(f"{k}={env[k]}" for k in ("LAHAR_NATS_URL", "LAHAR_NATS_CA", "LAHAR_REDIS_URL"))
    print(f"as admin: {urls}", file=sys.stderr)
    for child in stack.children:
        if child.port and child.name != "admission":
            base = f"http://127.0.0.1:{child.port}"
            print(f"  {child.identity:<13} {base}/metrics  {base}/readyz", file=sys.stderr)
    if stack.config.admission:
        print(f"  {'admission':<13} {stack.admission_url}/readyz (webhooks)", file=sys.stderr)
    print(f"traces: {stack.trace_destination()}; logs: {stack.dir / 'logs'}", file=sys.stderr)


async def _watch(stack: Any, interrupts: _Interrupts) -> int:
    import httpx

    from lahar.up.monitor import Autoscaler, status

    stop = asyncio.Event()
    interrupts.attach(asyncio.get_running_loop(), stop)
    nc = await stack.infra.connect_nats()
    js = nc.jetstream()
    scaler = Autoscaler(stack)
    seen_events = 0
    last_done, last_t = 0.0, time.monotonic()
    async with httpx.AsyncClient() as client:
        while not stop.is_set():
            st = await _unless_stopped(status(client, js, stack), stop)
            if st is None:
                break
            now = time.monotonic()
            rate = (st.binds_done - last_done) / max(now - last_t, 1e-6) if last_done else 0.0
            last_done, last_t = st.binds_done, now
            note = scaler.step(st.queued, now)
            line = (
                f"nodes {st.nodes}  pending {st.pending}  bound {st.bound}  binds/s {rate:6.0f}  "
                f"binders {st.binders}  queued {st.queued}"
            )
            print("\r" + line + (f"  ({note})" if note else "") + " " * 8, end="", file=sys.stderr, flush=True)
            # The keeper restarts dead children; say what it did, once, on its own line.
            for event in stack.keeper.events[seen_events:]:
                print(f"\nlahar up: {event} (see {stack.dir / 'logs'})", file=sys.stderr)
            seen_events = len(stack.keeper.events)
            if any(c.name == "sim" for c in stack.dead()):
                print(f"\nlahar up: the emulator exited; stopping (see {stack.dir / 'logs'})", file=sys.stderr)
                await nc.close()
                return 1
            if stack.kube is not None and (gone := stack.kube.dead()):
                print(f"\nlahar up: the control plane lost {', '.join(gone)}; stopping", file=sys.stderr)
                await nc.close()
                return 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    print("\nstopping...", file=sys.stderr)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(nc.close(), 2.0)  # a NATS that went away must not hold up the stop
    return 0


async def _unless_stopped(work: Coroutine[Any, Any, T], stop: asyncio.Event) -> T | None:
    """``work``'s result, or None as soon as ``stop`` is set (a slow scrape must not delay Ctrl-C)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
    return None
