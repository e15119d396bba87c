"""task-topology: roles of one job placed together or apart through buckets."""

from __future__ import annotations

from typing import Any

import pytest

from builders import make_conf, node, only, open_session, pod, podgroup, queue, scores, snapshot, task
from lahar_scheduler.core import run_session
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.session import Session
from lahar_scheduler.plugins.task_topology import (
    AFFINITY_KEY,
    ANTI_AFFINITY_KEY,
    TASK_ORDER_KEY,
    TaskTopology,
    TopologyError,
    read_topology,
)

SPEC = "volcano.sh/task-spec"


def job_objs(roles: dict[str, int], annotations: dict[str, str], *, cpu: str = "1", name: str = "job1") -> list[Any]:
    objs: list[Any] = [podgroup(name, min_member=1, annotations=annotations)]
    for role, count in roles.items():
        objs += [
            pod(f"{name}-{role}-{i}", group=name, cpu=cpu, annotations={SPEC: role}, labels={SPEC: role})
            for i in range(count)
        ]
    return objs


def topology_of(roles: dict[str, int], annotations: dict[str, str]) -> TaskTopology | None:
    ssn = open_session([node("n1"), queue("default"), *job_objs(roles, annotations)], make_conf("allocate", []))
    return read_topology(ssn.jobs["default/job1"])


TF = {"ps": 2, "worker": 2, "chief": 1, "evaluator": 1}


def test_reading_the_annotations() -> None:
    # volcano pkg/scheduler/plugins/task-topology/topology_test.go Test_readTopologyFromPgAnnotations
    # case "correct annotation"
    got = topology_of(
        TF,
        {
            AFFINITY_KEY: "ps,worker;ps,chief",
            ANTI_AFFINITY_KEY: "ps;worker,chief",
            TASK_ORDER_KEY: "ps,worker,chief,evaluator",
        },
    )
    assert got == TaskTopology(
        [["ps", "worker"], ["ps", "chief"]], [["ps"], ["worker", "chief"]], ["ps", "worker", "chief", "evaluator"]
    )
    # case "correct annotation with tasks whose names contain `-`"
    dashed = {"ps-some": 2, "worker-another-some": 2, "chief-kk": 1, "evaluator-tt": 1}
    got = topology_of(dashed, {AFFINITY_KEY: "ps-some,worker-another-some;ps-some,chief-kk"})
    assert got is not None and got.affinity == [["ps-some", "worker-another-some"], ["ps-some", "chief-kk"]]
    # case "nil annotation"
    assert topology_of(TF, {}) is None
    # case "redundant punctuations": empty names are kept, and skipped by the check
    got = topology_of(
        TF,
        {
            AFFINITY_KEY: "ps,worker;ps,,chief,;",
            ANTI_AFFINITY_KEY: "ps;worker,chief;;;",
            TASK_ORDER_KEY: "ps,worker,chief,evaluator,,,",
        },
    )
    assert got == TaskTopology(
        [["ps", "worker"], ["ps", "", "chief", ""], [""]],
        [["ps"], ["worker", "chief"], [""], [""], [""]],
        ["ps", "worker", "chief", "evaluator", "", "", ""],
    )


@pytest.mark.parametrize(
    ("case", "roles", "annotations", "error"),
    [
        # Test_readTopologyFromPgAnnotations cases "invalid annotation", "invalid task name",
        # "duplicate task name"
        (
            "invalid annotation",
            TF,
            {AFFINITY_KEY: "$%GF$^trtqwrg^"},
            "task $%GF$^trtqwrg^ do not exist in job <default/job1>",
        ),
        (
            "invalid task name",
            {"ps": 2, "worker": 2},
            {AFFINITY_KEY: "ps,worker", TASK_ORDER_KEY: "ps,worker,chief"},
            "task chief do not exist in job <default/job1>",
        ),
        (
            "duplicate task name",
            {"ps": 2, "worker": 2},
            {ANTI_AFFINITY_KEY: "ps,ps"},
            "task ps is duplicate in job <default/job1>",
        ),
    ],
)
def test_reading_refuses_unknown_and_duplicate_roles(
    case: str, roles: dict[str, int], annotations: dict[str, str], error: str
) -> None:
    with pytest.raises(TopologyError) as exc:
        topology_of(roles, annotations)
    assert str(exc.value) == error, case


def session(objs: list[Any], weight: int = 1) -> Session:
    conf = make_conf(
        "allocate", [only("task-topology", "enableTaskOrder", "enableNodeOrder", **{"task-topology.weight": weight})]
    )
    return open_session(objs, conf)


