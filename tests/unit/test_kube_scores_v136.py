"""The kube-scheduler v1.36 score formulas Volcano's nodeorder plugin runs, with values computed
by hand from pkg/scheduler/framework/plugins at v1.36 (k8s.io/kubernetes v1.36.1, the version
Volcano vendors): MostAllocated, TaintToleration, NodeAffinity and PodTopologySpread.

Each case enables one score at weight 1, so the node-order score is that plugin's normalised
score over every node."""

from __future__ import annotations

from typing import Any

import numpy as np

from builders import all_nodes, make_conf, node, open_session, pod, podgroup, queue, scores, task
from lahar_scheduler.framework import points as P
from lahar_scheduler.plugins.k8s import scores as kube

ZERO = {
    "leastrequested.weight": 0,
    "mostrequested.weight": 0,
    "balancedresource.weight": 0,
    "nodeaffinity.weight": 0,
    "podaffinity.weight": 0,
    "tainttoleration.weight": 0,
    "podtopologyspread.weight": 0,
}


def only(weight: str) -> Any:
    return make_conf("allocate", [{"name": "gang"}, {"name": "nodeorder", "arguments": {**ZERO, weight: 1}}])


def _scores(weight: str, nodes: list[Any], *objs: Any, key: str = "default/in") -> dict[str, float]:
    ssn = open_session([*nodes, queue("q"), podgroup("pg", queue="q"), *objs], only(weight))
    got: dict[str, float] = scores(ssn, key)
    return got


# -- MostAllocated ---------------------------------------------------------------------------
MOST_NODES = [
    node("n1", cpu="4", memory="8Gi"),
    node("n2", cpu="10", memory="4Gi"),
    node("n3", cpu="2", memory="0"),  # no memory: left out of the mean
    node("n4", cpu="500m", memory="8Gi"),  # requested above allocatable: capped at 100
]
MOST_PODS = [pod("old", group="pg", cpu="1", memory="2Gi", node_name="n1", phase="Running")]


def test_most_allocated_by_hand() -> None:
    got = _scores("mostrequested.weight", MOST_NODES, *MOST_PODS, pod("in", group="pg", cpu="1", memory="1Gi"))
    # n1: cpu (1000+1000)·100//4000 = 50, memory 3Gi·100//8Gi = 37 → (50+37)//2 = 43
    # n2: cpu 1000·100//10000 = 10, memory 1Gi·100//4Gi = 25 → 35//2 = 17
    # n3: cpu 1000·100//2000 = 50, memory skipped → 50
    # n4: cpu min(1000, 500)·100//500 = 100, memory 1·100//8 = 12 → 112//2 = 56
    assert got == {"n1": 43, "n2": 17, "n3": 50, "n4": 56}


def test_most_allocated_counts_a_best_effort_pod_at_the_non_zero_defaults() -> None:
    got = _scores("mostrequested.weight", MOST_NODES, *MOST_PODS, pod("in", group="pg"))
    # kube's non-zero request: 100m cpu, 200Mi memory.
    # n1: cpu 1100·100//4000 = 27, memory (2048+200)·100//8192 = 27 → 27
    # n2: cpu 100·100//10000 = 1, memory 200·100//4096 = 4 → 5//2 = 2
    assert got["n1"] == 27 and got["n2"] == 2


def test_most_allocated_row_version_agrees() -> None:
    ssn = open_session(
        [*MOST_NODES, queue("q"), podgroup("pg", queue="q"), *MOST_PODS, pod("in", group="pg", cpu="1", memory="1Gi")],
        only("mostrequested.weight"),
    )
    t = task(ssn, "default/in")
    vec = kube.most_allocated(ssn.nodes, t, all_nodes(ssn))
    rows = [kube.most_allocated_row(ssn.nodes, t, i) for i in range(len(ssn.node_list))]
    assert list(vec) == rows == [43, 17, 50, 56]


# -- TaintToleration -------------------------------------------------------------------------
def _taint(key: str, effect: str = "PreferNoSchedule") -> dict[str, str]:
    return {"key": key, "value": "x", "effect": effect}


