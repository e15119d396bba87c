"""``lahar explain`` without ``-f``: the cluster state comes from the cache's Redis mirror on real
Valkey — written by the real cache service from the emulator, or by the Mirror adapter."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgspec
import pytest

from lahar.adapters.mirror import Mirror
from lahar.cli.main import main
from lahar.wire.messages import Delta

from .services import kube_for, poll, stack
from .test_distributed import ensure_queue, pod, podgroup

pytestmark = pytest.mark.asyncio


async def lahar(*argv: str) -> int:
    """Run the CLI as a user would, in a thread (it runs its own event loop)."""

    def call() -> int:
        try:
            main(list(argv))
        except SystemExit as done:
            return int(done.code or 0)
        return 0

    return await asyncio.to_thread(call)


def _delta(kind: str, key: str, obj: dict[str, Any]) -> Delta:
    return Delta(kind=kind, op="ADDED", key=key, rv="1", obj=msgspec.Raw(json.dumps(obj).encode()))


async def test_explain_reads_the_live_state_the_cache_mirrors(
    make_sim: Any,
    nats_url: str,
    nats_ca: str,
    redis_url: str,
    lahar_prefix: str,
    redis_client: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim = make_sim(nodes=["1:cpu=8,memory=32Gi"])
    kube = kube_for(sim.url)
    ns = "live"
    async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await ensure_queue(kube, "default")
        await s.cache()
        await kube.create("podgroups", ns, podgroup(ns, "big", 3))
        for i in range(3):
            await kube.create("pods", ns, pod(ns, f"big-{i}", "big", cpu="100"))
        mirror = Mirror(redis_client, s.names.redis_prefix)
        await poll(lambda: mirror.get("pods", ns, "big-2"), timeout=10)
        capsys.readouterr()
        monkeypatch.setenv("LAHAR_REDIS_URL", redis_url)
        monkeypatch.setenv("LAHAR_PREFIX", lahar_prefix)
        assert await lahar("explain", "pod", "big-1", "-n", ns) == 0
    await kube.close()
    got = capsys.readouterr()
    assert got.out.startswith("pod live/big-1: Pending, in PodGroup live/big\n")
    assert "PodGroup live/big (queue default, minMember 3): Inqueue, waiting" in got.out
    assert "stopped by: action allocate, plugin proportion" in got.out
    assert "why: queue default: cpu 100 requested, 8 of deserved 8 left" in got.out
    assert "to run: it can never fit: the queue may hold at most 8 cpu; add nodes or request less" in got.out
    assert f"lahar explain: live: mirror {lahar_prefix!r} at stream sequence" in got.err
    assert "scheduler configuration: the built-in one (pass --conf FILE" in got.err


async def test_explain_on_a_mirror_written_by_the_adapter(
    redis_url: str, lahar_prefix: str, redis_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    mirror = Mirror(redis_client, lahar_prefix)
    await mirror.reset(fence=1, seq=0)
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}},
    }
    q = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "ml"},
        "spec": {"weight": 1, "capability": {"cpu": "4"}},
        "status": {"state": "Open"},
    }
    pg = podgroup("team", "train", 2, queue="ml")
    pg["spec"]["minResources"] = {"cpu": "6"}
    pg["status"] = {"phase": "Pending"}
    deltas = [
        _delta("nodes", "n1", node),
        _delta("queues", "ml", q),
        _delta("podgroups", "team/train", pg),
        *(_delta("pods", f"team/train-{i}", pod("team", f"train-{i}", "train", cpu="3")) for i in range(2)),
        _delta("pods", "team/bad", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"}, "spec": [1]}),
    ]
    await mirror.apply(deltas, 6, stream="s1", fence=1, building=True)
    await mirror.seal(stream="s1", fence=1)
    capsys.readouterr()
    code = await lahar(
        "explain", "podgroup", "team/train", "--redis-url", redis_url, "--prefix", lahar_prefix, "--cycles", "1"
    )
    got = capsys.readouterr()
    assert code == 0, got.err
    assert "PodGroup team/train (queue ml, minMember 2): Pending, waiting" in got.out
    assert "stopped by: action enqueue, plugin proportion" in got.out
    assert "why: queue ml: cpu 6 requested, 4 of capability 4 left" in got.out
    assert "to run: raise its capability" in got.out
    assert "lahar explain: warning: pods team/bad left out: " in got.err  # as the scheduler skips it
    assert "at stream sequence 6, 5 objects" in got.err


async def test_explain_without_a_mirror_says_what_to_set(
    redis_url: str, lahar_prefix: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LAHAR_REDIS_URL", raising=False)
    code = await lahar("explain", "pod", "x", "--redis-url", "")
    assert code == 2
    assert "set LAHAR_REDIS_URL and LAHAR_PREFIX as lahar up prints them" in capsys.readouterr().err
    code = await lahar("explain", "pod", "x", "--redis-url", redis_url, "--prefix", f"{lahar_prefix}_none")
    assert code == 2
    assert "is empty or being rebuilt: is lahar's cache running" in capsys.readouterr().err
