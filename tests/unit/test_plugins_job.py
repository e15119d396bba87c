"""Job-level plugins: gang, priority, conformance and drf, through the session's extension points."""

from __future__ import annotations

import pytest

from builders import (
    binds,
    make_conf,
    node,
    only,
    open_session,
    pod,
    podgroup,
    priority_class,
    queue,
    run,
    task,
)
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import JobInfo, TaskInfo, pod_requests
from lahar_scheduler.framework.types import TaskStatus
from lahar_scheduler.plugins.gang import _skip_for_releasing

S = TaskStatus


# -- gang ------------------------------------------------------------------------------------------


def gang_session(*objs):  # type: ignore[no-untyped-def]
    return open_session([queue("q"), *objs], make_conf("allocate", [{"name": "gang"}]))


def test_gang_job_valid() -> None:
    ssn = gang_session(
        podgroup("few", queue="q", min_member=3),
        pod("few-t-0", group="few", cpu="1"),
        pod("few-t-1", group="few", cpu="1", phase="Failed", node_name="n"),
        podgroup("ok", queue="q", min_member=2),
        pod("ok-t-0", group="ok", cpu="1"),
        pod("ok-t-1", group="ok", cpu="1", phase="Running", node_name="n"),
        podgroup("roles", queue="q", min_member=2, min_task_member={"ps": 1, "w": 1}),
        pod("roles-a-0", group="roles", cpu="1", labels={"volcano.sh/task-spec": "w"}),
        pod("roles-a-1", group="roles", cpu="1", labels={"volcano.sh/task-spec": "w"}),
    )
    assert ssn.call(P.JOB_VALID, ssn.jobs["default/few"]) == (
        "NotEnoughTasks",
        "Not enough valid tasks for gang-scheduling, valid: 1, min: 3",
    )
    assert ssn.call(P.JOB_VALID, ssn.jobs["default/ok"]) is None
    assert ssn.call(P.JOB_VALID, ssn.jobs["default/roles"]) == (
        "NotEnoughPodsOfTask",
        "Not enough valid pods of each task for gang-scheduling",
    )


def test_gang_ready_pipelined_starving_and_order() -> None:
    ssn = gang_session(
        podgroup("a", queue="q", min_member=2),
        pod("a-t-0", group="a", cpu="1", phase="Running", node_name="n"),
        pod("a-t-1", group="a", cpu="1"),
        podgroup("b", queue="q", min_member=1),
        pod("b-t-0", group="b", cpu="1", phase="Running", node_name="n"),
    )
    a, b = ssn.jobs["default/a"], ssn.jobs["default/b"]
    assert not ssn.call(P.JOB_READY, a) and ssn.call(P.JOB_READY, b)
    assert not ssn.call(P.JOB_PIPELINED, a)
    assert ssn.call(P.JOB_STARVING, a) and not ssn.call(P.JOB_STARVING, b)
    # Not-ready jobs go before ready ones, whatever their names.
    assert ssn.job_order(a, b) and not ssn.job_order(b, a)
    stmt = ssn.statement()
    stmt.pipeline(task(ssn, "default/a-t-1"), "n", eviction_occurred=False)
    assert ssn.call(P.JOB_PIPELINED, a) and not ssn.call(P.JOB_READY, a) and not ssn.call(P.JOB_STARVING, a)


def test_gang_victims_stop_at_min_member_per_job() -> None:
    objs = [podgroup("v", queue="q", min_member=2)]
    objs += [pod(f"v-t-{i}", group="v", cpu="1", phase="Running", node_name="n") for i in range(4)]
    objs += [
        podgroup("w", queue="q", min_member=1),
        pod("w-t-0", group="w", cpu="1", phase="Running", node_name="n"),
    ]
    ssn = open_session(
        [queue("q"), *objs], make_conf("allocate", [only("gang", "enablePreemptable", "enableReclaimable")])
    )
    cands = [task(ssn, f"default/v-t-{i}") for i in range(4)] + [task(ssn, "default/w-t-0")]
    got = ssn.call(P.PREEMPTABLE, cands[0], cands)
    assert [t.name for t in got] == ["v-t-0", "v-t-1"]  # 4 ready − min 2, in candidate order
    assert [t.name for t in ssn.call(P.RECLAIMABLE, cands[0], cands)] == ["v-t-0", "v-t-1"]


