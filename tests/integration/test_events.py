"""Kubernetes Events from the distributed scheduler: cache, scheduler and binder on real NATS,
Valkey and the emulator.  A gang that cannot fit gets ``FailedScheduling`` on its pods and
``Unschedulable`` on its PodGroup; a gang that fits gets ``Scheduled`` on both; ``lahar describe``
shows them, selected by the object's uid as ``kubectl describe`` selects them."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from lahar.adapters.kube import KubeClient
from lahar.sim import Emulator

from .services import kube_for, poll, stack
from .test_distributed import ensure_queue, pod, podgroup
from .test_sim_cli import lahar

pytestmark = pytest.mark.asyncio


async def events_of(core: client.CoreV1Api, ns: str, kind: str, name: str, uid: str) -> list[dict[str, Any]]:
    """The object's core/v1 Events, found by the field selector kubectl describe uses."""
    selector = f"involvedObject.kind={kind},involvedObject.name={name},involvedObject.uid={uid}"
    reply: Any = await asyncio.to_thread(
        core.list_namespaced_event, ns, field_selector=selector, _preload_content=False
    )
    items: list[dict[str, Any]] = json.loads(reply.data)["items"]
    return items


def kubectl(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    return subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, timeout=60)


async def uid_of(kube: KubeClient, kind: str, ns: str, name: str) -> str:
    return str(json.loads(await kube.get(kind, ns, name))["metadata"]["uid"])


def reasons(events: list[dict[str, Any]]) -> set[str]:
    return {e["reason"] for e in events}


async def test_gangs_that_wait_and_that_run_get_volcanos_events(
    sim: Emulator,
    core: client.CoreV1Api,
    nats_url: str,
    nats_ca: str,
    redis_url: str,
    lahar_prefix: str,
    tmp_path: Path,
) -> None:
    kube = kube_for(sim.url)
    ns = f"ev-{lahar_prefix}".replace("_", "-").lower()
    async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await ensure_queue(kube, "default")
        await s.cache()
        await s.scheduler(period=0.2)
        binder = await s.binder()
        await kube.create("podgroups", ns, podgroup(ns, "big", 3))
        await kube.create("podgroups", ns, podgroup(ns, "small", 2))
        for i in range(3):
            await kube.create("pods", ns, pod(ns, f"b-{i}", "big", cpu="12"))
        for i in range(2):
            await kube.create("pods", ns, pod(ns, f"s-{i}", "small"))
        big = await uid_of(kube, "podgroups", ns, "big")
        small = await uid_of(kube, "podgroups", ns, "small")

        async def waiting() -> list[dict[str, Any]]:
            # An earlier one may say the gang still misses pods (a session ran between creates).
            got = await events_of(core, ns, "PodGroup", "big", big)
            return [e for e in got if e["reason"] == "Unschedulable" and "Insufficient cpu" in e["message"]]

        (unschedulable, *_) = await poll(waiting, timeout=15.0)
        assert unschedulable["type"] == "Warning"
        assert unschedulable["source"] == {"component": "volcano"}
        assert "minMember 3" in unschedulable["message"]
        assert unschedulable["involvedObject"]["apiVersion"] == "scheduling.volcano.sh/v1beta1"

        async def failed_pod() -> list[dict[str, Any]]:
            got = []
            for i in range(3):
                uid = await uid_of(kube, "pods", ns, f"b-{i}")
                got += [e for e in await events_of(core, ns, "Pod", f"b-{i}", uid) if e["reason"] == "FailedScheduling"]
            return got

        failed = await poll(failed_pod, timeout=15.0)
        assert all(e["type"] == "Warning" and e["message"] for e in failed)

        async def scheduled() -> bool:
            pods = []
            for i in range(2):
                uid = await uid_of(kube, "pods", ns, f"s-{i}")
                pods.append(await events_of(core, ns, "Pod", f"s-{i}", uid))
            group = await events_of(core, ns, "PodGroup", "small", small)
            return all("Scheduled" in reasons(p) for p in pods) and "Scheduled" in reasons(group)

        await poll(scheduled, timeout=15.0)
        on_pod = await events_of(core, ns, "Pod", "s-0", await uid_of(kube, "pods", ns, "s-0"))
        (bound,) = [e for e in on_pod if e["reason"] == "Scheduled"]
        node = json.loads(await kube.get("pods", ns, "s-0"))["spec"]["nodeName"]
        assert bound["message"] == f"Successfully assigned {ns}/s-0 to {node}" and bound["type"] == "Normal"
        assert bound["count"] == 1 and bound["firstTimestamp"] == bound["lastTimestamp"]

        written = binder.service.events.metrics.written
        assert written.labels("Scheduled")._value.get() >= 3
        assert written.labels("Unschedulable")._value.get() >= 1

        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        done = await asyncio.to_thread(lahar, "describe", "podgroup", "big", "-n", ns, kubeconfig=kubeconfig)
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert out.startswith("Name:         big\nNamespace:    " + ns + "\n"), out
        assert "Min Member:  3" in out and "Kind:         PodGroup" in out
        events = out[out.index("Events:") :]
        assert "Type     Reason         Age" in events
        assert "Warning  Unschedulable" in events and "volcano" in events and "Insufficient cpu" in events

        done = await asyncio.to_thread(lahar, "describe", "pod", "s-0", "-n", ns, kubeconfig=kubeconfig)
        assert done.returncode == 0, done.stderr
        assert re.search(rf"^Node: +{node}", done.stdout, re.M), done.stdout
        assert "Normal  Scheduled" in done.stdout and f"Successfully assigned {ns}/s-0 to {node}" in done.stdout

        missing = await asyncio.to_thread(lahar, "describe", "pod", "nope", "-n", ns, kubeconfig=kubeconfig)
        assert missing.returncode == 1 and "NotFound" in missing.stderr

        if shutil.which("kubectl"):  # kubectl itself, when installed, finds the same Events
            done = await asyncio.to_thread(kubectl, "describe", "podgroup", "big", "-n", ns, kubeconfig=kubeconfig)
            assert done.returncode == 0, done.stderr
            assert re.search(r"Warning +Unschedulable .* volcano +.*Insufficient cpu", done.stdout), done.stdout
            done = await asyncio.to_thread(kubectl, "get", "events", "-n", ns, kubeconfig=kubeconfig)
            assert re.search(r"Normal +Scheduled +pod/s-0 +Successfully assigned", done.stdout), done.stdout
    await kube.close()


