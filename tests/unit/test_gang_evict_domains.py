"""gangpreempt and gangreclaim over HyperNode domains.

Expectations come from Volcano's pkg/scheduler/actions/utils/util_test.go (GetCandidateDomains),
pkg/scheduler/plugins/network-topology-aware/network_topology_aware_test.go
(TestReverseAndCapEvictionGradients, TestHyperNodeGradientPreFiltering) at ed72c7c8; the
action-level scenario is derived from gangpreempt.go and utils/simulate.go
(BuildNominationPlanInDomain: victims and placements inside one domain).
"""

from __future__ import annotations

from typing import Any

from builders import hypernode, make_conf, node, only, open_session, pod, podgroup, priority_class, queue, run
from lahar_scheduler.actions.gangevict import CLUSTER_TOP, candidate_domains
from lahar_scheduler.plugins.network_topology_aware import reverse_and_cap

NTA = only("network-topology-aware", "enableNodeOrder", "enabledHyperNodeOrder", "enabledHyperNodeGradient")
TIER = [
    only("priority", "enableJobOrder", "enableTaskOrder", "enableJobStarving"),
    only("gang", "enableJobReady", "enableJobPipelined", "enableJobStarving", "enablePreemptable"),
    only("conformance", "enablePreemptable"),
    NTA,
]


def conf(**nta_args: Any) -> Any:
    tiers = [*TIER[:-1], only("network-topology-aware", *NTA_FLAGS, **nta_args)] if nta_args else TIER
    return make_conf("gangpreempt", tiers)


NTA_FLAGS = ("enableNodeOrder", "enabledHyperNodeOrder", "enabledHyperNodeGradient")


def cluster() -> list[Any]:
    """Four 1-cpu nodes in two tier-1 HyperNodes under one tier-2, each node busy with a
    one-pod low-priority gang (a on s0-n1, b on s1-n3, c on s0-n2, d on s1-n4)."""
    objs: list[Any] = [
        priority_class("high", 100),
        priority_class("low", 1),
        queue("q1"),
        hypernode("s0", 1, nodes=["s0-n1", "s0-n2"]),
        hypernode("s1", 1, nodes=["s1-n3", "s1-n4"]),
        hypernode("s2", 2, hypernodes=["s0", "s1"]),
    ]
    for name, where in (("a", "s0-n1"), ("b", "s1-n3"), ("c", "s0-n2"), ("d", "s1-n4")):
        objs.append(node(where, "1", "2Gi"))
        objs.append(podgroup(name, queue="q1", min_member=1, priority_class="low", phase="Running"))
        objs.append(pod(f"{name}-0", group=name, cpu="1", memory="1Gi", node_name=where, phase="Running", priority=1))
    return objs


def starving(topology: dict[str, Any] | None, size: int = 2, cpu: str = "1") -> list[Any]:
    objs: list[Any] = [
        podgroup("high", queue="q1", min_member=size, priority_class="high", phase="Inqueue", network_topology=topology)
    ]
    objs += [pod(f"high-{i}", group="high", cpu=cpu, memory="1Gi", priority=100) for i in range(size)]
    return objs


def leaf(node_name: str) -> str:
    return node_name.split("-")[0]


def test_reverse_and_cap_eviction_gradients() -> None:
    # network_topology_aware_test.go TestReverseAndCapEvictionGradients
    assert reverse_and_cap([["a", "b"], ["c", "d"]], 3) == [["c", "d"], ["b"]]
    assert reverse_and_cap([["a", "b"], ["c", "d"]], 0) == [["a", "b"], ["c", "d"]]


def test_a_job_without_topology_looks_in_the_whole_cluster() -> None:
    # util_test.go TestGetCandidateDomains_EmptyGradient_NonHardTopologyFallbackToRoot
    ssn = open_session([*cluster(), *starving(None)], conf())
    assert [name for name, _ in candidate_domains(ssn, ssn.jobs["default/high"], 8)] == [CLUSTER_TOP]


def test_hard_job_domains_are_its_eviction_gradients_widest_first() -> None:
    # gangpreempt's GetCandidateDomains with PurposeEvict: tiers up to highestTierAllowed, widest
    # first; every HyperNode is busy (no idle), yet each is eligible since its allocatable could
    # hold the job (TestHyperNodeGradientPreFiltering "Evict purpose - idle insufficient,
    # futureIdle insufficient").
    ssn = open_session([*cluster(), *starving({"mode": "hard", "highestTierAllowed": 2})], conf())
    job = ssn.jobs["default/high"]
    domains = candidate_domains(ssn, job, 8)
    assert [name for name, _ in domains] == ["s2", "s0", "s1"]
    assert sorted(ssn.node_list[i].name for i in domains[1][1]) == ["s0-n1", "s0-n2"]
    # maxDomains caps the list; hypernode.gradient.evict.max-hypernodes caps the gradients first.
    assert [name for name, _ in candidate_domains(ssn, job, 2)] == ["s2", "s0"]
    capped = open_session(
        [*cluster(), *starving({"mode": "hard", "highestTierAllowed": 2})],
        conf(**{"hypernode.gradient.evict.max-hypernodes": 2}),
    )
    assert [name for name, _ in candidate_domains(capped, capped.jobs["default/high"], 8)] == ["s2", "s1"]


