"""Test-suite setup shared by every test directory."""

from __future__ import annotations

import pytest
from pytest_asyncio import is_async_test

# Real NATS and Valkey for the session, each test isolated by a prefix: lahar_infra, nats_url,
# redis_url, lahar_prefix, redis_client, nats_client, jetstream.  A real control plane (skipped
# without Go): kube_binaries, kube_control_plane.
pytest_plugins = ["lahar.infra.pytest_plugin", "lahar.kube.pytest_plugin"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # pyproject puts async *fixtures* in the session loop, but each async *test* would get a loop
    # of its own, and clients made by a fixture cannot be used from another loop.  Run every async
    # test in the session loop too (pytest-asyncio's documented recipe).
    session_loop = pytest.mark.asyncio(loop_scope="session")
    for item in items:
        if is_async_test(item):
            item.add_marker(session_loop, append=False)
