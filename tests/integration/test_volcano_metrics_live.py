"""Volcano's metrics on a running stack: every row of docs/METRICS.md's table and every series the
Grafana dashboard queries is scraped over HTTP from the service named, with the labels expected.

cache, scheduler, binder and controller run in this test's loop on real NATS, Valkey and the
emulator (``services.stack``), each serving its registry on ``/metrics`` as ``lahar up`` does.  The
cluster gets a gang that fits (queue ``research``, which has a capability), a GPU job, a GPU
reservation waiting in the queue and a gang that can never fit (queue ``default``).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from lahar.adapters.kube import Conflict, KubeClient
from lahar.service import Health, ProbeServer
from lahar.sim import Emulator

from .services import kube_for, poll, stack

pytestmark = pytest.mark.asyncio

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "METRICS.md"
DASHBOARD = ROOT / "deploy" / "grafana" / "lahar-volcano.json"
GROUP = "scheduling.k8s.io/group-name"
GPU = "nvidia.com/gpu"
HISTOGRAM_PARTS = ("_bucket", "_sum", "_count", "_created")
NAME_LABELS = ("queue_name", "queue", "job_name", "job_id")
Scraped = dict[str, list[dict[str, str]]]  # sample name -> the label sets it has


# -- what must be there ----------------------------------------------------------------------------
def documented() -> dict[str, tuple[str, set[str]]]:
    """docs/METRICS.md's Volcano table: metric -> (service, its labels)."""
    rows: dict[str, tuple[str, set[str]]] = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`volcano_"):
            continue
        labels = set(re.findall(r"`(\w+)`", cells[2]))
        rows[cells[0].strip("`")] = (cells[3], labels)
    return rows


def dashboard_queries() -> list[tuple[str, str]]:
    """Every (expr, legendFormat) of the dashboard's panels."""
    doc = json.loads(DASHBOARD.read_text())
    return [(t["expr"], t.get("legendFormat", "")) for p in doc["panels"] for t in p.get("targets", [])]


def referenced_labels(expr: str, legend: str) -> set[str]:
    """Labels a query needs from its series: grouped by, matched on, or shown in the legend."""
    labels = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))
    for group in re.findall(r"\bby\s*\(([^)]*)\)", expr):
        labels |= {g.strip() for g in group.split(",") if g.strip()}
    for matchers in re.findall(r"\{([^}]*)\}", expr):
        labels |= set(re.findall(r"(\w+)\s*=~?", matchers))
    return labels


# -- the cluster -----------------------------------------------------------------------------------
def queue(name: str, weight: int = 1, capability: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight}
    if capability:
        spec["capability"] = capability
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def podgroup(ns: str, name: str, min_member: int, queue_name: str, min_resources: dict[str, str] | None = None) -> Any:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue_name}
    if min_resources:
        spec["minResources"] = min_resources
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def pod(ns: str, name: str, group: str, requests: dict[str, str], gpu: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": {"requests": requests}}
    spec: dict[str, Any] = {"schedulerName": "volcano", "containers": [container]}
    if gpu:
        container["resources"]["limits"] = {GPU: requests[GPU]}
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": {GROUP: group}},
        "spec": spec,
    }


def volcano_job(ns: str, name: str, exit_code: str) -> dict[str, Any]:
    annotations = {"sim.lahar.io/run-seconds": "0.2", "sim.lahar.io/exit-code": exit_code}
    template = {
        "metadata": {"annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": 1,
            "tasks": [{"name": "t", "replicas": 1, "template": template}],
        },
    }


async def create(kube: KubeClient, kind: str, ns: str, obj: dict[str, Any]) -> None:
    with contextlib.suppress(Conflict):
        await kube.create(kind, ns, obj)


async def populate(kube: KubeClient, ns: str) -> None:
    await create(kube, "queues", "", queue("default"))
    await create(kube, "queues", "", queue("research", 2, {"cpu": "24", "memory": "96Gi", GPU: "2"}))
    await create(kube, "podgroups", ns, podgroup(ns, "train", 4, "research"))
    for i in range(4):
        await create(kube, "pods", ns, pod(ns, f"train-{i}", "train", {"cpu": "1", "memory": "1Gi"}))
    await create(kube, "podgroups", ns, podgroup(ns, "gpu", 1, "research", {"cpu": "1", GPU: "1"}))
    await create(kube, "pods", ns, pod(ns, "gpu-0", "gpu", {"cpu": "1", "memory": "1Gi", GPU: "1"}, gpu=True))
    # Admitted (Inqueue) but with no pod yet: its GPU stays reserved in the queue (inqueue series).
    await create(kube, "podgroups", ns, podgroup(ns, "reserve", 1, "research", {"cpu": "1", GPU: "1"}))
    # Volcano Jobs (the controller's): one that completes, one whose only pod fails.
    await create(kube, "jobs", ns, volcano_job(ns, "done", "0"))
    await create(kube, "jobs", ns, volcano_job(ns, "broken", "1"))
    await create(kube, "podgroups", ns, podgroup(ns, "huge", 3, "default"))
    for i in range(3):
        await create(kube, "pods", ns, pod(ns, f"huge-{i}", "huge", {"cpu": "40", "memory": "1Gi"}))


