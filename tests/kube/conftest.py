"""The real-control-plane tier: kube-apiserver, etcd, kube-controller-manager and KWOK.

Runs wherever the Go toolchain is present (the binaries are built once into the user's cache);
elsewhere every test here is skipped with one line saying why.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lahar.kube import build
from lahar.kube.control_plane import ControlPlane
from lahar.sim.nodes import parse_spec

# The first run builds the binaries (several minutes on a busy machine); later runs start in seconds.
BUILD_TIMEOUT = 3600
NODES = "3:cpu=8,memory=32Gi,pods=110"
NO_GO = "real control plane tier skipped: the Go toolchain is not installed (go 1.24+ builds it once)"
_skipped: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.timeout(BUILD_TIMEOUT))


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    if shutil.which("go") is None and not build.cached():
        _skipped.append(NO_GO)
        pytest.skip(NO_GO)
    bins = build.ensure(lambda line: print(line, file=sys.stderr, flush=True))
    state = tmp_path_factory.mktemp("kube")
    with ControlPlane(state, [parse_spec(NODES)], bins, lambda line: None) as plane:
        yield plane


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # One line, whatever the verbosity, rather than one "s" per test.
    if _skipped:
        terminalreporter.write_line(_skipped[0])