TAINT_NODES = [
    node("a"),
    node("b", taints=[_taint("k1"), _taint("k2")]),
    node("c", taints=[_taint("k1"), _taint("k3", "NoSchedule")]),
    node("d", taints=[_taint("k2")]),
    node("e", taints=[_taint("k1"), _taint("k4")]),
]
TOLERATIONS = [
    {"key": "k2", "operator": "Exists", "effect": "PreferNoSchedule"},
    {"key": "k1", "operator": "Exists", "effect": "NoSchedule"},  # not a PreferNoSchedule toleration
]


def test_taint_toleration_by_hand() -> None:
    got = _scores("tainttoleration.weight", TAINT_NODES, pod("in", group="pg", cpu="1", tolerations=TOLERATIONS))
    # untolerated PreferNoSchedule taints: a 0, b 1 (k1), c 1 (k3 is NoSchedule), d 0, e 2.
    # reverse normalise over max 2: 100 − 100·n//2.
    assert got == {"a": 100, "b": 50, "c": 50, "d": 100, "e": 0}


def test_taint_toleration_normalises_over_the_candidates_only() -> None:
    ssn = open_session(
        [*TAINT_NODES, queue("q"), podgroup("pg", queue="q"), pod("in", group="pg", cpu="1", tolerations=TOLERATIONS)],
        only("tainttoleration.weight"),
    )
    got = ssn.call(P.NODE_ORDER, task(ssn, "default/in"), np.array([0, 1, 2], dtype=np.intp))
    assert list(got) == [100, 0, 0]  # max over a, b, c is 1


def test_taint_toleration_with_no_such_taint_anywhere_is_100() -> None:
    got = _scores("tainttoleration.weight", [node("a"), node("b")], pod("in", group="pg", cpu="1"))
    assert got == {"a": 100, "b": 100}


# -- NodeAffinity ----------------------------------------------------------------------------
def test_node_affinity_by_hand() -> None:
    preferred = [
        {"weight": 3, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
        {"weight": 5, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}},
        {"weight": 0, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}},
        {"weight": 7, "preference": {}},  # no requirement: matches no node
        {"weight": 2, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}},
    ]
    nodes = [
        node("n1", labels={"zone": "a", "disk": "ssd"}),
        node("n2", labels={"zone": "b"}),
        node("n3", labels={"zone": "a"}),
        node("n4", labels={"disk": "hdd"}),
    ]
    aff = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    got = _scores("nodeaffinity.weight", nodes, pod("in", group="pg", cpu="1", affinity=aff))
    # raw: n1 3+5 = 8, n2 0, n3 3+2 = 5, n4 5 → 100·raw//8
    assert got == {"n1": 100, "n2": 0, "n3": 62, "n4": 62}


def test_node_affinity_without_preferred_terms_adds_nothing() -> None:
    got = _scores("nodeaffinity.weight", [node("n1", labels={"zone": "a"}), node("n2")], pod("in", group="pg", cpu="1"))
    assert got == {"n1": 0, "n2": 0}


# -- PodTopologySpread -----------------------------------------------------------------------
def _web(name: str, at: str, ver: str, ns: str = "default", **kw: Any) -> Any:
    return pod(
        name, ns, cpu="100m", node_name=at, phase="Running", scheduler="x", labels={"app": "web", "ver": ver}, **kw
    )


def test_topology_spread_by_hand() -> None:
    nodes = [
        node("n1", labels={"zone": "a"}),
        node("n2", labels={"zone": "a"}),
        node("n3", labels={"zone": "b"}),
        node("n4"),  # no zone: ignored, scores 0
        node("n5", labels={"zone": "c"}, taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
    ]
    spread = {
        "maxSkew": 2,
        "topologyKey": "zone",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "web"}},
        "matchLabelKeys": ["ver"],
        "nodeTaintsPolicy": "Honor",
    }
    placed = [
        _web("w1", "n1", "v2"),
        _web("w2", "n1", "v1"),  # another version: matchLabelKeys leaves it out
        _web("w3", "n3", "v2"),
        _web("w4", "n3", "v2"),
        _web("w5", "n5", "v2"),  # on a node whose taint the pod does not tolerate: Honor leaves it out
        _web("w6", "n2", "v2", ns="other"),  # another namespace
        _web("w7", "n2", "v2", deleting=True),  # terminating
    ]
    incoming = pod("in", group="pg", cpu="1", labels={"app": "web", "ver": "v2"}, spread=[spread])
    got = _scores("podtopologyspread.weight", nodes, *placed, incoming)
    # Domains among the scored candidates (n1, n2, n3, n5): a, b, c → weight ln(3 + 2) = 1.609.
    # Counts: a 1, b 2, c 0.  Score = count·1.609 + (2 − 1), rounded: a 3, b 4, c 1.
    # Normalise over min 1, max 4: 100·(4 + 1 − s)//4 → a 50, b 25, c 100; n4 ignored → 0.
    assert got == {"n1": 50, "n2": 50, "n3": 25, "n4": 0, "n5": 100}


