"""Fixtures for the integration tests.

``no_url_settings``: for tests that start servers of their own.

The Kubernetes API emulator: ``sim`` is one emulator for the whole session (tests isolate
themselves with their own namespace, ``ns``); ``make_sim`` starts extra emulators with their
own settings.  Clients are the official ``kubernetes`` client, pointed at the emulator.

Both backends: ``cluster`` runs a test on the emulator and on a real control plane (``[sim]`` and
``[kube]``; see backends.py), with a client per service identity and a fresh namespace.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes import client

from lahar.infra import NATS_CA_ENV, NATS_URL_ENV, REDIS_URL_ENV
from lahar.kube import build
from lahar.kube.control_plane import ControlPlane
from lahar.kube.pytest_plugin import BUILD_TIMEOUT, SESSION_NODES
from lahar.sim import Emulator, SimConfig

from .backends import BACKENDS, Cluster, Identities, kube_identities, sim_identities


@pytest.fixture
def no_url_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests that start servers of their own, whatever servers the session was pointed at."""
    monkeypatch.delenv(NATS_URL_ENV, raising=False)
    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    monkeypatch.delenv(NATS_CA_ENV, raising=False)


@pytest.fixture(scope="session")
def sim() -> Iterator[Emulator]:
    emulator = Emulator(
        SimConfig(
            nodes=list(SESSION_NODES),  # the real control plane's session nodes too
            start_delay=0.05,
            bookmark_interval=0.3,
        )
    ).start()
    yield emulator
    emulator.stop()


@pytest.fixture
def make_sim() -> Iterator[Callable[..., Emulator]]:
    started: list[Emulator] = []

    def make(**config: Any) -> Emulator:
        config.setdefault("start_delay", 0.05)
        emulator = Emulator(SimConfig(**config)).start()
        started.append(emulator)
        return emulator

    yield make
    for emulator in started:
        emulator.stop()


@pytest.fixture
def api_client(sim: Emulator) -> Iterator[client.ApiClient]:
    api = sim.api_client()
    yield api
    api.close()


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def ns(core: client.CoreV1Api) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture(autouse=True)
def _clear_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "sim" in request.fixturenames:
        request.getfixturevalue("sim").faults.clear()


def pod_manifest(name: str, **extra: Any) -> dict[str, Any]:
    annotations = extra.pop("annotations", None)
    labels = extra.pop("labels", None)
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    spec = {
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        **extra,
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


@pytest.fixture
def pod() -> Callable[..., dict[str, Any]]:
    return pod_manifest


def poll(check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02, what: str = "condition") -> Any:
    """Call ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


@pytest.fixture
def wait_for() -> Callable[..., Any]:
    return poll


# --- both backends ----------------------------------------------------------------------------------


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The first test on the real control plane may have to build it (see lahar.kube.pytest_plugin).
    if build.cached():
        return
    for item in items:
        callspec = getattr(item, "callspec", None)
        # "kube" as the value of a backend parameter: the cluster fixture, a stack's, a scenario's
        if callspec is not None and any(isinstance(v, str) and v == "kube" for v in callspec.params.values()):
            item.add_marker(pytest.mark.timeout(BUILD_TIMEOUT))


@pytest.fixture(scope="session")
def sim_ids(sim: Emulator, tmp_path_factory: pytest.TempPathFactory) -> Identities:
    return sim_identities(sim, tmp_path_factory.mktemp("sim-ids"))


@pytest.fixture(scope="session")
def kube_ids(kube_control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Identities:
    """deploy/'s RBAC applied once, and a token per service (skipped, with the tier, without Go)."""
    return kube_identities(kube_control_plane, tmp_path_factory.mktemp("kube-ids"))


@pytest_asyncio.fixture(params=BACKENDS)
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    ids: Identities = request.getfixturevalue(f"{request.param}_ids")
    c = Cluster(request.param, ids)
    try:
        await c.start()
        yield c
        refused = c.new_denials()
        assert not refused, f"the API server refused a service (403: a permission deploy/ lacks): {refused[:5]}"
    finally:
        await c.close()
