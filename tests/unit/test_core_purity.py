"""The scheduling core does no I/O: it imports no network, bus, cluster or telemetry library, and
its results do not depend on the machine's clock, time zone or environment."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import lahar.api
import lahar_scheduler

FORBIDDEN = (
    "nats",
    "redis",
    "kubernetes",
    "asyncio",
    "socket",
    "opentelemetry",
    "httpx",
    "uvicorn",
    "starlette",
)
# The pure parts of the scheduler; its service shell (added later) may import what it likes.
CORE_PACKAGES = ("framework", "actions", "plugins")
# decisions and deltas translate session results and bus deltas; they declare themselves pure.
CORE_MODULES = ("core", "simulation", "conformance", "registry", "decisions", "deltas")

SCHEDULER = Path(lahar_scheduler.__file__).parent
API = Path(lahar.api.__file__).parent


def core_files() -> list[Path]:
    files = [p for pkg in CORE_PACKAGES for p in sorted((SCHEDULER / pkg).rglob("*.py"))]
    files += [SCHEDULER / f"{m}.py" for m in CORE_MODULES]
    files += sorted(API.rglob("*.py"))
    return files


def module_name(path: Path) -> str:
    if path.is_relative_to(SCHEDULER):
        rel, top = path.relative_to(SCHEDULER), "lahar_scheduler"
    else:
        rel, top = path.relative_to(API), "lahar.api"
    parts = [top, *rel.with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_core_file_list_is_complete() -> None:
    names = {module_name(p) for p in core_files()}
    assert {
        "lahar_scheduler.framework.session",
        "lahar_scheduler.actions.allocate",
        "lahar.api.resource",
    } <= names
    assert {"lahar_scheduler.plugins.predicates", "lahar_scheduler.plugins.k8s.scores"} <= names
    assert all((SCHEDULER / f"{m}.py").is_file() for m in CORE_MODULES)


def test_importing_the_core_loads_no_io_library() -> None:
    """In a fresh interpreter, import every core module and look at what got loaded, transitively
    (a dependency can pull in socket or asyncio behind the core's back).

    What does get loaded is the C module ``_socket``: typing_extensions (imported by msgspec)
    imports it on Python < 3.13 only to read the PyCapsule type.  That opens nothing and is not the
    ``socket`` module, so it is allowed; ``socket`` itself must stay out."""
    modules = sorted(module_name(p) for p in core_files())
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(json.dumps({'bad': bad, 'count': len(sys.modules)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert got["bad"] == [], f"the scheduling core loads I/O libraries: {got['bad']}"
    assert got["count"] > 50  # the imports really happened


def _imported_roots(tree: ast.AST) -> set[str]:
    roots = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            roots.update(a.name.split(".")[0] for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            roots.add(n.module.split(".")[0])
        elif (
            isinstance(n, ast.Call)
            and getattr(n.func, "attr", getattr(n.func, "id", "")) in ("import_module", "__import__")
            and n.args
            and isinstance(n.args[0], ast.Constant)
            and isinstance(n.args[0].value, str)
        ):
            roots.add(n.args[0].value.split(".")[0])
    return roots


def test_core_sources_import_no_io_library() -> None:
    offenders = {}
    for path in core_files():
        bad = _imported_roots(ast.parse(path.read_text(), str(path))) & set(FORBIDDEN)
        if bad:
            offenders[str(path)] = sorted(bad)
    assert offenders == {}


def test_static_scan_catches_an_import() -> None:
    assert _imported_roots(ast.parse("import socket\nfrom redis.asyncio import Redis\n")) == {
        "socket",
        "redis",
    }
    assert _imported_roots(ast.parse("importlib.import_module('nats.js')")) == {"nats"}


def test_core_reads_no_clock_and_no_environment() -> None:
    """Time arrives in the snapshot; nothing in the core asks the machine for it or for settings."""
    forbidden_calls = {
        ("time", "time"),
        ("time", "monotonic"),
        ("time", "perf_counter"),
        ("datetime", "now"),
        ("datetime", "utcnow"),
        ("datetime", "today"),
        ("date", "today"),
        ("os", "getenv"),
        ("os", "environ"),
    }
    offenders = []
    for path in core_files():
        for n in ast.walk(ast.parse(path.read_text(), str(path))):
            named = isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            if named and (n.value.id, n.attr) in forbidden_calls:  # type: ignore[attr-defined]
                offenders.append(f"{path.name}:{n.lineno} {n.value.id}.{n.attr}")
    assert offenders == []


def test_timestamps_do_not_depend_on_the_local_time_zone() -> None:
    """A timestamp without an offset is read as UTC (as Kubernetes means it), not local time, so
    job order and SLA waiting times are the same on every machine."""
    code = (
        "from lahar_scheduler.framework.snapshot import parse_time\n"
        "print(parse_time('2024-01-01T00:00:00'), parse_time('2024-01-01T00:00:00Z'))\n"
    )
    outs = set()
    for tz in ("UTC", "Asia/Tokyo", "America/Los_Angeles"):
        env = {**os.environ, "TZ": tz}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
        naive, utc = out.stdout.split()
        assert naive == utc, tz
        outs.add(out.stdout)
    assert len(outs) == 1