def test_topology_spread_node_affinity_policy_ignore_counts_nodes_the_pod_cannot_use() -> None:
    nodes = [
        node("n1", labels={"zone": "a", "pool": "x"}),
        node("n2", labels={"zone": "a"}),
        node("n3", labels={"zone": "b", "pool": "x"}),
    ]
    base = {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    placed = [_web("w1", "n2", "v1"), _web("w2", "n2", "v1")]

    def run(policy: str) -> dict[str, float]:
        c = {**base, "nodeAffinityPolicy": policy}
        incoming = pod("in", group="pg", cpu="1", labels={"app": "web"}, node_selector={"pool": "x"}, spread=[c])
        return _scores("podtopologyspread.weight", nodes, *placed, incoming)

    # Candidates are every node here (scores alone, no filter); domains a, b → weight ln 4 = 1.386.
    # Honor (default): n2 does not match the pod's nodeSelector, so its pods do not count: a 0, b 0
    # → every score 0 → max 0 → 100 everywhere.
    assert run("Honor") == {"n1": 100, "n2": 100, "n3": 100}
    # Ignore: n2's two pods count for zone a: a = round(2·1.386) = 3, b = 0 → 100·(3 + 0 − s)//3.
    assert run("Ignore") == {"n1": 0, "n2": 0, "n3": 100}


def test_topology_spread_empty_selector_counts_nothing() -> None:
    host = "kubernetes.io/hostname"
    nodes = [node(f"n{i}", labels={host: f"n{i}"}) for i in (1, 2, 3)] + [node("n4")]
    c = {"maxSkew": 1, "topologyKey": host, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}
    placed = [_web("w1", "n1", "v1"), _web("w2", "n1", "v1")]
    got = _scores("podtopologyspread.weight", nodes, *placed, pod("in", group="pg", cpu="1", spread=[c]))
    # kube's countPodsMatchSelector returns 0 for an empty selector: all scores 0 → 100; n4 ignored.
    assert got == {"n1": 100, "n2": 100, "n3": 100, "n4": 0}


# -- PodTopologySpread's filter counts with the same node inclusion policies --------------------
def test_topology_spread_filter_honours_node_taints_policy() -> None:
    from builders import passing

    nodes = [
        node("n1", labels={"zone": "a"}),
        node("n2", labels={"zone": "b"}),
        node("n3", labels={"zone": "c"}, taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
    ]
    placed = [_web("w1", "n1", "v1"), _web("w2", "n2", "v1")]
    conf = make_conf("allocate", [{"name": "gang"}, {"name": "predicates"}])

    def allowed(policy: str) -> set[str]:
        c = {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
            "nodeTaintsPolicy": policy,
        }
        incoming = pod("in", group="pg", cpu="1", labels={"app": "web"}, spread=[c])
        return passing(
            open_session([*nodes, queue("q"), podgroup("pg", queue="q"), *placed, incoming], conf), "default/in"
        )

    # Ignore (default): zone c counts, with 0 pods: min 0, so a and b (1 + 1 − 0 > 1) are too
    # skewed; c is left out by its taint anyway.
    assert allowed("Ignore") == set()
    # Honor: the tainted node's zone does not count: min over a, b is 1, and 1 + 1 − 1 ≤ 1.
    assert allowed("Honor") == {"n1", "n2"}
