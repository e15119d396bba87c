"""The Redis-mirror cluster view against a real Valkey (lahar.infra fixtures)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from lahar.wire import keys
from lahar_admission.mirror import MirrorView
from lahar_admission.readthrough import Missed
from lahar_admission.view import ViewUnavailable


def queue(name: str, parent: str = "", state: str = "Open") -> bytes:
    return json.dumps(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": 1, "parent": parent},
            "status": {"state": state},
        }
    ).encode()


async def identify(redis_client: Any, prefix: str, seq: int = 1) -> None:
    """Seal the mirror as the cache does once it reflects a stream."""
    await redis_client.set(keys.stream_id_key(prefix), "stream-1")
    await redis_client.set(keys.seq_key(prefix), seq)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_mirror_view_reads_queues_children_and_namespaces(redis_client: Any, lahar_prefix: str) -> None:
    qkey = keys.objects_key(lahar_prefix, "queues")
    await redis_client.hset(
        qkey,
        mapping={
            "root": queue("root"),
            "eng": queue("eng", "root"),
            "dev": queue("dev", "eng", "Closed"),
            "bad": b"{not json",
        },
    )
    await redis_client.hset(
        keys.objects_key(lahar_prefix, "namespaces"),
        "team",
        json.dumps({"metadata": {"name": "team", "annotations": {"a": "b"}}}),
    )
    await identify(redis_client, lahar_prefix)
    view = MirrorView(redis_client, lahar_prefix)
    with pytest.raises(ViewUnavailable):
        view.queue("eng")  # nothing read yet
    assert await view.refresh_once()
    assert view.queue("dev") is not None and view.queue("dev").status.state == "Closed"  # type: ignore[union-attr]
    assert [q.metadata.name for q in view.children("eng")] == ["dev"]
    assert view.queue("bad") is None  # an undecodable entry is skipped, the rest still served
    assert view.namespace("team").metadata.annotations == {"a": "b"}  # type: ignore[union-attr]
    assert view.queue_count == 3


async def test_mirror_view_reloads_when_seq_moves(redis_client: Any, lahar_prefix: str) -> None:
    qkey = keys.objects_key(lahar_prefix, "queues")
    await redis_client.hset(qkey, "a", queue("a"))
    await identify(redis_client, lahar_prefix)
    view = MirrorView(redis_client, lahar_prefix)
    await view.refresh_once()
    await redis_client.hset(qkey, "b", queue("b"))
    await view.refresh_once()
    assert view.queue("b") is None  # seq unchanged: the snapshot is kept
    await redis_client.set(keys.seq_key(lahar_prefix), 2)
    await view.refresh_once()
    assert view.queue("b") is not None


class Broken:
    def pipeline(self, transaction: bool = True) -> Any:
        raise ConnectionError("connection refused")


async def test_mirror_view_becomes_unavailable_when_stale(redis_client: Any, lahar_prefix: str) -> None:
    await redis_client.hset(keys.objects_key(lahar_prefix, "queues"), "a", queue("a"))
    await identify(redis_client, lahar_prefix)
    clock = FakeClock()
    view = MirrorView(redis_client, lahar_prefix, refresh=0.5, max_staleness=5.0, clock=clock)
    assert await view.refresh_once()
    view._redis = Broken()
    clock.now = 4.0
    assert not await view.refresh_once()
    assert view.queue("a") is not None  # still within the staleness bound
    clock.now = 6.0
    with pytest.raises(ViewUnavailable, match="connection refused"):
        view.queue("a")
    assert not view.available


async def test_an_unidentified_mirror_is_not_ready_rather_than_not_found(redis_client: Any, lahar_prefix: str) -> None:
    # Objects and a sequence, but no stream identity: the cache is rebuilding it (or it was
    # flushed and partly rewritten); nothing in it may be answered as "not found".
    await redis_client.hset(keys.objects_key(lahar_prefix, "queues"), "a", queue("a"))
    await redis_client.set(keys.seq_key(lahar_prefix), 5)
    view = MirrorView(redis_client, lahar_prefix)
    assert await view.refresh_once()
    assert view.available  # Redis answers: the service stays ready and says why per review
    with pytest.raises(ViewUnavailable, match="the mirror is not ready: it names no stream"):
        view.queue("b")
    await redis_client.set(keys.stream_id_key(lahar_prefix), "stream-1")
    assert await view.refresh_once()
    assert view.queue("a") is not None and view.queue("b") is None
    await redis_client.delete(keys.stream_id_key(lahar_prefix))  # a FLUSHALL, or a rebuild starting
    assert await view.refresh_once()
    with pytest.raises(ViewUnavailable, match="not ready"):
        view.queue("a")


async def test_a_new_stream_identity_reloads_even_at_the_same_sequence(redis_client: Any, lahar_prefix: str) -> None:
    qkey = keys.objects_key(lahar_prefix, "queues")
    await redis_client.hset(qkey, "a", queue("a"))
    await identify(redis_client, lahar_prefix, seq=3)
    view = MirrorView(redis_client, lahar_prefix)
    await view.refresh_once()
    await redis_client.hset(qkey, "b", queue("b"))
    await redis_client.set(keys.stream_id_key(lahar_prefix), "stream-2")  # rebuilt for a new stream
    await view.refresh_once()
    assert view.queue("b") is not None


async def _hmget_calls(redis_client: Any) -> int:
    stats = await redis_client.info("commandstats")
    return int(stats.get("cmdstat_hmget", {}).get("calls", 0))


async def test_read_through_finds_a_key_written_while_it_waits(redis_client: Any, lahar_prefix: str) -> None:
    qkey = keys.objects_key(lahar_prefix, "queues")
    await identify(redis_client, lahar_prefix)
    view = MirrorView(redis_client, lahar_prefix)
    await view.refresh_once()
    before = await _hmget_calls(redis_client)
    started = time.monotonic()
    waiting = asyncio.create_task(view.read_through(Missed(queues={"fresh"}), wait=5.0))
    deadline = time.monotonic() + 5
    while await _hmget_calls(redis_client) == before:  # its first direct read came back empty
        assert time.monotonic() < deadline and not waiting.done()
        await asyncio.sleep(0.01)
    await redis_client.hset(qkey, "fresh", queue("fresh"))
    found = await waiting
    assert list(found.queues) == ["fresh"] and found.queues["fresh"].metadata.name == "fresh"
    assert time.monotonic() - started < 2.0  # found by polling, not at the deadline


async def test_read_through_gives_up_at_its_deadline(redis_client: Any, lahar_prefix: str) -> None:
    await redis_client.hset(
        keys.objects_key(lahar_prefix, "namespaces"), "team", json.dumps({"metadata": {"name": "team"}})
    )
    view = MirrorView(redis_client, lahar_prefix)
    started = time.monotonic()
    found = await view.read_through(Missed(queues={"never"}, namespaces={"team"}), wait=0.3)
    took = time.monotonic() - started
    assert found.queues == {} and list(found.namespaces) == ["team"]
    assert 0.3 <= took < 1.5