async def test_writer_counts_repeats_recreates_lost_events_and_keeps_up(
    sim: Emulator, core: client.CoreV1Api, lahar_prefix: str
) -> None:
    """The shell against the emulator's API: a repeat raises the count of the one Event (patch);
    an Event deleted meanwhile is created again with its count; many objects' events are written
    at the rate the API takes them."""
    from prometheus_client import CollectorRegistry

    from lahar_binder.events import EventWriter, Note, pod_ref

    kube = kube_for(sim.url)
    ns = f"evw-{lahar_prefix}".replace("_", "-").lower()
    writer = EventWriter(kube, CollectorRegistry(), workers=2, queue_size=5000)
    workers = asyncio.create_task(writer.run())
    try:
        ref = pod_ref(ns, "p", "uid-p")
        note = Note(ref, "Warning", "FailedScheduling", "0/6 nodes are available")

        async def listed(count: int) -> list[dict[str, Any]]:
            got = await events_of(core, ns, "Pod", "p", "uid-p")
            return got if got and got[0]["count"] == count else []

        writer.record(note)
        (first,) = await poll(lambda: listed(1), timeout=5.0)
        writer.record(note)
        (again,) = await poll(lambda: listed(2), timeout=5.0)
        assert again["metadata"]["name"] == first["metadata"]["name"]
        assert again["firstTimestamp"] == first["firstTimestamp"]

        await kube.delete("events", ns, first["metadata"]["name"])
        writer.record(note)
        (recreated,) = await poll(lambda: listed(3), timeout=5.0)
        assert recreated["metadata"]["name"] == first["metadata"]["name"]

        many = 1000
        started = time.monotonic()
        for i in range(many):
            writer.record(Note(pod_ref(ns, f"q-{i}", f"uid-q-{i}"), "Normal", "Scheduled", f"to n{i}"))
        written = writer.metrics.written.labels("Scheduled")

        await poll(lambda: written._value.get() >= many, timeout=60.0, interval=0.05)
        rate = many / (time.monotonic() - started)
        print(f"\n{many} events written at {rate:.0f}/s")
        assert writer.metrics.dropped.labels("api_error")._value.get() == 0
    finally:
        workers.cancel()
        await asyncio.gather(workers, return_exceptions=True)
        await kube.close()


PREEMPT_CONF = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def _prioritised(obj: dict[str, Any], cls: str, value: int) -> dict[str, Any]:
    if obj["kind"] == "Pod":
        obj["spec"].update(priorityClassName=cls, priority=value)
        obj["metadata"]["annotations"]["volcano.sh/preemptable"] = "true"
    else:
        obj["spec"]["priorityClassName"] = cls
    return obj


async def test_preempted_pod_gets_an_evict_event_naming_the_podgroup_it_makes_room_for(
    make_sim: Any, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, tmp_path: Path
) -> None:
    sim = make_sim(nodes=["2:cpu=4,memory=16Gi,pods=110"])
    kube = kube_for(sim.url)
    ns = "pre"
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(PREEMPT_CONF)
    async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await ensure_queue(kube, "default")
        for name, value in (("low", 10), ("high", 100000)):
            pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}}
            await kube.create("priorityclasses", "", {**pc, "value": value})
        await s.cache()
        await s.scheduler(conf=str(conf), period=0.2)
        await s.binder()
        await kube.create("podgroups", ns, _prioritised(podgroup(ns, "old", 1), "low", 10))
        for i in range(2):
            await kube.create("pods", ns, _prioritised(pod(ns, f"old-{i}", "old", cpu="4"), "low", 10))
        uids = {f"old-{i}": await uid_of(kube, "pods", ns, f"old-{i}") for i in range(2)}

        async def both_bound() -> bool:
            return all([json.loads(await kube.get("pods", ns, n))["spec"].get("nodeName") for n in uids])

        await poll(both_bound, timeout=15.0)
        await kube.create("podgroups", ns, _prioritised(podgroup(ns, "new", 1), "high", 100000))
        await kube.create("pods", ns, _prioritised(pod(ns, "new-0", "new", cpu="4"), "high", 100000))

        api = sim.api_client()
        core = client.CoreV1Api(api)

        async def evicted() -> list[dict[str, Any]]:
            got = []
            for name, uid in uids.items():
                got += [e for e in await events_of(core, ns, "Pod", name, uid) if e["reason"] == "Evict"]
            return got

        (event, *_) = await poll(evicted, timeout=20.0)
        assert event["type"] == "Warning" and event["source"] == {"component": "volcano"}
        assert event["message"] == f"Pod is evicted, because of preempt for PodGroup {ns}/new"
        old = await uid_of(kube, "podgroups", ns, "old")
        on_group = await events_of(core, ns, "PodGroup", "old", old)
        assert [(e["type"], e["reason"], e["message"]) for e in on_group if e["reason"] == "Evict"] == [
            ("Normal", "Evict", "preempt")
        ]
        api.close()
    await kube.close()
