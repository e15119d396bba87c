"""Fixtures for the integration tests."""

from __future__ import annotations

import pytest

from lahar.infra import NATS_URL_ENV, REDIS_URL_ENV


@pytest.fixture
def no_url_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests that start servers of their own, whatever servers the session was pointed at."""
    monkeypatch.delenv(NATS_URL_ENV, raising=False)
    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
