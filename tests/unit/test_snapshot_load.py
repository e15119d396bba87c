"""The fast mirror load (issue 14, "restart to first bind") gives exactly the snapshot the slow
one gave: the bulk node sums equal the per-task ones, shared quantities never hide a negative
request, and the load pauses the garbage collector without leaving it off."""

from __future__ import annotations

import gc

import msgspec
import numpy as np
import pytest

from lahar.adapters.mirror import MirrorState
from lahar.api.codec import DecodeError, decode_json_as
from lahar.api.objects import Node, Pod, PodGroup, Queue
from lahar.wire.messages import Delta
from lahar_scheduler.deltas import decode
from lahar_scheduler.framework.snapshot import Snapshot
from lahar_scheduler.live import LiveView
from lahar_scheduler.restart_cluster import build

ARRAYS = ("alloc", "used", "idle", "releasing", "pipelined", "future", "requested", "nonzero", "pod_count")


def _objects(
    nodes: int = 6, pods: int = 70, pending: int = 20
) -> tuple[list[Node], list[Pod], list[PodGroup], list[Queue]]:
    cluster = build(nodes, pods, pending)
    typed = {
        kind: [decode_json_as(raw, typ) for _, raw in cluster.objects[kind]]
        for kind, typ in (("nodes", Node), ("pods", Pod), ("podgroups", PodGroup), ("queues", Queue))
    }
    return typed["nodes"], typed["pods"], typed["podgroups"], typed["queues"]


def _varied(pods: list[Pod]) -> list[Pod]:
    """Some tasks releasing (being deleted) and some finished, so every branch of the sums runs."""
    out = []
    for i, pod in enumerate(pods):
        if pod.spec.node_name and i % 7 == 0:
            pod = msgspec.structs.replace(
                pod, metadata=msgspec.structs.replace(pod.metadata, deletion_timestamp="2026-12-02T10:00:00Z")
            )
        elif pod.spec.node_name and i % 11 == 0:
            pod = msgspec.structs.replace(pod, status=msgspec.structs.replace(pod.status, phase="Succeeded"))
        out.append(pod)
    return out


def test_the_bulk_build_sums_every_node_exactly_as_one_task_at_a_time() -> None:
    nodes, pods, groups, queues = _objects()
    pods = _varied(pods)
    bulk = Snapshot(nodes, pods, groups, queues)
    single = Snapshot(nodes, [], groups, queues)
    for pod in pods:
        single.upsert_pod(pod)
    for name in ARRAYS:
        assert np.array_equal(getattr(bulk.nodes, name), getattr(single.nodes, name)), name
    assert np.array_equal(bulk.nodes.row_version, single.nodes.row_version)
    assert bulk.nodes.generation == single.nodes.generation
    for a, b in zip(bulk.nodes.infos, single.nodes.infos, strict=True):
        assert list(a.tasks) == list(b.tasks)  # same tasks, in the same order
    assert bulk.nodes.used.sum() > 0 and bulk.nodes.releasing.sum() > 0


def _job_state(snap: Snapshot) -> dict[str, object]:
    return {
        uid: (
            list(job.tasks),
            {status: list(bucket) for status, bucket in job.status_index.items()},
            (job.allocated.milli_cpu, job.allocated.memory, dict(job.allocated.scalars)),
            (job.total_request.milli_cpu, job.total_request.memory, dict(job.total_request.scalars)),
            job.pending_best_effort,
        )
        for uid, job in snap.jobs.items()
    }


def test_the_bulk_build_fills_every_job_exactly_as_one_task_at_a_time() -> None:
    """Jobs take their tasks in bulk at a build (sums by runs of one request): the same task
    order, status buckets and float sums, bit for bit, a pod listed twice included."""
    nodes, pods, groups, queues = _objects(pods=90, pending=30)
    pods = _varied(pods)
    odd = msgspec.structs.replace(pods[3].spec.containers[0].resources, requests={"cpu": "0.1", "memory": "1.5Gi"})
    container = msgspec.structs.replace(pods[3].spec.containers[0], resources=odd)
    pods[3] = msgspec.structs.replace(pods[3], spec=msgspec.structs.replace(pods[3].spec, containers=[container]))
    listed = [*pods[:40], pods[5], *pods[40:], pods[60]]  # two listed twice, mid-way
    bulk = Snapshot(nodes, listed, groups, queues)
    single = Snapshot(nodes, [], groups, queues)
    for pod in listed:
        single.upsert_pod(pod)
    assert _job_state(bulk) == _job_state(single)
    assert list(bulk.tasks) == list(single.tasks)


