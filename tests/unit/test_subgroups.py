"""Sub-group policies: a job split into sub-jobs, each placed inside its own HyperNode.

Expectations come from Volcano's pkg/scheduler/actions/allocate/allocate_test.go at ed72c7c8
(TestAllocateWithPartitionPolicyNetworkTopology); each test cites its case.  Volcano's cases
check only how many pods bind (MinimalBindCheck); where the case's point is a placement, the
test also checks where the sub-groups went.  Volcano's tests give the snapshot's tier sets
directly; here the same trees are HyperNode objects.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from builders import binds, hypernode, make_conf, node, only, open_session, pod, podgroup, queue, run
from lahar_scheduler.framework.jobs import JOB_ALLOCATED_HYPERNODE
from lahar_scheduler.framework.subjobs import SubJobs

SUB = ("enabledSubJobReady", "enabledSubJobOrder")
GANG = only("gang", "enableJobOrder", "enableJobReady", "enableJobPipelined", "enableJobStarving", *SUB)
PREDICATES = only("predicates", "enablePredicate")
NTA = only("network-topology-aware", "enableNodeOrder", "enabledHyperNodeOrder", "enabledHyperNodeGradient")
CONF = make_conf("allocate", [GANG, PREDICATES, NTA])
SPEC, INSTANCE = "volcano.sh/task-spec", "volcano.sh/task-instance"


def tree(*leaves: tuple[str, list[str]], top: str = "s2", cpu: str = "2") -> list[Any]:
    """Tier-1 HyperNodes over their nodes (2 cpu per 4Gi each) under one tier-2 HyperNode."""
    objs: list[Any] = []
    for name, nodes in leaves:
        objs += [node(n, cpu=cpu, memory=f"{2 * int(cpu)}Gi", pods="10") for n in nodes]
        objs.append(hypernode(name, 1, nodes=nodes))
    if top:
        objs.append(hypernode(top, 2, hypernodes=[name for name, _ in leaves]))
    return objs


def two_tier(cpu: str = "2") -> list[Any]:
    return tree(("s0", ["s0-n1", "s0-n2"]), ("s1", ["s1-n3", "s1-n4"]), cpu=cpu)


def policy(name: str, key: str, mode: str = "", tier: int = 0, size: int = 1, min_groups: int = 0) -> dict[str, Any]:
    """Volcano's BuildSubGroupPolicyWithMinSubGroups."""
    out: dict[str, Any] = {"name": name, "matchLabelKeys": [key], "subGroupSize": size, "minSubGroups": min_groups}
    if mode:
        out["networkTopology"] = {"mode": mode, "highestTierAllowed": tier}
    return out


def job(
    min_member: int,
    mode: str,
    tier: int,
    policies: list[dict[str, Any]],
    pods: list[tuple[str, dict[str, str], str]] | list[tuple[str, dict[str, str], str, str]],
    allocated: str = "",
) -> list[Any]:
    """Volcano's BuildPodGroupWithSubGroupPolicy and its pods: (name, labels, node or "")."""
    nt = {"mode": mode, "highestTierAllowed": tier} if mode else None
    notes = {JOB_ALLOCATED_HYPERNODE: allocated} if allocated else None
    objs: list[Any] = [
        queue("q1"),
        podgroup(
            "pg1",
            "c1",
            queue="q1",
            min_member=min_member,
            network_topology=nt,
            sub_group_policy=policies,
            annotations=notes,
        ),
    ]
    for name, labels, where, *size in pods:
        cpu = size[0] if size else "2"
        extra: dict[str, Any] = {"node_name": where, "phase": "Running"} if where else {}
        objs.append(pod(name, "c1", group="pg1", cpu=cpu, memory=f"{2 * int(cpu)}Gi", labels=labels, **extra))
    return objs


def leaf(node_name: str) -> str:
    return node_name.split("-")[0]


# -- splitting --------------------------------------------------------------------------------------