# -- scraping --------------------------------------------------------------------------------------
@contextlib.asynccontextmanager
async def served(registries: dict[str, CollectorRegistry]) -> AsyncIterator[dict[str, str]]:
    """Each registry on its own ``/metrics``, as each service process serves it: service -> URL."""
    async with contextlib.AsyncExitStack() as stack_:
        urls = {}
        for service, registry in registries.items():
            server = await stack_.enter_async_context(ProbeServer(Health(), registry, "127.0.0.1", 0))
            urls[service] = f"http://127.0.0.1:{server.port}/metrics"
        yield urls


async def scrape(client: httpx.AsyncClient, url: str) -> Scraped:
    reply = await client.get(url)
    reply.raise_for_status()
    out: Scraped = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(dict(sample.labels))
    return out


def missing_rows(scraped: dict[str, Scraped]) -> list[str]:
    """Rows of the table not scraped from their service with exactly their labels."""
    problems = []
    for metric, (service, labels) in documented().items():
        got = scraped.get(service, {})
        names = [metric] if metric in got else [metric + part for part in HISTOGRAM_PARTS if metric + part in got]
        if not names:
            problems.append(f"{metric}: not scraped from {service}")
            continue
        seen = [set(s) - {"le"} for name in names for s in got[name]]
        if not any(s == labels for s in seen):
            problems.append(f"{metric} from {service}: labels {sorted(map(sorted, seen))[:3]}, want {sorted(labels)}")
    return problems


def missing_queries(scraped: dict[str, Scraped]) -> list[str]:
    everything: Scraped = {}
    for got in scraped.values():
        for name, label_sets in got.items():
            everything.setdefault(name, []).extend(label_sets)
    problems = []
    for expr, legend in dashboard_queries():
        needed = referenced_labels(expr, legend) - {"le"}
        for name in set(re.findall(r"\b((?:volcano|lahar)_\w+)", expr)):
            sets = everything.get(name, [])
            if not sets:
                problems.append(f"{name} (in {expr!r}): no such series")
            elif not any(needed <= set(s) for s in sets):
                problems.append(f"{name} (in {expr!r}): no series with labels {sorted(needed)}")
    return problems


async def test_documented_and_dashboard_series_are_scraped_from_a_running_stack(
    sim: Emulator, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str
) -> None:
    assert len(documented()) >= 40, "the table in docs/METRICS.md was not found"
    assert dashboard_queries(), "the dashboard has no queries"
    kube = kube_for(sim.url)
    ns = f"vm-{lahar_prefix}".replace("_", "-").lower()
    async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await create(kube, "queues", "", queue("default"))
        services = {
            "cache": await s.cache(),
            "scheduler": await s.scheduler(period=0.2),
            "binder": await s.binder(),
            "controller": await s.controller(),
        }
        registries = {name: run.service.metrics.registry for name, run in services.items()}
        await populate(kube, ns)
        async with served(registries) as urls, httpx.AsyncClient(timeout=5) as client:
            scraped: dict[str, Scraped] = {}

            async def complete() -> bool:
                for service, url in urls.items():
                    scraped[service] = await scrape(client, url)
                return not missing_rows(scraped) and not missing_queries(scraped)

            with contextlib.suppress(AssertionError):
                await poll(complete, timeout=30.0, interval=0.3)
            assert missing_rows(scraped) == []
            assert missing_queries(scraped) == []
            # Standbys export no queue gauges: only one scheduler and one controller run here, and
            # they lead; what they export is about this cluster.
            queues = {s["queue_name"] for s in scraped["scheduler"]["volcano_queue_weight"]}
            assert {"default", "research"} <= queues
            pg = scraped["controller"]["volcano_queue_pod_group_running_count"]
            assert {"research"} <= {s["queue_name"] for s in pg}
    await kube.close()


