"""Volcano conformance cases (copied from the shared corpus) run as part of ``make test``.

Every case must pass: enqueue, allocate, backfill, preempt and reclaim with all their plugins.
"""

from __future__ import annotations

import copy
import filecmp
import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from lahar_scheduler.conformance import run_case

HERE = Path(__file__).parent
CASES = HERE / "cases"
REPO = HERE.parents[1]
# The shared corpus this copy was taken from, next to the repository in the lead's workspace.
SHARED = (REPO / ".." / "shared" / "conformance" / "cases").resolve()


# The C loader when PyYAML has it: the pure-Python one takes seconds over the whole corpus.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _parsed(path: Path) -> dict[str, Any]:
    doc = yaml.load(path.read_text(), Loader=_Loader)
    assert isinstance(doc, dict), path
    return doc


def _load(path: Path) -> dict[str, Any]:
    """A private copy of the parsed case, so no test can alter what another one reads."""
    return copy.deepcopy(_parsed(path))


# Cases of issues still open: expected to fail until that issue lands (strict, so a case that starts
# passing is noticed and its mark removed).
_OPEN_ISSUES: dict[str, str] = {}


def _params() -> list[Any]:
    out = []
    for path in sorted(CASES.glob("*.yaml")):
        marks = [
            pytest.mark.xfail(reason=reason, strict=True)
            for prefix, reason in _OPEN_ISSUES.items()
            if path.stem.startswith(prefix)
        ]
        out.append(pytest.param(path, id=path.stem, marks=marks))
    return out


@pytest.mark.parametrize("path", _params())
def test_case(path: Path) -> None:
    result = run_case(_load(path))
    assert result.passed, f"{result.name} differs from Volcano:\n  " + "\n  ".join(result.differences)


def test_every_case_is_well_formed() -> None:
    """Each copied file is a scheduler case named after its file, with its source line kept."""
    paths = sorted(CASES.glob("*.yaml"))
    assert len(paths) >= 70
    for path in paths:
        doc = _load(path)
        assert doc["name"] == path.stem
        assert str(doc["source"]).startswith("volcano "), path
        assert {"schedulerConf", "objects", "expect"} <= doc.keys(), path


def test_index_lists_every_case() -> None:
    index = (CASES / "INDEX.md").read_text()
    for path in sorted(CASES.glob("*.yaml")):
        assert f"({path.name})" in index, f"{path.name} missing from INDEX.md"


def test_corpus_covers_every_action() -> None:
    """The corpus is not vacuous: it exercises each action the scheduler offers."""
    actions: set[str] = set()
    for path in sorted(CASES.glob("*.yaml")):
        conf = yaml.load(_load(path)["schedulerConf"], Loader=_Loader) or {}
        actions |= {a.strip() for a in str(conf.get("actions", "")).split(",") if a.strip()}
    assert {"enqueue", "allocate", "backfill", "preempt", "reclaim"} <= actions


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared corpus not present at {SHARED}")
def test_copy_matches_shared_corpus() -> None:
    """The copy is byte-for-byte the shared corpus (no file added, dropped or edited)."""
    ours = sorted(p.name for p in CASES.iterdir() if p.is_file())
    theirs = sorted(p.name for p in SHARED.iterdir() if p.is_file())
    assert ours == theirs
    _match, mismatch, errors = filecmp.cmpfiles(CASES, SHARED, ours, shallow=False)
    assert not mismatch and not errors, f"differ: {mismatch}, unreadable: {errors}"