def test_hard_job_without_any_eligible_hypernode_gets_no_domain() -> None:
    # util_test.go TestGetCandidateDomains_EmptyGradient_HardTopologyNoFallback, through
    # TestHyperNodeGradientPreFiltering "Evict purpose - allocatable insufficient": three cpus
    # cannot fit in any tier-1 HyperNode's two, and a hard job gets no cluster fallback.
    objs = [*cluster(), *starving({"mode": "hard", "highestTierAllowed": 1}, size=3)]
    objs[-4] = podgroup(
        "high",
        queue="q1",
        min_member=3,
        priority_class="high",
        phase="Inqueue",
        network_topology={"mode": "hard", "highestTierAllowed": 1},
        min_resources={"cpu": "3"},
    )
    ssn = open_session(objs, conf())
    assert candidate_domains(ssn, ssn.jobs["default/high"], 8) == []
    result = run(objs, conf())
    assert result.evictions == [] and result.pipelined == {}


def test_gangpreempt_frees_room_inside_one_hypernode_for_a_hard_job() -> None:
    # gangpreempt.go over BuildNominationPlanInDomain: the job, held to tier 1, evicts victims and
    # is pipelined inside one tier-1 HyperNode; across the cluster the same job (no topology)
    # takes victims from both.
    hard = run([*cluster(), *starving({"mode": "hard", "highestTierAllowed": 1})], conf())
    victims = {t.node_name or t.last_node for t, _ in hard.evictions}
    assert len(hard.evictions) == 2 and len({leaf(n) for n in victims}) == 1
    assert sorted(hard.pipelined) == ["default/high-0", "default/high-1"]
    assert {leaf(n) for n in hard.pipelined.values()} == {leaf(n) for n in victims}
    free = run([*cluster(), *starving(None)], conf())
    assert len(free.evictions) == 2
    assert len({leaf(t.node_name or t.last_node) for t, _ in free.evictions}) == 2


def test_gangpreempt_places_each_sub_group_inside_one_hypernode() -> None:
    # utils/simulate.go BuildNominationPlanInDomain: a job with a subGroupPolicy is pipelined sub-job
    # by sub-job; each hard sub-group (two pods, tier 1) inside one HyperNode of the domain.
    policy = {
        "name": "w",
        "matchLabelKeys": ["volcano.sh/task-spec"],
        "subGroupSize": 2,
        "minSubGroups": 2,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
    }
    objs: list[Any] = [
        *cluster(),
        podgroup("high", queue="q1", min_member=4, priority_class="high", phase="Inqueue", sub_group_policy=[policy]),
    ]
    # Interleaved so that task order alone would pair each sub-group across HyperNodes.
    for i, group in enumerate(["g0", "g1", "g0", "g1"]):
        objs.append(
            pod(f"high-{i}", group="high", cpu="1", memory="1Gi", priority=100, labels={"volcano.sh/task-spec": group})
        )
    result = run(objs, conf())
    assert len(result.evictions) == 4
    assert len(result.pipelined) == 4
    by_group: dict[str, set[str]] = {}
    for key, where in result.pipelined.items():
        index = int(key.rsplit("-", 1)[1])
        by_group.setdefault("g0" if index % 2 == 0 else "g1", set()).add(leaf(where))
    assert sorted(map(len, by_group.values())) == [1, 1] and by_group["g0"] != by_group["g1"]


def test_gangreclaim_frees_room_inside_one_hypernode_for_a_hard_job() -> None:
    # gangreclaim.go over the same domains: q2 holds every node with one-pod gangs; q1's hard
    # tier-1 job of two reclaims inside one tier-1 HyperNode only.
    reclaim = make_conf(
        "gangreclaim",
        [
            only("priority", "enableJobOrder", "enableTaskOrder", "enableJobStarving"),
            only("gang", "enableJobReady", "enableJobPipelined", "enableJobStarving", "enableReclaimable"),
            only("conformance", "enableReclaimable"),
            only("proportion", "enableQueueOrder", "enableReclaimable", "enablePreemptive", "enabledOverused"),
            NTA,
        ],
    )
    objs: list[Any] = [
        queue("q1"),
        queue("q2"),
        hypernode("s0", 1, nodes=["s0-n1", "s0-n2"]),
        hypernode("s1", 1, nodes=["s1-n3", "s1-n4"]),
        hypernode("s2", 2, hypernodes=["s0", "s1"]),
    ]
    for name, where in (("a", "s0-n1"), ("b", "s1-n3"), ("c", "s0-n2"), ("d", "s1-n4")):
        objs.append(node(where, "1", "2Gi"))
        objs.append(podgroup(name, queue="q2", min_member=1, phase="Running"))
        objs.append(pod(f"{name}-0", group=name, cpu="1", memory="1Gi", node_name=where, phase="Running"))
    objs.append(
        podgroup(
            "starved",
            queue="q1",
            min_member=2,
            phase="Inqueue",
            network_topology={"mode": "hard", "highestTierAllowed": 1},
        )
    )
    objs += [pod(f"starved-{i}", group="starved", cpu="1", memory="1Gi") for i in range(2)]
    result = run(objs, reclaim)
    victims = {leaf(t.node_name or t.last_node) for t, _ in result.evictions}
    assert len(result.evictions) == 2 and len(victims) == 1
    assert sorted(result.pipelined) == ["default/starved-0", "default/starved-1"]
    assert {leaf(n) for n in result.pipelined.values()} == victims
