"""Times and durations as Kubernetes and Go spell them (pure).

Object times are RFC 3339 strings in UTC (``2025-03-11T10:00:00Z``); durations that Volcano logs
or tests print use Go's ``time.Duration`` text (``3h59m0.1s``).  Python's ``datetime`` reads the
first but writes ``+00:00``, and knows nothing of the second, hence these few helpers.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_GO_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}
_GO_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_time(text: str) -> datetime:
    """An RFC 3339 time (``Z`` or an offset; fractions of a second allowed), aware."""
    value = datetime.fromisoformat(text.replace("z", "Z"))
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def format_time(value: datetime) -> str:
    """RFC 3339 with ``Z`` for UTC and whole seconds, as metav1.Time serializes."""
    value = value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return value.replace(tzinfo=None, microsecond=0).isoformat() + "Z"


def format_zoned(value: datetime) -> str:
    """RFC 3339 in the time's own zone (Go's ``time.RFC3339``): ``Z`` for UTC, else the offset."""
    offset = value.utcoffset()
    if offset is None or offset == timedelta(0):
        return format_time(value)
    return value.isoformat(timespec="seconds")


def parse_go_duration(text: str) -> timedelta:
    """Go's ``time.ParseDuration``: ``1h30m``, ``90s``, ``1.5h``, ``300ms``, ``-2m``, ``0``."""
    body = text.strip()
    sign = -1 if body.startswith("-") else 1
    body = body.lstrip("+-")
    if body == "0":
        return timedelta(0)
    nanos, pos = 0.0, 0
    for match in _GO_PART.finditer(body):
        if match.start() != pos or match.group(1) in ("", "."):
            break
        nanos += float(match.group(1)) * _GO_UNITS[match.group(2)]
        pos = match.end()
    if not body or pos != len(body):
        raise ValueError(f"time: invalid duration {text!r}")
    return timedelta(microseconds=sign * nanos / 1000)


def format_go_duration(value: timedelta) -> str:
    """Go's ``time.Duration.String()`` (microsecond precision): ``3h59m0.1s``, ``0s``, ``1.5ms``."""
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    if micros == 0:
        return "0s"
    sign, micros = ("-", -micros) if micros < 0 else ("", micros)
    if micros < 1_000_000:  # below a second Go picks the largest unit that keeps an integer part
        unit, size = ("ms", 1000) if micros >= 1000 else ("µs", 1)
        return sign + _decimal(micros, size) + unit
    hours, rest = divmod(micros, 3600 * 1_000_000)
    minutes, rest = divmod(rest, 60 * 1_000_000)
    text = _decimal(rest, 1_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return sign + text


def _decimal(amount: int, size: int) -> str:
    whole, frac = divmod(amount, size)
    if not frac:
        return str(whole)
    digits = str(frac).rjust(len(str(size)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
