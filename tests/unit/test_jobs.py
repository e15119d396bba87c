"""Tasks, jobs and queues: status mapping, requests, counters and the PodGroup phase helper."""

from __future__ import annotations

import pytest

from builders import make_conf, node, open_session, pod, podgroup, priority_class, queue, snapshot
from lahar.api.codec import decode_object
from lahar.api.objects import Pod
from lahar.api.resource import Resource, same
from lahar_scheduler.framework.jobs import JobInfo, TaskInfo, pod_index, pod_requests, pod_status
from lahar_scheduler.framework.session import pod_group_phase
from lahar_scheduler.framework.types import PodGroupPhase, TaskStatus

S = TaskStatus


@pytest.mark.parametrize(
    ("phase", "node_name", "deleting", "status"),
    [
        ("Pending", "", False, S.PENDING),
        ("", "", False, S.PENDING),
        ("Pending", "n1", False, S.BOUND),
        ("Running", "n1", False, S.RUNNING),
        ("Running", "n1", True, S.RELEASING),
        ("Pending", "n1", True, S.RELEASING),
        ("Pending", "", True, S.RELEASING),
        ("Succeeded", "n1", False, S.SUCCEEDED),
        ("Failed", "n1", False, S.FAILED),
        ("Weird", "n1", False, S.UNKNOWN),
    ],
)
def test_pod_status(phase: str, node_name: str, deleting: bool, status: TaskStatus) -> None:
    assert pod_status(pod("p", phase=phase, node_name=node_name, deleting=deleting)) == status


def _task(p: Pod, job: str = "default/pg") -> TaskInfo:
    resreq, init = pod_requests(p)
    return TaskInfo(p, job, resreq, init)


def test_task_priority_and_preemptable() -> None:
    assert _task(pod("p")).priority == 1  # no spec.priority: 1
    assert _task(pod("p", priority=0)).priority == 0
    assert _task(pod("p", priority=7, annotations={"volcano.sh/task-priority": "42"})).priority == 42
    assert _task(pod("p", priority=7, annotations={"volcano.sh/task-priority": "x"})).priority == 7
    assert _task(pod("p")).preemptable is True
    assert _task(pod("p", labels={"volcano.sh/preemptable": "false"})).preemptable is False
    assert _task(
        pod("p", annotations={"volcano.sh/preemptable": "True"}, labels={"volcano.sh/preemptable": "0"})
    ).preemptable
    assert _task(pod("p", annotations={"volcano.sh/preemptable": "maybe"})).preemptable is False


def test_task_identity_and_role() -> None:
    t = _task(pod("w-0", "ns", labels={"volcano.sh/task-spec": "worker"}))
    assert (t.uid, t.key, t.role, t.namespace) == ("ns-w-0", "ns/w-0", "worker", "ns")
    assert _task(pod("x", annotations={"volcano.sh/task-spec": "ps"})).role == "ps"


@pytest.mark.parametrize(
    ("name", "index"),
    [("job-worker-3", 3), ("a-b-10", 10), ("a-b-c", None), ("ab-1", None), ("p1", None), ("x-y-+2", 2)],
)
def test_pod_index(name: str, index: int | None) -> None:
    assert pod_index(name) == index


def test_requests_include_pods_and_init_containers() -> None:
    """A task's request is kube's effective pod request, as Volcano's NewTaskInfo uses for both
    Resreq and InitResreq: max(Σ containers, each init container) + overhead, plus ``pods: 1``."""
    p = pod("p", cpu="1", memory="1Gi", init_requests={"cpu": "2", "memory": "512Mi"})
    resreq, init = pod_requests(p)
    expected = Resource(2000, 2**30, {"pods": 1})
    assert same(init, expected)
    assert same(resreq, expected)
    t = _task(p)
    assert not t.best_effort


def test_requests_with_sidecars_overhead_and_pod_level_resources() -> None:
    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "initContainers": [
                # a restartable sidecar adds to the running total and to later init containers
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                {"name": "init", "resources": {"requests": {"cpu": "2"}}},
            ],
            "overhead": {"cpu": "100m"},
        },
    }
    p = decode_object(raw)
    assert isinstance(p, Pod)
    _, init = pod_requests(p)
    # containers 1 + sidecar 0.5 = 1.5; init 2 + sidecar 0.5 = 2.5 → max 2.5, + overhead 0.1
    assert init.milli_cpu == 2600 and init.memory == 2**30 and init.scalars == {"pods": 1}
    raw["spec"]["resources"] = {"requests": {"cpu": "4", "memory": "3Gi"}}
    _, level = pod_requests(decode_object(raw))  # type: ignore[arg-type]
    assert level.milli_cpu == 4100 and level.memory == 3 * 2**30


def test_best_effort_ignores_pods() -> None:
    assert _task(pod("p")).best_effort
    assert not _task(pod("p", cpu="1m")).best_effort
    assert not _task(pod("p", extra={"nvidia.com/gpu": "1"})).best_effort


