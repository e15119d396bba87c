"""Network-topology-aware scheduling: the HyperNode tree, the plugin and allocate's HyperNode path.

Expectations come from Volcano's pkg/scheduler/actions/allocate/allocate_test.go at ed72c7c8
(TestAllocateWithNetWorkTopologies, TestNodeLevelScoreWithNetWorkTopologies,
TestHyperNodeBinpackWithNetWorkTopologies); each test cites its case.  Volcano's tests give the
snapshot's tier sets directly; here the same trees are written as HyperNode objects.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from builders import binds, hypernode, make_conf, node, only, open_session, pod, podgroup, queue, run
from lahar_scheduler.framework.hypernodes import CLUSTER_TOP
from lahar_scheduler.framework.jobs import JOB_ALLOCATED_HYPERNODE
from lahar_scheduler.plugins.network_topology_aware import parse_args

GANG = only("gang", "enableJobOrder", "enableJobReady", "enableJobPipelined", "enableJobStarving")
PREDICATES = only("predicates", "enablePredicate")
NTA = only("network-topology-aware", "enableNodeOrder", "enabledHyperNodeOrder", "enabledHyperNodeGradient")
BINPACK = only("binpack", "enableNodeOrder")
CONF = make_conf("allocate", [GANG, PREDICATES, NTA])


def two_tier(**labels: dict[str, str]) -> list[Any]:
    """Volcano's usual tree: s0 {s0-n1, s0-n2} and s1 {s1-n3, s1-n4} at tier 1 under s2."""
    names = ["s0-n1", "s0-n2", "s1-n3", "s1-n4"]
    return [
        *(node(n, cpu="2", memory="4Gi", pods="10", labels=labels.get(n)) for n in names),
        hypernode("s0", 1, nodes=names[:2]),
        hypernode("s1", 1, nodes=names[2:]),
        hypernode("s2", 2, hypernodes=["s0", "s1"]),
    ]


def three_tier() -> list[Any]:
    """s3..s6 (two nodes each) at tier 1, s1 {s3, s4} and s2 {s5, s6} at tier 2, s0 at tier 3."""
    objs: list[Any] = []
    for leaf in ("s3", "s4", "s5", "s6"):
        names = [f"{leaf}-n1", f"{leaf}-n2"]
        objs += [node(n, cpu="2", memory="4Gi", pods="10") for n in names]
        objs.append(hypernode(leaf, 1, nodes=names))
    objs += [hypernode("s1", 2, hypernodes=["s3", "s4"]), hypernode("s2", 2, hypernodes=["s5", "s6"])]
    objs.append(hypernode("s0", 3, hypernodes=["s1", "s2"]))
    return objs


def job(
    min_member: int,
    mode: str,
    tier: int | None = None,
    *,
    running: dict[str, str] | None = None,
    pending: int = 0,
    allocated: str = "",
    tier_name: str = "",
    cpu: str = "2",
    memory: str = "4G",
    name: str = "pg1",
) -> list[Any]:
    """A PodGroup with networkTopology, its running pods (name → node) and pending pods."""
    spec: dict[str, Any] = {"mode": mode}
    if tier is not None:
        spec["highestTierAllowed"] = tier
    if tier_name:
        spec["highestTierName"] = tier_name
    annotations = {JOB_ALLOCATED_HYPERNODE: allocated} if allocated else None
    objs: list[Any] = [
        queue("q1"),
        podgroup(name, "c1", queue="q1", min_member=min_member, network_topology=spec, annotations=annotations),
    ]
    roles = iter(["master", *["worker"] * 16])
    for pname, where in (running or {}).items():
        objs.append(
            pod(
                pname,
                "c1",
                group=name,
                cpu=cpu,
                memory=memory,
                node_name=where,
                phase="Running",
                annotations={"volcano.sh/task-spec": next(roles)},
            )
        )
    for i in range(pending):
        objs.append(
            pod(
                f"{name}-p{i}",
                "c1",
                group=name,
                cpu=cpu,
                memory=memory,
                annotations={"volcano.sh/task-spec": next(roles)},
            )
        )
    return objs


def leaves(placed: dict[str, str]) -> Counter[str]:
    """How many binds landed in each leaf HyperNode (nodes are named <leaf>-nX)."""
    return Counter(n.split("-")[0] for n in placed.values())


# -- the tree ------------------------------------------------------------------------------------


