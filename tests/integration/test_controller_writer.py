"""The controller's Writer against the emulator: effects performed in order, idempotent creates
and deletes, a second write to one object taking the resourceVersion the first returned, stale
writes refused, pod chains run concurrently, Apply overwriting, Events, and no write at all from a
replica that does not lead."""

from __future__ import annotations

import json
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from lahar.sim import Emulator
from lahar_controller.job.effects import Annotate, Apply, Create, Delete, Effect, Event, Update, UpdateStatus
from lahar_controller.shell.metrics import Metrics
from lahar_controller.shell.writer import Deposed, Writer

from .services import kube_for

pytestmark = pytest.mark.asyncio

Obj = dict[str, Any]


def _pod(ns: str, name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def _job(ns: str) -> Obj:
    task = {"name": "t", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": ns},
        "spec": {"tasks": [task]},
    }


async def test_effects_are_idempotent_chained_and_fenced(sim: Emulator, ns: str) -> None:
    kube = kube_for(sim.url)
    registry = CollectorRegistry()
    leading = {"now": True}
    writer = Writer(kube, lambda: leading["now"], Metrics.of(registry), pod_concurrency=4)
    try:
        pods = [_pod(ns, f"p{i}") for i in range(12)]
        done = await writer.run([Create(p) for p in pods] + [Create(pods[0])])
        assert done.error == "" and len(done.written) == 12  # the repeated create counts as done

        job = json.loads(await kube.create("jobs", ns, _job(ns)))
        labelled = {**job, "metadata": {**job["metadata"], "labels": {"a": "b"}}}
        with_status = {**job, "status": {"state": {"phase": "Pending"}}}
        done = await writer.run([Update(labelled), UpdateStatus(with_status)])  # both read version 1
        assert done.error == ""
        stored = json.loads(await kube.get("jobs", ns, "j"))
        assert stored["metadata"]["labels"] == {"a": "b"} and stored["status"]["state"]["phase"] == "Pending"
        done = await writer.run([Update(labelled), Create(_pod(ns, "never"))])  # stale now
        assert "Conflict" in done.error or "409" in done.error
        assert not await writer.delete("pods", ns, "never")  # the failed step stopped there

        marks = [Annotate("v1", "Pod", ns, p["metadata"]["name"], {"volcano.sh/out-of-sync": "true"}) for p in pods]
        kills = [Delete("v1", "Pod", ns, p["metadata"]["name"]) for p in pods]
        steps: list[Effect] = [e for pair in zip(marks, kills, strict=True) for e in pair]
        done = await writer.run([*steps, kills[0]])
        assert done.error == ""
        listed, _ = await kube.list("pods")
        assert not [p for p in listed if p.meta.namespace == ns]

        config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hosts", "namespace": ns}}
        await writer.run([Apply({**config, "data": {"a": "1"}})])
        await writer.run([Apply({**config, "data": {"a": "2"}})])
        assert json.loads(await kube.get("configmaps", ns, "hosts"))["data"] == {"a": "2"}
        updates = registry.get_sample_value(
            "lahar_controller_writes_total", {"resource": "configmaps", "verb": "update"}
        )
        await writer.run([Apply({**config, "data": {"a": "2"}})])  # the same content: no call
        assert updates == 1 and updates == registry.get_sample_value(
            "lahar_controller_writes_total", {"resource": "configmaps", "verb": "update"}
        )

        about = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "namespace": ns, "name": "j", "uid": "u"}
        await writer.run([Event(about, "Normal", "Running", "Job phase changed")])
        events, _ = await kube.list("events")
        mine = [json.loads(e.raw) for e in events if e.meta.namespace == ns]
        assert [(e["reason"], e["involvedObject"]["name"], e["source"]["component"]) for e in mine] == [
            ("Running", "j", "lahar-controller")
        ]

        leading["now"] = False
        with pytest.raises(Deposed):
            await writer.run([Create(_pod(ns, "after-the-lease"))])
        assert not await _exists(kube, ns, "after-the-lease")
    finally:
        await kube.close()


async def _exists(kube: Any, ns: str, name: str) -> bool:
    try:
        await kube.get("pods", ns, name)
    except Exception:
        return False
    return True
