"""Volcano's controller conformance corpus, run against Lahar's pure controller functions.

Each case (see tests/conformance/controller/README.md) names an ``area``; each area has a runner
module in this package with ``check(case: dict) -> list[str]`` returning the differences from the
case's ``expect`` (empty: the case passes).  An area whose module does not exist yet has no
runner: its cases are expected failures naming issue 9.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lahar.api import safeyaml

Check = Callable[[dict[str, Any]], list[str]]

# area -> module of this package that runs its cases
RUNNERS: dict[str, str] = {
    "job-state-machine": "jobstate",
    "job-kill": "jobstate",
    "job-sync": "jobstate",
    "job-status": "jobstate",
    "job-dependson": "jobstate",
    "job-policy": "jobstate",
    "job-handlers": "jobstate",
    "job-podgroup": "render",
    "job-pod-render": "render",
    "plugin-env-svc-ssh": "render",
    "plugin-ssh": "render",
    "plugin-mpi": "render",
    "plugin-pytorch": "render",
    "plugin-tensorflow": "render",
    "queue-state-machine": "queues",
    "podgroup-controller": "podgroups",
    "job-ttl": "ttl",
    "cronjob-schedule": "cron",
}


@dataclass
class Result:
    name: str
    area: str
    runnable: bool
    differences: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.runnable and not self.differences


def _module(area: str) -> Any:
    module = RUNNERS.get(area)
    if module is None:
        return None
    try:
        return importlib.import_module(f"{__name__}.{module}")
    except ModuleNotFoundError as exc:
        if exc.name == f"{__name__}.{module}":
            return None
        raise


def checker(area: str) -> Check | None:
    """The area's runner, or None while it is not built."""
    loaded = _module(area)
    if loaded is None:
        return None
    check: Check = loaded.check
    return check


def pending(area: str, name: str) -> str:
    """Why a case of a built area is known not to pass yet ("" if it must pass): the runner
    module's ``PENDING`` maps case names to the reason."""
    loaded = _module(area)
    reasons: dict[str, str] = getattr(loaded, "PENDING", {}) if loaded is not None else {}
    return reasons.get(name, "")


def run_area(path: Path) -> str:
    """The case's area, read from its file."""
    case = safeyaml.load(path.read_text(), str(path))
    return str(case.get("area", "")) if isinstance(case, dict) else ""


def is_controller_case(doc: object) -> bool:
    return isinstance(doc, dict) and "area" in doc and "step" in doc and "expect" in doc


def run_case(path: Path) -> Result:
    case = safeyaml.load(path.read_text(), str(path))
    return run_doc(case, path.stem)


def run_doc(case: dict[str, Any], name: str) -> Result:
    area = str(case.get("area", ""))
    check = checker(area)
    if check is None:
        return Result(name, area, False, [f"no runner for area {area!r} yet (issue 9)"])
    try:
        differences = check(case)
    except Exception as exc:  # a runner bug is a failed case, reported with the rest
        differences = [f"the runner raised {type(exc).__name__}: {exc}"]
    return Result(str(case.get("name", name)), area, True, differences)
