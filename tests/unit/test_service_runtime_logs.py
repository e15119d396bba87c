"""lahar.service.logs: JSON lines off a terminal, readable text on one."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from opentelemetry.trace import format_span_id, format_trace_id

from lahar.adapters.otel import setup_tracing
from lahar.service import configure_logging


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_json_line_has_the_keys_and_the_extras() -> None:
    out = io.StringIO()  # not a terminal
    configure_logging("binder", "info", stream=out)
    log = logging.getLogger("lahar.binder")
    log.debug("hidden at info level")
    log.info("bound %s", "ns/p", extra={"pod": "ns/p", "node": "n1", "attempt": 2, "obj": object()})

    [line] = out.getvalue().splitlines()
    record = json.loads(line)
    assert list(record)[:5] == ["ts", "level", "service", "logger", "msg"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["ts"])
    assert (record["level"], record["service"], record["logger"], record["msg"]) == (
        "info",
        "binder",
        "lahar.binder",
        "bound ns/p",
    )
    assert (record["pod"], record["node"], record["attempt"]) == ("ns/p", "n1", 2)
    assert record["obj"].startswith("<object object")  # not JSON: its str
    assert "trace_id" not in record and "exc" not in record


def test_json_line_carries_the_current_span_and_the_exception() -> None:
    out = io.StringIO()
    configure_logging("scheduler", "debug", stream=out)
    provider = setup_tracing("scheduler", "none")
    with provider.get_tracer("t").start_as_current_span("session") as span:
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("lahar.scheduler").exception("session failed")
    provider.shutdown()

    record = json.loads(out.getvalue())
    ctx = span.get_span_context()
    assert (record["trace_id"], record["span_id"]) == (format_trace_id(ctx.trace_id), format_span_id(ctx.span_id))
    assert record["level"] == "error"
    assert "ValueError: boom" in record["exc"] and record["exc"].startswith("Traceback")


def test_human_lines_on_a_terminal() -> None:
    out = Terminal()
    configure_logging("cache", "warning", stream=out)
    logging.getLogger("lahar.cache").info("hidden")
    logging.getLogger("lahar.cache").warning("relisting %s", "pods", extra={"reason": "410"})
    text = out.getvalue()
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3} WARNING cache lahar.cache: relisting pods reason=410\n", text)


def test_configuring_again_replaces_the_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging("cache", "info", stream=first)
    configure_logging("cache", "info", stream=second, json=True)
    logging.getLogger("x").info("once")
    assert first.getvalue() == ""
    assert len(second.getvalue().splitlines()) == 1
