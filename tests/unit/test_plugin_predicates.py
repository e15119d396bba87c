"""predicates: the kube-scheduler filters, per node, through the session's PredicateFn."""

from __future__ import annotations

from typing import Any

import pytest

from builders import all_nodes, binds, make_conf, node, open_session, passing, pod, podgroup, queue, run, task
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.session import Session

CONF = make_conf("allocate", [{"name": "gang"}, {"name": "predicates"}])


def session(nodes: list[Any], *pods: Any, conf: Any = CONF) -> Session:
    return open_session([*nodes, queue("q"), podgroup("pg", queue="q"), *pods], conf)


def incoming(**kw: Any) -> Any:
    return pod("in", group="pg", cpu="1", **kw)


def running(name: str, node_name: str, **kw: Any) -> Any:
    return pod(name, cpu="100m", node_name=node_name, phase="Running", scheduler="other", **kw)


ZONES = [
    node("a1", labels={"zone": "a", "disk": "ssd", "gen": "3"}),
    node("a2", labels={"zone": "a", "gen": "5"}),
    node("b1", labels={"zone": "b", "disk": "hdd", "gen": "7"}),
    node("nolabel"),
]


# -- node selector and required node affinity ------------------------------------------------------


def test_node_selector() -> None:
    assert passing(session(ZONES, incoming(node_selector={"zone": "a"})), "default/in") == {"a1", "a2"}
    sel = {"zone": "a", "disk": "ssd"}
    assert passing(session(ZONES, incoming(node_selector=sel)), "default/in") == {"a1"}
    assert passing(session(ZONES, incoming(node_selector={"zone": "c"})), "default/in") == set()


def required(*terms: list[dict[str, Any]], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    node_terms = [{"matchExpressions": t} for t in terms]
    if fields is not None:
        node_terms.append({"matchFields": fields})
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": node_terms}}}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ({"key": "zone", "operator": "In", "values": ["a", "b"]}, {"a1", "a2", "b1"}),
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, {"b1", "nolabel"}),
        ({"key": "disk", "operator": "Exists"}, {"a1", "b1"}),
        ({"key": "disk", "operator": "DoesNotExist"}, {"a2", "nolabel"}),
        ({"key": "gen", "operator": "Gt", "values": ["4"]}, {"a2", "b1"}),
        ({"key": "gen", "operator": "Lt", "values": ["5"]}, {"a1"}),
        ({"key": "gen", "operator": "Gt", "values": ["x"]}, set()),
    ],
)
def test_required_node_affinity_operators(expr: dict[str, Any], expected: set[str]) -> None:
    assert passing(session(ZONES, incoming(affinity=required([expr]))), "default/in") == expected


def test_required_node_affinity_terms_are_ored_and_match_fields() -> None:
    aff = required(
        [{"key": "zone", "operator": "In", "values": ["b"]}],
        fields=[{"key": "metadata.name", "operator": "In", "values": ["a2"]}],
    )
    assert passing(session(ZONES, incoming(affinity=aff)), "default/in") == {"a2", "b1"}
    # Expressions inside one term are ANDed.
    both = required([{"key": "zone", "operator": "In", "values": ["a"]}, {"key": "disk", "operator": "Exists"}])
    assert passing(session(ZONES, incoming(affinity=both)), "default/in") == {"a1"}
    # nodeSelector and affinity must both hold.
    aff_b = required([{"key": "zone", "operator": "In", "values": ["b"]}])
    assert passing(session(ZONES, incoming(affinity=aff_b, node_selector={"zone": "a"})), "default/in") == set()


def test_empty_node_selector_term_matches_nothing() -> None:
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}
    assert passing(session(ZONES, incoming(affinity=aff)), "default/in") == set()


def test_node_affinity_check_can_be_switched_off() -> None:
    conf = make_conf(
        "allocate",
        [{"name": "gang"}, {"name": "predicates", "arguments": {"predicate.NodeAffinityEnable": False}}],
    )
    assert passing(session(ZONES, incoming(node_selector={"zone": "c"}), conf=conf), "default/in") == {
        "a1",
        "a2",
        "b1",
        "nolabel",
    }


# -- taints and tolerations -----------------------------------------------------------------------

TAINTED = [
    node("clean"),
    node("gpu", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
    node("drain", taints=[{"key": "drain", "effect": "NoExecute"}]),
    node("soft", taints=[{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}]),
]


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        ([], {"clean", "soft"}),
        (
            [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}],
            {"clean", "soft", "gpu"},
        ),
        ([{"key": "gpu", "operator": "Equal", "value": "no", "effect": "NoSchedule"}], {"clean", "soft"}),
        ([{"key": "gpu", "operator": "Exists"}], {"clean", "soft", "gpu"}),
        ([{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}], {"clean", "soft"}),
        ([{"key": "drain", "operator": "Exists", "effect": "NoExecute"}], {"clean", "soft", "drain"}),
        ([{"operator": "Exists"}], {"clean", "soft", "gpu", "drain"}),  # empty key: every taint
        ([{"operator": "Exists", "effect": "NoSchedule"}], {"clean", "soft", "gpu"}),
    ],
)
def test_taints_and_tolerations(tolerations: list[dict[str, Any]], expected: set[str]) -> None:
    assert passing(session(TAINTED, incoming(tolerations=tolerations)), "default/in") == expected


