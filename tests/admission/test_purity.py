"""The rules are pure: importing them pulls in no I/O, clock-driven or network library."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN = (
    "nats",
    "redis",
    "kubernetes",
    "asyncio",
    "socket",
    "opentelemetry",
    "uvicorn",
    "starlette",
    "httpx",
)


def test_rules_import_no_io_libraries() -> None:
    code = (
        "import sys, lahar_admission.rules, lahar_admission.conformance\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the rules import {out.stdout.strip()}"


def test_rule_modules_do_not_read_the_clock_or_environment() -> None:
    import inspect
    import pkgutil

    import lahar_admission.rules as rules

    for info in pkgutil.iter_modules(rules.__path__):
        source = inspect.getsource(__import__(f"lahar_admission.rules.{info.name}", fromlist=["x"]))
        for word in ("import time", "datetime", "os.environ", "open(", "random"):
            assert word not in source, f"rules/{info.name}.py uses {word}"
