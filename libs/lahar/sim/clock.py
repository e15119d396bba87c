"""Timestamps in the API server's RFC 3339 form, second precision, UTC."""

from __future__ import annotations

import time

_cache: tuple[int, str] = (0, "")


def iso(at: float | None = None) -> str:
    """``2026-01-02T03:04:05Z`` for ``at`` (default: now); the current second is cached."""
    global _cache
    second = int(time.time() if at is None else at)
    if _cache[0] == second:
        return _cache[1]
    text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
    if at is None:
        _cache = (second, text)
    return text


def parse_iso(text: str) -> float:
    """Seconds since the epoch for an RFC 3339 timestamp (``Z`` or offset; fractions allowed)."""
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