def test_gang_close_writes_conditions() -> None:
    objs = [
        node("n1", cpu="1", memory="8Gi"),
        queue("q"),
        podgroup("big", queue="q", min_member=2),
        pod("big-t-0", group="big", cpu="1", memory="1Gi"),
        pod("big-t-1", group="big", cpu="1", memory="1Gi"),
        podgroup("empty", queue="q", min_member=1),
    ]
    res = run(objs, make_conf("allocate", [{"name": "gang"}, {"name": "predicates"}]), seed=0)
    conds = res.podgroups["default/big"].conditions
    assert [(c.type, c.status, c.reason, c.transition_id) for c in conds] == [
        ("Unschedulable", "True", "NotEnoughResources", "session")
    ]
    assert res.podgroups["default/big"].changed
    assert res.podgroups["default/empty"].conditions == []  # jobs without tasks are skipped


def test_gang_unschedulable_running_job_becomes_unknown() -> None:
    """A Running job that gets gang's Unschedulable condition in this session is Unknown at close
    (the JobUpdater runs after the plugins' close hooks)."""
    objs = [
        node("n1", cpu="1", memory="8Gi"),
        queue("q"),
        podgroup("g", queue="q", min_member=2, phase="Running"),
        pod("g-t-0", group="g", cpu="1", memory="1Gi", node_name="n1", phase="Running"),
        pod("g-t-1", group="g", cpu="1", memory="1Gi"),
    ]
    res = run(objs, make_conf("allocate", [{"name": "gang"}, {"name": "predicates"}]))
    assert res.podgroups["default/g"].phase == "Unknown"
    assert res.podgroups["default/g"].running == 1


def test_gang_skips_unschedulable_for_releasing_tasks_that_cover_min_member() -> None:
    objs = [
        node("n1"),
        queue("q"),
        podgroup("g", queue="q", min_member=2, phase="Running"),
        pod("g-t-0", group="g", cpu="1", node_name="n1", phase="Running"),
        pod("g-t-1", group="g", cpu="1", node_name="n1", phase="Running", deleting=True),
    ]
    res = run(objs, make_conf("allocate", [{"name": "gang"}]))
    assert res.podgroups["default/g"].conditions == []
    assert res.podgroups["default/g"].phase == "Running"


def _job(min_member: int, *tasks: tuple[TaskStatus, str]) -> JobInfo:
    job = JobInfo("default/pg", podgroup("pg", min_member=min_member))
    for i, (status, node_name) in enumerate(tasks):
        p = pod(f"t{i}", group="pg", cpu="1")
        t = TaskInfo(p, job.uid, *pod_requests(p))
        t.status, t.node_name = status, node_name
        job.add_task(t)
    return job


@pytest.mark.parametrize(
    ("name", "min_member", "tasks", "skip"),
    [
        ("partial termination", 2, [(S.RUNNING, "n1"), (S.RELEASING, "n2")], True),
        ("pending replacement", 2, [(S.RUNNING, "n1"), (S.RELEASING, "n2"), (S.PENDING, "")], False),
        ("pipelined replacement", 2, [(S.RUNNING, "n1"), (S.RELEASING, "n2"), (S.PIPELINED, "n3")], False),
        ("never-scheduled releasing", 1, [(S.RELEASING, "")], False),
        ("below minAvailable", 3, [(S.RUNNING, "n1"), (S.RELEASING, "n2")], False),
    ],
)
def test_should_skip_unschedulable_for_releasing(
    name: str, min_member: int, tasks: list[tuple[TaskStatus, str]], skip: bool
) -> None:
    """SKIPPED.md §2.6: gang's shouldSkipUnschedulableForReleasing."""
    assert _skip_for_releasing(_job(min_member, *tasks)) is skip, name


# -- priority --------------------------------------------------------------------------------------