def test_unschedulable_nodes() -> None:
    nodes = [node("up"), node("cordoned", unschedulable=True)]
    assert passing(session(nodes, incoming()), "default/in") == {"up"}
    tol = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    assert passing(session(nodes, incoming(tolerations=tol)), "default/in") == {"up", "cordoned"}


# -- pod count and host ports ----------------------------------------------------------------------


def test_pod_count_limit_counts_running_and_tentative_pods() -> None:
    nodes = [node("small", pods="2"), node("big", pods="10")]
    ssn = session(nodes, running("r1", "small"), incoming(), pod("in2", group="pg", cpu="1"))
    assert passing(ssn, "default/in") == {"small", "big"}
    ssn.statement().allocate(task(ssn, "default/in2"), ssn.nodes.by_name["small"])
    assert passing(ssn, "default/in") == {"big"}
    got = ssn.call(P.PREDICATE, task(ssn, "default/in"), all_nodes(ssn))
    assert got.errors.reasons == {"node(s) pod number exceeded": 1}


def test_host_ports() -> None:
    nodes = [node("n1"), node("n2")]
    ssn = session(nodes, running("web", "n1", host_ports=[8080]), incoming(host_ports=[8080]))
    assert passing(ssn, "default/in") == {"n2"}
    ssn = session(nodes, running("web", "n1", host_ports=[8080]), incoming(host_ports=[9090]))
    assert passing(ssn, "default/in") == {"n1", "n2"}


def test_host_ports_protocols_and_addresses() -> None:
    from lahar.api.objects import ContainerPort

    nodes = [node("n1")]
    web = running("web", "n1")
    web.spec.containers[0].ports = [ContainerPort(container_port=53, host_port=53, protocol="UDP")]
    tcp = incoming()
    tcp.spec.containers[0].ports = [ContainerPort(container_port=53, host_port=53, protocol="TCP")]
    assert passing(session(nodes, web, tcp), "default/in") == {"n1"}
    udp_ip = incoming()
    udp_ip.spec.containers[0].ports = [
        ContainerPort(container_port=53, host_port=53, protocol="UDP", host_ip="10.0.0.1")
    ]
    # 0.0.0.0 (the running pod's default) conflicts with every address.
    assert passing(session(nodes, web, udp_ip), "default/in") == set()


# -- inter-pod affinity and anti-affinity ----------------------------------------------------------


def term(key: str, **labels: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def pod_aff(*terms: dict[str, Any], anti: bool = False) -> dict[str, Any]:
    kind = "podAntiAffinity" if anti else "podAffinity"
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def test_required_pod_affinity_by_zone() -> None:
    ssn = session(ZONES, running("db", "a2", labels={"app": "db"}), incoming(affinity=pod_aff(term("zone", app="db"))))
    assert passing(ssn, "default/in") == {"a1", "a2"}


def test_required_pod_affinity_first_pod_of_a_group_may_go_where_the_key_exists() -> None:
    aff = pod_aff(term("zone", app="web"))
    ssn = session(ZONES, incoming(affinity=aff, labels={"app": "web"}))
    assert passing(ssn, "default/in") == {"a1", "a2", "b1"}  # not the node without a zone
    # A pod that does not match its own term has nowhere to go.
    assert passing(session(ZONES, incoming(affinity=aff)), "default/in") == set()


def test_pod_affinity_looks_only_at_the_pods_namespace_unless_told() -> None:
    db = pod("db", "other", cpu="100m", node_name="a2", phase="Running", scheduler="x", labels={"app": "db"})
    assert passing(session(ZONES, db, incoming(affinity=pod_aff(term("zone", app="db")))), "default/in") == set()
    wide = term("zone", app="db")
    wide["namespaces"] = ["other"]
    assert passing(session(ZONES, db, incoming(affinity=pod_aff(wide))), "default/in") == {"a1", "a2"}


def test_required_anti_affinity_by_hostname_and_zone() -> None:
    web = running("web", "a1", labels={"app": "web"})
    host = pod_aff(term("kubernetes.io/hostname", app="web"), anti=True)
    nodes = [
        node(n.metadata.name, labels={**n.metadata.labels, "kubernetes.io/hostname": n.metadata.name}) for n in ZONES
    ]
    assert passing(session(nodes, web, incoming(affinity=host)), "default/in") == {"a2", "b1", "nolabel"}
    zone = pod_aff(term("zone", app="web"), anti=True)
    # Nodes without the topology key cannot conflict.
    assert passing(session(ZONES, web, incoming(affinity=zone)), "default/in") == {"b1", "nolabel"}


def test_existing_pods_anti_affinity_rejects_matching_newcomers() -> None:
    guard = running("guard", "a1", affinity=pod_aff(term("zone", app="noisy"), anti=True))
    assert passing(session(ZONES, guard, incoming(labels={"app": "noisy"})), "default/in") == {
        "b1",
        "nolabel",
    }
    assert passing(session(ZONES, guard, incoming(labels={"app": "calm"})), "default/in") == {
        "a1",
        "a2",
        "b1",
        "nolabel",
    }


def test_anti_affinity_sees_tentative_placements_of_the_session() -> None:
    aff = pod_aff(term("zone", app="w"), anti=True)
    ssn = session(
        ZONES,
        incoming(labels={"app": "w"}, affinity=aff),
        pod("in2", group="pg", cpu="1", labels={"app": "w"}, affinity=aff),
    )
    ssn.statement().allocate(task(ssn, "default/in2"), ssn.nodes.by_name["a1"])
    assert passing(ssn, "default/in") == {"b1", "nolabel"}


def test_anti_affinity_spreads_a_gang_across_zones() -> None:
    aff = pod_aff(term("zone", app="w"), anti=True)
    objs = [
        *ZONES,
        queue("q"),
        podgroup("pg", queue="q", min_member=2),
        pod("pg-t-0", group="pg", cpu="1", labels={"app": "w"}, affinity=aff),
        pod("pg-t-1", group="pg", cpu="1", labels={"app": "w"}, affinity=aff),
        pod("pg-t-2", group="pg", cpu="1", labels={"app": "w"}, affinity=aff),
    ]
    for seed in range(4):
        got = binds(run(objs, CONF, seed=seed))
        zones = [next(n for n in ZONES if n.metadata.name == v).metadata.labels.get("zone") for v in got.values()]
        assert len(got) == 3
        # At most one per zone; the unlabeled node has no zone, so it never conflicts.
        labelled = [z for z in zones if z]
        assert len(labelled) == len(set(labelled))


# -- topology spread (DoNotSchedule) ---------------------------------------------------------------


def spread(max_skew: int = 1, key: str = "zone", **labels: str) -> dict[str, Any]:
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": labels},
    }