def test_a_task_of_a_known_shape_is_the_task_made_from_its_pod() -> None:
    from lahar_scheduler.framework.jobs import TaskInfo, pod_requests

    nodes, pods, groups, queues = _objects()
    snap = Snapshot(nodes, pods, groups, queues)
    for pod in pods:
        task = snap.tasks[f"{pod.metadata.namespace}/{pod.metadata.name}"]
        fresh = TaskInfo(pod, task.job, *pod_requests(pod))
        for name in TaskInfo.__slots__:
            if name in ("res_vec", "init_vec", "fit_cols", "nonzero_vec", "template_key", "resreq", "init_resreq"):
                continue  # set by the snapshot's vectorising (compared by the node sums above)
            assert getattr(task, name) == getattr(fresh, name), name


def test_a_pod_listed_twice_counts_once() -> None:
    nodes, pods, groups, queues = _objects()
    placed = next(p for p in pods if p.spec.node_name)
    twice = Snapshot(nodes, [*pods, placed], groups, queues)
    once = Snapshot(nodes, pods, groups, queues)
    assert np.array_equal(twice.nodes.used, once.nodes.used)
    assert int(twice.nodes.pod_count.sum()) == int(once.nodes.pod_count.sum())


def _pod_delta(name: str, cpu: str) -> Delta:
    raw = msgspec.json.encode(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
            },
        }
    )
    return Delta(kind="pods", op="ADDED", key=f"default/{name}", rv="1", obj=msgspec.Raw(raw))


@pytest.mark.parametrize("first", ["1", "-1"])
def test_a_negative_request_is_refused_every_time_it_is_seen(first: str) -> None:
    if first == "1":
        decode(_pod_delta("warm", first))  # a positive quantity shared from now on
    for name in ("a", "b"):  # the second time must not come from a cache that skips the check
        with pytest.raises(DecodeError, match=rf"pods/default/{name}\.spec\.containers\[0\]"):
            decode(_pod_delta(name, "-1"))
    pod = decode(_pod_delta("c", "1"))
    assert pod.spec.containers[0].resources.requests["cpu"].milli == 1000


def test_a_value_that_is_not_a_quantity_still_names_its_field() -> None:
    with pytest.raises(
        DecodeError, match=r"pods/default/x\.spec\.containers\[0\]\.resources\.requests\.cpu: 'lots' is not a quantity"
    ):
        decode(_pod_delta("x", "lots"))


def test_the_load_leaves_the_collector_as_it_found_it() -> None:
    cluster = build(4, 30, 10)
    state = MirrorState(1, "s", {k: dict(v) for k, v in cluster.objects.items()}, 1)
    view = LiveView()
    assert gc.isenabled()
    view.load(state, 0.0)
    view.load(state, 0.0)  # a reload: the old snapshot must become collectable again
    assert gc.isenabled()
    assert len(view.snapshot.tasks) == 30 and len(view.snapshot.nodes) == 4
    gc.unfreeze()


def test_the_load_leaves_its_objects_frozen() -> None:
    cluster = build(4, 30, 10)
    state = MirrorState(1, "s", {k: dict(v) for k, v in cluster.objects.items()}, 1)
    view = LiveView()
    gc.collect()
    view.load(state, 0.0)
    try:
        # every task made by the load is in the permanent generation, none waits in generation 0
        assert gc.get_freeze_count() > 0
        assert gc.get_count()[0] < 100
    finally:
        gc.unfreeze()


