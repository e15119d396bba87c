"""Faults of the distributed scheduler, with every service a real process: a binder SIGKILLed with
binds in flight (on the emulator and on a real control plane), the leading scheduler and cache
killed mid-run."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lahar.adapters.connect import connect_nats
from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.adapters.leader import read_lease
from lahar.e2e.workload import JobSpec, Tracker, ensure_namespace, ensure_queues, submit, watch_binds
from lahar.sim import Emulator
from lahar.up.stack import LocalStack, StackConfig
from lahar.wire.messages import decode_result

from .backends import BACKENDS
from .services import poll

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


def _stack(
    tmp: Path, kubeconfig: str | None = None, *, nats_url: str, redis_url: str, prefix: str, **kw: Any
) -> LocalStack:
    cfg = StackConfig(
        state_dir=tmp,
        kubeconfig=kubeconfig,
        nats_url=nats_url,
        redis_url=redis_url,
        prefix=prefix,
        admission=False,
        period=0.5,
        kube_audit=True,  # only on the kube control plane: its audit log shows every 403
        **kw,
    )
    return LocalStack(cfg)


async def _results(nats_url: str, stack: LocalStack) -> Counter[tuple[str, str]]:
    """(pod, outcome) counts of every bind result the binders reported."""
    nc = await connect_nats(nats_url, ca=stack.config.nats_ca or "")
    js = nc.jetstream()
    sub = await js.subscribe(stack.names.result_subject, stream=stack.names.results_stream, ordered_consumer=True)
    info = await js.stream_info(stack.names.results_stream)
    out: Counter[tuple[str, str]] = Counter()
    for _ in range(info.state.messages):
        msg = await sub.next_msg(timeout=5)
        res = decode_result(msg.data)
        if res.kind == "bind":
            out[(f"{res.namespace}/{res.name}", res.outcome)] += 1
    await nc.close()
    return out


async def _settled_results(nats_url: str, stack: LocalStack, bound: set[str]) -> Counter[tuple[str, str]]:
    """The results once every bound pod has one: a binder reports a group's outcomes after the
    last of its binds returns, so the last pods can be seen bound a moment before."""

    async def covered() -> Counter[tuple[str, str]] | None:
        results = await _results(nats_url, stack)
        return results if bound <= {pod for pod, _ in results} else None

    try:
        got: Counter[tuple[str, str]] = await poll(covered, timeout=30, interval=0.2)
    except AssertionError:
        return await _results(nats_url, stack)  # the assertions that follow say what is missing
    return got


async def _run_workload(kube: KubeClient, ns: str, jobs: list[JobSpec], tracker: Tracker) -> None:
    await submit(kube, ns, jobs, tracker, parallel=64)


@dataclass(frozen=True)
class Workload:
    """The binder-kill workload on one backend: gangs of 20 one-cpu pods, the nodes they fill, and
    how many pods are bound before the kill."""

    nodes: str
    jobs: int
    kill_after: int

    @property
    def pods(self) -> int:
        return self.jobs * 20


# On the emulator every bind takes 100 ms (injected), so thousands are in flight; the real API
# server gets a smaller workload (it and KWOK share two cores with the test), on fewer, larger
# nodes (each KWOK node is a heartbeat to serve).
BINDER_KILL = {
    "sim": Workload("200:cpu=32,memory=128Gi,pods=110", jobs=100, kill_after=200),
    "kube": Workload("12:cpu=128,memory=512Gi,pods=110", jobs=40, kill_after=80),
}


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "kube":
        request.getfixturevalue("kube_binaries")  # skipped, with the whole tier, without Go
    return str(request.param)


def _binder_kill_stack(
    backend: str, make_sim: Any, tmp: Path, nats_url: str, nats_ca: str, redis_url: str, prefix: str
) -> LocalStack:
    nodes = BINDER_KILL[backend].nodes
    if backend == "kube":
        # Its own control plane, each service with its deploy/ ServiceAccount (lahar.up.kube).
        kw: dict[str, Any] = {"control_plane": "kube", "nodes": (nodes,)}
    else:
        sim: Emulator = make_sim(nodes=[nodes], latency=["binding=100ms"])
        kw = {"kubeconfig": str(sim.write_kubeconfig(tmp / "kubeconfig"))}
    return _stack(
        tmp / "stack",
        nats_url=nats_url,
        redis_url=redis_url,
        prefix=prefix,
        nats_ca=nats_ca,
        binders=2,
        ack_wait=3.0,
        **kw,
    )


async def test_killing_a_binder_with_binds_in_flight_loses_nothing(
    backend: str, make_sim: Any, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, tmp_path: Path
) -> None:
    work = BINDER_KILL[backend]
    stack = _binder_kill_stack(backend, make_sim, tmp_path, nats_url, nats_ca, redis_url, lahar_prefix)
    await asyncio.get_running_loop().run_in_executor(None, lambda: stack.start(timeout=120))
    kube = KubeClient(KubeConfig.load(stack.kubeconfig))
    try:
        await ensure_queues(kube, {"default": 1})
        await ensure_namespace(kube, "kill", account_timeout=60.0 if backend == "kube" else 0.0)
        tracker = Tracker()
        watcher = asyncio.create_task(watch_binds(kube, tracker))
        jobs = [JobSpec(f"j{j:03d}", "default", 20, cpu="1", memory="1Gi") for j in range(work.jobs)]
        await _run_workload(kube, "kill", jobs, tracker)
        await poll(lambda: len(tracker.bound) >= work.kill_after, timeout=60)
        victim = stack.replica("binder-1")
        os.kill(victim.proc.pid, signal.SIGKILL)
        killed_at = len(tracker.bound)
        await poll(lambda: len(tracker.bound) >= work.pods, timeout=120)
        watcher.cancel()
        assert killed_at < work.pods, "the binder was killed after everything was bound: nothing was in flight"
        results = await _settled_results(nats_url, stack, set(tracker.bound))
        conflicts = [k for k, n in results.items() if k[1] in ("conflict", "failed")]
        assert not conflicts, conflicts[:5]
        assert {pod for pod, outcome in results if outcome == "done"} == set(tracker.bound)
        assert not _refused(stack), _refused(stack)
    finally:
        await kube.close()
        stack.stop()


def _refused(stack: LocalStack) -> list[str]:
    """Services whose log shows a request refused by RBAC (403 Forbidden): a permission deploy/
    lacks, which a service may only log and retry."""
    logged = [c.identity for c in stack.children if "forbidden" in c.log_path.read_text(errors="replace").lower()]
    return logged + (stack.kube.refusals() if stack.kube else [])  # also the ones not logged


async def _lease(nats_url: str, stack: LocalStack, role: str) -> tuple[str, int]:
    """(holder, epoch) of ``role``'s lease, or ("", 0) while there is none."""
    nc = await connect_nats(nats_url, ca=stack.config.nats_ca or "")
    try:
        kv = await nc.jetstream().key_value(stack.names.leader_bucket)
        lease = await read_lease(kv, role)
        return (lease.holder, lease.epoch) if lease is not None else ("", 0)
    except Exception:  # no leader yet
        return ("", 0)
    finally:
        await nc.close()


