"""The capacity plugin, flat and hierarchical: shares, guarantee protection, reclaim gates,
allocatable/enqueue limits, and its simulate hooks under topology-aware preemption."""

from __future__ import annotations

from typing import Any

import pytest
from evict_builders import conf, evicted, node, plugin, pod, podgroup, priority_class, queue, res, run

from lahar.api.resource import Resource
from lahar_scheduler.plugins.capacity_queues import CapacityAttr

A100 = "nvidia.com/a100"
HCA = "rdma/hca"


def capacity_conf(
    *,
    hierarchy: bool = False,
    level: int | None = None,
    priority: bool = True,
    actions: str = "enqueue, reclaim, allocate",
) -> Any:
    flags = ["enabledAllocatable", "enablePreemptive", "enableReclaimable", "enableQueueOrder", "enableJobEnqueued"]
    if hierarchy:
        flags.append("enableHierarchy")
    args = {"ancestorReclaimLevel": level} if level is not None else None
    tier = [
        plugin("capacity", *flags, arguments=args),
        plugin("predicates", "enablePredicate"),
        plugin("gang", "enableJobStarving"),
    ]
    if priority:
        tier.append(plugin("priority", "enableJobOrder", "enableTaskOrder"))
    return conf(actions, tier)


@pytest.mark.parametrize(
    ("deserved", "allocated", "share"),
    [
        (Resource(), Resource(1000, 2**30), 1.0),  # best effort: always 1
        (Resource(), Resource(), 1.0),
        (Resource(2000, 2 * 2**30), Resource(), 0.0),
        (Resource(2000, 2 * 2**30), Resource(1000, 2**30), 0.5),
        (Resource(2000, 4 * 2**30), Resource(1000, 3 * 2**30), 0.75),  # memory dominant
        (Resource(2000, 2 * 2**30), Resource(3000, 2 * 2**30), 1.5),
        (Resource(0, 0), Resource(1000, 2**30), 1.0),  # zero deserved counts as none
    ],
)
def test_share(deserved: Resource, allocated: Resource, share: float) -> None:
    attr = CapacityAttr("q", deserved, Resource(), Resource(), allocated=allocated)
    attr.update_share()
    assert attr.share == pytest.approx(share)


def _flat_reclaim(guarantee: dict[str, str] | None) -> list[Any]:
    return [
        queue("q1", deserved=res("1", "1Gi"), guarantee=guarantee),
        queue("q2", deserved=res("2", "2Gi")),
        node("n1", "2", "2Gi"),
        podgroup("pg1", "q1", 0, phase="Running"),
        podgroup("pg2", "q2", 1),
        pod("t1", "pg1", res("1", "1Gi"), "n1"),
        pod("t2", "pg1", res("1", "1Gi"), "n1"),
        pod("reclaimer", "pg2", res("1", "1Gi")),
    ]


def test_reclaims_from_a_queue_over_deserved() -> None:
    out = run(_flat_reclaim(None), capacity_conf())
    assert len(evicted(out)) == 1
    assert out.pipelined == {"c1/reclaimer": "n1"}


def test_guarantee_protects_a_queue_over_deserved() -> None:
    assert evicted(run(_flat_reclaim(res("2", "2Gi")), capacity_conf())) == []


def test_queue_at_deserved_on_every_requested_dimension_may_not_reclaim() -> None:
    objs = _flat_reclaim(None)
    objs[1] = queue("q2", deserved=res("1", "1Gi"))
    objs.insert(5, pod("q2-running", "pg2", res("1", "1Gi"), "n1", phase="Running"))
    objs[2] = node("n1", "3", "3Gi")
    # q2 already uses its 1 cpu / 1Gi: one more task would exceed deserved on both dimensions.
    assert evicted(run(objs, capacity_conf())) == []


