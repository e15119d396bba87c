"""nodegroup: queue affinity to node groups, with the expectations of Volcano's nodegroup_test.go."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest

from builders import make_conf, node, only, open_session, pod, podgroup, queue, task
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.session import Session

KEY = "volcano.sh/nodegroup-name"
REQ, PREF = "requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"


def q(name: str, affinity: dict[str, Any] | None, parent: str = "", annotations: dict[str, str] | None = None) -> Any:
    base = queue(name)
    spec = msgspec.structs.replace(base.spec, affinity=affinity, parent=parent)
    meta = msgspec.structs.replace(base.metadata, annotations=dict(annotations or {}))
    return msgspec.structs.replace(base, spec=spec, metadata=meta)


def aff(
    req: tuple[str, ...] | list[str] = (),
    pref: tuple[str, ...] | list[str] = (),
    anti_req: tuple[str, ...] | list[str] = (),
    anti_pref: tuple[str, ...] | list[str] = (),
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if req or pref:
        out["nodeGroupAffinity"] = {REQ: list(req), PREF: list(pref)}
    if anti_req or anti_pref:
        out["nodeGroupAntiAffinity"] = {REQ: list(anti_req), PREF: list(anti_pref)}
    return out


# TestNodeGroup's nodes: n1 group1 (2 cpu), n2..n4 group2..4 (4 cpu), n5 without the label.
def nodes() -> list[Any]:
    sizes = {"n1": ("2", "4Gi")}
    return [
        node(n, *sizes.get(n, ("4", "16Gi")), labels={KEY: f"group{n[1]}"} if n != "n5" else {})
        for n in ("n1", "n2", "n3", "n4", "n5")
    ]


Q1 = aff(["group1", "group3"], ["group3"], ["group2", "group4"], ["group4"])
Q2 = aff(["group1"], ["group3"], ["group2"], ["group4"])
Q3 = aff(pref=["group1", "group3"])


def verdicts(ssn: Session, key: str) -> tuple[dict[str, float], set[str]]:
    t = task(ssn, key)
    idx = np.arange(len(ssn.node_list), dtype=np.intp)
    scores = {n.name: float(s) for n, s in zip(ssn.node_list, ssn.call(P.NODE_ORDER, t, idx), strict=True)}
    passed = {ssn.node_list[i].name for i in ssn.call(P.PREDICATE, t, idx).passed}
    return scores, passed


def session(queues: list[Any], queue_name: str, *, hierarchy: bool = False, **arguments: Any) -> Session:
    objs = [
        *nodes(),
        *queues,
        podgroup("pg", "c1", queue=queue_name),
        pod("p", "c1", group="pg", cpu="2", memory="4Gi"),
    ]
    opt = only("nodegroup", "enableNodeOrder", "enablePredicate", **arguments)
    opt["enableHierarchy"] = hierarchy
    return open_session(objs, make_conf("allocate", [opt]))


ALL = {"n1", "n2", "n3", "n4", "n5"}
Q1_SCORES = {"n1": 100.0, "n2": 0.0, "n3": 150.0, "n4": -1.0, "n5": 0.0}


@pytest.mark.parametrize(
    ("case", "queues", "queue_name", "hierarchy", "arguments", "scores", "passed"),
    [
        # volcano pkg/scheduler/plugins/nodegroup/nodegroup_test.go TestNodeGroup, each case by name
        (
            "soft constraints is subset of hard constraints",
            [q("q1", Q1)],
            "q1",
            False,
            {},
            Q1_SCORES,
            {"n1", "n3", "n4"},
        ),
        (
            "soft constraints is not subset of hard constraints",
            [q("q2", Q2)],
            "q2",
            False,
            {},
            {"n1": 100.0, "n2": 0.0, "n3": 50.0, "n4": -1.0, "n5": 0.0},
            {"n1", "n3", "n4"},
        ),
        (
            "affinity is not set for the queue, ... strict=false",
            [q("root-no-affinity", None)],
            "root-no-affinity",
            False,
            {"strict": False},
            dict.fromkeys(ALL, 0.0),
            {"n5"},
        ),
        (
            "affinity inherits from parent queue",
            [q("root", Q1), q("q1", Q1, "root"), q("q1-child", None, "q1")],
            "q1-child",
            True,
            {},
            Q1_SCORES,
            {"n1", "n3", "n4"},
        ),
        (
            "affinity inherits from ancestor queue if parent queue has no affinity",
            [q("root", Q1), q("q-no-affinity", None, "root"), q("q-no-affinity-child", None, "q-no-affinity")],
            "q-no-affinity-child",
            True,
            {},
            Q1_SCORES,
            {"n1", "n3", "n4"},
        ),
        (
            "queue without affinity",
            [q("q-no-affinity", None, "root")],
            "q-no-affinity",
            False,
            {},
            dict.fromkeys(ALL, 0.0),
            set(),
        ),
        (
            "preferred nodegroup priority ordering",
            [q("q3", Q3)],
            "q3",
            False,
            {"enablePreferredOrder": True},
            {"n1": 50.0, "n2": 0.0, "n3": 25.0, "n4": 0.0, "n5": 0.0},
            {"n1", "n3"},
        ),
    ],
)
def test_nodegroup_scores_and_predicates(
    case: str,
    queues: list[Any],
    queue_name: str,
    hierarchy: bool,
    arguments: dict[str, Any],
    scores: dict[str, float],
    passed: set[str],
) -> None:
    got_scores, got_passed = verdicts(session(queues, queue_name, hierarchy=hierarchy, **arguments), "c1/p")
    assert got_scores == scores, case
    assert got_passed == passed, case


def test_nodegroup_without_hierarchy_a_child_does_not_inherit() -> None:
    ssn = session([q("root", Q1), q("q1-child", None, "root")], "q1-child")
    assert verdicts(ssn, "c1/p")[1] == set()


def test_nodegroup_failure_reasons_are_volcanos() -> None:
    ssn = session([q("q1", Q1)], "q1")
    res = ssn.call(P.PREDICATE, task(ssn, "c1/p"), np.arange(5, dtype=np.intp))
    text = res.errors.error(5)
    assert "node group label not found" in text
    assert "node does not satisfy the node group affinity" in text
    assert sorted(ssn.node_list[i].name for i in res.unresolvable) == ["n2", "n5"]


LIMIT_AFFINITY = aff(["group1", "group2"], ["group1"])


def limit_session(annotation: str | None, used: bool = False) -> Session:
    # TestNodeGroupResourceLimit: n1 group1, n2 group2, 16 cpu / 64Gi / 32 pods each
    objs: list[Any] = [node(n, "16", "64Gi", "32", labels={KEY: g}) for n, g in (("n1", "group1"), ("n2", "group2"))]
    ann = {"volcano.sh/nodegroup-resource-limits": annotation} if annotation is not None else {}
    objs.append(q("ql", LIMIT_AFFINITY, annotations=ann))
    objs += [
        podgroup("pg-pending", "limit", queue="ql"),
        pod("pending", "limit", group="pg-pending", cpu="2", memory="4Gi"),
    ]
    if used:
        objs += [
            podgroup("pg-used", "limit", queue="ql", phase="Running"),
            pod("used", "limit", group="pg-used", cpu="2", memory="4Gi", node_name="n1", phase="Running"),
        ]
    return open_session(objs, make_conf("allocate", [only("nodegroup", "enableNodeOrder", "enablePredicate")]))


@pytest.mark.parametrize(
    ("case", "annotation", "used", "passed"),
    [
        # volcano nodegroup_test.go TestNodeGroupResourceLimit, each case by name
        ("no annotation keeps existing behavior", None, False, {"n1", "n2"}),
        (
            "under nodegroup limit permits preferred nodegroup",
            '{"group1":{"cpu":"3","memory":"8Gi"}}',
            False,
            {"n1", "n2"},
        ),
        ("omitted resource dimension is unlimited", '{"group1":{"cpu":"3"}}', False, {"n1", "n2"}),
        ("specified resource dimension is enforced", '{"group1":{"cpu":"1"}}', False, {"n2"}),
        ("over nodegroup limit rejects preferred nodegroup", '{"group1":{"cpu":"3","memory":"8Gi"}}', True, {"n2"}),
        ("invalid annotation rejects queue tasks", '{"group1":{"cpu":', False, set()),
    ],
)
def test_nodegroup_resource_limits(case: str, annotation: str | None, used: bool, passed: set[str]) -> None:
    ssn = limit_session(annotation, used)
    assert verdicts(ssn, "limit/pending")[1] == passed, case


def test_nodegroup_allocation_event_updates_group_usage() -> None:
    # volcano nodegroup_test.go TestNodeGroupResourceLimitAllocationEvent: 3 cpu limit in group1,
    # two 2-cpu tasks: the first fits, after its allocation the second does not.
    objs: list[Any] = [node("n1", "16", "64Gi", "32", labels={KEY: "group1"})]
    objs.append(
        q(
            "qe",
            aff(["group1"]),
            annotations={"volcano.sh/nodegroup-resource-limits": '{"group1":{"cpu":"3","memory":"8Gi"}}'},
        )
    )
    for i in (1, 2):
        objs += [
            podgroup(f"pg-{i}", "limit", queue="qe"),
            pod(f"pending-{i}", "limit", group=f"pg-{i}", cpu="2", memory="4Gi"),
        ]
    ssn = open_session(objs, make_conf("allocate", [only("nodegroup", "enableNodeOrder", "enablePredicate")]))
    t1, t2 = task(ssn, "limit/pending-1"), task(ssn, "limit/pending-2")
    one = np.array([0], dtype=np.intp)
    assert len(ssn.call(P.PREDICATE, t1, one).passed) == 1
    stmt = ssn.statement()
    stmt.allocate(t1, ssn.node_list[0])
    assert len(ssn.call(P.PREDICATE, t2, one).passed) == 0
    stmt.discard()
    assert len(ssn.call(P.PREDICATE, t2, one).passed) == 1  # the undo gives the usage back
