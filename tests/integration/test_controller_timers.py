"""The controller's timers, with the services in this event loop on the emulator: a CronJob starts
its run, records it, and drops it by its history limit once it completed; a policy with a
``timeout`` fires its action when the time is up.  The CronJob test runs the controller a little
over a minute ahead, so a run is due at once rather than at the next minute."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lahar.adapters.kube import KubeClient, NotFound
from lahar.sim import Emulator

from .services import kube_for, poll, stack

pytestmark = pytest.mark.asyncio

Obj = dict[str, Any]


def _template(**annotations: str) -> Obj:
    return {
        "metadata": {"annotations": annotations},
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}],
        },
    }


async def _get(kube: KubeClient, kind: str, ns: str, name: str) -> Obj | None:
    try:
        got: Obj = json.loads(await kube.get(kind, ns, name))
    except NotFound:
        return None
    return got


async def _namespace(kube: KubeClient) -> str:
    name = f"timers-{uuid.uuid4().hex[:8]}"
    await kube.create("namespaces", "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


async def test_a_cronjob_starts_its_run_and_keeps_its_history_limit(
    sim: Emulator, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str
) -> None:
    kube = kube_for(sim.url)

    def ahead() -> datetime:
        return datetime.now(UTC) + timedelta(seconds=61)

    async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await s.cache()
        await s.scheduler(period=0.2)
        await s.binder()
        await s.controller(clock=ahead)
        ns = await _namespace(kube)
        task = {"name": "t", "replicas": 1, "template": _template(**{"sim.lahar.io/run-seconds": "0.5"})}
        cronjob = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": ns},
            "spec": {
                "schedule": "* * * * *",
                "concurrencyPolicy": "Forbid",
                "successfulJobsHistoryLimit": 0,
                "jobTemplate": {"spec": {"schedulerName": "volcano", "minAvailable": 1, "tasks": [task]}},
            },
        }
        await poll(lambda: _get(kube, "queues", "", "default"), timeout=10)
        made = json.loads(await kube.create("cronjobs", ns, cronjob))

        async def first_run() -> Obj | None:
            got = await _get(kube, "cronjobs", ns, "nightly")
            active = ((got or {}).get("status") or {}).get("active") or []
            return active[0] if active else None

        run: Obj = await poll(first_run, timeout=10)
        job = await _get(kube, "jobs", ns, run["name"])
        assert job is not None and run["uid"] == job["metadata"]["uid"]
        assert run["name"].startswith("nightly-")
        owner = job["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("CronJob", made["metadata"]["uid"], True)

        async def completed_and_dropped() -> Obj | None:
            got = await _get(kube, "cronjobs", ns, "nightly")
            status = (got or {}).get("status") or {}
            gone = await _get(kube, "jobs", ns, run["name"]) is None
            return status if gone and status.get("lastSuccessfulTime") else None

        status: Obj = await poll(completed_and_dropped, timeout=20, interval=0.1)
        assert run["name"] not in [ref["name"] for ref in status.get("active") or []]
        assert status["lastScheduleTime"]
    await kube.close()


async def test_a_policy_timeout_fires_its_action_when_the_time_is_up(
    sim: Emulator, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str
) -> None:
    kube = kube_for(sim.url)
    async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await s.cache()
        await s.scheduler(period=0.2)
        await s.binder()
        await s.controller()
        ns = await _namespace(kube)
        stuck = _template()
        stuck["spec"]["nodeSelector"] = {"zone": "nowhere"}  # admitted as a gang, but no node fits
        job = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "waits", "namespace": ns},
            "spec": {
                "schedulerName": "volcano",
                "queue": "default",
                "minAvailable": 1,
                "policies": [{"event": "PodPending", "action": "AbortJob", "timeout": "1s"}],
                "tasks": [{"name": "t", "replicas": 1, "template": stuck}],
            },
        }
        await poll(lambda: _get(kube, "queues", "", "default"), timeout=10)
        await kube.create("jobs", ns, job)

        async def pod_pending() -> bool:
            return await _get(kube, "pods", ns, "waits-t-0") is not None

        await poll(pod_pending, timeout=10)
        seen = datetime.now(UTC)

        async def aborted() -> bool:
            got = await _get(kube, "jobs", ns, "waits")
            return (((got or {}).get("status") or {}).get("state") or {}).get("phase") in ("Aborting", "Aborted")

        await poll(aborted, timeout=10)
        assert datetime.now(UTC) - seen >= timedelta(seconds=0.9)  # not before its timeout
    await kube.close()


async def test_a_job_whose_step_keeps_failing_is_retried_then_terminated(
    sim: Emulator, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str
) -> None:
    kube = kube_for(sim.url)
    async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await s.cache()
        await s.controller(max_requeue=3)
        ns = await _namespace(kube)
        job = {  # no admission here to refuse it: its queue does not exist, so every sync fails
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "lost", "namespace": ns},
            "spec": {
                "schedulerName": "volcano",
                "queue": "nowhere",
                "tasks": [{"name": "t", "replicas": 1, "template": _template()}],
            },
        }
        await kube.create("jobs", ns, job)

        async def terminated() -> bool:
            got = await _get(kube, "jobs", ns, "lost")
            return (((got or {}).get("status") or {}).get("state") or {}).get("phase") == "Terminated"

        await poll(terminated, timeout=15, interval=0.05)
        items, _ = await kube.list("events")
        messages = [json.loads(i.raw)["message"] for i in items if i.meta.namespace == ns]
        assert "Job failed on action SyncJob for retry limit reached" in messages, messages
        requests = s.running[-1].service.metrics.registry.get_sample_value(
            "lahar_controller_requests_total", {"controller": "jobs", "outcome": "retried"}
        )
        assert requests is not None and requests >= 3
    await kube.close()
