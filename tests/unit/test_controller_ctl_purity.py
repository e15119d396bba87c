"""The queue, PodGroup, TTL, CronJob and JobFlow rules of the controller are pure: no network, bus,
cluster or event-loop library, and no clock (``now`` is always a parameter)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import lahar_controller

PURE = ("queues", "podgroups", "ttl", "cron", "cronschedule", "kubetime", "flow")
FORBIDDEN = ("nats", "redis", "kubernetes", "asyncio", "socket", "httpx", "aiohttp", "opentelemetry", "time", "os")
CLOCKS = ("now", "utcnow", "today", "time", "monotonic")
ROOT = Path(lahar_controller.__file__).parent


@pytest.mark.parametrize("module", PURE)
def test_imports_no_io_library(module: str) -> None:
    tree = ast.parse((ROOT / f"{module}.py").read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & set(FORBIDDEN), imported & set(FORBIDDEN)


@pytest.mark.parametrize("module", PURE)
def test_reads_no_clock(module: str) -> None:
    tree = ast.parse((ROOT / f"{module}.py").read_text())
    calls = [n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    assert not [c for c in calls if c in CLOCKS]