def priority_objs():  # type: ignore[no-untyped-def]
    return [
        queue("q"),
        priority_class("low", 100),
        priority_class("mid", 500),
        priority_class("high", 1000),
        podgroup("pre", queue="q", priority_class="mid"),
        pod("pre-t-0", group="pre", cpu="1", priority=5),
        pod("pre-t-1", group="pre", cpu="1", priority=1, phase="Running", node_name="n"),
        pod("pre-t-2", group="pre", cpu="1", priority=9, phase="Running", node_name="n"),
        podgroup("lo", queue="q", priority_class="low"),
        pod("lo-t-0", group="lo", cpu="1", phase="Running", node_name="n"),
        podgroup("hi", queue="q", priority_class="high"),
        pod("hi-t-0", group="hi", cpu="1", phase="Running", node_name="n"),
    ]


def test_priority_orders_and_victims() -> None:
    ssn = open_session(
        priority_objs(),
        make_conf(
            "allocate",
            [only("priority", "enableJobOrder", "enableTaskOrder", "enablePreemptable", "enableJobStarving")],
        ),
    )
    pre, lo, hi = (ssn.jobs[f"default/{n}"] for n in ("pre", "lo", "hi"))
    assert ssn.job_order(hi, pre) and ssn.job_order(pre, lo)
    t0, t1, t2 = (task(ssn, f"default/pre-t-{i}") for i in range(3))
    assert ssn.task_order(t2, t0) and ssn.task_order(t0, t1)
    cands = [t1, t2, task(ssn, "default/lo-t-0"), task(ssn, "default/hi-t-0")]
    # Other jobs: lower job priority only; same job: lower task priority only.
    assert [t.name for t in ssn.call(P.PREEMPTABLE, t0, cands)] == ["pre-t-1", "lo-t-0"]
    # Starving: fewer ready+waiting tasks than tasks.
    assert ssn.call(P.JOB_STARVING, pre) and not ssn.call(P.JOB_STARVING, lo)


def test_priority_victims_of_an_unknown_preemptor_job() -> None:
    ssn = open_session(priority_objs(), make_conf("allocate", [only("priority", "enablePreemptable")]))
    orphan = TaskInfo(pod("x", group="nope", cpu="1"), "default/nope", *pod_requests(pod("x", cpu="1")))
    # Permits with no victims, which vetoes the tier.
    assert ssn.call(P.PREEMPTABLE, orphan, [task(ssn, "default/lo-t-0")]) == []


def test_priority_in_front_of_gang_cannot_be_overridden_in_its_tier() -> None:
    """Default tier 1 is priority, gang, conformance: when priority finds no lower-priority victim,
    gang's list must not re-seed the tier (see the session's victim rule)."""
    conf = make_conf(
        "allocate",
        [
            only("priority", "enablePreemptable"),
            only("gang", "enablePreemptable"),
            only("conformance", "enablePreemptable"),
        ],
    )
    objs = priority_objs() + [pod(f"hi-t-{i}", group="hi", cpu="1", phase="Running", node_name="n") for i in (1, 2)]
    ssn = open_session(objs, conf)
    preemptor = task(ssn, "default/pre-t-0")
    cands = [task(ssn, f"default/hi-t-{i}") for i in range(3)]
    assert ssn.call(P.PREEMPTABLE, preemptor, cands) == []


# -- conformance -----------------------------------------------------------------------------------


def test_conformance_protects_kube_system_and_critical_pods() -> None:
    """SKIPPED.md §2.5: of two running tasks, the one in kube-system is never a victim."""
    objs = [
        queue("q"),
        podgroup("pg1", "kube-system", queue="q"),
        pod(
            "test-pod",
            "kube-system",
            group="pg1",
            cpu="1",
            memory="1Gi",
            node_name="test-node",
            phase="Running",
        ),
        podgroup("pg1", "test-namespace", queue="q"),
        pod(
            "test-pod",
            "test-namespace",
            group="pg1",
            cpu="1",
            memory="1Gi",
            node_name="test-node",
            phase="Running",
        ),
        pod(
            "crit",
            "test-namespace",
            group="pg1",
            cpu="1",
            node_name="n",
            phase="Running",
            priority_class="system-node-critical",
        ),
        pod(
            "crit2",
            "test-namespace",
            group="pg1",
            cpu="1",
            node_name="n",
            phase="Running",
            priority_class="system-cluster-critical",
        ),
    ]
    ssn = open_session(objs, make_conf("allocate", [only("conformance", "enablePreemptable", "enableReclaimable")]))
    task1, task2 = task(ssn, "kube-system/test-pod"), task(ssn, "test-namespace/test-pod")
    crit, crit2 = task(ssn, "test-namespace/crit"), task(ssn, "test-namespace/crit2")
    assert ssn.call(P.PREEMPTABLE, task2, [task1, task2]) == [task2]
    assert ssn.call(P.RECLAIMABLE, task2, [task1, task2, crit, crit2]) == [task2]