def test_capability_limits_allocation_and_admission() -> None:
    objs = [
        queue("q1", capability=res("2", "2G")),
        node("n1", "8", "8G"),
        # pg1's minResources covers its allocation, so none of it counts as elastic (reclaimable
        # headroom that would let pg2 in).
        podgroup("pg1", "q1", 0, phase="Running", min_resources=res("1", "1G")),
        podgroup("pg2", "q1", 1, phase="Pending", min_resources=res("2", "1G")),
        podgroup("pg3", "q1", 1),
        pod("running", "pg1", res("1", "1G"), "n1"),
        pod("waiting", "pg2", res("2", "1G")),
        pod("small", "pg3", res("1", "1G")),
    ]
    out = run(objs, capacity_conf())
    assert out.binds == {"c1/small": "n1"}  # 1 + 1 ≤ 2; pg2's minResources would exceed it
    assert out.phases["c1/pg2"] == "Pending"


LEVEL_TREE = [
    queue("root"),
    queue("grand-a", parent="root", deserved=res("2", "2Gi"), capability=res("4", "4Gi")),
    queue("parent-a", parent="grand-a", deserved=res("2", "2Gi"), capability=res("2", "2Gi")),
    queue("queue-a", parent="parent-a", deserved=res("2", "2Gi"), capability=res("2", "2Gi")),
    queue("grand-b", parent="root", deserved=res("3", "3Gi"), capability=res("4", "4Gi")),
    queue("parent-b", parent="grand-b", deserved=res("1", "1Gi"), capability=res("2", "2Gi")),
    queue("queue-b", parent="parent-b", deserved=res("1", "1Gi"), capability=res("2", "2Gi")),
    node("n1", "2", "2Gi"),
    podgroup("pg-victim", "queue-b", 1, namespace="ns1", phase="Running"),
    podgroup("pg-reclaimer", "queue-a", 1, namespace="ns1"),
    pod("p-victim", "pg-victim", res("2", "2Gi"), "n1", namespace="ns1"),
    pod("p-reclaimer", "pg-reclaimer", res("2", "2Gi"), namespace="ns1"),
]


@pytest.mark.parametrize(("level", "victims"), [(0, ["ns1/p-victim"]), (1, ["ns1/p-victim"]), (2, [])])
def test_ancestor_reclaim_level_gates_on_ancestors_over_deserved(level: int, victims: list[str]) -> None:
    """queue-b and parent-b are over their 1-cpu deserved; grand-b (3 cpu) is not, so only a
    level reaching the grandparent protects the victim."""
    out = run(LEVEL_TREE, capacity_conf(hierarchy=True, level=level, priority=False))
    assert evicted(out) == victims
    assert out.pipelined == ({"ns1/p-reclaimer": "n1"} if victims else {})


def test_parent_deserved_lets_a_leaf_without_deserved_reclaim() -> None:
    objs = [
        queue("root", deserved=res("16", "16Gi", {A100: "4", "rdma": "1000"})),
        queue("case1_queue1", parent="root", deserved={A100: "1"}),
        queue("case1_queue11", parent="case1_queue1"),
        queue("case1_queue2", parent="root"),
        node("n1", "16", "16Gi", pods="11", scalars={A100: "4", HCA: "1001"}),
        podgroup("pg1", "case1_queue2", 1, namespace="ns1", phase="Running"),
        podgroup("pg2", "case1_queue11", 1, namespace="ns1"),
        pod("p1", "pg1", res("1", "1Gi", {A100: "4", HCA: "1"}), "n1", namespace="ns1"),
        pod("p2", "pg2", res("1", "1Gi", {A100: "1", HCA: "1"}), namespace="ns1"),
    ]
    out = run(objs, capacity_conf(hierarchy=True, level=1))
    assert evicted(out) == ["ns1/p1"]
    assert out.pipelined == {"ns1/p2": "n1"}


def test_reclaims_below_deserved_on_a_single_scalar_dimension() -> None:
    objs = [
        queue("root", deserved=res("16", "16Gi", {A100: "4", "rdma": "1000"})),
        queue("case12_queue1", parent="root", deserved={A100: "2"}),
        queue("case12_queue11", parent="case12_queue1", deserved={A100: "2"}),
        queue("case12_queue12", parent="case12_queue1"),
        node("n3", "16", "16Gi", pods="11", scalars={A100: "5", HCA: "1001"}),
        podgroup("pg16", "case12_queue11", 1, namespace="ns1"),
        podgroup("pg17", "case12_queue12", 1, namespace="ns1", phase="Running"),
        podgroup("pg18", "case12_queue12", 1, namespace="ns1", phase="Running"),
        pod("p16", "pg16", res("1", "1Gi", {A100: "2", HCA: "1"}), namespace="ns1"),
        pod("p17", "pg17", res("1", "1Gi", {A100: "2", HCA: "1"}), "n3", namespace="ns1"),
        pod(
            "p18",
            "pg18",
            res("1", "1Gi", {A100: "2", HCA: "1"}),
            "n3",
            namespace="ns1",
            labels={"volcano.sh/preemptable": "false"},
        ),
    ]
    out = run(objs, capacity_conf(hierarchy=True, priority=False))
    assert evicted(out) == ["ns1/p17"]
    assert out.pipelined == {"ns1/p16": "n3"}


