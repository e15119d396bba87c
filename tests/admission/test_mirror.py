"""The Redis-mirror cluster view against a real Valkey (lahar.infra fixtures)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lahar.wire import keys
from lahar_admission.mirror import MirrorView
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
    await redis_client.set(keys.seq_key(lahar_prefix), 1)
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
    await redis_client.set(keys.seq_key(lahar_prefix), 1)
    view = MirrorView(redis_client, lahar_prefix)
    await view.refresh_once()
    await redis_client.hset(qkey, "b", queue("b"))
    await view.refresh_once()
    assert view.queue("b") is None  # seq unchanged: the snapshot is kept
    await redis_client.set(keys.seq_key(lahar_prefix), 2)
    await view.refresh_once()
    assert view.queue("b") is not None


class Broken:
    async def get(self, key: str) -> None:
        raise ConnectionError("connection refused")


async def test_mirror_view_becomes_unavailable_when_stale(redis_client: Any, lahar_prefix: str) -> None:
    await redis_client.hset(keys.objects_key(lahar_prefix, "queues"), "a", queue("a"))
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