async def test_a_leader_publishes_binds_and_evictions_before_the_statuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a start every PodGroup's status is sent again (5,000 at 5,000 PodGroups): binders
    must not wait for those to be queued before the first bind leaves."""
    from prometheus_client import CollectorRegistry

    from lahar.adapters.bus import Outgoing
    from lahar.wire.names import Names
    from lahar_scheduler import service

    sent: list[list[str]] = []

    async def publish_batch(js: object, batch: list[Outgoing]) -> list[int]:
        sent.append([m.subject.rsplit(".", 1)[1] for m in batch])
        return list(range(len(batch)))

    monkeypatch.setattr(service, "publish_batch", publish_batch)
    names = Names("t")
    svc = service.SchedulerService(  # no connections: only _publish runs
        None,
        None,
        None,
        names,
        CollectorRegistry(),
        service.ConfSource(None),
    )
    kinds = ["podgroup", "bind", "queue", "evict", "podstatus", "bind"]
    await svc._publish([Outgoing(names.decision_subject(k), b"{}") for k in kinds])
    assert sent == [["bind", "evict", "bind"], ["podgroup", "queue", "podstatus"]]


def _with_affinity(pod: Pod, kind: str) -> Pod:
    from lahar.api.objects import Affinity, PodAffinity

    aff = Affinity(pod_affinity=PodAffinity()) if kind == "pod" else Affinity(pod_anti_affinity=PodAffinity())
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, affinity=aff))


def test_the_snapshot_counts_its_pods_with_pod_affinity_through_every_change() -> None:
    from lahar_scheduler.framework.snapshot import has_pod_affinity

    nodes, pods, groups, queues = _objects()
    pods = [_with_affinity(p, "pod" if i % 3 else "anti") if i % 5 == 0 else p for i, p in enumerate(pods)]
    snap = Snapshot(nodes, [*pods, pods[0]], groups, queues)  # one listed twice

    def counted() -> int:
        return sum(has_pod_affinity(t.pod) for t in (*snap.tasks.values(), *snap.others.values()))

    assert snap.pod_affinity_tasks == counted() > 0
    for pod in pods[:20]:
        snap.delete_pod(pod.metadata.namespace, pod.metadata.name)
        assert snap.pod_affinity_tasks == counted()
    for i, pod in enumerate(pods[:30]):
        snap.upsert_pod(_with_affinity(pod, "pod") if i % 2 else pod)
        assert snap.pod_affinity_tasks == counted()
    for pod in pods:
        snap.delete_pod(pod.metadata.namespace, pod.metadata.name)
    assert snap.pod_affinity_tasks == 0


def test_the_load_is_the_snapshot_built_from_every_pod_decoded_whole() -> None:
    """The mirror load (shared specs, shape keys from templates) against a build from each pod
    decoded alone: the same tasks, node sums and first session's decisions."""
    from lahar_scheduler.core import load_conf, run_session
    from lahar_scheduler.deltas import decode_raw

    cluster = build(12, 240, 60)
    state = MirrorState(1, "s", {k: dict(v) for k, v in cluster.objects.items()}, 1)
    view = LiveView()
    view.load(state, 5.0)
    gc.unfreeze()
    typed = {k: [decode_raw(k, key, raw) for key, raw in held] for k, held in cluster.objects.items()}
    kinds = ("nodes", "pods", "podgroups", "queues", "priorityclasses", "namespaces")
    whole = Snapshot(*(typed[k] for k in kinds), now=5.0)
    loaded = view.snapshot
    assert list(loaded.tasks) == list(whole.tasks)
    for key, task in loaded.tasks.items():
        other = whole.tasks[key]
        assert task.pod == other.pod and task.template_key == other.template_key
        assert (task.status, task.node_name, task.job) == (other.status, other.node_name, other.job)
        assert np.array_equal(task.res_vec, other.res_vec) and np.array_equal(task.init_vec, other.init_vec)
    for name in ARRAYS:
        assert np.array_equal(getattr(loaded.nodes, name), getattr(whole.nodes, name)), name
    conf = load_conf(None)
    got, want = (run_session(s, conf, seed=3, uid="u") for s in (loaded, whole))
    placed = [[(t.key, node) for t, node in result.binds] for result in (got, want)]
    assert placed[0] == placed[1] and placed[0]


def test_collector_pauses_nest_and_restore_what_they_found() -> None:
    from lahar_scheduler.gcpause import collector_paused

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # a load during a session's publishing
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # off before: stays off
    finally:
        gc.enable()


async def test_a_session_runs_and_publishes_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    from prometheus_client import CollectorRegistry

    from lahar.wire.names import Names
    from lahar_scheduler import service

    seen: list[bool] = []
    svc = service.SchedulerService(None, None, None, Names("t"), CollectorRegistry(), service.ConfSource(None))
    real = svc._decide

    def decide(*args: object) -> object:
        seen.append(gc.isenabled())
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(svc, "_decide", decide)
    await svc.session()
    assert seen == [False] and gc.isenabled()