def test_tree_resolves_exact_regex_label_and_nested_members() -> None:
    objs = [
        node("a-1"),
        node("a-2"),
        node("b-1", labels={"rack": "b"}),
        node("b-2", labels={"rack": "b"}),
        node("c-1"),
        hypernode("ha", 1, regex="^a-"),
        hypernode("hb", 1, labels={"rack": "b"}),
        hypernode("hc", 1, nodes=["c-1", "missing"]),
        hypernode("spine", 2, hypernodes=["ha", "hb"]),
    ]
    tree = open_session(objs, CONF).hypernodes
    assert tree.infos["ha"].nodes == {"a-1", "a-2"}
    assert tree.infos["hb"].nodes == {"b-1", "b-2"}
    assert tree.infos["hc"].nodes == {"c-1"}  # an absent node is not a member
    assert tree.infos["spine"].nodes == {"a-1", "a-2", "b-1", "b-2"}
    # volcano pkg/scheduler/framework/session.go addClusterTopHyperNode: one tier above the top.
    assert tree.tier(CLUSTER_TOP) == 3
    assert tree.infos["hc"].parent == CLUSTER_TOP and tree.infos["ha"].parent == "spine"
    assert tree.lca("ha", "hb") == "spine" and tree.lca("ha", "hc") == CLUSTER_TOP
    assert tree.leaf_of("b-2") == "hb" and tree.by_tier[1] == ["ha", "hb", "hc"]


def test_tree_follows_node_label_changes() -> None:
    from builders import snapshot

    snap = snapshot([node("n1"), node("n2", labels={"rack": "r1"}), hypernode("r1", 1, labels={"rack": "r1"})])
    assert snap.hypernodes.infos["r1"].nodes == {"n2"}
    snap.upsert_node(node("n1", labels={"rack": "r1"}))
    assert snap.hypernodes.infos["r1"].nodes == {"n1", "n2"}
    snap.delete_hypernode("r1")
    assert "r1" not in snap.hypernodes


def test_args_parse_volcano_keys_and_name_bad_fields() -> None:
    errors: list[str] = []
    args = parse_args(
        {
            "weight": 10,
            "hypernode.binpack.cpu": -1,
            "hypernode.binpack.resources": "nvidia.com/gpu",
            "hypernode.binpack.resources.nvidia.com/gpu": 2,
            "hypernode.binpack.normal-pod.fading": 0.5,
        },
        "tiers[0].plugins[2].arguments",
        errors,
    )
    assert not errors
    assert (args.weight, args.cpu, args.resources, args.normal_pod_fading) == (10, 1, {"nvidia.com/gpu": 2}, 0.5)
    parse_args({"weight": "x", "bogus": 1}, "p", errors)
    assert errors[0].startswith("p.weight: expected an integer") and errors[1].startswith("p.bogus: unknown argument")


# -- TestAllocateWithNetWorkTopologies ------------------------------------------------------------


def test_soft_allocates_when_resources_are_enough() -> None:
    # case "soft network topology constrain, can allocate job when resources are enough"
    assert len(binds(run([*two_tier(), *job(3, "soft", 0, pending=3)], CONF))) == 3


def test_soft_allocates_when_minavailable_below_replicas() -> None:
    # case "soft network topology constrain, can allocate job when minavailable < replicas"
    assert len(binds(run([*two_tier(), *job(1, "soft", 0, pending=2)], CONF))) == 2


@pytest.mark.parametrize("mode,tier", [("soft", 0), ("hard", 1)])
def test_allocates_to_the_node_with_affinity(mode: str, tier: int) -> None:
    # cases "soft|hard network topology constrain, two available hyperNodes, can allocate job to
    # nodes with affinity"
    objs: list[Any] = [
        node("s0-n1", cpu="2", memory="4Gi"),
        node("s1-n2", cpu="2", memory="4Gi", labels={"nodeRole": "master"}),
        hypernode("s0", 1, nodes=["s0-n1"]),
        hypernode("s1", 1, nodes=["s1-n2"]),
        queue("q1"),
        podgroup("pg1", "c1", queue="q1", min_member=1, network_topology={"mode": mode, "highestTierAllowed": tier}),
        pod("p1", "c1", group="pg1", cpu="2", memory="4G", node_selector={"nodeRole": "master"}),
    ]
    assert binds(run(objs, CONF)) == {"c1/p1": "s1-n2"}


@pytest.mark.parametrize("min_member", [2, 3])
def test_soft_rescheduled_job_goes_on_beside_its_running_tasks(min_member: int) -> None:
    # cases "soft network topology constrain and tasks in job rescheduled, can allocate job when
    # resources are enough" (minMember 2) and "... and minavailable = replicas" (3)
    objs = [*two_tier(), *job(min_member, "soft", 0, running={"r1": "s0-n1", "r2": "s0-n2"}, pending=1, allocated="s0")]
    placed = binds(run(objs, CONF))
    assert len(placed) == 1 and set(leaves(placed)) == {"s1"}


def test_soft_rescheduled_three_tiers_crosses_tiers() -> None:
    # case "soft ... rescheduled, can allocate job when cross highestTierAllowed tier and
    # hyperNodesInfo has three tier"
    objs = [*three_tier(), *job(2, "soft", 0, running={"r1": "s3-n1", "r2": "s3-n2"}, pending=1, allocated="s3")]
    placed = binds(run(objs, CONF))
    assert len(placed) == 1
    assert set(leaves(placed)) == {"s4"}  # the nearest room: s4 shares tier-2 s1 with s3


