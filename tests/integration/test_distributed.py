"""The distributed scheduler end to end: cache, scheduler and binder on real NATS and Valkey, no
mocks of our own services.  The tests taking ``cluster`` run on the emulator and on a real control
plane, each service with its own identity there (backends.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import msgspec
import pytest

from lahar.adapters.kube import KubeClient
from lahar.sim import Emulator
from lahar.wire.messages import Delta, encode

from .backends import Cluster
from .services import CLOSE_TIMEOUT, bounded, kube_for, poll, stack

pytestmark = pytest.mark.asyncio

GROUP = "scheduling.k8s.io/group-name"


def podgroup(ns: str, name: str, min_member: int, queue: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min_member, "queue": queue},
    }


def queue(name: str, weight: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight},
        "status": {"state": "Open"},
    }


def pod(ns: str, name: str, group: str, cpu: str = "1", memory: str = "1Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": {GROUP: group}},
        "spec": {
            "schedulerName": "volcano",
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
            ],
        },
    }


async def node_of(kube: KubeClient, ns: str, name: str) -> str:
    raw = json.loads(await kube.get("pods", ns, name))
    return str(raw["spec"].get("nodeName", ""))


async def ensure_queue(kube: KubeClient, name: str) -> None:
    from lahar.adapters.kube import Conflict

    with contextlib.suppress(Conflict):
        await kube.create("queues", "", queue(name))


async def serving(s: Any, kube: KubeClient, **scheduler: Any) -> None:
    """The default queue, then cache, scheduler and binder started."""
    await ensure_queue(kube, "default")
    await s.cache()
    await s.scheduler(**scheduler)
    await s.binder()


async def test_gang_of_four_binds_within_a_second(
    cluster: Cluster, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str
) -> None:
    kube, ns = cluster.admin, cluster.ns
    async with stack(cluster.client, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await serving(s, kube)
        await kube.create("podgroups", ns, podgroup(ns, "pg", 4))
        created = time.monotonic()
        await asyncio.gather(*(kube.create("pods", ns, pod(ns, f"w-{i}", "pg")) for i in range(4)))

        async def all_bound() -> bool:
            nodes = await asyncio.gather(*(node_of(kube, ns, f"w-{i}") for i in range(4)))
            return all(nodes)

        await poll(all_bound, timeout=5.0)
        elapsed = time.monotonic() - created
        assert elapsed < 1.0, f"gang bound after {elapsed:.2f}s"


async def test_a_podgroup_status_undone_by_another_writer_is_written_again(
    cluster: Cluster, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str
) -> None:
    """The scheduler's status write can be lost after it was sent (a binder gives up on it, or a
    stale update of another writer undoes it): the PodGroup must not stay in its old phase."""
    kube, ns = cluster.admin, cluster.ns
    async with stack(cluster.client, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await serving(s, kube, period=0.2)
        await kube.create("podgroups", ns, podgroup(ns, "pg", 2))
        await asyncio.gather(*(kube.create("pods", ns, pod(ns, f"r-{i}", "pg")) for i in range(2)))

        async def phase() -> str:
            return str(json.loads(await kube.get("podgroups", ns, "pg")).get("status", {}).get("phase", ""))

        await poll(lambda: _is(phase(), "Running"), timeout=10.0)
        await kube.patch("podgroups", ns, "pg", {"status": {"phase": "Inqueue"}})
        assert await phase() == "Inqueue"
        await poll(lambda: _is(phase(), "Running"), timeout=20.0)


async def _is(got: Any, want: str) -> bool:
    return bool(await got == want)


async def test_gang_that_cannot_fit_gets_no_bind_and_a_reason(
    cluster: Cluster, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str
) -> None:
    kube, ns = cluster.admin, cluster.ns
    async with stack(cluster.client, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await serving(s, kube, period=0.2)
        # The group last: a session that saw only some of the pods would rightly say the gang is
        # short of members (the real API server takes long enough per create for that to happen).
        for i in range(3):
            await kube.create("pods", ns, pod(ns, f"b-{i}", "big", cpu="12"))
        await kube.create("podgroups", ns, podgroup(ns, "big", 3))

        async def unschedulable() -> str:
            pg = json.loads(await kube.get("podgroups", ns, "big"))
            for c in pg.get("status", {}).get("conditions", []):
                if c["type"] == "Unschedulable" and c["status"] == "True":
                    return str(c["message"])
            return ""

        message = await poll(unschedulable, timeout=10.0)
        assert "Insufficient cpu" in message
        assert "minMember 3" in message
        assert not any([await node_of(kube, ns, f"b-{i}") for i in range(3)])


async def test_malformed_messages_are_dead_lettered_and_services_go_on(
    sim: Emulator, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str
) -> None:
    from lahar.adapters.connect import connect_nats

    kube = kube_for(sim.url)
    ns = f"bad-{lahar_prefix}".replace("_", "-").lower()
    async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await ensure_queue(kube, "default")
        await s.cache()
        sched = await s.scheduler(period=0.2)
        binder = await s.binder()
        nc = await connect_nats(nats_url, ca=nats_ca)
        js = nc.jetstream()
        names = s.names
        await js.publish(names.delta_subject("pods"), b"{not json")
        # Schema-valid poison: an addition without its object, a queue that is not an object, a
        # cpu request no int64 holds.  Each is dead-lettered; none stops the delta loop.
        await js.publish(names.delta_subject("pods"), encode(Delta(kind="pods", op="ADDED", key="x/y", rv="1")))
        queue = Delta(kind="queues", op="MODIFIED", key="q", rv="1", obj=msgspec.Raw(b"[1,2]"))
        await js.publish(names.delta_subject("queues"), encode(queue))
        huge = pod(ns, "huge", "pg2")
        huge["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "9" * 400
        raw = msgspec.Raw(json.dumps(huge).encode())
        huge_delta = Delta(kind="pods", op="ADDED", key=f"{ns}/huge", rv="1", obj=raw)
        await js.publish(names.delta_subject("pods"), encode(huge_delta))
        await js.publish(names.decision_subject("bind"), msgspec.json.encode({"v": 99, "kind": "bind"}))
        await js.publish(names.result_subject, b"\x00\x01")
        # A pod whose request is not a quantity: the scheduler says why on the pod and carries on.
        # The API server refuses such a pod (422), so it can only come as a bad delta for a pod
        # that exists: forge one once the scheduler has seen the real pod (so the real ADDED
        # delta cannot come after it), with the cache's epoch (so it is not ignored as stale).
        await kube.create("pods", ns, pod(ns, "broken", "pg-never"))

        async def seen() -> bool:
            return f"{ns}/broken" in sched.service.view.snapshot.tasks

        await poll(seen, timeout=10.0)
        broken = pod(ns, "broken", "pg-never")
        broken["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1x"
        forged = Delta(
            kind="pods",
            op="MODIFIED",
            key=f"{ns}/broken",
            rv="1",
            obj=msgspec.Raw(json.dumps(broken).encode()),
            epoch=sched.service.follower.epoch,
        )
        await js.publish(names.delta_subject("pods"), encode(forged))
        # A PodGroup naming a queue that does not exist gets a condition saying so.
        await kube.create("podgroups", ns, podgroup(ns, "lost", 1, queue="no-such-queue"))
        await kube.create("podgroups", ns, podgroup(ns, "pg2", 1))
        await kube.create("pods", ns, pod(ns, "good", "pg2"))

        async def bound() -> bool:
            return bool(await node_of(kube, ns, "good"))

        await poll(bound, timeout=10.0)

        async def pod_reason() -> str:
            raw = json.loads(await kube.get("pods", ns, "broken"))
            conds = raw.get("status", {}).get("conditions", [])
            return next((c["message"] for c in conds if c["type"] == "PodScheduled"), "")

        assert "'1x' is not a quantity" in await poll(pod_reason, timeout=10.0)

        async def queue_reason() -> str:
            pg = json.loads(await kube.get("podgroups", ns, "lost"))
            conds = pg.get("status", {}).get("conditions", [])
            return next((c["message"] for c in conds if c["type"] == "Unschedulable"), "")

        assert "no-such-queue" in await poll(queue_reason, timeout=10.0)
        dlq = await js.stream_info(names.dead_letter_stream)
        assert dlq.state.messages >= 2
        bad = sched.service.metrics.bad_deltas
        assert bad.labels("malformed")._value.get() >= 1
        assert bad.labels("no_object")._value.get() >= 1
        assert bad.labels("apply")._value.get() >= 3  # the queue, the huge pod and the broken one
        assert dlq.state.messages >= 5
        assert binder.service.metrics.bad._value.get() >= 1
        await bounded(nc.close(), CLOSE_TIMEOUT)
    await kube.close()


async def test_a_bind_can_be_followed_to_the_decision_and_the_delta(
    cluster: Cluster, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, tmp_path: Any
) -> None:
    from lahar.adapters.otel import load_traces, trace_path

    traces = str(tmp_path / "traces.jsonl")
    kube, ns = cluster.admin, cluster.ns
    async with stack(cluster.client, nats_url, redis_url, lahar_prefix, traces, nats_ca=nats_ca) as s:
        await serving(s, kube)
        await kube.create("podgroups", ns, podgroup(ns, "pg", 2))
        for i in range(2):
            await kube.create("pods", ns, pod(ns, f"t-{i}", "pg"))

        async def bound() -> bool:
            return all([await node_of(kube, ns, f"t-{i}") for i in range(2)])

        await poll(bound, timeout=10.0)

        def bind_span() -> Any:
            spans = load_traces(traces)
            return next(
                (x for x in spans if x["name"] == "binder.bind" and x["attributes"].get("lahar.pod") == f"{ns}/t-0"),
                None,
            )

        span = await poll(bind_span, timeout=10.0)
    path = trace_path(load_traces(traces), span["span_id"])
    names = [(x["name"], x["service"]) for x in path]
    assert names[0] == ("binder.bind", "binder")
    job = next(x for x in path if x["name"] == "scheduler.job")
    assert job["attributes"]["lahar.job"] == f"{ns}/pg"
    assert ("scheduler.session", "scheduler") in names
    deltas = [x for x in path if x["name"] == "cache.delta"]
    assert any(d["attributes"].get("lahar.pod") == f"{ns}/t-0" for d in deltas), names


# Volcano's default actions and tiers, with preempt: a starving job may evict tasks of lower
# priority jobs of its queue, through the binder's pods/eviction calls.
PREEMPT_CONF = """\
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
PRIORITIES = {"lahar-test-high": 1000, "lahar-test-low": 10}


