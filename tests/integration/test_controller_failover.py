"""The controller's leader is SIGKILLed while a Volcano Job runs: the standby (warm: it follows
the cluster all along; the killed one is kept down) leads in a new epoch within about the lease's
TTL, carries the running Job to Completed and runs a Job created after the kill."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from lahar.adapters.connect import connect_nats
from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.adapters.leader import read_lease
from lahar.up.stack import LocalStack, StackConfig

from .services import poll

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


def _job(name: str, seconds: str) -> dict[str, Any]:
    template = {
        "metadata": {"annotations": {"sim.lahar.io/run-seconds": seconds}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": 2,
            "tasks": [{"name": "w", "replicas": 2, "template": template}],
        },
    }


async def _lease(stack: LocalStack, nats_url: str) -> tuple[str, int]:
    nc = await connect_nats(nats_url, ca=stack.config.nats_ca or "")
    try:
        kv = await nc.jetstream().key_value(stack.names.leader_bucket)
        lease = await read_lease(kv, "controller")
        return (lease.holder, lease.epoch) if lease is not None else ("", 0)
    except Exception:  # no bucket or no leader yet
        return ("", 0)
    finally:
        await nc.close()


async def _phase(kube: KubeClient, name: str) -> str:
    job = json.loads(await kube.get("jobs", "default", name))
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


async def test_a_killed_controller_leader_is_replaced_and_its_jobs_go_on(
    make_sim: Any, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, tmp_path: Path
) -> None:
    sim = make_sim(nodes=["4:cpu=16,memory=64Gi,pods=110"])
    kubeconfig = str(sim.write_kubeconfig(tmp_path / "kubeconfig"))
    config = StackConfig(
        state_dir=tmp_path / "stack",
        kubeconfig=kubeconfig,
        nats_url=nats_url,
        nats_ca=nats_ca,
        redis_url=redis_url,
        prefix=lahar_prefix,
        admission=False,
        period=0.2,
        binders=1,
        max_binders=1,
        replicas=2,
    )
    stack = LocalStack(config)
    await asyncio.get_running_loop().run_in_executor(None, stack.start)
    kube = KubeClient(KubeConfig.load(kubeconfig))
    try:
        await poll(lambda: _exists(kube), timeout=15)
        await kube.create("jobs", "default", _job("before", "4"))
        await poll(lambda: _is(kube, "before", "Running"), timeout=20)
        leader, epoch = await poll(lambda: _leading(stack, nats_url), timeout=10)
        (standby,) = [c for c in stack.children if c.name == "controller" and c.identity != leader]
        # warm: the standby's world follows the stream (it has seen the Job run) before it leads
        seq = await poll(lambda: _world_seq(standby.port), timeout=10)
        # kept down (lahar up's keeper would restart it and it would take its own lease back at
        # once): the standby must take over
        stack.replica(leader).held = True
        os.kill(stack.replica(leader).proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        await kube.create("jobs", "default", _job("after", "1"))
        await poll(lambda: _is(kube, "after", "Running"), timeout=20)
        took = time.monotonic() - killed
        holder, new_epoch = await _lease(stack, nats_url)
        assert new_epoch > epoch and holder != leader, (holder, leader)
        await poll(lambda: _is(kube, "before", "Completed"), timeout=20)
        await poll(lambda: _is(kube, "after", "Completed"), timeout=20)
        print(f"\nkill of the controller leader → a new Job Running: {took:.2f} s (standby warm at seq {seq:.0f})")
        # the standby follows the cluster all along: it acts once the lease (2 s) runs out, with no
        # mirror to load first
        assert took < 3.5, f"kill of the controller leader → a new Job Running took {took:.2f} s (lease 2 s)"
    finally:
        await kube.close()
        stack.stop()


async def _world_seq(port: int) -> float | None:
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    for line in text.splitlines():
        if line.startswith("lahar_controller_world_seq "):
            return float(line.split()[1]) or None
    return None


async def _exists(kube: KubeClient) -> bool:
    try:
        await kube.get("queues", "", "default")
    except Exception:
        return False
    return True


async def _is(kube: KubeClient, name: str, phase: str) -> bool:
    return await _phase(kube, name) == phase


async def _leading(stack: LocalStack, nats_url: str) -> tuple[str, int] | None:
    holder, epoch = await _lease(stack, nats_url)
    return (holder, epoch) if holder else None
