"""Volcano Jobs end to end on the stack `lahar up` runs (emulator, admission, cache, controller,
scheduler, binder as processes, real NATS and Valkey): a Job gets its PodGroup, its pods and its
plugins' objects, is scheduled, runs, completes and is deleted after its TTL; a failing pod
restarts the job up to maxRetry, then it fails; `lahar job suspend`/`resume` abort and resume it;
a closed queue passes Closing → Closed and admission then refuses Jobs in it; a bare pod for our
scheduler gets a PodGroup and runs; Volcano's JobFlow example runs its Jobs in DAG order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from lahar.adapters.kube import KubeClient, KubeConfig, KubeError, NotFound
from lahar.infra import EmbeddedServer
from lahar.up.stack import LocalStack, StackConfig

from .services import poll

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

Obj = dict[str, Any]
RUN = "sim.lahar.io/run-seconds"
EXIT = "sim.lahar.io/exit-code"
# ephemeral-storage: the PaddlePaddle example requests it
NODES = (
    "8:cpu=32,memory=128Gi,pods=110,ephemeral-storage=200Gi",
    "2:cpu=32,memory=128Gi,pods=110,ephemeral-storage=200Gi,nvidia.com/gpu=8,name=gpu",
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """Its own NATS and Valkey, so each service logs in as its own user, with its permissions."""
    cfg = StackConfig(
        state_dir=tmp_path_factory.mktemp("jobs"),
        nodes=NODES,
        binders=1,
        max_binders=1,
        period=0.2,
    )
    running = LocalStack(cfg).start(timeout=120)
    try:
        yield running
    finally:
        running.stop()


@pytest_asyncio.fixture
async def kube(stack: LocalStack) -> AsyncIterator[KubeClient]:
    client = KubeClient(KubeConfig.load(stack.kubeconfig))
    try:
        yield client
    finally:
        await client.close()


@pytest_asyncio.fixture
async def ns(kube: KubeClient) -> str:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    await kube.create("namespaces", "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def template(cpu: str = "1", annotations: dict[str, str] | None = None) -> Obj:
    return {
        "metadata": {"annotations": annotations or {}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
        },
    }


def volcano_job(ns: str, name: str, tasks: list[Obj], **spec: Any) -> Obj:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"schedulerName": "volcano", "tasks": tasks, **spec},
    }


async def get(kube: KubeClient, kind: str, ns: str, name: str) -> Obj | None:
    try:
        got: Obj = json.loads(await kube.get(kind, ns, name))
    except NotFound:
        return None
    return got


def phase_of(job: Obj | None) -> str:
    return str((((job or {}).get("status") or {}).get("state") or {}).get("phase") or "")


async def reach(kube: KubeClient, ns: str, name: str, phase: str, timeout: float = 30) -> Obj:
    async def check() -> Obj | None:
        job = await get(kube, "jobs", ns, name)
        return job if phase_of(job) == phase else None

    try:
        got: Obj = await poll(check, timeout=timeout, interval=0.05)
    except AssertionError:
        job = await get(kube, "jobs", ns, name)
        raise AssertionError(f"{ns}/{name} never reached {phase}: {json.dumps((job or {}).get('status'))}") from None
    return got


async def pods_of(kube: KubeClient, ns: str) -> dict[str, Obj]:
    items, _ = await kube.list("pods")
    return {i.meta.name: json.loads(i.raw) for i in items if i.meta.namespace == ns}


def lahar(stack: LocalStack, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": stack.kubeconfig}
    return subprocess.run(
        [sys.executable, "-m", "lahar", *argv], capture_output=True, text=True, env=env, timeout=60, check=False
    )


async def test_a_job_runs_completes_and_is_deleted_after_its_ttl(stack: LocalStack, kube: KubeClient, ns: str) -> None:
    run = {RUN: "2"}
    tasks = [
        {"name": "master", "replicas": 1, "template": template(annotations=run)},
        {"name": "worker", "replicas": 3, "template": template(annotations=run)},
    ]
    job = volcano_job(ns, "train", tasks, minAvailable=4, plugins={"svc": [], "env": []}, ttlSecondsAfterFinished=2)
    started = time.monotonic()
    await kube.create("jobs", ns, job)
    running = await reach(kube, ns, "train", "Running")
    to_running = time.monotonic() - started
    created = json.loads(json.dumps(running))
    uid = created["metadata"]["uid"]
    group = await get(kube, "podgroups", ns, f"train-{uid}")
    assert group is not None and group["spec"]["minMember"] == 4 and group["spec"]["queue"] == "default"
    pods = await pods_of(kube, ns)
    assert sorted(pods) == ["train-master-0", "train-worker-0", "train-worker-1", "train-worker-2"]
    worker = pods["train-worker-2"]
    env = {e["name"]: e.get("value") for e in worker["spec"]["containers"][0].get("env") or []}
    assert env.get("VC_TASK_INDEX") == "2" and env.get("VK_TASK_INDEX") == "2"
    assert worker["spec"]["nodeName"] and worker["spec"]["hostname"] == "train-worker-2"
    assert worker["spec"]["subdomain"] == "train"
    assert await get(kube, "services", ns, "train") is not None  # svc: the headless Service
    hosts = await get(kube, "configmaps", ns, "train-svc")
    assert hosts is not None and "train-worker-2.train" in hosts["data"]["worker.host"]

    done = await reach(kube, ns, "train", "Completed")
    to_completed = time.monotonic() - started
    assert done["status"]["succeeded"] == 4
    await _events_include(kube, ns, "train", {"Pending", "Running", "Completed"})  # written after the status

    await poll(lambda: _gone(kube, ns, "train"), timeout=15, interval=0.1)
    to_deleted = time.monotonic() - started
    print(f"\nJob create → Running {to_running:.2f} s, → Completed {to_completed:.2f} s, → deleted {to_deleted:.2f} s")


async def _gone(kube: KubeClient, ns: str, name: str) -> bool:
    return await get(kube, "jobs", ns, name) is None


async def _events_include(kube: KubeClient, ns: str, name: str, reasons: set[str]) -> None:
    async def included() -> bool:
        items, _ = await kube.list("events")
        events = [json.loads(i.raw) for i in items if i.meta.namespace == ns]
        return reasons <= {e["reason"] for e in events if e["involvedObject"].get("name") == name}

    await poll(included, timeout=10, interval=0.1)


async def test_a_failing_pod_restarts_the_job_up_to_max_retry_then_it_fails(
    stack: LocalStack, kube: KubeClient, ns: str
) -> None:
    failing = template(annotations={RUN: "0.5", EXIT: "3"})
    job = volcano_job(
        ns,
        "flaky",
        [{"name": "bad", "replicas": 1, "template": failing}, {"name": "good", "replicas": 1, "template": template()}],
        minAvailable=2,
        maxRetry=2,
        policies=[{"event": "PodFailed", "action": "RestartJob"}],
    )
    await kube.create("jobs", ns, job)
    seen: list[tuple[str, int]] = []

    async def watch() -> Obj | None:
        got = await get(kube, "jobs", ns, "flaky")
        status = (got or {}).get("status") or {}
        step = (phase_of(got), int(status.get("retryCount") or 0))
        if not seen or seen[-1] != step:
            seen.append(step)
        return got if step[0] == "Failed" else None

    failed: Obj = await poll(watch, timeout=60, interval=0.05)
    assert failed["status"]["retryCount"] == 2
    assert ("Running", 1) in seen, seen  # restarted once, and ran again before the last failure


async def test_suspend_aborts_the_job_and_resume_brings_it_back(stack: LocalStack, kube: KubeClient, ns: str) -> None:
    job = volcano_job(ns, "pausable", [{"name": "w", "replicas": 2, "template": template()}], minAvailable=2)
    await kube.create("jobs", ns, job)
    await reach(kube, ns, "pausable", "Running")
    done = lahar(stack, "job", "suspend", "-n", ns, "pausable")
    assert done.returncode == 0, done.stderr
    await reach(kube, ns, "pausable", "Aborted")
    await poll(lambda: _no_live_pods(kube, ns), timeout=15)
    commands, _ = await kube.list("commands")
    assert not [c for c in commands if c.meta.namespace == ns]  # executed once, then deleted
    done = lahar(stack, "job", "resume", "-n", ns, "pausable")
    assert done.returncode == 0, done.stderr
    resumed = await reach(kube, ns, "pausable", "Running")
    assert resumed["status"]["retryCount"] == 1
    await _events_include(kube, ns, "pausable", {"CommandIssued", "Aborted"})


async def _no_live_pods(kube: KubeClient, ns: str) -> bool:
    pods = await pods_of(kube, ns)
    return not [p for p in pods.values() if not p["metadata"].get("deletionTimestamp")]


async def test_a_closed_queue_passes_closing_then_closed_and_refuses_new_jobs(
    stack: LocalStack, kube: KubeClient, ns: str
) -> None:
    queue_name = f"q-{ns}"
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": queue_name}}
    await kube.create("queues", "", {**queue, "spec": {"weight": 1}})
    await poll(lambda: _queue_state(kube, queue_name, "Open"), timeout=10)
    job = volcano_job(ns, "busy", [{"name": "w", "replicas": 1, "template": template()}], queue=queue_name)
    await kube.create("jobs", ns, job)
    await reach(kube, ns, "busy", "Running")
    done = lahar(stack, "queue", "operate", "-n", queue_name, "--action", "close")
    assert done.returncode == 0, done.stderr
    await poll(lambda: _queue_state(kube, queue_name, "Closing"), timeout=10)  # its PodGroup remains
    assert lahar(stack, "job", "suspend", "-n", ns, "busy").returncode == 0  # aborting deletes the PodGroup
    await poll(lambda: _queue_state(kube, queue_name, "Closed"), timeout=20)
    with pytest.raises(KubeError) as refused:
        await kube.create("jobs", ns, volcano_job(ns, "late", job["spec"]["tasks"], queue=queue_name))
    assert "Open" in str(refused.value) or "closed" in str(refused.value).lower(), refused.value


async def _queue_state(kube: KubeClient, name: str, state: str) -> bool:
    got = await get(kube, "queues", "", name)
    return ((got or {}).get("status") or {}).get("state") == state


async def test_a_bare_pod_for_our_scheduler_gets_a_podgroup_and_runs(
    stack: LocalStack, kube: KubeClient, ns: str
) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lonely", "namespace": ns}}
    pod["spec"] = {**template()["spec"], "schedulerName": "volcano"}
    created = json.loads(await kube.create("pods", ns, pod))
    group = f"podgroup-{created['metadata']['uid']}"

    async def running() -> Obj | None:
        got = await get(kube, "pods", ns, "lonely")
        return got if ((got or {}).get("status") or {}).get("phase") == "Running" else None

    ran: Obj = await poll(running, timeout=20)
    assert ran["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == group
    made = await get(kube, "podgroups", ns, group)
    assert made is not None and made["spec"]["minMember"] == 1
    assert made["metadata"]["ownerReferences"][0]["kind"] == "Pod"


async def test_a_dependent_task_starts_only_once_the_task_it_depends_on_runs(
    stack: LocalStack, kube: KubeClient, ns: str
) -> None:
    first = template()
    first["spec"]["nodeSelector"] = {"e2e/dependency": ns}  # no node has it yet: the pod waits
    tasks = [
        {"name": "a", "replicas": 1, "minAvailable": 1, "template": first},
        {"name": "b", "replicas": 2, "dependsOn": {"name": ["a"]}, "template": template()},
    ]
    await kube.create("jobs", ns, volcano_job(ns, "ordered", tasks, minAvailable=1))

    async def a_waiting() -> bool:  # the sync that created a's pod also looked at b
        job = await get(kube, "jobs", ns, "ordered")
        return int(((job or {}).get("status") or {}).get("pending") or 0) == 1

    await poll(a_waiting, timeout=20)
    assert sorted(await pods_of(kube, ns)) == ["ordered-a-0"]
    nodes, _ = await kube.list("nodes")
    await kube.patch("nodes", "", nodes[0].meta.name, {"metadata": {"labels": {"e2e/dependency": ns}}})

    async def b_created() -> dict[str, Obj] | None:
        pods = await pods_of(kube, ns)
        return pods if "ordered-b-0" in pods else None

    pods: dict[str, Obj] = await poll(b_created, timeout=20)
    assert pods["ordered-a-0"]["status"]["phase"] == "Running"
    await reach(kube, ns, "ordered", "Running")


async def test_pods_of_a_workload_share_one_podgroup_with_its_min_member(
    stack: LocalStack, kube: KubeClient, ns: str
) -> None:
    spec = {**template()["spec"], "schedulerName": "volcano", "restartPolicy": "Always"}
    replicaset = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": ns, "annotations": {"scheduling.volcano.sh/group-min-member": "2"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec},
        },
    }
    owner = json.loads(await kube.create("replicasets", ns, replicaset))
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": owner["metadata"]["uid"]}
    for i in range(2):  # the emulator runs no ReplicaSet controller: its pods, as it would make them
        meta: Obj = {"name": f"web-{i}", "namespace": ns, "labels": {"app": "web"}}
        meta["ownerReferences"] = [{**ref, "controller": True, "blockOwnerDeletion": True}]
        await kube.create("pods", ns, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})

    async def both_running() -> dict[str, Obj] | None:
        pods = await pods_of(kube, ns)
        running = [p for p in pods.values() if (p.get("status") or {}).get("phase") == "Running"]
        return pods if len(running) == 2 else None

    pods: dict[str, Obj] = await poll(both_running, timeout=20)
    group = f"podgroup-{owner['metadata']['uid']}"
    assert {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for p in pods.values()} == {group}
    made = await get(kube, "podgroups", ns, group)
    assert made is not None and made["spec"]["minMember"] == 2  # the owner's annotation, read from the mirror


JOBFLOW = Path(__file__).parents[1] / "admission" / "examples" / "example" / "jobflow"


def _flow_example(ns: str) -> tuple[list[Obj], Obj]:
    """Volcano's example/jobflow, in ``ns``; a test copy: each template's pods get a run time (the
    example's pods run ``sleep 10s``, which the emulator does not execute)."""
    templates = list(yaml.safe_load_all((JOBFLOW / "JobTemplate.yaml").read_text()))
    for doc in templates:
        doc["metadata"]["namespace"] = ns
        for task in doc["spec"]["tasks"]:
            task["template"]["metadata"].setdefault("annotations", {})[RUN] = "0.5"
    flow = yaml.safe_load((JOBFLOW / "JobFlow.yaml").read_text())
    flow["metadata"]["namespace"] = ns
    return templates, flow


async def test_the_jobflow_example_runs_its_jobs_in_dag_order_and_succeeds(
    stack: LocalStack, kube: KubeClient, ns: str
) -> None:
    templates, flow = _flow_example(ns)
    for doc in templates:
        await kube.create("jobtemplates", ns, doc)
    started = time.monotonic()
    await kube.create("jobflows", ns, flow)
    name = flow["metadata"]["name"]
    needs = {
        f"{name}-{s['name']}": {f"{name}-{t}" for t in (s.get("dependsOn") or {}).get("targets") or []}
        for s in flow["spec"]["flows"]
    }
    seen: list[str] = []  # Jobs in the order they appeared

    async def succeeded() -> Obj | None:
        items, _ = await kube.list("jobs")
        jobs = {i.meta.name: json.loads(i.raw) for i in items if i.meta.namespace == ns}
        for job in sorted(set(jobs) - set(seen)):
            # the API is ahead of what the controller saw: its dependencies must be Completed now
            phases = {dep: phase_of(jobs.get(dep)) for dep in needs[job]}
            assert set(phases.values()) <= {"Completed"}, f"{job} created while {phases}"
            seen.append(job)
        got = await get(kube, "jobflows", ns, name)
        return got if phase_of(got) == "Succeed" else None

    try:
        done: Obj = await poll(succeeded, timeout=60, interval=0.05)
    except AssertionError as exc:
        got = await get(kube, "jobflows", ns, name)
        raise AssertionError(f"{exc}; flow status {json.dumps((got or {}).get('status'))}; seen {seen}") from None
    took = time.monotonic() - started
    assert set(seen) == set(needs), seen
    assert seen.index(f"{name}-a") < seen.index(f"{name}-b") < min(seen.index(f"{name}-c"), seen.index(f"{name}-d"))
    assert seen[-1] == f"{name}-e"
    assert sorted(done["status"]["completedJobs"]) == sorted(needs)
    # jobRetainPolicy: delete — once Succeed, the flow's Jobs go
    await poll(lambda: _no_jobs(kube, ns), timeout=15, interval=0.1)
    template_a = await get(kube, "jobtemplates", ns, "a")
    assert (template_a or {}).get("status", {}).get("jobDependsOnList") == [f"{name}-a"]
    print(f"\nJobFlow of 5 steps (4 levels) create → Succeed {took:.2f} s")


async def test_a_jobflow_that_is_not_a_dag_is_refused(stack: LocalStack, kube: KubeClient, ns: str) -> None:
    _, flow = _flow_example(ns)
    flow["metadata"]["name"] = "cyclic"
    flow["spec"]["flows"][0]["dependsOn"] = {"targets": ["e"]}  # a → … → e → a
    with pytest.raises(KubeError) as refused:
        await kube.create("jobflows", ns, flow)
    assert "not DAG" in str(refused.value), refused.value


async def _no_jobs(kube: KubeClient, ns: str) -> bool:
    items, _ = await kube.list("jobs")
    return not [i for i in items if i.meta.namespace == ns]


EXAMPLES = Path(__file__).parents[1] / "admission" / "examples" / "example"  # ../shared/volcano-examples
# Refused by admission (examples/README.md): duplicate policy event, duplicate task name,
# minAvailable above the replicas, and `priorityClass` (not a PodSpec field) in elastic-job.
BROKEN = {"invalid_jobs", "elastic-job.yaml"}


def _example_jobs() -> list[Path]:
    found = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        if BROKEN & {path.name, path.parent.name}:
            continue
        if any(_is_volcano_job(doc) for doc in yaml.safe_load_all(path.read_text())):
            found.append(path)
    return found


def _is_volcano_job(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("kind") == "Job" and doc.get("apiVersion") == "batch.volcano.sh/v1alpha1"


async def _example_queues(kube: KubeClient) -> None:
    """The queues the examples name (hierarchical-jobs/queues.yaml), created as a user would first."""
    for doc in yaml.safe_load_all((EXAMPLES / "hierarchical-jobs" / "queues.yaml").read_text()):
        try:
            await kube.create("queues", "", doc)
        except KubeError as exc:
            if exc.status != 409:
                raise
        name = str(doc["metadata"]["name"])
        await poll(lambda: _queue_state(kube, name, "Open"), timeout=10)  # noqa: B023 (awaited at once)


@pytest.mark.parametrize("path", _example_jobs(), ids=lambda p: str(p.relative_to(EXAMPLES)))
async def test_every_valid_volcano_example_job_applies_unchanged_and_runs(
    stack: LocalStack, kube: KubeClient, ns: str, path: Path
) -> None:
    await _example_queues(kube)
    jobs = [doc for doc in yaml.safe_load_all(path.read_text()) if _is_volcano_job(doc)]
    started = time.monotonic()
    for job in jobs:
        await kube.create("jobs", ns, job)
    for job in jobs:
        running = await reach(kube, ns, job["metadata"]["name"], "Running")
        uid = running["metadata"]["uid"]
        assert await get(kube, "podgroups", ns, f"{job['metadata']['name']}-{uid}") is not None
    print(f" {len(jobs)} job(s) Running {time.monotonic() - started:.2f} s after create", end="")


async def test_no_service_was_refused_by_nats(stack: LocalStack) -> None:
    """Each service's NATS user may do all that service does (the controller's included)."""
    assert stack.infra is not None
    server = stack.infra.nats
    assert isinstance(server, EmbeddedServer)
    log = server.log_path.read_text(errors="replace")
    assert "[INF] Server is ready" in log or "Server is ready" in log
    assert [line for line in log.splitlines() if "violation" in line.lower()] == []