async def _leader(nats_url: str, stack: LocalStack, role: str) -> str:
    return (await _lease(nats_url, stack, role))[0]


async def test_scheduler_and_cache_restarts_lose_and_duplicate_nothing(
    make_sim: Any, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, tmp_path: Path
) -> None:
    sim: Emulator = make_sim(nodes=["100:cpu=32,memory=128Gi,pods=110"])
    kubeconfig = str(sim.write_kubeconfig(tmp_path / "kubeconfig"))
    stack = _stack(
        tmp_path / "stack",
        kubeconfig,
        nats_url=nats_url,
        redis_url=redis_url,
        prefix=lahar_prefix,
        nats_ca=nats_ca,
        replicas=2,
        leader_ttl=3.0,
    )
    await asyncio.get_running_loop().run_in_executor(None, stack.start)
    kube = KubeClient(KubeConfig.load(kubeconfig))
    try:
        await ensure_queues(kube, {"default": 1})
        tracker = Tracker()
        watcher = asyncio.create_task(watch_binds(kube, tracker))
        first = [JobSpec(f"a{j:02d}", "default", 10) for j in range(30)]
        await _run_workload(kube, "restart", first, tracker)
        await poll(lambda: len(tracker.bound) >= 100, timeout=60)
        took = {}
        for role in ("scheduler", "cache"):
            leader = await poll(lambda r=role: _leader(nats_url, stack, r), timeout=10)
            _, epoch = await _lease(nats_url, stack, role)
            os.kill(stack.replica(leader).proc.pid, signal.SIGKILL)
            killed = time.monotonic()
            # A standby, or the killed replica restarted by lahar up's keeper, leads in a new epoch.
            await poll(lambda r=role, old=epoch: _new_epoch(nats_url, stack, r, old), timeout=15)
            took[role] = time.monotonic() - killed
        second = [JobSpec(f"b{j:02d}", "default", 10) for j in range(30)]
        await _run_workload(kube, "restart", second, tracker)
        await poll(lambda: len(tracker.bound) >= 600, timeout=90)
        watcher.cancel()
        assert max(took.values()) < 10, took
        results = await _settled_results(nats_url, stack, set(tracker.bound))
        assert not [k for k in results if k[1] in ("conflict", "failed")]
        assert {pod for pod, outcome in results if outcome == "done"} == set(tracker.bound)
    finally:
        await kube.close()
        stack.stop()


async def _new_epoch(nats_url: str, stack: LocalStack, role: str, old: int) -> bool:
    return (await _lease(nats_url, stack, role))[1] > old