def test_topology_spread_skew_and_missing_label() -> None:
    placed = [running(f"w{i}", "a1", labels={"app": "w"}) for i in range(2)]
    ssn = session(ZONES, *placed, incoming(labels={"app": "w"}, spread=[spread(app="w")]))
    # zone a holds 2, zone b 0: placing in a would make skew 3 − 0 > 1; the unlabeled node is out.
    assert passing(ssn, "default/in") == {"b1"}
    got = ssn.call(P.PREDICATE, task(ssn, "default/in"), all_nodes(ssn))
    assert got.errors.reasons == {
        "node(s) didn't match pod topology spread constraints": 2,
        "node(s) didn't match pod topology spread constraints (missing required label)": 1,
    }
    assert [ssn.node_list[i].name for i in got.unresolvable] == ["nolabel"]


def test_topology_spread_max_skew_allows_some_imbalance() -> None:
    placed = [running("w0", "a1", labels={"app": "w"})]
    ssn = session(ZONES, *placed, incoming(labels={"app": "w"}, spread=[spread(max_skew=2, app="w")]))
    assert passing(ssn, "default/in") == {"a1", "a2", "b1"}


def test_topology_spread_counts_only_nodes_the_pod_may_use() -> None:
    # Zone b is excluded by the pod's node selector, so its emptiness does not count for the skew.
    placed = [running("w0", "a1", labels={"app": "w"})]
    spec = incoming(labels={"app": "w"}, spread=[spread(app="w")], node_selector={"gen": "3"})
    ssn = session(ZONES, *placed, spec)
    assert passing(ssn, "default/in") == {"a1"}


def test_schedule_anyway_spread_is_not_a_filter() -> None:
    soft = spread(app="w")
    soft["whenUnsatisfiable"] = "ScheduleAnyway"
    placed = [running(f"w{i}", "a1", labels={"app": "w"}) for i in range(3)]
    ssn = session(ZONES, *placed, incoming(labels={"app": "w"}, spread=[soft]))
    assert passing(ssn, "default/in") == {"a1", "a2", "b1", "nolabel"}


def test_fit_error_message_lists_every_reason() -> None:
    objs = [
        node("full", cpu="1", memory="8Gi"),
        node("tainted", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
        node("other", labels={"zone": "x"}),
        queue("q"),
        podgroup("pg", queue="q", min_member=1),
        pod("pg-t-0", group="pg", cpu="2", node_selector={"zone": "x"}),
    ]
    objs[2] = node("other", cpu="1", labels={"zone": "x"})
    res = run(objs, CONF)
    assert not res.binds
    cond = next(c for c in res.podgroups["default/pg"].conditions if c.type == "Unschedulable")
    assert "3/3 nodes are unavailable: " in cond.message
    assert "2 Insufficient cpu" in cond.message
    assert "1 node(s) didn't match Pod's node affinity/selector" in cond.message