def _job(min_member: int, *statuses: TaskStatus, best_effort: set[int] = frozenset()) -> JobInfo:  # type: ignore[assignment]
    job = JobInfo("default/pg", podgroup("pg", min_member=min_member))
    for i, st in enumerate(statuses):
        p = pod(f"pg-t-{i}", group="pg", cpu=None if i in best_effort else "1")
        t = _task(p)
        t.status = st
        if st not in (S.PENDING,):
            t.node_name = "n1"
        job.add_task(t)
    return job


def test_job_counters() -> None:
    job = _job(3, S.RUNNING, S.BOUND, S.ALLOCATED, S.PIPELINED, S.PENDING, S.SUCCEEDED, S.FAILED, S.RELEASING)
    assert job.ready_num() == 4  # Bound, Binding, Running, Allocated, Succeeded
    assert job.waiting_num() == 1
    assert job.valid_num() == 6
    assert job.allocated_num() == 3
    assert job.scheduled_num() == 4  # Running, Bound, Failed, Succeeded
    assert job.releasing_scheduled_num() == 1
    assert job.is_ready() and job.is_pipelined() and not job.is_starving()
    assert job.allocated.milli_cpu == 3000  # AllocatedStatus tasks only
    assert job.total_request.milli_cpu == 8000


def test_job_readiness_counts_pending_best_effort() -> None:
    job = _job(3, S.RUNNING, S.PENDING, S.PENDING, best_effort={1, 2})
    assert job.pending_best_effort == 2
    assert job.is_ready()  # 1 ready + 2 pending BestEffort
    assert job.is_starving()  # starving ignores BestEffort
    job2 = _job(3, S.RUNNING, S.PIPELINED, S.PENDING)
    assert not job2.is_ready() and not job2.is_pipelined() and job2.is_starving()
    job3 = _job(2, S.RUNNING, S.PIPELINED)
    assert not job3.is_ready() and job3.is_pipelined() and not job3.is_starving()


def test_update_status_moves_counters() -> None:
    job = _job(1, S.PENDING)
    t = next(iter(job.tasks.values()))
    job.update_status(t, S.ALLOCATED)
    assert job.ready_num() == 1 and job.allocated.milli_cpu == 1000
    job.update_status(t, S.PENDING)
    assert job.ready_num() == 0 and job.allocated.milli_cpu == 0
    job.remove_task(t)
    assert not job.tasks and job.total_request.milli_cpu == 0


def test_role_checks() -> None:
    pg = podgroup("pg", min_member=3, min_task_member={"ps": 1, "worker": 2})
    job = JobInfo("default/pg", pg)
    for i, (role, st) in enumerate([("ps", S.RUNNING), ("worker", S.RUNNING), ("worker", S.PENDING)]):
        t = _task(pod(f"pg-{role}-{i}", group="pg", cpu="1", labels={"volcano.sh/task-spec": role}))
        t.status = st
        job.add_task(t)
    assert job.check_task_valid()
    assert not job.check_task_ready()  # one worker of two allocated
    assert not job.check_task_pipelined()
    assert job.check_task_starving()
    # Role checks are skipped when minMember < Σ minTaskMember.
    job.min_available = 2
    assert job.check_task_ready() and job.check_task_valid()


def test_need_continue_allocating() -> None:
    pg = podgroup("pg", min_member=1, min_task_member={"a": 1, "b": 0})
    job = JobInfo("default/pg", pg)
    tasks = []
    for i, role in enumerate(["a", "b"]):
        t = _task(pod(f"pg-{role}-{i}", group="pg", cpu="1", labels={"volcano.sh/task-spec": role}))
        job.add_task(t)
        tasks.append(t)
    from lahar_scheduler.framework.fiterrors import FitErrors

    job.fit_errors[tasks[1].uid] = FitErrors("no")  # role b failed; b needs 0
    assert job.need_continue_allocating()
    job.fit_errors[tasks[0].uid] = FitErrors("no")  # role a failed and a needs 1
    assert not job.need_continue_allocating()
    assert job.task_has_fit_errors(tasks[0])
    # A job whose minMember equals its task count never continues.
    job.fit_errors.clear()
    job.min_available = 2
    job.fit_errors[tasks[1].uid] = FitErrors("no")
    assert not job.need_continue_allocating()


def test_queue_info_fields() -> None:
    snap = snapshot(
        [
            queue("q", 3, capability={"cpu": "4"}, guarantee={"cpu": "1"}, priority=5, reclaimable=False),
            queue("r", state="Closed"),
        ]
    )
    q, r = snap.queues["q"], snap.queues["r"]
    assert (q.weight, q.priority, q.reclaimable, q.is_open()) == (3, 5, False, True)
    assert q.capability is not None and q.capability.milli_cpu == 4000
    assert q.guarantee is not None and q.guarantee.milli_cpu == 1000
    assert r.reclaimable is True and not r.is_open() and r.capability is None


def test_job_priority_from_priority_class_then_global_default() -> None:
    objs = [
        queue("q"),
        priority_class("high", 1000),
        priority_class("base", 7, global_default=True),
        podgroup("a", queue="q", priority_class="high"),
        podgroup("b", queue="q", priority_class="missing"),
        podgroup("c", queue="q"),
    ]
    ssn = open_session(objs, make_conf("allocate"))
    assert [ssn.jobs[f"default/{n}"].priority for n in "abc"] == [1000, 7, 7]
    ssn2 = open_session([queue("q"), podgroup("a", queue="q", priority_class="x")], make_conf("allocate"))
    assert ssn2.jobs["default/a"].priority == 0


