"""Volcano's job-controller conformance corpus (copied from the shared corpus under ``controller/``).

The cases are data; ``lahar_controller.conformance`` runs each against Lahar's pure controller
functions, one runner per area.  A case whose area has no runner yet is an expected failure naming
issue 9; once a runner exists its cases must pass.
"""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent / "controller"
CASES = HERE / "cases"
SHARED = (Path(__file__).parents[2] / ".." / "shared" / "conformance" / "controller").resolve()


def _params() -> list[Any]:
    from lahar_controller.conformance import checker, pending, run_area

    params = []
    for p in sorted(CASES.glob("*.yaml")):
        marks = []
        area = run_area(p)
        if checker(area) is None:
            marks.append(pytest.mark.xfail(reason="issue 9: no runner for this area yet", strict=True))
        elif why := pending(area, p.stem):
            marks.append(pytest.mark.xfail(reason=f"issue 9: {why}", strict=True))
        params.append(pytest.param(p, id=p.stem, marks=marks))
    return params


def test_corpus_is_well_formed() -> None:
    """The corpus's own validator accepts every copied case."""
    out = subprocess.run([sys.executable, "validate.py"], cwd=HERE, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(list(CASES.glob("*.yaml"))) == 187


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared corpus not present at {SHARED}")
def test_copy_matches_shared_corpus() -> None:
    ours = sorted(p.relative_to(HERE).as_posix() for p in HERE.rglob("*") if p.is_file())
    theirs = sorted(p.relative_to(SHARED).as_posix() for p in SHARED.rglob("*") if p.is_file())
    assert ours == theirs
    _match, mismatch, errors = filecmp.cmpfiles(HERE, SHARED, ours, shallow=False)
    assert not mismatch and not errors, f"differ: {mismatch}, unreadable: {errors}"


@pytest.mark.parametrize("path", _params())
def test_case(path: Path) -> None:
    from lahar_controller.conformance import run_case

    result = run_case(path)
    assert result.passed, "\n".join(result.differences)


def test_lahar_conformance_runs_the_controller_corpus() -> None:
    """``lahar conformance`` runs controller cases like scheduler and admission ones."""
    out = subprocess.run(
        [sys.executable, "-m", "lahar", "conformance", str(CASES)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "187 passed, 0 failed"
