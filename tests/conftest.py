"""Test-suite setup shared by every test directory."""

from __future__ import annotations

import ast
import gc
from typing import Any

import pytest
from pytest_asyncio import is_async_test


def _parse_uncollected(*args: Any, **kwargs: Any) -> Any:
    """``ast.parse`` with the collector held back.  A collection during a parse may finalise an
    earlier test's abandoned asyncio task, whose logged traceback CPython 3.11 underlines by
    parsing with ``ast`` as well; the nested conversion resets the converter's shared depth and
    the outer parse fails (SystemError: AST constructor recursion depth mismatch), as three full
    runs showed in tests that parse source files."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _ast_parse(*args, **kwargs)
    finally:
        if enabled:
            gc.enable()


_ast_parse = ast.parse
ast.parse = _parse_uncollected


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