def test_pods_split_by_match_label_values_and_default_sub_job() -> None:
    # volcano pkg/scheduler/api/job_info.go getOrCreateSubJob: a pod selected by a policy joins the
    # sub-job of its label values; pods no policy selects join the job's default sub-job.
    objs = [
        *two_tier(),
        *job(
            2,
            "",
            0,
            [policy("task1", SPEC, "hard", 1, size=2, min_groups=1)],
            [("p1", {SPEC: "a"}, ""), ("p2", {SPEC: "a"}, ""), ("p3", {SPEC: "b"}, ""), ("p4", {}, "")],
        ),
    ]
    ssn = open_session(objs, CONF)
    subs = ssn.jobs["c1/pg1"].sub_jobs
    assert isinstance(subs, SubJobs)
    sizes = {s.uid: (len(s.tasks), s.min_available) for s in subs.all()}
    assert sizes == {"c1/pg1/task1-a": (2, 2), "c1/pg1/task1-b": (1, 2), "c1/pg1": (1, 1)}
    assert subs.min_sub_jobs == {"c1/pg1/task1": 1}
    assert ssn.sub_topology["c1/pg1/task1-a"].highest_tier == 1


# -- TestAllocateWithPartitionPolicyNetworkTopology ----------------------------------------------------


def test_hard_job_soft_subgroups_allocate_when_resources_are_enough() -> None:
    # case "podgroup hard network topology constrain and subGroup soft network topology constrain,
    # can allocate job when resources are enough"
    pods = [("p1", {SPEC: "master"}, ""), ("p2", {SPEC: "worker"}, ""), ("p3", {SPEC: "worker"}, "")]
    placed = binds(run([*two_tier(), *job(3, "hard", 2, [policy("task1", SPEC, "soft")], pods)], CONF))
    assert len(placed) == 3


def test_hard_job_soft_subgroups_allocate_when_minavailable_below_replicas() -> None:
    # case "... subGroup soft network topology constrain, can allocate job when minavailable < replicas"
    pods = [("p1", {SPEC: "master"}, ""), ("p2", {SPEC: "worker"}, "")]
    placed = binds(run([*two_tier(), *job(1, "hard", 1, [policy("task1", SPEC, "soft")], pods)], CONF))
    assert len(placed) == 2
    # highestTierAllowed 1: the whole job inside one tier-1 HyperNode.
    assert len({leaf(n) for n in placed.values()}) == 1


def test_hard_job_soft_subgroups_go_to_the_node_with_affinity() -> None:
    # case "... subGroup soft network topology constrain, two available hyperNodes, can allocate
    # job to nodes with affinity"
    objs: list[Any] = [
        node("s0-n1", cpu="2", memory="4Gi"),
        node("s1-n2", cpu="2", memory="4Gi", labels={"nodeRole": "master"}),
        hypernode("s0", 1, nodes=["s0-n1"]),
        hypernode("s1", 1, nodes=["s1-n2"]),
        queue("q1"),
        podgroup(
            "pg1",
            "c1",
            queue="q1",
            min_member=1,
            network_topology={"mode": "hard", "highestTierAllowed": 1},
            sub_group_policy=[policy("task1", SPEC, "soft")],
        ),
        pod(
            "p1", "c1", group="pg1", cpu="2", memory="4G", labels={SPEC: "master"}, node_selector={"nodeRole": "master"}
        ),
    ]
    assert binds(run(objs, CONF)) == {"c1/p1": "s1-n2"}


def test_soft_job_hard_subgroups_each_inside_one_tier1_hypernode() -> None:
    # case "podgroup soft network topology constrain and subGroup hard network topology constrain,
    # can allocate job when resources are enough": task1's two masters need one tier-1 HyperNode
    # (only s0 has two nodes), task2's worker goes where room is left (s1-n3).
    objs = [
        *tree(("s0", ["s0-n1", "s0-n2"]), ("s1", ["s1-n3"])),
        *job(
            3,
            "soft",
            0,
            [policy("task1", SPEC, "hard", 1, size=2), policy("task2", INSTANCE, "hard", 1, size=1)],
            [("p1", {SPEC: "master"}, ""), ("p2", {SPEC: "master"}, ""), ("p3", {INSTANCE: "worker"}, "")],
        ),
    ]
    placed = binds(run(objs, CONF))
    assert len(placed) == 3
    assert {leaf(placed["c1/p1"]), leaf(placed["c1/p2"])} == {"s0"} and placed["c1/p3"] == "s1-n3"