def test_affinity_packs_the_roles_into_one_bucket_and_scores_room_for_it() -> None:
    """ps (order first) opens bucket 0; each worker is drawn to ps (+1): one bucket of 3, largest 3.
    A 4-cpu node holds the bucket's 3 cpu: (0 placed + 3 pending) × 100 / 3 = 100 everywhere;
    a 2-cpu node must leave one other task out: (3 − 1) × 100 / 3."""
    objs = [node("n1", cpu="4"), node("n2", cpu="2"), queue("default")]
    objs += job_objs({"ps": 1, "worker": 2}, {AFFINITY_KEY: "ps,worker", TASK_ORDER_KEY: "ps,worker"})
    ssn = session(objs)
    plugin = next(p for p in ssn.plugins if p.name == "task-topology")
    manager = plugin.managers["default/job1"]  # type: ignore[attr-defined]
    assert len(manager.buckets) == 1 and manager.max_size == 3
    got = scores(ssn, "default/job1-ps-0")
    assert got["n1"] == pytest.approx(100.0)
    assert got["n2"] == pytest.approx(200.0 / 3)


def test_allocation_moves_the_bucket_to_its_node() -> None:
    """After ps lands on n2, a worker scores n2 (1 placed + 2 pending) × 100 / 3 = 100 and the
    others 2 × 100 / 3 (weight 1)."""
    objs = [node(n, cpu="8") for n in ("n1", "n2", "n3")] + [queue("default")]
    objs += job_objs({"ps": 1, "worker": 2}, {AFFINITY_KEY: "ps,worker", TASK_ORDER_KEY: "ps,worker"})
    ssn = session(objs)
    stmt = ssn.statement()
    stmt.allocate(task(ssn, "default/job1-ps-0"), ssn.nodes.by_name["n2"])
    got = scores(ssn, "default/job1-worker-0")
    assert got == pytest.approx({"n1": 200.0 / 3, "n2": 100.0, "n3": 200.0 / 3})


def test_self_anti_affinity_gives_each_pod_its_own_bucket_and_avoids_its_peers() -> None:
    """worker;worker anti: two buckets of one; once worker-0 is on n1, worker-1 scores n1
    (0 placed + 1 pending − 1 anti) × 100 / 1 = 0 and the other nodes 100."""
    objs = [node(n, cpu="8") for n in ("n1", "n2")] + [queue("default")]
    objs += job_objs({"worker": 2}, {ANTI_AFFINITY_KEY: "worker"})
    ssn = session(objs)
    plugin = next(p for p in ssn.plugins if p.name == "task-topology")
    assert len(plugin.managers["default/job1"].buckets) == 2  # type: ignore[attr-defined]
    ssn.statement().allocate(task(ssn, "default/job1-worker-0"), ssn.nodes.by_name["n1"])
    assert scores(ssn, "default/job1-worker-1") == pytest.approx({"n1": 0.0, "n2": 100.0})


def test_task_order_puts_fuller_buckets_and_ordered_roles_first() -> None:
    objs = [node("n1", cpu="8"), queue("default")]
    objs += job_objs(
        {"ps": 1, "worker": 2, "evaluator": 1},
        {AFFINITY_KEY: "ps,worker", ANTI_AFFINITY_KEY: "evaluator", TASK_ORDER_KEY: "ps,worker"},
    )
    ssn = session(objs)
    ps, w0, ev = (task(ssn, f"default/job1-{n}") for n in ("ps-0", "worker-0", "evaluator-0"))
    # ps and the workers share the bucket of 3; the evaluator is alone in its own
    assert ssn.call(P.TASK_ORDER, w0, ev) == -1
    # in one bucket, the role earlier in the task order goes first
    assert ssn.call(P.TASK_ORDER, ps, w0) == -1 and ssn.call(P.TASK_ORDER, w0, ps) == 1


def test_a_session_places_affine_roles_together_and_anti_affine_apart() -> None:
    objs = [node(n, cpu="4") for n in ("n1", "n2", "n3")] + [queue("default")]
    objs += job_objs({"ps": 1, "worker": 2}, {AFFINITY_KEY: "ps,worker", TASK_ORDER_KEY: "ps,worker"}, name="aff")
    objs += job_objs({"rep": 3}, {ANTI_AFFINITY_KEY: "rep"}, name="anti")
    tiers = [
        {"name": "gang"},
        {"name": "predicates"},
        {"name": "task-topology", "arguments": {"task-topology.weight": 10}},
    ]
    result = run_session(snapshot(objs), make_conf("allocate", *[[t] for t in tiers]))
    placed = {t.name: n for t, n in result.binds}
    assert len({placed["aff-ps-0"], placed["aff-worker-0"], placed["aff-worker-1"]}) == 1
    assert len({placed[f"anti-rep-{i}"] for i in range(3)}) == 3


def test_jobs_with_bad_annotations_are_left_without_topology() -> None:
    objs = [node("n1"), queue("default"), *job_objs({"ps": 1}, {AFFINITY_KEY: "ps,nosuch"})]
    ssn = session(objs)
    plugin = next(p for p in ssn.plugins if p.name == "task-topology")
    assert plugin.managers == {}  # type: ignore[attr-defined]
