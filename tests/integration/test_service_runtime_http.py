"""The probe server over real HTTP, and serve() in-process."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from lahar.adapters.otel import load_traces
from lahar.service import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, Health, ProbeServer, ServiceContext, Settings, serve


@pytest.fixture
async def probes() -> AsyncIterator[ProbeServer]:
    async with ProbeServer(Health(), CollectorRegistry(), "127.0.0.1", 0) as server:
        yield server


@pytest.fixture
async def client(probes: ProbeServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{probes.port}", timeout=5) as c:
        yield c


async def test_healthz_answers(client: httpx.AsyncClient) -> None:
    reply = await client.get("/healthz")
    assert (reply.status_code, reply.text) == (200, "ok\n")


async def test_healthz_fails_once_a_loop_died(probes: ProbeServer, client: httpx.AsyncClient) -> None:
    probes.health.set_ready()
    probes.health.die("LoopDied('deltas')")
    reply = await client.get("/healthz")
    assert (reply.status_code, reply.text) == (500, "dead: LoopDied('deltas')\n")
    assert (await client.get("/readyz")).status_code == 503


async def test_readyz_follows_the_flag_the_checks_and_draining(probes: ProbeServer, client: httpx.AsyncClient) -> None:
    health = probes.health
    reply = await client.get("/readyz")
    assert (reply.status_code, reply.text) == (503, "not ready: starting\n")
    health.set_ready()
    assert (await client.get("/readyz")).status_code == 200

    nats_up, broken = {"ok": False}, {"raises": True}
    health.add_check("nats", lambda: nats_up["ok"])
    health.add_check("broken", lambda: 1 / 0 == 0 if broken["raises"] else True)  # raising counts as failing
    reply = await client.get("/readyz")
    assert (reply.status_code, reply.text) == (503, "not ready: nats, broken\n")
    with pytest.raises(ValueError, match="'nats': already registered"):
        health.add_check("nats", lambda: True)

    nats_up["ok"], broken["raises"] = True, False
    assert (await client.get("/readyz")).text == "ready\n"
    health.drain()
    reply = await client.get("/readyz")
    assert (reply.status_code, reply.text) == (503, "not ready: shutting down\n")


async def test_metrics_serves_the_services_registry(probes: ProbeServer, client: httpx.AsyncClient) -> None:
    binds = Counter("lahar_binds", "Binds done", ["outcome"], registry=probes.registry)
    binds.labels("bound").inc(3)
    reply = await client.get("/metrics")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'lahar_binds_total{outcome="bound"} 3.0' in reply.text

    reply = await client.get("/metrics", headers={"accept": "application/openmetrics-text; version=1.0.0"})
    assert reply.headers["content-type"].startswith("application/openmetrics-text")
    assert reply.text.endswith("# EOF\n")


async def test_other_paths_and_methods(client: httpx.AsyncClient) -> None:
    assert (await client.get("/nope")).status_code == 404
    reply = await client.post("/healthz", content=b"x" * 10)
    assert (reply.status_code, reply.headers["allow"]) == (405, "GET, HEAD")
    reply = await client.head("/healthz")
    assert (reply.status_code, reply.content, reply.headers["content-length"]) == (200, b"", "3")
    assert (await client.get("/healthz?verbose=1")).status_code == 200  # a query does not change the route


async def test_keep_alive_serves_several_requests_on_one_connection(probes: ProbeServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", probes.port)
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    writer.write(request * 2)
    await writer.drain()
    replies = b""
    while replies.count(b"ok\n") < 2:
        chunk = await asyncio.wait_for(reader.read(4096), 5)
        assert chunk, f"connection closed early: {replies!r}"
        replies += chunk
    assert replies.count(b"HTTP/1.1 200 ") == 2
    writer.close()


async def test_a_malformed_request_gets_400_and_a_closed_connection(probes: ProbeServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", probes.port)
    writer.write(b"NOT HTTP AT ALL\r\n\r\n")
    await writer.drain()
    reply = await asyncio.wait_for(reader.read(), 5)  # read to end: the server closes
    assert reply.startswith(b"HTTP/1.1 400 ")
    writer.close()


async def test_stop_closes_idle_keep_alive_connections() -> None:
    server = ProbeServer(Health(), CollectorRegistry(), "127.0.0.1", 0)
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    assert (await asyncio.wait_for(reader.readuntil(b"ok\n"), 5)).startswith(b"HTTP/1.1 200")
    await asyncio.wait_for(server.stop(), 5)
    assert await asyncio.wait_for(reader.read(), 5) == b""  # the server hung up
    writer.close()
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.port


# --- serve() in this process ------------------------------------------------------------------------


async def test_serve_runs_main_with_probes_metrics_and_tracing(tmp_path: Path) -> None:
    spans = tmp_path / "spans.jsonl"
    seen: dict[str, object] = {}

    async def main(ctx: ServiceContext[Settings]) -> None:
        with ctx.tracer.start_as_current_span("work"):
            ctx.health.set_ready(True)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ctx.http_port}") as c:
                seen["readyz"] = (await c.get("/readyz")).status_code
                seen["metrics"] = (await c.get("/metrics")).text

    settings = Settings(http_host="127.0.0.1", http_port=0, otel_exporter=f"jsonl:{spans}")
    assert await serve("tiny", main, settings, own_process=False) == EXIT_OK
    assert seen["readyz"] == 200
    assert 'lahar_service_info{service="tiny",version=' in str(seen["metrics"])
    assert "process_cpu_seconds_total" in str(seen["metrics"])
    assert [(s["service"], s["name"]) for s in load_traces(spans)] == [("tiny", "work")]  # flushed at the end


async def test_serve_reports_a_failing_main(caplog: pytest.LogCaptureFixture) -> None:
    async def main(ctx: ServiceContext[Settings]) -> None:
        raise RuntimeError("no API server")

    assert await serve("tiny", main, Settings(http_host="127.0.0.1", http_port=0), own_process=False) == EXIT_FAILURE
    assert "tiny failed" in caplog.text and "no API server" in caplog.text


async def test_serve_stops_on_a_busy_port_and_on_a_bad_span_file(tmp_path: Path) -> None:
    async def main(ctx: ServiceContext[Settings]) -> None:
        raise AssertionError("must not run")

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = Settings(http_host="127.0.0.1", http_port=taken.getsockname()[1])
        assert await serve("tiny", main, busy, own_process=False) == EXIT_FAILURE
    (tmp_path / "dir").mkdir()
    bad_file = Settings(http_host="127.0.0.1", http_port=0, otel_exporter=f"jsonl:{tmp_path / 'dir'}")
    assert await serve("tiny", main, bad_file, own_process=False) == EXIT_USAGE


async def test_setting_stopping_drains_readiness_and_ends_main() -> None:
    contexts: list[ServiceContext[Settings]] = []
    readiness_while_stopping: list[int] = []

    async def main(ctx: ServiceContext[Settings]) -> None:
        ctx.health.set_ready(True)
        contexts.append(ctx)
        await ctx.stopping.wait()
        async with httpx.AsyncClient() as c:
            readiness_while_stopping.append((await c.get(f"http://127.0.0.1:{ctx.http_port}/readyz")).status_code)

    service = asyncio.create_task(serve("tiny", main, Settings(http_host="127.0.0.1", http_port=0), own_process=False))
    while not contexts:
        assert not service.done(), service
        await asyncio.sleep(0.01)
    async with httpx.AsyncClient() as c:
        assert (await c.get(f"http://127.0.0.1:{contexts[0].http_port}/readyz")).status_code == 200
    contexts[0].stopping.set()
    assert await asyncio.wait_for(service, 5) == EXIT_OK
    assert readiness_while_stopping == [503]


async def test_cancelling_serve_cancels_main_and_lets_it_clean_up() -> None:
    started, cleaned = asyncio.Event(), asyncio.Event()

    async def main(ctx: ServiceContext[Settings]) -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned.set()

    service = asyncio.create_task(serve("tiny", main, Settings(http_host="127.0.0.1", http_port=0), own_process=False))
    await asyncio.wait_for(started.wait(), 5)
    service.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(service, 5)
    assert cleaned.is_set()
