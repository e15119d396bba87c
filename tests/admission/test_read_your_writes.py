"""The HTTPS service over the Redis mirror (real Valkey): read-your-writes after a snapshot miss,
and a mirror that is not ready answered as such, never as "not found"."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from lahar.wire import keys
from lahar_admission.conformance import settings as case_settings
from lahar_admission.live import LiveServer, start_live
from lahar_admission.mirror import MirrorView
from lahar_admission.server import AppConfig

JSON = {"Content-Type": "application/json"}


def queue(name: str) -> str:
    return json.dumps({"kind": "Queue", "metadata": {"name": name}, "spec": {"weight": 1}, "status": {"state": "Open"}})


def podgroup_review(queue_name: str) -> bytes:
    obj = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ns"},
        "spec": {"minMember": 1, "queue": queue_name},
    }
    request = {
        "uid": "u1",
        "operation": "CREATE",
        "resource": {"group": "scheduling.volcano.sh", "version": "v1beta1", "resource": "podgroups"},
        "namespace": "ns",
        "name": "pg",
        "object": obj,
    }
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()


Refresh = Callable[[], bool]


@pytest.fixture
def mirror_server(tmp_path: Path, redis_url: str, lahar_prefix: str) -> Iterator[tuple[LiveServer, Refresh]]:
    """The service as ``lahar admission`` runs it, except that the snapshot is refreshed only when
    the test says so (so a miss in it is certain)."""
    client = aioredis.from_url(redis_url)  # used only on the server's event loop
    view = MirrorView(client, lahar_prefix, refresh=3600.0, max_staleness=3600.0)
    server = start_live(
        AppConfig(
            rules=case_settings(),
            view=view,
            read_through=view.read_through,
            catch_up=view.catch_up,
            ready=lambda: (view.available, ""),
        ),
        tmp_path,
    )
    loop = server.server.servers[0].get_loop()

    def refresh() -> bool:
        return asyncio.run_coroutine_threadsafe(view.refresh_once(), loop).result(10)

    yield server, refresh
    asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(10)
    server.stop()


def answer(server: LiveServer, body: bytes) -> dict[str, Any]:
    with server.client() as c:
        reply = c.post("/podgroups/validate", content=body, headers=JSON)
    assert reply.status_code == 200, reply.text
    response: dict[str, Any] = reply.json()["response"]
    return response


async def seal(redis_client: Any, prefix: str) -> None:
    await redis_client.set(keys.stream_id_key(prefix), "stream-1")
    await redis_client.set(keys.seq_key(prefix), 1)


async def test_a_queue_created_just_before_is_found_by_reading_the_mirror(
    mirror_server: tuple[LiveServer, Refresh], redis_client: Any, lahar_prefix: str
) -> None:
    server, refresh = mirror_server
    await seal(redis_client, lahar_prefix)
    assert refresh()  # the snapshot: no queue "fresh"
    # The queue reaches the mirror after the snapshot was taken (one `kubectl apply` with both).
    await redis_client.hset(keys.objects_key(lahar_prefix, "queues"), "fresh", queue("fresh"))
    started = time.monotonic()
    response = await asyncio.to_thread(answer, server, podgroup_review("fresh"))
    assert response["allowed"] is True, response
    assert time.monotonic() - started < 1.0  # read at once, no wait for the next refresh


async def test_a_queue_that_arrives_while_the_review_waits_is_found(
    mirror_server: tuple[LiveServer, Refresh], redis_client: Any, lahar_prefix: str
) -> None:
    server, refresh = mirror_server
    await seal(redis_client, lahar_prefix)
    assert refresh()
    before = await _hmget_calls(redis_client)
    pending = asyncio.create_task(asyncio.to_thread(answer, server, podgroup_review("late")))
    deadline = time.monotonic() + 5
    while await _hmget_calls(redis_client) == before:  # the review has missed, and read, once
        assert time.monotonic() < deadline and not pending.done()
        await asyncio.sleep(0.01)
    await redis_client.hset(keys.objects_key(lahar_prefix, "queues"), "late", queue("late"))
    response = await pending
    assert response["allowed"] is True, response


async def test_a_queue_that_never_comes_is_denied_after_a_second(
    mirror_server: tuple[LiveServer, Refresh], redis_client: Any, lahar_prefix: str
) -> None:
    server, refresh = mirror_server
    await seal(redis_client, lahar_prefix)
    assert refresh()
    started = time.monotonic()
    response = await asyncio.to_thread(answer, server, podgroup_review("nowhere"))
    took = time.monotonic() - started
    assert response["allowed"] is False
    assert response["status"]["message"] == 'unable to find queue: queue.scheduling.volcano.sh "nowhere" not found'
    assert 0.9 <= took < 3.0


async def test_an_unidentified_mirror_answers_not_ready(
    mirror_server: tuple[LiveServer, Refresh], redis_client: Any, lahar_prefix: str
) -> None:
    server, refresh = mirror_server
    # Objects, but no stream identity: a mirror the cache is rebuilding (or one just flushed).
    await redis_client.hset(keys.objects_key(lahar_prefix, "queues"), "default", queue("default"))
    await redis_client.set(keys.seq_key(lahar_prefix), 7)
    assert refresh()
    response = await asyncio.to_thread(answer, server, podgroup_review("default"))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "the mirror is not ready: it names no stream" in message
    assert "--on-unavailable podgroups=deny" in message and "unable to find queue" not in message
    with server.client() as c:
        assert c.get("/readyz").status_code == 200  # it answers, and says why, per review
    # Sealed a moment ago, before any periodic refresh: the review reads the mirror again itself.
    await redis_client.set(keys.stream_id_key(lahar_prefix), "stream-1")
    assert (await asyncio.to_thread(answer, server, podgroup_review("default")))["allowed"] is True


async def _hmget_calls(redis_client: Any) -> int:
    stats = await redis_client.info("commandstats")
    return int(stats.get("cmdstat_hmget", {}).get("calls", 0))


def test_review_view_records_misses_and_adds_what_was_found() -> None:
    import msgspec

    from lahar_admission.readthrough import Found, ReviewView
    from lahar_admission.types import Queue
    from lahar_admission.view import InMemoryView

    def q(name: str, parent: str = "", state: str = "Open") -> Queue:
        raw = {"metadata": {"name": name}, "spec": {"parent": parent}, "status": {"state": state}}
        return msgspec.convert(raw, Queue)

    base = InMemoryView([q("root"), q("a", "root")])
    view = ReviewView(base)
    assert view.queue("b") is None and view.namespace("ns") is None and view.queue("a") is not None
    assert view.missed.queues == {"b"} and view.missed.namespaces == {"ns"}
    again = ReviewView(base, Found(queues={"b": q("b", "root"), "a": q("a", "root")}))
    assert again.queue("b") is not None and not again.missed
    assert sorted(x.metadata.name for x in again.children("root")) == ["a", "b"]
    assert sorted(x.metadata.name for x in again.queues()) == ["a", "b", "root"]
    # A queue without a state (the controller has not opened it yet) is waited for like a missing
    # one, but still answered: if it stays so, the rules deny as Volcano's do.
    fresh = ReviewView(InMemoryView([q("new", state="")]))
    assert fresh.queue("new") is not None and fresh.missed.queues == {"new"}
    opened = ReviewView(InMemoryView([q("new", state="")]), Found(queues={"new": q("new")}))
    assert opened.queue("new").status.state == "Open" and not opened.missed  # type: ignore[union-attr]
    assert Found(queues={"new": q("new", state="")}).unsettled({"new", "gone"}) == ["gone", "new"]
