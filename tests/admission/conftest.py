"""Fixtures for the admission tests: case files (copied into the repo) and a live HTTPS server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lahar_admission.conformance import settings as case_settings
from lahar_admission.live import LiveServer, ProxyView, start_live
from lahar_admission.server import AppConfig


@pytest.fixture(scope="session")
def proxy_view() -> ProxyView:
    return ProxyView()


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory, proxy_view: ProxyView) -> Iterator[LiveServer]:
    server = start_live(AppConfig(rules=case_settings(), view=proxy_view), tmp_path_factory.mktemp("certs"))
    yield server
    server.stop()
