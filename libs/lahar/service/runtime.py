"""``run_service``: settings, logging, tracing, probes, metrics and graceful shutdown around a
service's main coroutine, for its ``python -m`` entry point::

    class BinderSettings(Settings):
        max_in_flight: Annotated[int, Meta(ge=1)] = 64

    async def main(ctx: ServiceContext[BinderSettings]) -> None:
        async with connect(...) as nc:              # start up
            ctx.health.set_ready(True)
            await ctx.stopping.wait()               # SIGTERM/SIGINT
            ...finish or hand back work in flight   # within settings.shutdown_timeout

    if __name__ == "__main__":
        raise SystemExit(run_service("binder", main, BinderSettings))

Exit codes: 0 when main returns (by itself or after the stop signal, within the deadline); 1 when
it raises, is cancelled at the deadline or by a second signal, or the service cannot start
(a port in use); 2 for invalid settings, every problem printed to stderr first.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import uvloop
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer
from prometheus_client import CollectorRegistry, GCCollector, Info, PlatformCollector, ProcessCollector

from lahar.adapters.otel import TracingSettingError, setup_tracing
from lahar.service.health import Health
from lahar.service.http import ProbeServer
from lahar.service.logs import configure_logging
from lahar.service.settings import Settings, SettingsError, load_settings
from lahar.service.shutdown import ShutdownSignals, finish_within

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "ServiceContext", "run_service", "serve"]

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
S = TypeVar("S", bound=Settings)
log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class ServiceContext(Generic[S]):
    """What the runtime hands a service's main coroutine."""

    name: str
    settings: S
    stopping: asyncio.Event  # set on SIGTERM/SIGINT: take no new work, finish what is in flight
    health: Health  # set_ready(True) once serving; add_check() for dependencies
    registry: CollectorRegistry  # the service's metrics, served on /metrics
    tracer_provider: TracerProvider
    http_port: int  # the probe server's port (the chosen one when settings asked for 0)

    @property
    def tracer(self) -> Tracer:
        return self.tracer_provider.get_tracer(f"lahar.{self.name}")

    @property
    def log(self) -> logging.Logger:
        return logging.getLogger(f"lahar.{self.name}")


Main = Callable[[ServiceContext[S]], Awaitable[None]]


def run_service(
    name: str,
    main: Main[S],
    settings: type[S] | S,
    *,
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Load the settings (a Settings type is read from ``argv``/``environ``; an instance is used as
    it is), configure logging and run ``main`` in a new event loop; returns the exit code."""
    if isinstance(settings, type):
        try:
            settings = load_settings(settings, argv, environ, prog=f"lahar {name}")
        except SettingsError as err:
            print(f"{name}: {err}", file=sys.stderr)
            return EXIT_USAGE
    configure_logging(name, settings.log_level)
    # uvloop: the services are event-loop bound (NATS, Redis and HTTP clients on one loop), and
    # its loop and transports cost a fraction of asyncio's.
    return uvloop.run(serve(name, main, settings))


async def serve(name: str, main: Main[S], settings: S, *, own_process: bool = True) -> int:
    """Run ``main`` with probes, metrics and tracing in the running loop; returns the exit code.

    ``own_process`` (the process runs this service alone) handles SIGTERM/SIGINT and installs the
    tracer provider as the global one.  Embedded (tests, several services in one process), pass
    False: signals are left alone and ``main`` is stopped by cancelling ``serve``."""
    signals = ShutdownSignals()
    if own_process:
        signals.install()  # first, so a SIGTERM during start-up is a graceful stop too
    try:
        provider = setup_tracing(name, settings.otel_exporter, set_global=own_process)
    except TracingSettingError as err:
        log.error("%s", err)
        signals.uninstall()
        return EXIT_USAGE
    health, registry = Health(), _registry(name)
    try:
        async with ProbeServer(health, registry, settings.http_host, settings.http_port) as probes:
            ctx = ServiceContext(name, settings, signals.requested, health, registry, provider, probes.port)
            return await _supervise(main, ctx, signals)
    except OSError as err:
        log.error("cannot serve probes on %s:%d: %s", settings.http_host, settings.http_port, err)
        return EXIT_FAILURE
    finally:
        signals.uninstall()
        provider.shutdown()  # flushes spans still batched


async def _supervise(main: Main[S], ctx: ServiceContext[S], signals: ShutdownSignals) -> int:
    task = asyncio.create_task(_run_main(main, ctx), name=f"{ctx.name} main")
    signals.on_repeat = task.cancel  # a second signal: stop now
    stop = asyncio.create_task(signals.requested.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # serve() itself cancelled (embedded): main goes with it
        task.cancel()
        await asyncio.wait({task}, timeout=ctx.settings.shutdown_timeout)
        raise
    finally:
        stop.cancel()
    if not task.done():
        ctx.health.drain()
        if not await finish_within(task, ctx.settings.shutdown_timeout):
            return EXIT_FAILURE
    if task.cancelled():
        return EXIT_FAILURE
    return EXIT_OK if task.result() else EXIT_FAILURE


async def _run_main(main: Main[S], ctx: ServiceContext[S]) -> bool:
    try:
        await main(ctx)
    except Exception as exc:
        ctx.health.die(repr(exc))  # liveness fails first; the exit follows
        log.exception("%s failed", ctx.name)
        return False
    log.info("%s stopped", ctx.name)
    return True


def _registry(name: str) -> CollectorRegistry:
    """A registry of the service's own, with the process, platform and GC collectors."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    Info("lahar_service", "The Lahar service in this process", registry=registry).info(
        {"service": name, "version": _version()}
    )
    return registry


def _version() -> str:
    try:
        return importlib.metadata.version("lahar")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
