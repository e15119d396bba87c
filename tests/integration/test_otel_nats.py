"""Trace context through real NATS message headers (core and JetStream)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lahar.adapters.otel import extract_context, inject_headers, link_from_headers, setup_tracing


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    provider = setup_tracing("test", "none")
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield provider, memory
    provider.shutdown()


async def test_child_span_of_a_message_has_the_producer_as_parent(
    nats_client: NatsClient, lahar_prefix: str, traced: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = traced
    tracer = provider.get_tracer("test")
    subject = f"{lahar_prefix}.decisions"
    sub = await nats_client.subscribe(subject)

    with tracer.start_as_current_span("allocate job", kind=trace.SpanKind.PRODUCER) as producer:
        await nats_client.publish(subject, b"bind", headers={"Nats-Msg-Id": "p@1", **inject_headers()})
    msg = await sub.next_msg(timeout=5)
    with tracer.start_as_current_span("bind", context=extract_context(msg.headers), kind=trace.SpanKind.CONSUMER):
        pass

    bind = next(s for s in memory.get_finished_spans() if s.name == "bind")
    expected = producer.get_span_context()
    assert msg.headers is not None and msg.headers["Nats-Msg-Id"] == "p@1"
    assert bind.parent is not None and bind.parent.span_id == expected.span_id
    assert bind.context is not None and bind.context.trace_id == expected.trace_id


async def test_batch_consumer_links_to_every_producer_through_jetstream(
    jetstream: JetStreamContext, lahar_prefix: str, traced: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, memory = traced
    tracer = provider.get_tracer("test")
    stream = f"{lahar_prefix}_CLUSTER"
    await jetstream.add_stream(name=stream, subjects=[f"{lahar_prefix}.delta.>"])
    producers = []
    for i in range(3):
        with tracer.start_as_current_span(f"delta {i}") as span:
            await jetstream.publish(f"{lahar_prefix}.delta.pod", b"{}", headers=inject_headers())
        producers.append(span.get_span_context())
    await jetstream.publish(f"{lahar_prefix}.delta.pod", b"{}")  # an untraced producer: no link, no error

    sub = await jetstream.pull_subscribe(f"{lahar_prefix}.delta.>", durable="scheduler", stream=stream)
    msgs = await sub.fetch(4, timeout=5)
    links = [link for m in msgs if (link := link_from_headers(m.headers, {"subject": m.subject}))]
    with tracer.start_as_current_span("session", links=links):
        await asyncio.gather(*(m.ack() for m in msgs))

    session = next(s for s in memory.get_finished_spans() if s.name == "session")
    assert session.parent is None  # a batch consumer is a root that links, not a child
    assert [(link.context.trace_id, link.context.span_id) for link in session.links] == [
        (p.trace_id, p.span_id) for p in producers
    ]
    assert all(link.attributes == {"subject": f"{lahar_prefix}.delta.pod"} for link in session.links)