def test_soft_job_hard_subgroups_cannot_cross_highest_tier() -> None:
    # case "podgroup soft network topology constrain and subGroup hard network topology constrain,
    # can not allocate job when cross highestTierAllowed tier": the three "worker" pods form one
    # sub-job whose minimum resources are all its pending tasks (6 cpu), more than any tier-1
    # HyperNode has (4), so no HyperNode is eligible for it and the gang never forms.
    pods = [("p1", {SPEC: "master"}, ""), *((f"p{i}", {SPEC: "worker"}, "") for i in (2, 3, 4))]
    objs = [*two_tier(), *job(3, "soft", 0, [policy("task1", SPEC, "hard", 1)], pods)]
    result = run(objs, CONF)
    assert binds(result) == {}


def test_hard_hard_allocates_when_highest_tier_not_reached() -> None:
    # case "podgroup hard network topology constrain and subGroup hard network topology constrain,
    # can allocate job when highestTierAllowed not reached"
    pods = [("p1", {SPEC: "master"}, ""), ("p2", {SPEC: "worker"}, ""), ("p3", {SPEC: "worker"}, "")]
    placed = binds(run([*two_tier(), *job(3, "hard", 2, [policy("task1", SPEC, "hard", 1)], pods)], CONF))
    assert len(placed) == 3
    # Each sub-group inside one tier-1 HyperNode: both workers share a leaf.
    assert leaf(placed["c1/p2"]) == leaf(placed["c1/p3"])


def test_hard_hard_follows_the_subgroup_policies_constraint() -> None:
    # case "... can allocate job according to the network topology constrain of subGroup policy":
    # task2's two workers (subGroupSize 2) need a tier-1 HyperNode with two free nodes (s0).
    objs = [
        *tree(("s0", ["s0-n1", "s0-n2"]), ("s1", ["s1-n3"])),
        *job(
            3,
            "hard",
            2,
            [policy("task1", SPEC, "hard", 1, size=1), policy("task2", INSTANCE, "hard", 1, size=2)],
            [("p1", {SPEC: "master"}, ""), ("p2", {INSTANCE: "worker"}, ""), ("p3", {INSTANCE: "worker"}, "")],
        ),
    ]
    placed = binds(run(objs, CONF))
    assert len(placed) == 3
    assert leaf(placed["c1/p2"]) == leaf(placed["c1/p3"]) == "s0" and placed["c1/p1"] == "s1-n3"


def test_hard_hard_with_min_sub_groups_places_every_required_subgroup() -> None:
    # case "... according to the network topology constrain of subGroup policy with minSubGroups":
    # worker and worker2 (size 2, minSubGroups 2) take s0 and s1 whole; master the s2 node.
    objs = [
        *tree(("s0", ["s0-n1", "s0-n2"]), ("s1", ["s1-n3", "s1-n4"]), ("s2", ["s2-n5"]), top="s3"),
        *job(
            5,
            "hard",
            2,
            [policy("task1", SPEC, "hard", 1, 1, 1), policy("task2", INSTANCE, "hard", 1, 2, 2)],
            [
                ("p1", {SPEC: "master"}, ""),
                ("p2", {INSTANCE: "worker"}, ""),
                ("p3", {INSTANCE: "worker"}, ""),
                ("p4", {INSTANCE: "worker2"}, ""),
                ("p5", {INSTANCE: "worker2"}, ""),
            ],
        ),
    ]
    placed = binds(run(objs, CONF))
    assert len(placed) == 5 and placed["c1/p1"] == "s2-n5"
    assert leaf(placed["c1/p2"]) == leaf(placed["c1/p3"]) != leaf(placed["c1/p4"]) == leaf(placed["c1/p5"])


def test_hard_hard_min_sub_groups_met_when_hypernodes_hold_only_the_minimum() -> None:
    # case "... with minSubGroups and hypernode resources meet minSubGroups": 8 pods, 4 nodes;
    # minMember 3 with task1 minSubGroups 2 and task2 minSubGroups 1 (size 2): 4 binds.
    masters = [(f"p{i}", {SPEC: f"master{'' if i == 1 else i}"}, "") for i in range(1, 5)]
    workers = [("p5", {INSTANCE: "worker"}, ""), ("p6", {INSTANCE: "worker"}, "")]
    workers += [("p7", {INSTANCE: "worker2"}, ""), ("p8", {INSTANCE: "worker2"}, "")]
    objs = [
        *two_tier(),
        *job(
            3,
            "hard",
            2,
            [policy("task1", SPEC, "hard", 1, 1, 2), policy("task2", INSTANCE, "hard", 1, 2, 1)],
            masters + workers,
        ),
    ]
    placed = binds(run(objs, CONF))
    assert len(placed) == 4
    kinds = Counter("worker" if k in {"c1/p5", "c1/p6", "c1/p7", "c1/p8"} else "master" for k in placed)
    # The required ones: two masters and one whole worker sub-group.
    assert kinds == {"master": 2, "worker": 2}