# -- drf -------------------------------------------------------------------------------------------


def drf_session():  # type: ignore[no-untyped-def]
    objs = [
        node("n1", cpu="10", memory="10Gi", pods="10"),
        queue("q"),
        podgroup("a", queue="q"),
        pod("a-t-0", group="a", cpu="4", memory="1Gi", node_name="n1", phase="Running"),
        pod("a-t-1", group="a", cpu="1", memory="1Gi"),
        podgroup("b", queue="q"),
        pod("b-t-0", group="b", cpu="1", memory="5Gi", node_name="n1", phase="Running"),
        pod("b-t-1", group="b", cpu="1", memory="1Gi", node_name="n1", phase="Running"),
        podgroup("c", queue="q"),
        pod("c-t-0", group="c", cpu="1", memory="1Gi"),
    ]
    return open_session(objs, make_conf("allocate", [only("drf", "enableJobOrder", "enablePreemptable")]))


def test_drf_dominant_shares_and_order() -> None:
    ssn = drf_session()
    drf = next(p for p in ssn.plugins if p.name == "drf")
    # a: cpu 4/10 dominates; b: memory 6/10 dominates; c holds nothing.
    assert drf.shares == pytest.approx({"default/a": 0.4, "default/b": 0.6, "default/c": 0.0})  # type: ignore[attr-defined]
    a, b, c = (ssn.jobs[f"default/{n}"] for n in "abc")
    assert sorted([b, a, c], key=ssn.job_order_key) == [c, a, b]


def test_drf_share_follows_allocations_and_their_undo() -> None:
    ssn = drf_session()
    drf = next(p for p in ssn.plugins if p.name == "drf")
    stmt = ssn.statement()
    stmt.allocate(task(ssn, "default/a-t-1"), ssn.nodes.by_name["n1"])
    assert drf.shares["default/a"] == pytest.approx(0.5)  # type: ignore[attr-defined]
    stmt.discard()
    assert drf.shares["default/a"] == pytest.approx(0.4)  # type: ignore[attr-defined]


def test_drf_preemptable_compares_shares_after_the_move() -> None:
    ssn = drf_session()
    c0 = task(ssn, "default/c-t-0")
    a0, b0, b1 = task(ssn, "default/a-t-0"), task(ssn, "default/b-t-0"), task(ssn, "default/b-t-1")
    # c after +1 cpu/1Gi: share 0.1 (cpu) / pods 1/10.  a without a-t-0: 0; b without b-t-0: 0.1;
    # then b without b-t-1 as well: 0 (cumulative per job).
    got = ssn.call(P.PREEMPTABLE, c0, [a0, b0, b1])
    assert got == [b0]


def test_drf_job_order_in_allocate() -> None:
    objs = [
        node("n1", cpu="2", memory="4Gi"),
        queue("q"),
        podgroup("busy", queue="q", min_member=1, phase="Running"),
        pod("busy-t-0", group="busy", cpu="1", memory="1Gi", node_name="n1", phase="Running"),
        pod("busy-t-1", group="busy", cpu="1", memory="1Gi"),
        podgroup("zidle", queue="q", min_member=1),
        pod("zidle-t-0", group="zidle", cpu="1", memory="1Gi"),
    ]
    conf = make_conf("allocate", [only("drf", "enableJobOrder"), {"name": "gang"}, {"name": "predicates"}])
    # zidle holds nothing, so it sorts before busy although its name sorts after.
    assert binds(run(objs, conf)) == {"default/zidle-t-0": "n1"}
