"""What every service shell shares: connections, tracing, health/metrics, leadership, shutdown.

``ServiceOptions`` are the settings common to the cache, scheduler and binder; each comes from a
flag or a ``LAHAR_*`` variable (flag wins), and all invalid settings are reported together.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

log = logging.getLogger("lahar")


@dataclass
class ServiceOptions:
    service: str
    nats_url: str = ""
    redis_url: str = ""
    kubeconfig: str = ""
    prefix: str = "lahar"
    http_port: int = 0
    http_host: str = "127.0.0.1"
    log_level: str = "info"
    otel_exporter: str = ""
    identity: str = ""
    leader_ttl: float = 5.0
    extra: dict[str, Any] = field(default_factory=dict)


COMMON = {
    # flag: (env var, type, default, help)
    "nats-url": ("LAHAR_NATS_URL", str, "", "NATS server URL (nats://host:port)"),
    "redis-url": ("LAHAR_REDIS_URL", str, "", "Redis/Valkey URL (redis://host:port)"),
    "kubeconfig": ("KUBECONFIG", str, "", "kubeconfig file (default: ~/.kube/config or in-cluster)"),
    "prefix": ("LAHAR_PREFIX", str, "lahar", "prefix of every stream, subject and Redis key"),
    "http-port": ("LAHAR_HTTP_PORT", int, 0, "port for /healthz, /readyz and /metrics (0: any free port)"),
    "log-level": ("LAHAR_LOG_LEVEL", str, "info", "debug, info, warning or error"),
    "otel-exporter": ("LAHAR_OTEL_EXPORTER", str, "", "otlp, console, none or jsonl:PATH"),
    "identity": ("LAHAR_IDENTITY", str, "", "this replica's name in leader election (default host-pid)"),
    "leader-ttl": ("LAHAR_LEADER_TTL", float, 5.0, "leader lease, seconds"),
}


def add_options(p: argparse.ArgumentParser, extra: dict[str, tuple[str, type, Any, str]]) -> None:
    for flag, (env, _typ, default, help_) in {**COMMON, **extra}.items():
        p.add_argument(f"--{flag}", default=None, help=f"{help_} [env {env}; default {default!r}]")


def options(service: str, args: argparse.Namespace, extra: dict[str, tuple[str, type, Any, str]]) -> ServiceOptions:
    """Settings from flags, then environment, then defaults; every bad one reported at once."""
    errors: list[str] = []
    values: dict[str, Any] = {}
    for flag, (env, typ, default, _help) in {**COMMON, **extra}.items():
        raw = getattr(args, flag.replace("-", "_"))
        source = f"--{flag}"
        if raw is None:
            raw, source = os.environ.get(env), env
        if raw is None:
            values[flag] = default
            continue
        try:
            values[flag] = typ(raw)
        except ValueError:
            errors.append(f"{source}: {raw!r} is not a valid {typ.__name__}")
    for flag in ("nats-url", "redis-url"):
        if not values[flag]:
            errors.append(f"--{flag} (or {COMMON[flag][0]}): required")
    if values["log-level"] not in ("debug", "info", "warning", "error"):
        errors.append(f"--log-level: {values['log-level']!r} must be debug, info, warning or error")
    if not 0 <= values["http-port"] < 65536:
        errors.append(f"--http-port: {values['http-port']} is not a port")
    if values["leader-ttl"] <= 0:
        errors.append("--leader-ttl: must be positive")
    if errors:
        raise SettingsError(service, errors)
    return ServiceOptions(
        service=service,
        nats_url=values["nats-url"],
        redis_url=values["redis-url"],
        kubeconfig=values["kubeconfig"],
        prefix=values["prefix"],
        http_port=values["http-port"],
        log_level=values["log-level"],
        otel_exporter=values["otel-exporter"],
        identity=values["identity"] or f"{os.uname().nodename}-{os.getpid()}",
        leader_ttl=values["leader-ttl"],
        extra={k: values[k] for k in extra},
    )


class SettingsError(ValueError):
    def __init__(self, service: str, errors: list[str]) -> None:
        super().__init__(f"lahar {service}: invalid settings:\n  " + "\n  ".join(errors))
        self.errors = errors


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


def configure_logging(service: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if sys.stderr.isatty():
        handler.setFormatter(logging.Formatter(f"%(asctime)s {service} %(levelname)s %(message)s"))
    else:
        handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # One line per HTTP request would drown everything else.
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


class HealthServer:
    """/healthz, /readyz and /metrics on a tiny asyncio HTTP server (no framework needed for three
    fixed GET routes, and it runs inside the service's own loop)."""

    def __init__(self, registry: CollectorRegistry, ready: Callable[[], bool]) -> None:
        self.registry = registry
        self.ready = ready
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        self.server = await asyncio.start_server(self._serve, host, port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass
            path = line.split()[1].decode() if len(line.split()) > 1 else "/"
            status, body, ctype = self._route(path)
            head = f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            writer.write(head.encode() + b"Connection: close\r\n\r\n" + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, IndexError):
            pass
        finally:
            writer.close()

    def _route(self, path: str) -> tuple[str, bytes, str]:
        if path == "/healthz":
            return "200 OK", b"ok\n", "text/plain"
        if path == "/readyz":
            return (
                ("200 OK", b"ready\n", "text/plain")
                if self.ready()
                else ("503 Not Ready", b"not ready\n", "text/plain")
            )
        if path == "/metrics":
            return "200 OK", generate_latest(self.registry), "text/plain; version=0.0.4"
        return "404 Not Found", b"not found\n", "text/plain"


def stop_event() -> asyncio.Event:
    """Set on SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


def run(service: str, opts: ServiceOptions, main: Callable[[ServiceOptions, asyncio.Event], Awaitable[None]]) -> int:
    configure_logging(service, opts.log_level)

    async def go() -> None:
        stop = stop_event()
        started = time.monotonic()
        await main(opts, stop)
        log.info("%s stopped after %.1fs", service, time.monotonic() - started)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(go())
    return 0


def health_line(port: int) -> str:
    return f"LAHAR_HTTP_PORT={port}"