def test_hard_refuses_a_gang_larger_than_any_allowed_hypernode() -> None:
    # case "hard network topology constrain, can not allocate job when cross highestTierAllowed tier"
    res = run([*two_tier(), *job(3, "hard", 1, pending=3)], CONF)
    assert not res.binds
    why = res.decisions["c1/pg1"].why
    assert why is not None and why.plugin == "network-topology-aware"
    assert "tier <= 1" in why.summary
    assert [d.split(" (")[0] for d in why.details] == [
        "tier 1 hypernode s0: 2 of 3 pending tasks fit, 3 needed",
        "tier 1 hypernode s1: 2 of 3 pending tasks fit, 3 needed",
    ]
    assert "Insufficient cpu" in why.details[0]


def test_hard_allocates_when_highest_tier_is_not_reached() -> None:
    # case "hard network topology constrain, can allocate job when highestTierAllowed not reached"
    assert len(binds(run([*two_tier(), *job(3, "hard", 2, pending=3)], CONF))) == 3


def test_hard_keeps_a_gang_in_one_leaf_when_several_fit() -> None:
    # case "hard network topology constrain, can allocate job when multi hyperNodes are available"
    placed = binds(run([*two_tier(), *job(2, "hard", 1, pending=2)], CONF))
    assert len(placed) == 2 and len(leaves(placed)) == 1


def test_hard_minavailable_below_replicas_places_the_rest_in_the_same_leaf() -> None:
    # case "hard network topology constrain, can allocate job when minavailable < replicas"
    placed = binds(run([*two_tier(), *job(1, "hard", 1, pending=2)], CONF))
    assert len(placed) == 2 and len(leaves(placed)) == 1


@pytest.mark.parametrize(
    "tree,tier,running,allocated,expected",
    [
        # "hard ... rescheduled, can allocate job when highestTierAllowed not reached"
        ("two", 2, {"r1": "s0-n1", "r2": "s0-n2"}, "s0", 1),
        # "hard ... rescheduled, can not allocate job when cross highestTierAllowed tier"
        ("two", 1, {"r1": "s0-n1", "r2": "s0-n2"}, "s0", 0),
        # "hard ... rescheduled, can allocate job when highestTierAllowed not reached and
        # hyperNodesInfo has three tier"
        ("three", 2, {"r1": "s3-n1", "r2": "s3-n2"}, "s3", 1),
        # "hard ... rescheduled, can not allocate job when cross highestTierAllowed tier and
        # hyperNodesInfo has three tier"
        ("three", 1, {"r1": "s3-n1", "r2": "s3-n2"}, "s3", 0),
    ],
)
def test_hard_rescheduled(tree: str, tier: int, running: dict[str, str], allocated: str, expected: int) -> None:
    objs = [
        *(two_tier() if tree == "two" else three_tier()),
        *job(2, "hard", tier, running=running, pending=1, allocated=allocated),
    ]
    placed = binds(run(objs, CONF))
    assert len(placed) == expected
    if tree == "three" and expected:
        assert set(leaves(placed)) == {"s4"}  # inside tier-2 s1, never s5/s6


def test_hard_rescheduled_recovers_the_allocated_hypernode_without_the_annotation() -> None:
    # As the case "hard ... rescheduled, can not allocate job when cross highestTierAllowed tier",
    # with the allocated HyperNode recovered from where the tasks run (recoverAllocatedHyperNode).
    objs = [*two_tier(), *job(2, "hard", 1, running={"r1": "s0-n1", "r2": "s0-n2"}, pending=1)]
    assert not binds(run(objs, CONF))


def test_hard_rescheduled_when_lca_is_the_cluster_top() -> None:
    # case "hard network topology constrain and tasks in job rescheduled, can allocate job when
    # LCAHyperNode is empty": only tier-1 HyperNodes, so the cluster top is tier 2.
    objs: list[Any] = [
        *(node(n, cpu="2", memory="4Gi") for n in ("s0-n1", "s0-n2", "s1-n3", "s1-n4")),
        hypernode("s0", 1, nodes=["s0-n1", "s0-n2"]),
        hypernode("s1", 1, nodes=["s1-n3", "s1-n4"]),
        *job(2, "hard", 2, running={"r1": "s0-n1", "r2": "s0-n2"}, pending=1, allocated="s0"),
    ]
    placed = binds(run(objs, CONF))
    assert len(placed) == 1 and set(leaves(placed)) == {"s1"}


