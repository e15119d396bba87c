"""Tracing for the services: a tracer provider per service, W3C trace context in NATS headers,
and a JSON-lines span file that tests (and people) can read back.

    provider = setup_tracing("scheduler")               # exporter from $LAHAR_OTEL_EXPORTER
    tracer = provider.get_tracer("lahar.scheduler")
    with tracer.start_as_current_span("session", links=[link_from_headers(m.headers)]):
        await js.publish(subject, data, headers=inject_headers())
    # consumer side
    with tracer.start_as_current_span("bind", context=extract_context(msg.headers)): ...
    provider.shutdown()                                   # flushes the exporter

The provider is returned, never only installed globally: OpenTelemetry lets a process set the
global provider once, so tests and embedded services pass the provider (or a tracer) around.

The exporter setting ``LAHAR_OTEL_EXPORTER`` (the ``exporter`` argument wins over it):

* ``none`` (default): spans are made, so trace context still propagates, but nothing is exported;
* ``console``: the SDK's console exporter, one JSON object per span on stdout;
* ``otlp``: OTLP over HTTP/protobuf, configured by the standard ``OTEL_EXPORTER_OTLP_*`` variables;
* ``jsonl:PATH``: one line per finished span appended to PATH (parent folders are created).

JSON-lines format, one object per line with exactly these keys, in this order::

    {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",   32 lowercase hex chars, as OpenTelemetry prints it
     "span_id": "00f067aa0ba902b7",                     16 lowercase hex chars
     "parent_span_id": "53995c3f42cd8ad8" | null,       null for a root span (the parent is in trace_id)
     "name": "bind", "service": "binder",               service is the resource's service.name
     "attributes": {"pod": "ns/p", ...},                attribute values: string, bool, number or array
     "links": [{"trace_id": "...", "span_id": "..."}],
     "start": 1732890000123456789, "end": ...}          unix time in integer nanoseconds (exact, sortable)

Several processes (cache, scheduler, binder) may append to one file.  Each export writes its whole
batch under an exclusive ``flock`` on an ``O_APPEND`` descriptor: ``O_APPEND`` puts every write at
the current end of file, and the lock keeps a batch contiguous even when the kernel splits a large
write or a signal interrupts it (``PIPE_BUF`` atomicity is a pipe guarantee, not a file one).
``load_traces`` takes the shared lock, so it never sees half a batch.  ``flock`` is advisory and
local: the file must be on a local file system, which is where tests and demos keep it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sys
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec
from opentelemetry import trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Link, format_span_id, format_trace_id
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes

__all__ = [
    "EXPORTER_ENV",
    "ExporterSetting",
    "JsonLinesSpanExporter",
    "TracingSettingError",
    "exporter_problem",
    "extract_context",
    "inject_headers",
    "link_from_headers",
    "load_traces",
    "parse_exporter",
    "setup_tracing",
    "trace_path",
]

EXPORTER_ENV = "LAHAR_OTEL_EXPORTER"
_EXPORTER_KINDS = ("otlp", "console", "none", "jsonl")
_USAGE = "use otlp, console, none or jsonl:PATH (e.g. jsonl:/tmp/spans.jsonl)"

log = logging.getLogger(__name__)


# --- the exporter setting ---------------------------------------------------------------------


class TracingSettingError(ValueError):
    """The exporter setting is invalid; the message names the setting and the accepted values."""


class ExporterSetting(msgspec.Struct, frozen=True):
    kind: Literal["otlp", "console", "none", "jsonl"]
    path: str | None = None  # only for jsonl


def exporter_problem(value: str) -> str | None:
    """Why ``value`` is not a valid exporter setting, or None when it is (for settings checks)."""
    kind, sep, path = value.strip().partition(":")
    if kind not in _EXPORTER_KINDS:
        return f"{value!r} is not a known exporter; {_USAGE}"
    if kind == "jsonl" and not path.strip():
        return f"{value!r} names no file; {_USAGE}"
    if kind != "jsonl" and sep:
        return f"{value!r}: only jsonl takes a path; {_USAGE}"
    return None


def parse_exporter(value: str, source: str = EXPORTER_ENV) -> ExporterSetting:
    """Parse ``otlp|console|none|jsonl:PATH``; raises TracingSettingError naming ``source``."""
    problem = exporter_problem(value)
    if problem:
        raise TracingSettingError(f"{source}: {problem}")
    kind, _, path = value.strip().partition(":")
    return ExporterSetting(kind=kind, path=path.strip() or None)  # type: ignore[arg-type]


# --- the provider -----------------------------------------------------------------------------


def setup_tracing(
    service_name: str,
    exporter: str | None = None,
    *,
    batch: bool = True,
    set_global: bool = False,
    resource_attributes: Mapping[str, str] | None = None,
) -> TracerProvider:
    """A tracer provider for ``service_name`` exporting as ``exporter`` (else ``$LAHAR_OTEL_EXPORTER``,
    else ``none``).

    ``batch=False`` exports each span as it ends (SimpleSpanProcessor), for tests that read the
    file straight after.  ``set_global`` also installs the provider as the process's global one
    if none is installed yet (a service's own process, never a test).  Call ``shutdown()`` to flush;
    the SDK also does it at interpreter exit.
    """
    if not service_name.strip():
        raise ValueError("service_name: must not be empty")
    source = f"exporter argument (instead of {EXPORTER_ENV})" if exporter is not None else EXPORTER_ENV
    raw = exporter if exporter is not None else os.environ.get(EXPORTER_ENV, "").strip() or "none"
    setting = parse_exporter(raw, source)
    resource = Resource.create({**(resource_attributes or {}), SERVICE_NAME: service_name})
    provider = TracerProvider(resource=resource)
    span_exporter = _make_exporter(setting, source)
    if span_exporter is not None:
        processor: SpanProcessor = BatchSpanProcessor(span_exporter) if batch else SimpleSpanProcessor(span_exporter)
        provider.add_span_processor(processor)
    if set_global and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)  # the API allows this once per process
    return provider


def _make_exporter(setting: ExporterSetting, source: str) -> SpanExporter | None:
    if setting.kind == "none":
        return None
    if setting.kind == "console":
        return ConsoleSpanExporter(out=sys.stdout)  # today's stdout, not the one at import time
    if setting.kind == "otlp":
        # Imported here: it pulls in protobuf and requests, which most runs never need.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    assert setting.path is not None
    try:
        return JsonLinesSpanExporter(setting.path)
    except OSError as err:
        raise TracingSettingError(f"{source}: cannot open {setting.path!r} for appending: {err.strerror}") from err


# --- the JSON-lines exporter ------------------------------------------------------------------


class _LinkLine(msgspec.Struct):
    trace_id: str
    span_id: str


class _SpanLine(msgspec.Struct, forbid_unknown_fields=True):
    # The field order is the key order of a line; see the module docstring.
    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    service: str
    attributes: dict[str, Any]
    links: list[_LinkLine]
    start: int
    end: int


_line_encoder = msgspec.json.Encoder()
_line_decoder = msgspec.json.Decoder(_SpanLine)


class JsonLinesSpanExporter(SpanExporter):
    """Appends one JSON line per span to ``path``; safe with other processes appending too."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        # Opened now, so a bad path stops the service at start-up rather than at the first span.
        self._fd: int | None = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._fd is None:
            return SpanExportResult.FAILURE
        payload = _line_encoder.encode_lines([_span_line(span) for span in spans])
        try:
            _append_locked(self._fd, payload)
        except OSError as err:
            log.warning("could not append %d spans to %s: %s", len(spans), self._path, err)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every export is written through; nothing is buffered here

    def shutdown(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _append_locked(fd: int, payload: bytes) -> None:
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        view = memoryview(payload)
        while view:  # a regular file may take less than asked (full disk, signal): write the rest
            view = view[os.write(fd, view) :]
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _span_line(span: ReadableSpan) -> _SpanLine:
    ctx = span.get_span_context()
    assert ctx is not None  # the SDK's finished spans always have one
    return _SpanLine(
        trace_id=format_trace_id(ctx.trace_id),
        span_id=format_span_id(ctx.span_id),
        parent_span_id=format_span_id(span.parent.span_id) if span.parent is not None else None,
        name=span.name,
        service=str(span.resource.attributes.get(SERVICE_NAME, "")),
        attributes=dict(span.attributes or {}),
        links=[
            _LinkLine(trace_id=format_trace_id(link.context.trace_id), span_id=format_span_id(link.context.span_id))
            for link in span.links
        ],
        start=span.start_time or 0,
        end=span.end_time or 0,
    )


# --- reading a span file back -----------------------------------------------------------------


def load_traces(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every span in a JSON-lines file, in file order; raises ValueError naming ``path:line`` for a
    line that is not a span in the format above."""
    with open(path, "rb") as file:
        fcntl.flock(file.fileno(), fcntl.LOCK_SH)  # wait for a writer to finish its batch
        try:
            data = file.read()
        finally:
            fcntl.flock(file.fileno(), fcntl.LOCK_UN)
    spans = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            spans.append(msgspec.to_builtins(_line_decoder.decode(line)))
        except msgspec.DecodeError as err:
            raise ValueError(f"{path}:{number}: not a span line: {err}") from err
    return spans


def trace_path(spans: Iterable[Mapping[str, Any]], span_id: str) -> list[Mapping[str, Any]]:
    """The spans that led to ``span_id``: first its parent chain up to the root, then, for each span
    on that chain in order, the spans it links to with their own chains, and so on (breadth-first
    over links).  Each span appears once; parents or links absent from ``spans`` are skipped.

    So for a bind: ``[bind, allocate job, session, <the deltas the session linked to>...]``.
    Raises KeyError when ``span_id`` is not among ``spans``.
    """
    by_id = {(s["trace_id"], s["span_id"]): s for s in spans}
    starts = [key for key in by_id if key[1] == span_id]
    if len(starts) != 1:
        raise KeyError(f"span {span_id}: {'not found' if not starts else 'found in several traces'}")
    path: list[Mapping[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    todo = deque(starts)
    while todo:
        key: tuple[str, str] | None = todo.popleft()
        while key is not None and key in by_id and key not in seen:  # up the parent chain
            seen.add(key)
            span = by_id[key]
            path.append(span)
            todo.extend((link["trace_id"], link["span_id"]) for link in span["links"])
            parent = span["parent_span_id"]
            key = (span["trace_id"], parent) if parent else None
    return path


# --- W3C trace context in NATS headers ----------------------------------------------------------

# Trace context and baggage, the W3C pair, whatever global propagator the process configured:
# every Lahar service must read what every other one writes.
_propagator = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])


def inject_headers(ctx: Context | None = None) -> dict[str, str]:
    """Headers carrying ``ctx`` (default: the current context), e.g. ``{"traceparent": "00-…-01"}``;
    merge them into the message's headers.  Empty when there is no valid span."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=ctx)
    return carrier


def extract_context(headers: Mapping[str, Any] | None) -> Context:
    """The context that ``headers`` carry, to use as a span's parent.  Missing or malformed headers
    give an empty context (the span becomes a root): a bad producer must not break a consumer.
    The current context is never used as the base, so a consumer's span never adopts an
    unrelated ambient parent."""
    carrier = _carrier(headers)
    if not carrier:
        return Context()
    try:
        return _propagator.extract(carrier, context=Context())
    except Exception:  # the propagators are lenient already; this is the never-raise promise
        log.debug("ignoring unreadable trace headers %r", carrier, exc_info=True)
        return Context()


def link_from_headers(headers: Mapping[str, Any] | None, attributes: Attributes = None) -> Link | None:
    """A Link to the span that ``headers`` carry, for a span that consumes many messages at once
    (a scheduling session, a batch of deltas); None when they carry no valid span context."""
    span_context = trace.get_current_span(extract_context(headers)).get_span_context()
    return Link(span_context, attributes) if span_context.is_valid else None


def _carrier(headers: Mapping[str, Any] | None) -> dict[str, str]:
    # NATS headers are case-sensitive and some clients canonicalise names ("Traceparent"); the
    # W3C propagators look up lowercase names.  Non-text values are dropped, not fatal.
    if not isinstance(headers, Mapping):
        return {}
    return {k.lower(): v for k, v in headers.items() if isinstance(k, str) and isinstance(v, str)}