async def ensure_priority_classes(kube: KubeClient) -> None:
    from lahar.adapters.kube import Conflict

    for name, value in PRIORITIES.items():
        pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        with contextlib.suppress(Conflict):
            await kube.create("priorityclasses", "", pc)


def pinned(obj: dict[str, Any], node_label: str, priority: str) -> dict[str, Any]:
    """A pod that only the test's own node takes (its label and taint), of a given priority."""
    key, _, value = node_label.partition("=")
    obj["spec"]["nodeSelector"] = {key: value}
    obj["spec"]["tolerations"] = [{"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}]
    obj["spec"]["priorityClassName"] = priority
    obj["spec"]["terminationGracePeriodSeconds"] = 1  # an evicted pod goes within a second
    return obj


async def test_a_high_priority_gang_evicts_lower_priority_pods_through_the_binder(
    cluster: Cluster, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, tmp_path: Any
) -> None:
    kube, ns = cluster.admin, cluster.ns
    conf = tmp_path / "preempt.yaml"
    conf.write_text(PREEMPT_CONF)
    label = f"lahar-test={ns}"
    # One 8-cpu node of the test's own, which the pods below alone tolerate.
    [node] = await cluster.add_nodes(f"1:cpu=8,memory=32Gi,label.{label},taint.{label}:NoSchedule,name={ns}")
    await ensure_priority_classes(kube)
    async with stack(cluster.client, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await ensure_queue(kube, "default")
        await s.cache()
        await s.scheduler(str(conf), period=0.2)
        binder = await s.binder()
        low = podgroup(ns, "low", 1)
        low["spec"]["priorityClassName"] = "lahar-test-low"
        await kube.create("podgroups", ns, low)
        for i in range(4):  # 4 x 2 cpu: the node is full
            await kube.create("pods", ns, pinned(pod(ns, f"low-{i}", "low", cpu="2"), label, "lahar-test-low"))

        async def placed(names: list[str]) -> bool:
            return all([await node_of(kube, ns, name) == node for name in names])

        await poll(lambda: placed([f"low-{i}" for i in range(4)]), timeout=10.0)
        for i in range(2):  # 2 x 2 cpu, all or nothing: room for them only if two low pods go
            await kube.create("pods", ns, pinned(pod(ns, f"high-{i}", "high", cpu="2"), label, "lahar-test-high"))
        high = podgroup(ns, "high", 2)
        high["spec"]["priorityClassName"] = "lahar-test-high"
        await kube.create("podgroups", ns, high)

        await poll(lambda: placed(["high-0", "high-1"]), timeout=20.0)
        left, _ = await kube.list("pods")
        survivors = sorted(i.key for i in left if i.key.startswith(f"{ns}/low-"))
        evictions = binder.service.metrics.calls.labels("evict", "done")._value.get()
    assert len(survivors) == 2, survivors
    assert evictions == 2
