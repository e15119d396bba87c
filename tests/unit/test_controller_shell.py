"""The controller shell's own machinery, without I/O: keyed worker pools (one item of a key at a
time, equal items collapse, backoff then give-up, poison contained) and the World's informer
events (previous object handed over, a reload diffed into additions, updates and deletions)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from lahar.adapters.mirror import MirrorState
from lahar.wire.messages import Delta, Op
from lahar_controller.shell.calls import CALLS, KIND_RESOURCES, NotAllowed, check
from lahar_controller.shell.metrics import Metrics
from lahar_controller.shell.pool import Pool, Retry
from lahar_controller.shell.world import World
from lahar_controller.shell.writer import Deposed

Obj = dict[str, Any]


def metrics() -> Metrics:
    return Metrics.of(CollectorRegistry())


async def until(check: Callable[[], bool], timeout: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.001)  # the polling interval of a deadline-bounded wait


async def running(pool: Pool[Any], body: Callable[[], Awaitable[None]]) -> None:
    task = asyncio.create_task(pool.run())
    try:
        await body()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_items_of_one_key_run_one_at_a_time_and_in_order() -> None:
    log: list[tuple[str, str, str]] = []
    gate = asyncio.Event()

    async def handle(key: str, item: str) -> None:
        log.append(("start", key, item))
        if item == "a1":
            await gate.wait()
        log.append(("end", key, item))

    pool: Pool[str] = Pool("t", handle, metrics(), workers=4)

    async def body() -> None:
        pool.put("a", "a1")
        pool.put("a", "a2")
        pool.put("b", "b1")
        await until(lambda: ("end", "b", "b1") in log)  # another key is not held back
        assert ("start", "a", "a2") not in log  # the same key waits for a1
        gate.set()
        await until(lambda: ("end", "a", "a2") in log)
        assert log.index(("end", "a", "a1")) < log.index(("start", "a", "a2"))

    await running(pool, body)


async def test_equal_items_waiting_under_a_key_collapse() -> None:
    seen: list[str] = []
    gate = asyncio.Event()

    async def handle(key: str, item: str) -> None:
        seen.append(item)
        if item == "first":
            await gate.wait()

    pool: Pool[str] = Pool("t", handle, metrics(), workers=2)

    async def body() -> None:
        pool.put("k", "first")
        await until(lambda: seen == ["first"])
        for _ in range(5):
            pool.put("k", "sync")
        pool.put("k", "other")
        gate.set()
        await until(lambda: len(seen) == 3)
        assert seen == ["first", "sync", "other"]
        assert pool.pending() == 0

    await running(pool, body)


async def test_a_failing_item_is_retried_with_backoff_then_given_up() -> None:
    attempts: list[float] = []
    given_up: list[tuple[str, str, str]] = []

    async def handle(key: str, item: str) -> None:
        attempts.append(asyncio.get_running_loop().time())
        raise Retry("conflict")

    async def give_up(key: str, item: str, why: str) -> None:
        given_up.append((key, item, why))

    pool: Pool[str] = Pool("t", handle, metrics(), workers=1, first=0.01, cap=0.04, limit=3, give_up=give_up)

    async def body() -> None:
        pool.put("k", "x")
        await until(lambda: bool(given_up))
        assert len(attempts) == 4  # the first try and 3 retries
        gaps = [b - a for a, b in itertools.pairwise(attempts)]
        assert gaps[0] >= 0.01 and gaps[2] >= 0.04 * 0.9  # doubling, capped
        assert given_up == [("k", "x", "conflict")]

    await running(pool, body)


async def test_poison_and_a_lost_lease_drop_the_item_and_the_workers_go_on() -> None:
    done: list[str] = []

    async def handle(key: str, item: str) -> None:
        if item == "bad":
            raise ValueError("cannot read this object")
        if item == "deposed":
            raise Deposed("not leading")
        done.append(item)

    registry = CollectorRegistry()
    pool: Pool[str] = Pool("t", handle, Metrics.of(registry), workers=1)

    async def body() -> None:
        for item in ("bad", "deposed", "good"):
            pool.put("k", item)
        await until(lambda: done == ["good"])
        failed = registry.get_sample_value("lahar_controller_requests_total", {"controller": "t", "outcome": "failed"})
        assert failed == 1

    await running(pool, body)


def _obj(name: str, rv: str, namespace: str = "ns", **extra: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": rv}, **extra}


def _delta(op: Op, kind: str, obj: Obj) -> Delta:
    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
    return Delta(
        kind=kind, op=op, key=key, rv=obj["metadata"]["resourceVersion"], obj=msgspec.Raw(msgspec.json.encode(obj))
    )


def test_the_world_hands_listeners_the_previous_object() -> None:
    world = World(["pods"], metrics().bad)
    events: list[tuple[str | None, str | None]] = []

    def rv(obj: Obj | None) -> str | None:
        return None if obj is None else str(obj["metadata"]["resourceVersion"])

    world.listen("pods", lambda old, new: events.append((rv(old), rv(new))))
    world.index_by_namespace("pods")
    world.apply(_delta("ADDED", "pods", _obj("a", "1")))
    world.apply(_delta("MODIFIED", "pods", _obj("a", "2")))
    world.apply(_delta("DELETED", "pods", _obj("a", "3")))
    world.apply(_delta("DELETED", "pods", _obj("a", "3")))  # already gone: no event
    assert events == [(None, "1"), ("1", "2"), ("2", None)]
    assert world.in_namespace("pods", "ns") == []


def test_a_reload_becomes_the_difference_deletions_included() -> None:
    registry = CollectorRegistry()
    world = World(["pods"], Metrics.of(registry).bad)
    for name in ("a", "b", "c"):
        world.apply(_delta("ADDED", "pods", _obj(name, "1")))
    events: list[tuple[str, str]] = []

    def note(old: Obj | None, new: Obj | None) -> None:
        kind = "added" if old is None else "deleted" if new is None else "updated"
        events.append((kind, (new or old or {})["metadata"]["name"]))

    world.listen("pods", note)
    raw = {f"ns/{n}": msgspec.json.encode(_obj(n, rv)) for n, rv in (("a", "1"), ("b", "2"), ("d", "1"))}
    raw["ns/bad"] = b"[1, 2]"
    world.load(MirrorState(seq=9, stream="s", objects={"pods": raw}))
    assert sorted(events) == [("added", "d"), ("deleted", "c"), ("updated", "b")]
    assert registry.get_sample_value("lahar_controller_bad_deltas_total", {"why": "object"}) == 1


def test_a_listener_that_fails_is_counted_and_the_others_still_hear() -> None:
    registry = CollectorRegistry()
    world = World(["pods"], Metrics.of(registry).bad)
    heard: list[str] = []

    def broken(old: Obj | None, new: Obj | None) -> None:
        raise KeyError("spec")

    world.listen("pods", broken)
    world.listen("pods", lambda old, new: heard.append("ok"))
    world.apply(_delta("ADDED", "pods", _obj("a", "1")))
    assert heard == ["ok"]
    assert registry.get_sample_value("lahar_controller_bad_deltas_total", {"why": "listener"}) == 1


def test_a_warm_world_is_replayed_to_a_new_term_and_a_deposed_terms_listeners_hear_nothing() -> None:
    world = World(["queues", "pods"], metrics().bad)
    world.apply(_delta("ADDED", "pods", _obj("p", "1")))
    world.apply(_delta("ADDED", "queues", _obj("q", "1")))
    first: list[tuple[bool, str]] = []
    world.listen("pods", lambda old, new: first.append((old is None, (new or {})["metadata"]["name"])))
    world.listen("queues", lambda old, new: first.append((old is None, (new or {})["metadata"]["name"])))
    world.index_by_namespace("pods")  # asked for after the objects arrived
    assert [p["metadata"]["name"] for p in world.in_namespace("pods", "ns")] == ["p"]
    world.replay()
    assert first == [(True, "q"), (True, "p")]  # additions, kind by kind in the world's order
    world.forget_listeners()
    world.apply(_delta("MODIFIED", "pods", _obj("p", "2")))
    assert len(first) == 2
    assert world.get("pods", "ns/p") == _obj("p", "2")  # the world follows on


def test_a_delta_that_is_not_an_object_raises_for_the_follower_to_dead_letter() -> None:
    world = World(["queues"], metrics().bad)
    bad = Delta(kind="queues", op="ADDED", key="q", rv="1", obj=msgspec.Raw(b"[1, 2]"))
    with pytest.raises(ValueError):
        world.apply(bad)


def test_every_kind_the_rules_write_has_a_resource_and_undeclared_calls_are_refused() -> None:
    resources = set(KIND_RESOURCES.values())
    assert {resource.split("/")[0] for _, resource in CALLS} <= resources
    check("create", "pods")
    with pytest.raises(NotAllowed):
        check("delete", "nodes")
    with pytest.raises(NotAllowed):
        check("update", "pods")  # the controller never replaces a pod
