"""lahar.adapters.otel without servers: exporter setting, JSON-lines format, propagation helpers, trace_path."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_span_id, format_trace_id

from lahar.adapters.otel import (
    EXPORTER_ENV,
    TracingSettingError,
    extract_context,
    inject_headers,
    link_from_headers,
    load_traces,
    parse_exporter,
    setup_tracing,
    trace_path,
)

KEYS = ["trace_id", "span_id", "parent_span_id", "name", "service", "attributes", "links", "start", "end"]


@pytest.fixture(autouse=True)
def _no_exporter_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXPORTER_ENV, raising=False)


@pytest.fixture
def providers() -> Iterator[list[TracerProvider]]:
    """Providers a test makes, shut down (and so flushed) at its end even when it fails."""
    made: list[TracerProvider] = []
    yield made
    for provider in made:
        provider.shutdown()


def _ids(span: trace.Span) -> tuple[str, str]:
    ctx = span.get_span_context()
    return format_trace_id(ctx.trace_id), format_span_id(ctx.span_id)


def test_jsonl_line_has_exactly_the_documented_keys_and_values(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    provider = setup_tracing("cache", f"jsonl:{path}", batch=False)
    tracer = provider.get_tracer("test")
    with (
        tracer.start_as_current_span("root", attributes={"pod": "ns/p", "n": 3, "ok": True}) as root,
        tracer.start_as_current_span("child", attributes={"nodes": ["a", "b"]}) as child,
    ):
        pass
    provider.shutdown()

    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [list(line) for line in lines] == [KEYS, KEYS]  # exact keys, in the documented order
    child_line, root_line = lines  # a child ends first
    root_trace, root_id = _ids(root)
    assert root_line["trace_id"] == root_trace and re.fullmatch(r"[0-9a-f]{32}", root_trace)
    assert root_line["span_id"] == root_id and re.fullmatch(r"[0-9a-f]{16}", root_id)
    assert root_line["parent_span_id"] is None
    assert child_line["span_id"] == _ids(child)[1]
    assert child_line["parent_span_id"] == root_id and child_line["trace_id"] == root_trace
    assert (root_line["name"], root_line["service"]) == ("root", "cache")
    assert root_line["attributes"] == {"pod": "ns/p", "n": 3, "ok": True}
    assert child_line["attributes"] == {"nodes": ["a", "b"]}
    assert root_line["links"] == []
    assert isinstance(root_line["start"], int) and root_line["start"] <= child_line["start"]
    assert child_line["end"] <= root_line["end"]
    assert root_line["start"] > 1_600_000_000 * 10**9  # unix nanoseconds, not seconds


def test_links_are_recorded(tmp_path: Path, providers: list[TracerProvider]) -> None:
    path = tmp_path / "spans.jsonl"
    providers.append(provider := setup_tracing("scheduler", f"jsonl:{path}", batch=False))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("delta-1") as d1:
        h1 = inject_headers()
    with tracer.start_as_current_span("delta-2") as d2:
        h2 = inject_headers()
    links = [link for link in (link_from_headers(h1), link_from_headers(h2), link_from_headers({})) if link]
    with tracer.start_as_current_span("session", links=links):
        pass

    session = next(s for s in load_traces(path) if s["name"] == "session")
    assert session["links"] == [dict(zip(["trace_id", "span_id"], _ids(d), strict=True)) for d in (d1, d2)]


def test_batch_processor_writes_on_shutdown(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    provider = setup_tracing("binder", f"jsonl:{path}")  # batched: written later, by a thread
    with provider.get_tracer("test").start_as_current_span("bind"):
        pass
    provider.shutdown()
    assert [s["name"] for s in load_traces(path)] == ["bind"]


@pytest.mark.parametrize("setting", [None, "none"])
def test_exporter_none_creates_no_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str | None, providers: list[TracerProvider]
) -> None:
    monkeypatch.chdir(tmp_path)
    providers.append(provider := setup_tracing("cache", setting))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("test").start_as_current_span("s"):
        headers = inject_headers()
    provider.shutdown()
    assert [s.name for s in memory.get_finished_spans()] == ["s"]  # spans exist...
    assert headers["traceparent"].startswith("00-")  # ...and propagate...
    assert list(tmp_path.iterdir()) == []  # ...but nothing is written


def test_environment_chooses_the_exporter_and_the_argument_overrides_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, providers: list[TracerProvider]
) -> None:
    monkeypatch.setenv(EXPORTER_ENV, f"jsonl:{tmp_path / 'from-env.jsonl'}")
    providers.append(setup_tracing("cache"))
    providers.append(setup_tracing("cache", f"jsonl:{tmp_path / 'from-arg.jsonl'}"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["from-arg.jsonl", "from-env.jsonl"]
    monkeypatch.setenv(EXPORTER_ENV, "bogus")
    providers.append(setup_tracing("cache", "none"))  # the argument wins, so the bad env is not read


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("zipkin", "not a known exporter"),
        ("jsonl", "names no file"),
        ("jsonl:  ", "names no file"),
        ("console:/tmp/x", "only jsonl takes a path"),
        ("", "not a known exporter"),
    ],
)
def test_invalid_setting_is_a_clear_error_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, value: str, why: str
) -> None:
    with pytest.raises(TracingSettingError, match=f"^exporter argument \\(instead of {EXPORTER_ENV}\\): .*{why}"):
        setup_tracing("cache", value)
    if value.strip():  # an empty variable means "unset", so "none"
        monkeypatch.setenv(EXPORTER_ENV, value)
        with pytest.raises(TracingSettingError, match=f"^{EXPORTER_ENV}: .*{why}.*otlp, console, none or jsonl:PATH"):
            setup_tracing("cache")


def test_unwritable_jsonl_path_is_reported_at_setup(tmp_path: Path) -> None:
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(TracingSettingError, match=f"{EXPORTER_ENV}.*cannot open .*dir.jsonl"):
        setup_tracing("cache", f"jsonl:{tmp_path / 'dir.jsonl'}")


def test_parse_exporter_kinds() -> None:
    assert parse_exporter(" otlp ").kind == "otlp"
    assert (parse_exporter("jsonl:/a/b c.jsonl").kind, parse_exporter("jsonl:/a/b c.jsonl").path) == (
        "jsonl",
        "/a/b c.jsonl",
    )


def test_console_exporter_prints_spans(capsys: pytest.CaptureFixture[str]) -> None:
    provider = setup_tracing("admission", "console", batch=False)
    with provider.get_tracer("test").start_as_current_span("review"):
        pass
    provider.shutdown()
    assert '"name": "review"' in capsys.readouterr().out


def test_otlp_exporter_is_built_without_contacting_anyone() -> None:
    provider = setup_tracing("admission", "otlp")
    provider.shutdown()  # no span was made, so nothing is sent


def test_service_name_wins_over_otel_service_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "other")
    provider = setup_tracing("controller", f"jsonl:{tmp_path / 's.jsonl'}", batch=False)
    with provider.get_tracer("test").start_as_current_span("x"):
        pass
    provider.shutdown()
    assert load_traces(tmp_path / "s.jsonl")[0]["service"] == "controller"


def test_empty_service_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="service_name"):
        setup_tracing(" ", "none")


# --- propagation helpers, in one process --------------------------------------------------------


@pytest.fixture
def memory_tracer() -> Iterator[tuple[trace.Tracer, InMemorySpanExporter]]:
    provider = setup_tracing("test", "none")
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield provider.get_tracer("test"), memory
    provider.shutdown()


def test_inject_then_extract_gives_the_parent(memory_tracer: tuple[trace.Tracer, InMemorySpanExporter]) -> None:
    tracer, memory = memory_tracer
    with tracer.start_as_current_span("producer") as producer:
        headers = inject_headers()
    assert set(headers) == {"traceparent"}
    canonicalised = {"Traceparent": headers["traceparent"], "Nats-Msg-Id": "x"}  # another client's spelling
    for carrier in (headers, canonicalised):
        with tracer.start_as_current_span("consumer", context=extract_context(carrier)):
            pass
    consumers = [s for s in memory.get_finished_spans() if s.name == "consumer"]
    for span in consumers:
        assert span.parent is not None and span.parent.span_id == producer.get_span_context().span_id
        assert span.context is not None and span.context.trace_id == producer.get_span_context().trace_id


def test_inject_with_no_span_gives_no_headers() -> None:
    assert inject_headers() == {}


BAD_HEADERS: list[Any] = [
    None,
    {},
    {"traceparent": "garbage"},
    {"traceparent": "00-" + "0" * 32 + "-" + "0" * 16 + "-01"},  # all-zero ids are invalid
    {"traceparent": 5},
    {5: "x"},
    "not a mapping",
    [("traceparent", "x")],
]


@pytest.mark.parametrize("headers", BAD_HEADERS)
def test_bad_headers_give_a_root_span_and_no_link(
    headers: Any, memory_tracer: tuple[trace.Tracer, InMemorySpanExporter]
) -> None:
    tracer, memory = memory_tracer
    with (
        tracer.start_as_current_span("ambient"),  # must not be adopted as the parent
        tracer.start_as_current_span("consumer", context=extract_context(headers)),
    ):
        pass
    consumer = next(s for s in memory.get_finished_spans() if s.name == "consumer")
    assert consumer.parent is None
    assert link_from_headers(headers) is None


# --- load_traces and trace_path -----------------------------------------------------------------


def test_trace_path_follows_parents_then_links_across_services(tmp_path: Path, providers: list[TracerProvider]) -> None:
    path = tmp_path / "spans.jsonl"
    cache, scheduler, binder = (
        setup_tracing(name, f"jsonl:{path}", batch=False) for name in ("cache", "scheduler", "binder")
    )
    providers.extend([cache, scheduler, binder])
    with cache.get_tracer("c").start_as_current_span("delta", attributes={"pod": "ns/a"}):
        delta_a = inject_headers()
    with cache.get_tracer("c").start_as_current_span("delta", attributes={"pod": "ns/b"}):
        delta_b = inject_headers()
    with scheduler.get_tracer("s").start_as_current_span("unrelated"):
        pass
    links = [link for link in (link_from_headers(delta_a), link_from_headers(delta_b)) if link]
    tracer = scheduler.get_tracer("s")
    with tracer.start_as_current_span("session", links=links), tracer.start_as_current_span("allocate job-a"):
        decision = inject_headers()
    with binder.get_tracer("b").start_as_current_span("bind", context=extract_context(decision)) as bind:
        pass

    spans = load_traces(path)
    walked = trace_path(spans, _ids(bind)[1])
    assert [(s["service"], s["name"]) for s in walked] == [
        ("binder", "bind"),
        ("scheduler", "allocate job-a"),
        ("scheduler", "session"),
        ("cache", "delta"),
        ("cache", "delta"),
    ]
    assert [s["attributes"].get("pod") for s in walked[3:]] == ["ns/a", "ns/b"]
    with pytest.raises(KeyError, match="not found"):
        trace_path(spans, "0" * 16)


def test_trace_path_survives_cycles_and_missing_spans() -> None:
    def span(sid: str, parent: str | None, links: list[str]) -> dict[str, Any]:
        return {
            "trace_id": "t",
            "span_id": sid,
            "parent_span_id": parent,
            "links": [{"trace_id": "t", "span_id": x} for x in links],
        }

    spans = [span("a", "b", ["c", "gone"]), span("b", "missing", ["a"]), span("c", None, ["a", "b"])]
    assert [s["span_id"] for s in trace_path(spans, "a")] == ["a", "b", "c"]


def test_load_traces_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    provider = setup_tracing("cache", f"jsonl:{path}", batch=False)
    with provider.get_tracer("t").start_as_current_span("ok"):
        pass
    provider.shutdown()
    good = path.read_text()
    path.write_text(good + "\n" + good.replace('"name"', '"nom"'))
    with pytest.raises(ValueError, match=r"spans.jsonl:3: not a span line"):
        load_traces(path)
