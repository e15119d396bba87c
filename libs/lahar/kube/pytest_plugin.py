"""pytest fixtures for the real-control-plane tier: ``kube_binaries`` (built once into the user's
cache) and ``kube_control_plane`` (one etcd + kube-apiserver + kube-controller-manager + KWOK for
the whole session, with the Ready KWOK nodes of ``SESSION_NODES`` and Volcano's CRDs;
``.kubeconfig`` is its path).

Enabled by ``pytest_plugins`` in the root ``conftest.py``.  Where the Go toolchain is absent (and
nothing is cached) the tests that use them are skipped, and the run ends with one line saying why.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator

import pytest

from lahar.kube import build
from lahar.kube.control_plane import ControlPlane
from lahar.sim.nodes import parse_spec

# The first run builds the binaries (over ten minutes on a busy 2-core machine); later runs start
# the control plane in seconds.  The build happens in the setup of the first test that needs it.
BUILD_TIMEOUT = 3600
# The shapes of the integration tests' session emulator too (tests/integration/conftest.py), so a
# test parametrised over both backends sees the same nodes on each.
SESSION_NODES = (
    "4:cpu=8,memory=32Gi,pods=110,label.zone=a",
    "2:cpu=16,memory=64Gi,pods=110,nvidia.com/gpu=4,label.zone=b,taint.dedicated=gpu:NoSchedule,name=gpu",
)
NO_GO = "real control plane tier skipped: the Go toolchain is not installed (go 1.24+ builds it once)"
_FIXTURES = {"kube_binaries", "kube_control_plane"}
_skipped: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.timeout(BUILD_TIMEOUT))


@pytest.fixture(scope="session")
def kube_binaries() -> build.Binaries:
    if shutil.which("go") is None and not build.cached():
        _skipped.append(NO_GO)
        pytest.skip(NO_GO)
    return build.ensure(lambda line: print(line, file=sys.stderr, flush=True), jobs=_build_jobs())


def _build_jobs() -> int:
    """Packages compiled at once by the first build: ``LAHAR_KUBE_BUILD_JOBS``, else every core on
    CI (the tests wait for the build, nothing else runs) and 1 elsewhere (a shared laptop)."""
    raw = os.environ.get("LAHAR_KUBE_BUILD_JOBS", "")
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return (os.cpu_count() or 1) if os.environ.get("CI") else 1


@pytest.fixture(scope="session")
def kube_control_plane(
    kube_binaries: build.Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    state = tmp_path_factory.mktemp("kube")
    specs = [parse_spec(s) for s in SESSION_NODES]
    # Audited: the integration tests fail on any request of a service that RBAC refused.
    with ControlPlane(state, specs, kube_binaries, lambda line: None, audit=True) as plane:
        yield plane


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # One line, whatever the verbosity, rather than one "s" per test.
    if _skipped:
        terminalreporter.write_line(_skipped[0])