def test_broken_hierarchy_refuses_everything() -> None:
    """A parent that does not exist makes the tree unusable: nothing is admitted or placed."""
    objs = [
        queue("root"),
        queue("orphan", parent="missing"),
        queue("leaf", parent="root"),
        node("n1", "4", "4Gi"),
        podgroup("pg1", "leaf", 1, phase="Pending", min_resources=res("1", "1Gi")),
        pod("p1", "pg1", res("1", "1Gi")),
    ]
    out = run(objs, capacity_conf(hierarchy=True))
    assert out.binds == {}
    assert out.phases["c1/pg1"] == "Pending"  # enqueue was refused too
    objs[1] = queue("orphan", parent="root")
    assert run(objs, capacity_conf(hierarchy=True)).binds == {"c1/p1": "n1"}


def test_children_inherit_unset_capability_from_the_parent() -> None:
    objs = [
        queue("root"),
        queue("parent", parent="root", capability=res("1", "8Gi")),
        queue("child", parent="parent", capability={"memory": "4Gi"}),
        node("n1", "8", "8Gi"),
        podgroup("pg1", "child", 1),
        podgroup("pg2", "child", 1),
        pod("first", "pg1", res("1", "1Gi")),
        pod("second", "pg2", res("1", "1Gi")),
    ]
    # child's cpu capability comes from parent (1 cpu): only one task fits.
    assert len(run(objs, capacity_conf(hierarchy=True)).binds) == 1


@pytest.mark.parametrize("topology", [False, True], ids=["normal", "topology"])
def test_preemption_respects_capacity_allocatable(topology: bool) -> None:
    """The node has room, the queue (capability 2 cpu) does not: the preemptor needs the victim
    gone for the queue's sake.  On the topology path the capacity state in the CycleState sees
    the simulated removal."""
    objs = [
        priority_class("high", 1000),
        priority_class("low", 10),
        queue("q1", capability=res("2", "2Gi")),
        node("n1", "4", "4Gi"),
        podgroup("pg-low", "q1", 0, priority_class="low", phase="Running"),
        podgroup("pg-high", "q1", 1, priority_class="high"),
        pod("victim", "pg-low", res("2", "2Gi"), "n1"),
        pod("preemptor", "pg-high", res("2", "2Gi")),
    ]
    tier = [
        plugin("gang", "enablePreemptable", "enableJobPipelined", "enableJobStarving"),
        plugin("priority", "enablePreemptable", "enableJobOrder", "enableTaskOrder"),
        plugin("capacity", "enabledAllocatable", "enablePredicate", "enableQueueOrder"),
    ]
    cfg = conf("preempt", tier, preempt={"enableTopologyAwarePreemption": topology})
    out = run(objs, cfg)
    assert evicted(out) == ["c1/victim"]
    assert out.pipelined == {"c1/preemptor": "n1"}
    # Without capacity's pre_predicate (enablePredicate off) the simulated allocatable check
    # has no state and fails, so the topology path finds no candidate.
    tier[2] = plugin("capacity", "enabledAllocatable", "enableQueueOrder")
    cfg = conf("preempt", tier, preempt={"enableTopologyAwarePreemption": topology})
    assert evicted(run(objs, cfg)) == ([] if topology else ["c1/victim"])


