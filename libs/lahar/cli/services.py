"""``lahar cache``, ``lahar scheduler``, ``lahar binder`` and ``lahar controller``: the service
processes.  Every flag is also a ``LAHAR_*`` environment variable (``--nats-url`` /
``LAHAR_NATS_URL``); ``lahar <service> --help`` lists them."""

from __future__ import annotations

import importlib
from typing import Any

SERVICES = {
    "cache": ("lahar_cache.main", "watch the cluster, mirror it into Redis, publish deltas"),
    "scheduler": ("lahar_scheduler.main", "run scheduling sessions over the mirrored cluster"),
    "binder": ("lahar_binder.main", "perform binds, evictions and status writes"),
    "controller": ("lahar_controller.main", "drive queue states (Volcano's controller, first part)"),
}


def register(sub: Any) -> None:
    """Listed in ``lahar --help``; ``main`` hands their arguments to ``run_service_command``."""
    for name, (_, help_) in SERVICES.items():
        sub.add_parser(name, help=f"{help_} (see lahar {name} --help)")


def run_service_command(name: str, argv: list[str]) -> int:
    from lahar.service import run_service

    mod = importlib.import_module(SERVICES[name][0])
    return int(run_service(name, mod.main, mod.SETTINGS, argv=argv))
