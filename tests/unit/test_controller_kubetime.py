"""Go durations and Kubernetes times as the controller writes and reads them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from lahar_controller.kubetime import format_go_duration, format_time, format_zoned, parse_go_duration, parse_time


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(microseconds=5), "5µs"),
        (timedelta(microseconds=1500), "1.5ms"),
        (timedelta(seconds=3), "3s"),
        (timedelta(minutes=1, milliseconds=100), "1m0.1s"),
        (timedelta(hours=3, minutes=59, milliseconds=100), "3h59m0.1s"),
        (timedelta(hours=24, milliseconds=100), "24h0m0.1s"),
        (timedelta(seconds=-90), "-1m30s"),
    ],
)
def test_go_duration_text(value: timedelta, text: str) -> None:
    assert format_go_duration(value) == text


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1h", timedelta(hours=1)),
        ("1h30m", timedelta(minutes=90)),
        ("1.5h", timedelta(minutes=90)),
        ("300ms", timedelta(milliseconds=300)),
        ("-2m", timedelta(minutes=-2)),
        ("0", timedelta(0)),
    ],
)
def test_parse_go_duration(text: str, value: timedelta) -> None:
    assert parse_go_duration(text) == value


@pytest.mark.parametrize("text", ["", "1", "h", "1x", "1h 2m", ".h"])
def test_parse_go_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)


def test_times() -> None:
    assert format_time(parse_time("0001-01-01T01:01:01Z")) == "0001-01-01T01:01:01Z"
    assert format_time(parse_time("2025-03-11T11:00:00.5+01:00")) == "2025-03-11T10:00:00Z"
    plus_one = datetime(2025, 3, 11, 11, tzinfo=timezone(timedelta(hours=1)))
    assert format_zoned(plus_one) == "2025-03-11T11:00:00+01:00"
    assert format_zoned(datetime(2025, 3, 11, 10, tzinfo=UTC)) == "2025-03-11T10:00:00Z"