def test_hard_hard_minmember_not_satisfied_binds_nothing() -> None:
    # case "... can not allocate job when minMember is not satisfied": 5 pods, 4 nodes.
    pods = [
        ("p1", {SPEC: "master"}, ""),
        ("p2", {INSTANCE: "worker"}, ""),
        ("p3", {INSTANCE: "worker"}, ""),
        ("p4", {INSTANCE: "worker2"}, ""),
        ("p5", {INSTANCE: "worker2"}, ""),
    ]
    pols = [policy("task1", SPEC, "hard", 1, 1, 1), policy("task2", INSTANCE, "hard", 1, 2, 1)]
    assert binds(run([*two_tier(), *job(5, "hard", 2, pols, pods)], CONF)) == {}


def test_hard_hard_min_sub_groups_not_satisfied_binds_nothing() -> None:
    # case "... can not allocate job when minSubGroups is not satisfied": minMember 3 would fit,
    # but task2 needs two whole sub-groups of two beside the master: 5 pods on 4 nodes.
    pods = [
        ("p1", {SPEC: "master"}, ""),
        ("p2", {INSTANCE: "worker"}, ""),
        ("p3", {INSTANCE: "worker"}, ""),
        ("p4", {INSTANCE: "worker2"}, ""),
        ("p5", {INSTANCE: "worker2"}, ""),
    ]
    pols = [policy("task1", SPEC, "hard", 1, 1, 1), policy("task2", INSTANCE, "hard", 1, 2, 2)]
    result = run([*two_tier(), *job(3, "hard", 2, pols, pods)], CONF)
    assert binds(result) == {} and result.pipelined == {}
    # The refusal names, per HyperNode tried, how far the dry run got and which policy fell short.
    decision = result.decisions["c1/pg1"]
    assert decision.outcome == "discarded" and decision.why is not None
    assert decision.why.summary.startswith("sub-group policy: the job's 3 sub-groups could not be placed")
    assert "hypernode s2: 4 pods placed, 2 of 3 sub-groups whole; policy task2: 1 of minSubGroups 2" in "\n".join(
        decision.why.details
    )


RUNNING = [("p1", {SPEC: "master"}, "s0-n1"), ("p2", {SPEC: "worker"}, "s0-n2"), ("p3", {SPEC: "worker"}, "")]


def test_rescheduled_subgroup_may_widen_up_to_its_tier() -> None:
    # case "podgroup hard network topology constrain and subGroup hard network topology constrain
    # and tasks in job rescheduled, can allocate job when highestTierAllowed not reached and
    # minavailable = replicas": the worker sub-group runs in s0 (full) and may use tier 2, so its
    # pending worker goes to s1.
    objs = [*two_tier(), *job(3, "hard", 2, [policy("task1", SPEC, "hard", 2)], RUNNING, allocated="s0")]
    placed = binds(run(objs, CONF))
    assert len(placed) == 1 and leaf(placed["c1/p3"]) == "s1"


def test_rescheduled_subgroup_cannot_leave_its_full_hypernode() -> None:
    # case "... and tasks in job rescheduled, can not allocate job when cross highestTierAllowed
    # tier": the worker sub-group is held to tier 1 and its HyperNode s0 is full.
    objs = [*two_tier(), *job(2, "hard", 2, [policy("task1", SPEC, "hard", 1)], RUNNING, allocated="s0")]
    assert binds(run(objs, CONF)) == {}


def test_no_topology_anywhere_but_a_policy_allocates() -> None:
    # case "no network topology at job or subgroup level but has SubJobPolicy, can allocate job
    # successfully"
    objs = [
        node("n1", cpu="2", memory="4Gi", pods="10"),
        node("n2", cpu="2", memory="4Gi", pods="10"),
        *job(
            2,
            "",
            0,
            [policy("worker", SPEC, "", 0, 1, 2)],
            [("p1", {SPEC: "worker-0"}, ""), ("p2", {SPEC: "worker-1"}, "")],
        ),
    ]
    assert len(binds(run(objs, CONF))) == 2