@pytest.mark.parametrize(("request_", "bound_to"), [(res("1", "0G"), "n1"), (res("0", "1G"), "n2")])
def test_admission_and_allocation_look_only_at_requested_dimensions(request_: dict[str, str], bound_to: str) -> None:
    """q1 is over its capability in memory (pod1) and q2 in cpu (pod2); a job asking only for
    the other dimension is still admitted and placed."""
    objs = [
        queue("q1", deserved=res("2", "2G"), capability=res("2", "2G")),
        queue("q2", deserved=res("2", "2G"), capability=res("3", "3G")),
        node("n1", "3", "3G"),
        node("n2", "3", "3G"),
        podgroup("pg1", "q1", 1, namespace="ns1", phase="Running", min_resources=res("1", "3G")),
        podgroup("pg2", "q2", 1, namespace="ns1", phase="Running", min_resources=res("3", "1G")),
        pod("pod1", "pg1", res("1", "3G"), "n1", namespace="ns1"),
        pod("pod2", "pg2", res("3", "1G"), "n2", namespace="ns1"),
    ]
    q = "q1" if request_.get("cpu") == "1" else "q2"
    objs += [
        podgroup("pg3", q, 1, namespace="ns1", phase="Pending", min_resources=request_),
        pod("pod3", "pg3", request_, namespace="ns1"),
    ]
    cfg = conf(
        "enqueue, allocate",
        [plugin("capacity", "enabledAllocatable", "enablePreemptive", "enabledOverused", "enableJobEnqueued")],
    )
    assert run(objs, cfg).binds == {"ns1/pod3": bound_to}


def test_no_reclaim_on_a_dimension_the_victims_queue_does_not_use() -> None:
    """queue14 deserves 2 gpu but uses none, so its cpu/memory task p22 is not over deserved on a
    gpu-relevant dimension; queue16's reclaimer cannot take it (volcano-sh/volcano#4918)."""
    gpu = "nvidia.com/gpu"
    objs = [
        queue("queue14", deserved=res("2", "4Gi", {gpu: "2"})),
        queue("queue15"),
        queue("queue16", deserved=res("2", "4Gi", {gpu: "2"})),
        node("n7", "4", "8Gi", scalars={gpu: "4"}),
        podgroup("pg22", "queue14", 1, namespace="ns1", phase="Running"),
        podgroup("pg23", "queue15", 1, namespace="ns1", phase="Running"),
        podgroup("pg24", "queue16", 1, namespace="ns1", phase="Running"),
        podgroup("pg25", "queue16", 1, namespace="ns1"),
        pod("p22", "pg22", res("2", "4Gi"), "n7", namespace="ns1"),
        pod("p23", "pg23", res("0", "0Gi", {gpu: "1"}), "n7", namespace="ns1"),
        pod("p24", "pg24", res("2", "1Gi", {gpu: "1"}), "n7", namespace="ns1"),
        pod("p25", "pg25", res("2", "3Gi", {gpu: "1"}), namespace="ns1"),
    ]
    out = run(objs, capacity_conf(priority=False, actions="allocate, reclaim"))
    assert evicted(out) == []
    assert out.pipelined == {}


def test_inqueue_job_with_binding_tasks_reserves_only_what_it_still_lacks() -> None:
    """A job whose tasks are bound (still Binding in the snapshot) keeps no inqueue reservation
    beyond max(0, minResources − allocated), so the next job is admitted (SKIPPED.md §2.8)."""
    from lahar_scheduler.core import run_session
    from lahar_scheduler.simulation import Cluster

    objs = [
        queue("q1", capability=res("4", "8Gi")),
        node("n1", "4", "8Gi"),
        podgroup("job-a", "q1", 3, min_resources=res("3", "3Gi")),
        *(pod(f"a-{i}", "job-a", res("1", "1Gi")) for i in range(3)),
    ]
    snapshot = Cluster(objs).snapshot()
    cfg = conf("enqueue, allocate", [plugin("capacity", "enabledAllocatable", "enableJobEnqueued", "enableQueueOrder")])
    first = run_session(snapshot, cfg)
    assert len(first.binds) == 3
    later = Cluster([podgroup("job-b", "q1", 1, phase="Pending", min_resources=res("1", "1Gi"))]).podgroups
    for pg in later.values():
        snapshot.upsert_podgroup(pg)
    snapshot.upsert_pod(pod("b-0", "job-b", res("1", "1Gi")))
    second = run_session(snapshot, cfg, uid="second")
    assert [t.key for t, _ in second.binds] == ["c1/b-0"]