async def test_deleted_queues_and_jobs_lose_their_series_and_a_standby_exports_none(
    sim: Emulator, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str
) -> None:
    kube = kube_for(sim.url)
    ns = f"gone-{lahar_prefix}".replace("_", "-").lower()
    brief = f"brief-{lahar_prefix}".replace("_", "-").lower()  # a queue of this test only
    async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await create(kube, "queues", "", queue("default"))
        await s.cache()
        leader = await s.scheduler(period=0.1)
        await poll(lambda: leader.service.is_leader, timeout=10.0)
        standby = await s.scheduler(period=0.1, identity="scheduler-standby")
        await s.binder()  # a new epoch settles only once the decisions of older ones are executed
        controller = await s.controller()
        registries = {
            "leader": leader.service.metrics.registry,
            "standby": standby.service.metrics.registry,
            "controller": controller.service.metrics.registry,
        }
        await create(kube, "queues", "", queue(brief, 3))
        await create(kube, "podgroups", ns, podgroup(ns, "short-lived", 1, brief))
        async with served(registries) as urls, httpx.AsyncClient(timeout=5) as client:

            async def mentions(service: str) -> set[str]:
                """This test's queue and job, where the service's series name them."""
                got = await scrape(client, urls[service])
                labels = {v for sets in got.values() for s in sets for k, v in s.items() if k in NAME_LABELS}
                return labels & {brief, "short-lived"}

            async def present() -> bool:
                return await mentions("leader") == {brief, "short-lived"} and await mentions("controller") == {brief}

            await poll(present, timeout=15.0, interval=0.2)
            await kube.delete("podgroups", ns, "short-lived")
            await kube.delete("queues", "", brief)

            async def gone() -> bool:
                return not await mentions("leader") and not await mentions("controller")

            await poll(gone, timeout=15.0, interval=0.2)
            # Gone because they were deleted, not because nothing is exported: the leader still
            # leads and exports the queues that remain.
            assert leader.service.is_leader and not standby.service.is_leader
            remaining = (await scrape(client, urls["leader"]))["volcano_queue_weight"]
            assert "default" in {s["queue_name"] for s in remaining}
            standby_series = await scrape(client, urls["standby"])
            assert not [n for n in standby_series if n.startswith(("volcano_queue_", "volcano_job_share"))]
            assert "volcano_e2e_job_scheduling_start_time" not in standby_series
    await kube.close()


async def test_idle_sessions_are_counted_and_make_no_span(
    sim: Emulator, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, tmp_path: Path
) -> None:
    """Sessions that decide nothing leave no ``scheduler.session`` span, only a count; the session
    that places a gang has its span, with the job's span under it."""
    from lahar.adapters.otel import load_traces

    traces = str(tmp_path / "traces.jsonl")
    kube = kube_for(sim.url)
    ns = f"idle-{lahar_prefix}".replace("_", "-").lower()
    async with stack(sim.url, nats_url, redis_url, lahar_prefix, traces, nats_ca=nats_ca) as s:
        await create(kube, "queues", "", queue("default"))
        await s.cache()
        scheduler = await s.scheduler(period=0.05)
        await s.binder()
        registry = scheduler.service.metrics.registry

        def idle() -> float:
            return float(registry.get_sample_value("lahar_scheduler_idle_sessions_total") or 0)

        def sessions() -> list[dict[str, Any]]:
            return [x for x in load_traces(traces) if x["name"] == "scheduler.session"]

        # Once the statuses of whatever the cluster already holds are written, sessions go idle.
        await poll(lambda: idle() >= 10, timeout=10.0)
        before, idle_before = len(sessions()), idle()
        await poll(lambda: idle() >= idle_before + 10, timeout=10.0)
        assert len(sessions()) == before, "idle sessions made spans"

        await create(kube, "podgroups", ns, podgroup(ns, "pg", 2, "default"))
        for i in range(2):
            await create(kube, "pods", ns, pod(ns, f"p-{i}", "pg", {"cpu": "1", "memory": "1Gi"}))

        def placing_span() -> Any:
            return next((x for x in sessions()[before:] if x["attributes"].get("lahar.binds") == 2), None)

        span = await poll(placing_span, timeout=10.0)
        jobs = [
            x for x in load_traces(traces) if x["name"] == "scheduler.job" and x["parent_span_id"] == span["span_id"]
        ]
        mine = [j for j in jobs if j["attributes"]["lahar.job"] == f"{ns}/pg"]  # others' jobs may wait too
        assert len(mine) == 1
        assert span["start"] <= mine[0]["start"] <= mine[0]["end"] <= span["end"]
    await kube.close()
