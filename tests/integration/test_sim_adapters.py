"""Lahar's own Kubernetes adapter (``lahar.adapters.kube``) against the emulator: the calls the
cache, scheduler and binder make, with the errors they classify."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lahar.adapters.kube import Conflict, Gone, KubeClient, KubeConfig, NotFound, TransientKubeError


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def kube(sim, tmp_path: Path) -> KubeClient:  # type: ignore[no-untyped-def]
    return KubeClient(KubeConfig.load(str(sim.write_kubeconfig(tmp_path / "kubeconfig"))))


def test_list_pages_watch_bind_evict(sim, ns: str, tmp_path: Path, pod) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        client = kube(sim, tmp_path)
        try:
            for i in range(5):
                await client.create("pods", ns, pod(f"p{i}", termination_grace_period_seconds=1))
            items, rv = await client.list("pods", page=2)
            mine = [i.meta.name for i in items if i.meta.namespace == ns]
            assert mine == ["p0", "p1", "p2", "p3", "p4"] and int(rv) > 0
            await client.bind(ns, "p0", "node-0001", uid=items[0].meta.uid if items[0].meta.namespace == ns else "")
            with pytest.raises(Conflict):
                await client.bind(ns, "p0", "node-0002")
            with pytest.raises(NotFound):
                await client.bind(ns, "ghost", "node-0001")
            seen = []
            async for event in client.watch("pods", rv, timeout=2):
                if event.item.meta.namespace == ns:
                    seen.append((event.type, event.item.meta.name))
                if ("MODIFIED", "p0") in seen:
                    break
            assert seen[0] == ("MODIFIED", "p0")
            await client.patch(
                "pods",
                ns,
                "p1",
                {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}},
                sub="status",
                how="strategic",
            )
            await client.evict(ns, "p0", grace_seconds=0)
            with pytest.raises(NotFound):
                await client.get("pods", ns, "p0")
        finally:
            await client.close()

    run(scenario())


def test_gone_and_injected_errors(make_sim, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    small = make_sim(watch_cache_size=2)

    async def scenario() -> None:
        client = kube(small, tmp_path)
        try:
            _, rv = await client.list("queues")
            for i in range(4):
                await client.create(
                    "queues",
                    "",
                    {
                        "apiVersion": "scheduling.volcano.sh/v1beta1",
                        "kind": "Queue",
                        "metadata": {"name": f"q{i}"},
                        "spec": {"weight": 1},
                    },
                )
            with pytest.raises(Gone):
                async for _ in client.watch("queues", rv, timeout=2):
                    pass
            small.faults.set_error_rate("binding", 1.0, codes=(429,))
            with pytest.raises(TransientKubeError):
                await client.bind("default", "x", "node-0001")
        finally:
            await client.close()

    run(scenario())