@pytest.mark.parametrize("tier_name,expected", [("volcano.sh/task-spec", 0), ("volcano.sh/job-spec", 3)])
def test_hard_highest_tier_name(tier_name: str, expected: int) -> None:
    # cases "hard network topology constrain, can not allocate job when cross highestTierName tier"
    # and "... can allocate job when the tier corresponding to highestTierName not reached"
    objs: list[Any] = [
        *(node(n, cpu="2", memory="4Gi") for n in ("s0-n1", "s0-n2", "s1-n3", "s1-n4")),
        hypernode("s0", 1, nodes=["s0-n1", "s0-n2"], tier_name="volcano.sh/task-spec"),
        hypernode("s1", 1, nodes=["s1-n3", "s1-n4"], tier_name="volcano.sh/task-spec"),
        hypernode("s2", 2, hypernodes=["s0", "s1"], tier_name="volcano.sh/job-spec"),
        *job(3, "hard", tier_name=tier_name, pending=3),
    ]
    assert len(binds(run(objs, CONF))) == expected


# -- TestNodeLevelScoreWithNetWorkTopologies / TestHyperNodeBinpackWithNetWorkTopologies -----------


def test_node_level_binpack_picks_the_fuller_hypernode() -> None:
    # TestNodeLevelScoreWithNetWorkTopologies case "hard network topology constrain, allocate job
    # to highest score hypeNode with node level binpack"
    objs: list[Any] = [
        node("s0-n1", cpu="4", memory="8Gi", pods="10"),
        node("s0-n2", cpu="8", memory="16Gi", pods="10"),
        node("s1-n3", cpu="4", memory="8Gi", pods="10"),
        node("s1-n4", cpu="8", memory="16Gi", pods="10"),
        hypernode("s0", 1, nodes=["s0-n1", "s0-n2"]),
        hypernode("s1", 1, nodes=["s1-n3", "s1-n4"]),
        hypernode("s2", 2, hypernodes=["s0", "s1"]),
        queue("q1"),
        podgroup("pg1", "c1", queue="q1", min_member=2, network_topology={"mode": "hard", "highestTierAllowed": 1}),
        podgroup("pg2", "c1", queue="q1", min_member=2, phase="Running"),
        pod("p1", "c1", group="pg1", cpu="2", memory="4Gi", annotations={"volcano.sh/task-spec": "master"}),
        pod("p2", "c1", group="pg1", cpu="4", memory="8Gi", annotations={"volcano.sh/task-spec": "worker"}),
        pod("p3", "c1", group="pg2", cpu="2", memory="4Gi", node_name="s0-n1", phase="Running"),
        pod("p4", "c1", group="pg2", cpu="4", memory="8Gi", node_name="s0-n2", phase="Running"),
    ]
    conf = make_conf("allocate", [GANG, PREDICATES, BINPACK, NTA])
    assert binds(run(objs, conf)) == {"c1/p1": "s0-n1", "c1/p2": "s0-n2"}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_hypernode_binpack_keeps_tasks_under_the_lowest_common_ancestor(seed: int) -> None:
    # TestHyperNodeBinpackWithNetWorkTopologies case "hard network topology constrain, allocate task
    # to node under LCAHyperNode": 4 tasks over leaves of 2 nodes land 2 + 2.
    objs: list[Any] = []
    for leaf, names in (("s0", ["s0-n1", "s0-n2"]), ("s1", ["s1-n3", "s1-n4"]), ("s2", ["s2-n5", "s2-n6"])):
        objs += [node(n, cpu="4", memory="8Gi", pods="10") for n in names]
        objs.append(hypernode(leaf, 1, nodes=names))
    objs.append(hypernode("s3", 2, hypernodes=["s0", "s1", "s2"]))
    objs += job(4, "hard", 2, pending=4, cpu="4", memory="8Gi")
    placed = binds(run(objs, CONF, seed=seed))
    assert len(placed) == 4
    assert sorted(leaves(placed).values()) == [2, 2]


def test_normal_pods_are_binpacked_into_fuller_hypernodes() -> None:
    # network_topology_aware.go batchNodeOrderFnForNormalPods: a pod without networkTopology
    # prefers the node whose HyperNode is fuller (s0 holds a running pod), all else equal.
    objs: list[Any] = [
        *two_tier(),
        queue("q1"),
        podgroup("busy", "c1", queue="q1", min_member=1, phase="Running"),
        pod("b1", "c1", group="busy", cpu="2", memory="4G", node_name="s0-n1", phase="Running"),
        podgroup("plain", "c1", queue="q1", min_member=1),
        pod("x", "c1", group="plain", cpu="1", memory="1G"),
    ]
    assert binds(run(objs, CONF)) == {"c1/x": "s0-n2"}


def test_jobs_without_network_topology_take_the_plain_path() -> None:
    ssn = open_session([*two_tier(), queue("q1"), podgroup("plain", "c1", queue="q1", min_member=1)], CONF)
    assert ssn.topology == {}
