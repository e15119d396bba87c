"""The preempt action: normal and topology-aware paths, through simulate() on plain objects.

Scenarios follow Volcano's preempt tests (conformance, gang, priority, proportion in one tier,
only the listed flags on) plus targeted checks of the rules in the semantics document §8.4.
"""

from __future__ import annotations

from typing import Any

import pytest
from evict_builders import (
    conf,
    evicted,
    node,
    plugin,
    pod,
    podgroup,
    priority_class,
    queue,
    random_cluster,
    res,
    run,
    unpruned,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from lahar_scheduler.core import load_conf, run_session
from lahar_scheduler.framework.snapshot import Snapshot

HIGH, LOW = priority_class("high-priority", 100000), priority_class("low-priority", 10)
PREEMPTABLE = {"volcano.sh/preemptable": "true"}
NOT_PREEMPTABLE = {"volcano.sh/preemptable": "false"}


def preempt_conf(topology: bool = False, predicates: bool = False, **extra: object) -> object:
    tier = [
        plugin("conformance", "enablePreemptable"),
        plugin("gang", "enablePreemptable", "enableJobPipelined", "enableJobStarving"),
        plugin(
            "priority",
            "enableTaskOrder",
            "enableJobOrder",
            "enablePreemptable",
            "enableJobPipelined",
            "enableJobStarving",
        ),
        plugin("proportion", "enabledOverused", "enabledAllocatable", "enableQueueOrder", "enablePredicate"),
    ]
    if predicates:
        tier.append(plugin("predicates", "enablePreemptable", "enablePredicate"))
    return conf("preempt", tier, preempt={"enableTopologyAwarePreemption": topology, **extra})


BOTH = pytest.mark.parametrize("topology", [False, True], ids=["normal", "topology"])


@BOTH
def test_no_preemption_when_the_preemptor_fits_idle_resources(topology: bool) -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        node("n1", "10", "10G"),
        podgroup("pg1", "q1", 3, min_task_member={"": 3}),
        pod("preemptee1", "pg1", res("1", "1G"), "n1"),
        pod("preemptee2", "pg1", res("1", "1G"), "n1"),
        pod("preemptor1", "pg1", res("1", "1G")),
    ]
    out = run(objs, preempt_conf(topology))
    assert evicted(out) == []
    assert out.binds == {}


@BOTH
def test_jobs_that_are_not_starving_do_not_preempt(topology: bool) -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        node("n1", "3", "3G"),
        podgroup("pg1", "q1", 1, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("preemptee1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee2", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee3", "pg2", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptor2", "pg2", res("1", "1G")),
    ]
    # pg2 has one running task = minMember, so gang says it is not starving.
    assert evicted(run(objs, preempt_conf(topology))) == []