def test_invalid_when_fewer_subgroups_exist_than_min_sub_groups() -> None:
    # volcano pkg/scheduler/plugins/gang/gang.go validJobFn: CheckSubJobValid
    objs = [*two_tier(), *job(1, "", 0, [policy("worker", SPEC, "", 0, 1, 2)], [("p1", {SPEC: "w0"}, "")])]
    result = run(objs, CONF)
    assert binds(result) == {}
    assert "Not enough valid subGroups" in result.decisions["c1/pg1"].reason


def test_job_partition_policy_rendered_by_the_controller_places_each_partition_in_one_hypernode() -> None:
    # volcano pkg/controllers/job (partitionPolicy → PodGroup subGroupPolicy keyed by
    # volcano.sh/partition-id) with the allocate case "podgroup hard network topology constrain
    # and subGroup hard network topology constrain, can allocate job when multi hyperNodes are
    # available": two partitions of two pods, each inside one tier-1 HyperNode.
    from builders import _decode
    from lahar_controller.job.render import new_podgroup, render_pod

    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}
    task = {
        "name": "worker",
        "replicas": 4,
        "template": {"spec": {"containers": [container]}},
        "partitionPolicy": {
            "totalPartitions": 2,
            "partitionSize": 2,
            "minPartitions": 2,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        },
    }
    vjob = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "c1", "uid": "u1"},
        "spec": {"minAvailable": 4, "queue": "q1", "tasks": [task]},
    }
    pg = new_podgroup(vjob, {})
    pg.update(apiVersion="scheduling.volcano.sh/v1beta1", kind="PodGroup", status={"phase": "Inqueue"})
    pods = []
    for i in range(4):
        raw = render_pod(vjob, task, i)
        raw.update(apiVersion="v1", kind="Pod")
        raw["metadata"]["uid"] = raw["metadata"]["name"]
        raw["spec"]["schedulerName"] = "volcano"
        raw.setdefault("status", {})["phase"] = "Pending"
        pods.append(_decode(raw))
    # A lone node in a third tier-1 HyperNode tempts a split partition.
    objs = [*tree(("s0", ["s0-n1", "s0-n2"]), ("s1", ["s1-n3", "s1-n4"]), ("s3", ["s3-n5"])), queue("q1")]
    placed = binds(run([*objs, _decode(pg), *pods], CONF))
    assert len(placed) == 4
    by_partition: dict[str, set[str]] = {}
    for key, where in placed.items():
        index = int(key.rsplit("-", 1)[1])
        by_partition.setdefault(str(index // 2), set()).add(leaf(where))
    assert sorted(map(len, by_partition.values())) == [1, 1] and by_partition["0"] != by_partition["1"]


def test_benchmark_scenario_places_every_sub_group_inside_one_hypernode() -> None:
    # allocate_test.go BenchmarkHyperNodeGradientFnPerformance, scaled down: 10 sub-groups of 10.
    from lahar.cli.bench_subgroups import report

    got = report(100)
    assert got["pods_placed"] == 100 and got["sub_groups_inside_one_hypernode"] == 10


# -- the rescheduling cases: a sub-job's minimum resources are its pending tasks ---------------------


def test_rescheduling_sub_job_fills_its_own_hypernode() -> None:
    # case "rescheduling scenario: SubJob with multiple pending tasks, GetMinResources returns sum
    # of all pending tasks resources": two of four workers run in s0 (4-cpu nodes); the other two
    # join them there.
    workers = [("p1", {SPEC: "worker"}, "s0-n1"), ("p2", {SPEC: "worker"}, "s0-n2")]
    workers += [("p3", {SPEC: "worker"}, ""), ("p4", {SPEC: "worker"}, "")]
    objs = [*two_tier("4"), *job(4, "hard", 2, [policy("task1", SPEC, "hard", 1, size=4)], workers, allocated="s0")]
    placed = binds(run(objs, CONF))
    assert len(placed) == 2 and {leaf(n) for n in placed.values()} == {"s0"}


def test_rescheduling_several_sub_jobs_each_beside_its_running_tasks() -> None:
    # case "rescheduling scenario: multiple SubJobs with different pending task counts"
    pods = [
        ("p1", {SPEC: "master"}, "s0-n1"),
        ("p2", {SPEC: "master"}, "s0-n2"),
        ("p3", {SPEC: "master"}, ""),
        ("p4", {INSTANCE: "worker"}, "s1-n3"),
        ("p5", {INSTANCE: "worker"}, ""),
        ("p6", {INSTANCE: "worker"}, ""),
    ]
    pols = [policy("task1", SPEC, "hard", 1, size=3), policy("task2", INSTANCE, "hard", 1, size=3)]
    placed = binds(run([*two_tier("4"), *job(6, "hard", 2, pols, pods, allocated="s2")], CONF))
    assert len(placed) == 3
    assert leaf(placed["c1/p3"]) == "s0" and {leaf(placed["c1/p5"]), leaf(placed["c1/p6"])} == {"s1"}


def test_rescheduling_pending_tasks_of_different_sizes() -> None:
    # case "rescheduling scenario: pending tasks with different resource requirements"
    objs = [
        *tree(("s0", ["s0-n1", "s0-n2"]), top="", cpu="10"),
        *job(
            3,
            "hard",
            1,
            [policy("task1", SPEC, "hard", 1, size=3)],
            [
                ("p1-running", {SPEC: "worker"}, "s0-n1", "2"),
                ("p2-pending-small", {SPEC: "worker"}, "", "2"),
                ("p3-pending-large", {SPEC: "worker"}, "", "4"),
            ],
            allocated="s0",
        ),
    ]
    assert len(binds(run(objs, CONF))) == 2


def test_rescheduling_with_too_little_room_binds_nothing() -> None:
    # case "rescheduling scenario: insufficient resources for pending tasks allocation": one
    # 4-cpu node is left in s0 for two 4-cpu pods the sub-job needs together.
    pods = [
        ("p1", {SPEC: "worker"}, "s0-n1", "4"),
        ("p2", {SPEC: "worker"}, "", "4"),
        ("p3", {SPEC: "worker"}, "", "4"),
    ]
    objs = [
        *tree(("s0", ["s0-n1", "s0-n2"]), top="", cpu="4"),
        *job(3, "hard", 1, [policy("task1", SPEC, "hard", 1, size=3)], pods, allocated="s0"),
    ]
    assert binds(run(objs, CONF)) == {}


def test_rescheduling_within_a_tier2_sub_job_constraint() -> None:
    # case "rescheduling scenario: SubJob rescheduling within tier-2 HyperNode constraint"
    workers = [("p1", {SPEC: "worker"}, "s0-n1"), ("p2", {SPEC: "worker"}, "s0-n2")]
    workers += [("p3", {SPEC: "worker"}, ""), ("p4", {SPEC: "worker"}, "")]
    objs = [*two_tier("4"), *job(4, "hard", 2, [policy("task1", SPEC, "hard", 2, size=4)], workers, allocated="s2")]
    assert len(binds(run(objs, CONF))) == 2


def test_sub_jobs_go_by_priority_then_partition_index() -> None:
    # volcano pkg/scheduler/plugins/priority/priority.go subJobOrderFn (higher priority first),
    # then framework/session_plugins.go SubJobOrderFn's default (MatchIndex, then UID); one node
    # holds one sub-group, so only the first in order binds.
    prio = make_conf("allocate", [only("priority", "enabledSubJobOrder"), GANG, PREDICATES, NTA])
    objs: list[Any] = [node("n1", cpu="2", memory="4Gi", pods="10"), queue("q1")]
    objs.append(
        podgroup("pg1", "c1", queue="q1", min_member=1, sub_group_policy=[policy("part", "volcano.sh/partition-id")])
    )
    for name, part, priority in (("a", "2", 1), ("b", "10", 1), ("c", "3", 10)):
        labels = {"volcano.sh/partition-id": part}
        objs.append(pod(name, "c1", group="pg1", cpu="2", memory="4Gi", labels=labels, priority=priority))
    assert binds(run(objs, prio)) == {"c1/c": "n1"}  # the high-priority sub-group
    objs = [o for o in objs if o.metadata.name != "c"]
    assert binds(run(objs, prio)) == {"c1/a": "n1"}  # partition 2 before 10 (numeric, not text)


def three_tier() -> list[Any]:
    """s3..s6 (two 2-cpu nodes each) at tier 1, s1 {s3, s4} and s2 {s5, s6} at tier 2, s0 at tier 3."""
    objs: list[Any] = []
    for name in ("s3", "s4", "s5", "s6"):
        nodes = [f"{name}-n1", f"{name}-n2"]
        objs += [node(n, cpu="2", memory="4Gi", pods="10") for n in nodes]
        objs.append(hypernode(name, 1, nodes=nodes))
    objs += [hypernode("s1", 2, hypernodes=["s3", "s4"]), hypernode("s2", 2, hypernodes=["s5", "s6"])]
    objs.append(hypernode("s0", 3, hypernodes=["s1", "s2"]))
    return objs


def test_three_tiers_rescheduled_job_stays_in_its_tier2_hypernode() -> None:
    # case "podgroup hard network topology constrain and subGroup soft network topology constrain
    # and tasks in job rescheduled, can allocate job when cross highestTierAllowed tier and
    # hyperNodesInfo has three tier": the job runs in s3 (under s1) and is held to tier 2, so the
    # pending worker goes to s4, not under s2.
    pods = [("p1", {SPEC: "master"}, "s3-n1"), ("p2", {SPEC: "worker"}, "s3-n2"), ("p3", {SPEC: "worker"}, "")]
    objs = [*three_tier(), *job(2, "hard", 2, [policy("task1", SPEC, "soft")], pods, allocated="s1")]
    placed = binds(run(objs, CONF))
    assert len(placed) == 1 and leaf(placed["c1/p3"]) == "s4"


def test_three_tiers_rescheduled_sub_job_cannot_leave_its_full_tier2_hypernode() -> None:
    # case "podgroup soft network topology constrain and subGroup hard network topology constrain
    # and tasks in job rescheduled, can not allocate job when cross highestTierAllowed tier and
    # hyperNodesInfo has three tier": the workers fill s1 and are held to tier 2.
    pods = [
        ("p1", {SPEC: "master"}, "s3-n1"),
        ("p2", {SPEC: "worker"}, "s3-n2"),
        ("p3", {SPEC: "worker"}, "s4-n1"),
        ("p4", {SPEC: "worker"}, "s4-n2"),
        ("p5", {SPEC: "worker"}, ""),
    ]
    objs = [*three_tier(), *job(2, "soft", 0, [policy("task1", SPEC, "hard", 2)], pods, allocated="s1")]
    assert binds(run(objs, CONF)) == {}


def test_rescheduled_sub_job_may_use_the_cluster_top_tier() -> None:
    # case "... and tasks in job rescheduled, can allocate job when LCAHyperNode is empty": with
    # only tier-1 HyperNodes, tier 2 is the cluster top, so the worker sub-group (hard, tier 2)
    # running in the full s0 may place its pending worker in s1.
    objs = [
        *tree(("s0", ["s0-n1", "s0-n2"]), ("s1", ["s1-n3", "s1-n4"]), top=""),
        *job(2, "hard", 3, [policy("task1", SPEC, "hard", 2)], RUNNING, allocated="s0"),
    ]
    placed = binds(run(objs, CONF))
    assert len(placed) == 1 and leaf(placed["c1/p3"]) == "s1"


def test_rescheduled_job_with_min_sub_groups_met_adds_one_whole_worker_group() -> None:
    # case "... with minSubGroups and tasks in job rescheduled, can allocate job when subGroup is
    # rescheduled": two masters already run in s0 (task1's minSubGroups 2 met); one whole worker
    # sub-group (task2, size 2) fits in s1 and makes the job ready.
    pods = [
        ("p1", {SPEC: "master"}, ""),
        ("p2", {SPEC: "master2"}, ""),
        ("p3", {SPEC: "master3"}, "s0-n1"),
        ("p4", {SPEC: "master4"}, "s0-n2"),
        ("p5", {INSTANCE: "worker"}, ""),
        ("p6", {INSTANCE: "worker"}, ""),
        ("p7", {INSTANCE: "worker2"}, ""),
        ("p8", {INSTANCE: "worker2"}, ""),
    ]
    pols = [policy("task1", SPEC, "hard", 1, 1, 2), policy("task2", INSTANCE, "hard", 1, 2, 1)]
    placed = binds(run([*two_tier(), *job(3, "hard", 2, pols, pods)], CONF))
    assert len(placed) == 2 and {leaf(n) for n in placed.values()} == {"s1"}
    assert set(placed) in ({"c1/p5", "c1/p6"}, {"c1/p7", "c1/p8"})
