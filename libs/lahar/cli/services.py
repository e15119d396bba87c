"""``lahar cache``, ``lahar scheduler`` and ``lahar binder``: the service processes."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from lahar.servicekit import ServiceOptions, SettingsError, add_options, options, run

log = logging.getLogger("lahar")

SCHEDULER = {
    "conf": ("LAHAR_SCHEDULER_CONF", str, "", "volcano-scheduler.conf file (reloaded when it changes)"),
    "period": ("LAHAR_SCHEDULE_PERIOD", float, 1.0, "seconds between sessions"),
    "seed": ("LAHAR_SEED", int, 0, "seed for tie-breaking"),
}
BINDER = {
    "max-in-flight": ("LAHAR_MAX_IN_FLIGHT", int, 64, "API calls running at once"),
    "max-attempts": ("LAHAR_MAX_ATTEMPTS", int, 5, "deliveries of a failing decision before giving up"),
    "ack-wait": ("LAHAR_ACK_WAIT", float, 30.0, "seconds before an unacknowledged decision is redelivered"),
}


def register(sub: Any) -> None:
    for name, extra, help_ in (
        ("cache", {}, "watch the cluster, mirror it into Redis, publish deltas"),
        ("scheduler", SCHEDULER, "run scheduling sessions over the mirrored cluster"),
        ("binder", BINDER, "perform binds, evictions and status writes"),
        ("controller", {}, "drive queue states (Volcano's controller, first part)"),
    ):
        p = sub.add_parser(name, help=help_)
        add_options(p, extra)
        p.set_defaults(handler=_handler(name, extra))


def _handler(name: str, extra: dict[str, Any]) -> Any:
    def handle(args: argparse.Namespace) -> int:
        try:
            opts = options(name, args, extra)
        except SettingsError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        return run(name, opts, MAINS[name])

    return handle


async def cache_main(opts: ServiceOptions, stop: asyncio.Event) -> None:
    from lahar_cache.main import serve

    await serve(opts, stop)


async def scheduler_main(opts: ServiceOptions, stop: asyncio.Event) -> None:
    from lahar_scheduler.main import serve

    await serve(opts, stop)


async def binder_main(opts: ServiceOptions, stop: asyncio.Event) -> None:
    from lahar_binder.main import serve

    await serve(opts, stop)


async def controller_main(opts: ServiceOptions, stop: asyncio.Event) -> None:
    from lahar_controller.main import serve

    await serve(opts, stop)


MAINS = {"cache": cache_main, "scheduler": scheduler_main, "binder": binder_main, "controller": controller_main}