@BOTH
def test_preemptable_false_and_gang_min_member_protect_victims(topology: bool) -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        node("n1", "2", "2G"),
        podgroup("pg1", "q1", 1, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("preemptee1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee2", "pg1", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
        pod("preemptor1", "pg2", res("1", "1G")),
        pod("preemptor2", "pg2", res("1", "1G")),
    ]
    out = run(objs, preempt_conf(topology))
    # preemptee2 is not preemptable; after preemptee1 goes pg1 would drop below minMember 1.
    assert evicted(out) == ["c1/preemptee1"]
    assert list(out.pipelined.values()) == ["n1"]
    assert out.binds == {}


@BOTH
def test_evicts_only_as_many_preemptable_tasks_as_needed(topology: bool) -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        node("n1", "6", "6G"),
        podgroup("pg1", "q1", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("preemptee1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee2", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee3", "pg1", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
        pod("preemptor1", "pg2", res("5", "5G")),
    ]
    assert evicted(run(objs, preempt_conf(topology))) == ["c1/preemptee1", "c1/preemptee2"]


@BOTH
def test_victims_must_have_lower_job_priority(topology: bool) -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1", capability=res("3", "3G")),
        node("n1", "12", "12G"),
        podgroup("pg1", "q1", 1, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        podgroup("pg3", "q1", 0, priority_class="high-priority"),
        pod("preemptee1", "pg1", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
        pod("preemptee2", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("equal", "pg3", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptor1", "pg2", res("1", "1G")),
    ]
    # The queue's capability (3 cpu) is full; pg3 has the preemptor's priority, so only pg1's
    # preemptable task may go.
    assert evicted(run(objs, preempt_conf(topology))) == ["c1/preemptee2"]


@BOTH
def test_allocatable_queue_with_room_does_not_preempt(topology: bool) -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1", capability=res("6", "6G")),
        node("n1", "12", "12G"),
        podgroup("pg1", "q1", 1, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("preemptee1", "pg1", res("3", "3G"), "n1", labels=PREEMPTABLE),
        pod("preemptor1", "pg2", res("3", "3G")),
    ]
    assert evicted(run(objs, preempt_conf(topology))) == []


@BOTH
def test_queue_capability_forces_preemption_on_a_roomy_node(topology: bool) -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1", capability=res("4", "4G")),
        node("n1", "12", "12G"),
        podgroup("pg1", "q1", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("preemptee1", "pg1", res("3", "3G"), "n1", labels=PREEMPTABLE),
        pod("preemptor1", "pg2", res("3", "3G")),
    ]
    assert evicted(run(objs, preempt_conf(topology))) == ["c1/preemptee1"]


@BOTH
def test_best_effort_preemptor_only_evicts_best_effort(topology: bool) -> None:
    base = [
        HIGH,
        LOW,
        queue("q1", capability=res("6", "6G")),
        node("n1", "12", "12G", pods="1"),
        podgroup("pg1", "q1", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("preemptor1", "pg2", {}),
    ]
    best_effort_victim = pod("preemptee1", "pg1", {}, "n1", labels=PREEMPTABLE)
    assert evicted(run([*base, best_effort_victim], preempt_conf(topology))) == ["c1/preemptee1"]
    requesting_victim = pod("preemptee1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE)
    assert evicted(run([*base, requesting_victim], preempt_conf(topology))) == []


@BOTH
def test_requesting_preemptor_evicts_best_effort_for_a_pod_slot(topology: bool) -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1", capability=res("6", "6G")),
        node("n1", "12", "12G", pods="1"),
        podgroup("pg1", "q1", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("preemptee1", "pg1", {}, "n1", labels=PREEMPTABLE),
        pod("preemptor1", "pg2", res("3", "3G")),
    ]
    assert evicted(run(objs, preempt_conf(topology))) == ["c1/preemptee1"]


@BOTH
def test_preemption_policy_never(topology: bool) -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        node("n1", "1", "1Gi", pods="1"),
        podgroup("pg1", "q1", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("preemptee1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptor1", "pg2", res("1", "1G"), preemption_policy="Never"),
    ]
    assert evicted(run(objs, preempt_conf(topology))) == []
    objs[-1] = pod("preemptor1", "pg2", res("1", "1G"), preemption_policy="PreemptLowerPriority")
    assert evicted(run(objs, preempt_conf(topology))) == ["c1/preemptee1"]


@BOTH
def test_only_tasks_of_the_preemptors_queue_are_victims(topology: bool) -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        queue("q2"),
        node("n1", "2", "2G"),
        podgroup("pg-other", "q2", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("other-queue", "pg-other", res("2", "2G"), "n1", labels=PREEMPTABLE),
        pod("preemptor1", "pg2", res("1", "1G")),
    ]
    assert evicted(run(objs, preempt_conf(topology))) == []


@BOTH
def test_kube_system_pods_are_never_victims(topology: bool) -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        node("n1", "2", "2G"),
        podgroup("pg1", "q1", 0, namespace="kube-system", priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("system", "pg1", res("2", "2G"), "n1", namespace="kube-system", labels=PREEMPTABLE),
        pod("preemptor1", "pg2", res("1", "1G")),
    ]
    assert evicted(run(objs, preempt_conf(topology))) == []


@BOTH
def test_gang_job_that_cannot_be_pipelined_is_discarded(topology: bool) -> None:
    """Two pending tasks must both be pipelined (minMember 2) but only one victim exists:
    the first task's evictions are discarded with the statement."""
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        node("n1", "1", "1G"),
        podgroup("pg1", "q1", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 2, priority_class="high-priority"),
        pod("preemptee1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptor-0", "pg2", res("1", "1G")),
        pod("preemptor-1", "pg2", res("1", "1G")),
    ]
    out = run(objs, preempt_conf(topology))
    assert evicted(out) == []
    assert out.pipelined == {}


def test_commits_only_the_winning_nodes_evictions() -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1", capability=res("6", "6G")),
        node("n1", "3", "3G"),
        node("n2", "4", "4G"),
        podgroup("pg1", "q1", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        podgroup("pg3", "q1", 0, priority_class="low-priority"),
        pod("preemptee1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee2", "pg3", res("4", "4G"), "n2", labels=PREEMPTABLE),
        pod("preemptor1", "pg2", res("3", "3G")),
    ]
    out = run(objs, preempt_conf())
    assert evicted(out) == ["c1/preemptee2"]
    assert out.pipelined == {"c1/preemptor1": "n2"}


def test_lowest_priority_victim_goes_first() -> None:
    """Victims of several jobs: reverse job order (priority plugin), so the lowest job priority
    is evicted and the middle one survives."""
    objs = [
        priority_class("top", 1000),
        priority_class("mid", 500),
        priority_class("bottom", 100),
        queue("q1"),
        node("n1", "2", "2G"),
        podgroup("pg-mid", "q1", 0, priority_class="mid"),
        podgroup("pg-bottom", "q1", 0, priority_class="bottom"),
        podgroup("pg-top", "q1", 1, priority_class="top"),
        pod("mid", "pg-mid", res("1", "1G"), "n1"),
        pod("bottom", "pg-bottom", res("1", "1G"), "n1"),
        pod("preemptor", "pg-top", res("1", "1G")),
    ]
    assert evicted(run(objs, preempt_conf())) == ["c1/bottom"]


def test_intra_job_preemption_by_task_priority() -> None:
    """A job at its minMember is not starving for gang but is for priority (ready < tasks);
    its high-priority pending task evicts its own low-priority running task."""
    objs = [
        HIGH,
        queue("q1"),
        node("n1", "1", "1G"),
        podgroup("pg1", "q1", 0, priority_class="high-priority"),
        pod("worker-low", "pg1", res("1", "1G"), "n1", priority=1),
        pod("worker-high", "pg1", res("1", "1G"), priority=100),
    ]
    tier = [
        plugin("conformance", "enablePreemptable"),
        plugin("priority", "enableTaskOrder", "enableJobOrder", "enablePreemptable", "enableJobStarving"),
    ]
    out = run(objs, conf("preempt", tier))
    assert evicted(out) == ["c1/worker-low"]
    assert out.pipelined == {"c1/worker-high": "n1"}


def test_nominated_node_that_now_fits_blocks_preemption() -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        node("n1", "1", "1G"),
        node("n2", "1", "1G"),
        podgroup("pg1", "q1", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("preemptee1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("filler", "pg1", res("1", "1G"), "n2", labels=PREEMPTABLE),
    ]
    # PredicateFn (here: the pod-count check) passes on the nominated node, so preempting again
    # would be pointless; a nominated node that is gone also stops it.
    tier = [
        plugin("conformance", "enablePreemptable"),
        plugin("gang", "enablePreemptable", "enableJobPipelined", "enableJobStarving"),
        plugin("priority", "enableTaskOrder", "enableJobOrder", "enablePreemptable", "enableJobStarving"),
        plugin("predicates", "enablePredicate"),
    ]
    fits = pod("preemptor1", "pg2", res("1", "1G"), nominated="n2")
    assert evicted(run([*objs, fits], conf("preempt", tier))) == []
    gone = pod("preemptor1", "pg2", res("1", "1G"), nominated="n9")
    assert evicted(run([*objs, gone], conf("preempt", tier))) == []
    without = pod("preemptor1", "pg2", res("1", "1G"))
    assert len(evicted(run([*objs, without], conf("preempt", tier)))) == 1


def test_topology_path_reprieves_victims_the_normal_path_evicts() -> None:
    """Victim order pops the 1-cpu task first; it is not enough alone, the 2-cpu one is.  The
    normal path keeps both evictions, the topology-aware path gives the small one back."""
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        node("n1", "3", "3G"),
        podgroup("pg1", "q1", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("small", "pg1", res("1", "1G"), "n1", priority=1),
        pod("large", "pg1", res("2", "2G"), "n1", priority=2),
        pod("preemptor1", "pg2", res("2", "2G")),
    ]
    assert evicted(run(objs, preempt_conf(False))) == ["c1/large", "c1/small"]
    assert evicted(run(objs, preempt_conf(True))) == ["c1/large"]


@pytest.mark.parametrize("seed", range(4))
def test_topology_path_picks_the_node_with_the_least_important_victim(seed: int) -> None:
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        node("n1", "1", "1G"),
        node("n2", "1", "1G"),
        node("n3", "1", "1G"),
        podgroup("pg1", "q1", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("on-n1", "pg1", res("1", "1G"), "n1", priority=5),
        pod("on-n2", "pg1", res("1", "1G"), "n2", priority=1),
        pod("on-n3", "pg1", res("1", "1G"), "n3", priority=9),
        pod("preemptor1", "pg2", res("1", "1G")),
    ]
    cfg = preempt_conf(True, minCandidateNodesAbsolute=3)
    out = run(objs, cfg, seed=seed)
    assert evicted(out) == ["c1/on-n2"]
    assert out.pipelined == {"c1/preemptor1": "n2"}


@BOTH
def test_topology_anti_affinity_victim_is_the_one_removed(topology: bool) -> None:
    """Only the topology-aware path can see past a victim's anti-affinity: its dry run removes
    the victim from the affinity view.  The normal path's PredicateFn keeps the view the
    preemptor's pre_predicate took, so evicting on that node never helps and nothing happens."""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"test": "test"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    objs = [
        HIGH,
        LOW,
        queue("q1", capability=res("2", "2G")),
        node("n1", "2", "2Gi", pods="2", labels={"kubernetes.io/hostname": "n1"}),
        podgroup("pg1", "q1", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 0, priority_class="low-priority"),
        podgroup("pg3", "q1", 1, priority_class="high-priority"),
        pod("preemptee1", "pg2", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee2", "pg1", res("1", "1G"), "n1", labels={**PREEMPTABLE, "test": "test"}, affinity=anti),
        pod("preemptor1", "pg3", res("1", "1G"), labels={"test": "test"}, affinity=anti),
    ]
    want = ["c1/preemptee2"] if topology else []
    assert evicted(run(objs, preempt_conf(topology, predicates=True))) == want


def test_gang_actions_are_accepted() -> None:
    # They were rejected as unsupported until tests/unit/test_gang_evict.py.
    for name in ("gangpreempt", "gangreclaim"):
        assert load_conf(f'actions: "enqueue, {name}"\ntiers: []\n').actions == ["enqueue", name]


def test_preempt_leaves_the_snapshot_as_committed() -> None:
    """Pipelined preemptors are rolled back at close; committed evictions stay Releasing."""
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        node("n1", "1", "1G"),
        podgroup("pg1", "q1", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("preemptee1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptor1", "pg2", res("1", "1G")),
    ]
    from lahar_scheduler.simulation import Cluster

    snapshot: Snapshot = Cluster(objs).snapshot()
    result = run_session(snapshot, preempt_conf())
    assert [t.key for t, _ in result.evictions] == ["c1/preemptee1"]
    assert result.pipelined == {"c1/preemptor1": "n1"}
    tasks = snapshot.tasks
    assert str(tasks["c1/preemptor1"].status) == "Pending"
    assert str(tasks["c1/preemptee1"].status) == "Releasing"


@settings(max_examples=60, deadline=None)
@given(st.composite(random_cluster)(), st.booleans())
def test_shortcuts_never_change_the_outcome(objs: list[Any], topology: bool) -> None:
    cfg = preempt_conf(topology)
    fast = run(objs, cfg, seed=3)
    with unpruned():
        slow = run(objs, cfg, seed=3)
    assert (evicted(fast), fast.pipelined, fast.binds) == (evicted(slow), slow.pipelined, slow.binds)


def test_evicted_pod_frees_its_slot_for_the_pod_count_predicate() -> None:
    """The predicates plugin's node view drops a pod when it is evicted (Deallocate), so on a
    node full on pods the normal path's PredicateFn passes once the victim is evicted."""
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        node("n1", "4", "4G", pods="1"),
        podgroup("pg1", "q1", 0, priority_class="low-priority"),
        podgroup("pg2", "q1", 1, priority_class="high-priority"),
        pod("preemptee1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptor1", "pg2", res("1", "1G")),
    ]
    tier = [
        plugin("gang", "enablePreemptable", "enableJobPipelined", "enableJobStarving"),
        plugin("priority", "enableTaskOrder", "enableJobOrder", "enablePreemptable", "enableJobStarving"),
        plugin("predicates", "enablePredicate"),
    ]
    out = run(objs, conf("allocate, preempt", tier))
    assert evicted(out) == ["c1/preemptee1"]
    assert out.pipelined == {"c1/preemptor1": "n1"}


def test_a_pod_evicted_earlier_in_the_session_no_longer_blocks_by_anti_affinity() -> None:
    """The predicates plugin's pod view drops evicted pods (Deallocate).  The repeller's
    anti-affinity keeps app=web pods out of zone a; the job's first task (no label) evicts it,
    after which the second task (app=web) may preempt on the other node of the zone."""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
            ]
        }
    }
    objs = [
        HIGH,
        LOW,
        queue("q1"),
        node("n1", "1", "1G", labels={"zone": "a"}),
        node("n2", "1", "1G", labels={"zone": "a"}),
        podgroup("pg-low", "q1", 0, priority_class="low-priority"),
        podgroup("pg-high", "q1", 2, priority_class="high-priority"),
        pod("repeller", "pg-low", res("1", "1G"), "n1", affinity=anti),
        pod("filler", "pg-low", res("1", "1G"), "n2"),
        pod("plain", "pg-high", res("1", "1G"), priority=10),
        pod("web", "pg-high", res("1", "1G"), labels={"app": "web"}, priority=1),
    ]
    tier = [
        plugin("gang", "enablePreemptable", "enableJobPipelined", "enableJobStarving"),
        plugin("priority", "enableTaskOrder", "enableJobOrder", "enablePreemptable"),
        plugin("predicates", "enablePredicate"),
    ]
    out = run(objs, conf("preempt", tier))
    assert evicted(out) == ["c1/filler", "c1/repeller"]
    assert out.pipelined == {"c1/plain": "n1", "c1/web": "n2"}