def test_podgroup_fields() -> None:
    pg = podgroup(
        "pg",
        queue="",
        min_member=2,
        min_resources={"cpu": "2"},
        annotations={"volcano.sh/preemptable": "true", "volcano.sh/sla-waiting-time": "5m"},
    )
    job = JobInfo("default/pg", pg, default_queue="fallback")
    assert job.queue == "fallback"
    assert job.preemptable and job.waiting_time == "5m"
    assert job.min_resources is not None and job.min_resources.milli_cpu == 2000
    assert JobInfo("default/x", None).is_pending()
    assert JobInfo("default/x", podgroup("x", phase=None)).is_pending()
    assert not JobInfo("default/x", podgroup("x", phase="Inqueue")).is_pending()


# -- PodGroup phase at session close (SKIPPED.md §2.6, TestGetPodGroupPhase) ---------------------

PHASES = [
    ("single pod terminating keeps Running", "Running", 1, [(S.RELEASING, "n1")], False, "Running"),
    (
        "partial termination keeps Running",
        "Running",
        2,
        [(S.RUNNING, "n1"), (S.RELEASING, "n2")],
        False,
        "Running",
    ),
    (
        "all terminating keeps Running",
        "Running",
        2,
        [(S.RELEASING, "n1"), (S.RELEASING, "n2")],
        False,
        "Running",
    ),
    (
        "never-scheduled releasing stays Pending",
        "Pending",
        2,
        [(S.RELEASING, ""), (S.PENDING, "")],
        False,
        "Pending",
    ),
    ("all completed", "Running", 2, [(S.SUCCEEDED, "n1"), (S.SUCCEEDED, "n2")], False, "Completed"),
    ("releasing below minMember falls to Pending", "Running", 2, [(S.RELEASING, "n1")], False, "Pending"),
    (
        "running and unschedulable is Unknown",
        "Running",
        2,
        [(S.RUNNING, "n1"), (S.PENDING, "")],
        True,
        "Unknown",
    ),
    # Beyond the Volcano table: an Inqueue job below minMember stays Inqueue, Failed counts as
    # scheduled and completed.
    ("inqueue stays inqueue", "Inqueue", 2, [(S.RUNNING, "n1"), (S.PENDING, "")], False, "Inqueue"),
    (
        "failed and succeeded complete",
        "Running",
        2,
        [(S.FAILED, "n1"), (S.SUCCEEDED, "n2")],
        False,
        "Completed",
    ),
    ("allocated is not scheduled", "Inqueue", 1, [(S.ALLOCATED, "n1"), (S.BINDING, "n1")], False, "Inqueue"),
]


@pytest.mark.parametrize(("name", "phase", "min_member", "tasks", "unschedulable", "expected"), PHASES)
def test_pod_group_phase(
    name: str,
    phase: str,
    min_member: int,
    tasks: list[tuple[TaskStatus, str]],
    unschedulable: bool,
    expected: str,
) -> None:
    job = JobInfo("default/pg", podgroup("pg", min_member=min_member, phase=phase))
    for i, (st, node_name) in enumerate(tasks):
        t = _task(pod(f"t{i}", group="pg"))
        t.status, t.node_name = st, node_name
        job.add_task(t)
    assert pod_group_phase(job, unschedulable) == PodGroupPhase(expected), name


def test_snapshot_upserts_and_deletes_keep_node_accounting() -> None:
    snap = snapshot([node("n1", cpu="4"), queue("q"), podgroup("pg", queue="q")])
    n1 = snap.nodes.by_name["n1"]
    snap.upsert_pod(pod("a", group="pg", cpu="1", node_name="n1", phase="Running"))
    snap.upsert_pod(pod("b", cpu="2", node_name="n1", phase="Running", scheduler="default-scheduler"))
    assert n1.used.milli_cpu == 3000 and n1.idle.milli_cpu == 1000
    assert "default/b" in snap.others and "default/a" in snap.tasks
    # A pod of another scheduler that is not on a node is not ours to see.
    assert snap.upsert_pod(pod("c", cpu="1", scheduler="default-scheduler")) is None
    # Updating a pod replaces it (no double counting); finishing frees the node.
    snap.upsert_pod(pod("a", group="pg", cpu="1", node_name="n1", phase="Succeeded"))
    assert n1.used.milli_cpu == 2000
    snap.delete_pod("default", "b")
    assert n1.used.milli_cpu == 0 and n1.idle.milli_cpu == 4000
    # A new scalar resource widens the node arrays.
    snap.upsert_pod(pod("g", group="pg", extra={"example.com/foo": "1"}))
    assert "example.com/foo" in snap.space.index
    assert snap.nodes.alloc.shape[1] == len(snap.space)
    snap.delete_podgroup("default", "pg")
    assert snap.jobs["default/pg"].podgroup is None  # kept while it has tasks
