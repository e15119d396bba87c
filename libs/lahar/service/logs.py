"""Structured logging: JSON lines for machines, one readable line for people.

``configure_logging("binder", "info")`` sends every log record to stderr: as one JSON object per
line when stderr is not a terminal (a container, a file, a pipe), as text when it is.  JSON keys:

* ``ts``: ISO 8601 UTC with milliseconds (``2026-11-29T15:26:04.663Z``), ``level`` (lowercase),
  ``service``, ``logger``, ``msg`` (the formatted message);
* ``trace_id`` / ``span_id`` when a span is current, so a line can be found from its trace;
* ``exc`` (the formatted traceback) when the record carries an exception;
* every ``extra={...}`` key as given (values that are not JSON become their ``str``).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, TextIO

import msgspec
from opentelemetry import trace
from opentelemetry.trace import format_span_id, format_trace_id

__all__ = ["HumanFormatter", "JsonFormatter", "configure_logging"]

# The attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
_encoder = msgspec.json.Encoder(enc_hook=str)


class _LaharHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler ``configure_logging`` installed, so calling it again replaces it."""


def configure_logging(
    service: str, level: str | int = "info", *, stream: TextIO | None = None, json: bool | None = None
) -> None:
    """Route the root logger to ``stream`` (default stderr) at ``level``; ``json`` defaults to
    "stream is not a terminal".  Calling it again replaces the previous configuration."""
    out = sys.stderr if stream is None else stream
    as_json = not _isatty(out) if json is None else json
    handler = _LaharHandler(out)
    handler.setFormatter(JsonFormatter(service) if as_json else HumanFormatter(service))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _LaharHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _iso_utc(record.created),
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update(_trace_ids())
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = record.stack_info
        line.update(_extras(record))
        return _encoder.encode(line).decode()


class HumanFormatter(logging.Formatter):
    """``15:26:04.663 INFO    binder lahar.binder: bound pod=ns/p node=n1``"""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        clock = time.strftime("%H:%M:%S", time.localtime(record.created)) + f".{int(record.msecs):03d}"
        fields = " ".join(f"{k}={v}" for k, v in _extras(record).items())
        text = f"{clock} {record.levelname:<7} {self.service} {record.name}: {record.getMessage()}"
        text = f"{text} {fields}" if fields else text
        if record.exc_info:
            text = f"{text}\n{self.formatException(record.exc_info)}"
        if record.stack_info:
            text = f"{text}\n{record.stack_info}"
        return text


def _iso_utc(created: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z"


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}


def _trace_ids() -> dict[str, str]:
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return {}
    return {"trace_id": format_trace_id(ctx.trace_id), "span_id": format_span_id(ctx.span_id)}


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
