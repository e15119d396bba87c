"""The reclaim action, through simulate() on plain objects.

Scenarios follow Volcano's reclaim tests (one tier: conformance, gang, proportion, capacity,
priority, only the listed flags on; plugins a case does not use are left out) plus checks of
the rules in the semantics document §8.5.
"""

from __future__ import annotations

from typing import Any

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

PREEMPTABLE = {"volcano.sh/preemptable": "true"}
NOT_PREEMPTABLE = {"volcano.sh/preemptable": "false"}
LEVELS = [
    priority_class("low-priority", 100),
    priority_class("mid-priority", 500),
    priority_class("high-priority", 1000),
]

TIER = {
    "conformance": plugin("conformance", "enableReclaimable"),
    "gang": plugin("gang", "enableReclaimable", "enableJobStarving"),
    "proportion": plugin("proportion", "enableReclaimable", "enableQueueOrder", "enablePreemptive"),
    "capacity": plugin("capacity", "enableReclaimable", "enableQueueOrder", "enablePreemptive"),
    "priority": plugin("priority", "enableReclaimable", "enableJobOrder", "enableTaskOrder"),
}


def reclaim_conf(*plugins: str, actions: str = "reclaim") -> Any:
    return conf(actions, [TIER[name] for name in TIER if name in plugins])


DEFAULT = ("conformance", "gang", "proportion")


def test_overusing_queue_gives_back_its_preemptable_task() -> None:
    objs = [
        *LEVELS,
        queue("q1"),
        queue("q2"),
        node("n1", "3", "3Gi"),
        podgroup("pg1", "q1", 1, priority_class="low-priority"),
        podgroup("pg2", "q2", 1, priority_class="high-priority"),
        pod("preemptee1", "pg1", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
        pod("preemptee2", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee3", "pg1", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
        pod("preemptor1", "pg2", res("1", "1G")),
    ]
    out = run(objs, reclaim_conf(*DEFAULT))
    assert evicted(out) == ["c1/preemptee2"]
    assert out.pipelined == {"c1/preemptor1": "n1"}
    assert out.binds == {}


def test_victims_of_the_lowest_priority_job_go_first() -> None:
    objs = [
        *LEVELS,
        queue("q1"),
        queue("q2"),
        queue("q3"),
        node("n1", "4", "4Gi"),
        podgroup("pg1", "q1", 1, priority_class="mid-priority"),
        podgroup("pg2", "q2", 1, priority_class="low-priority"),
        podgroup("pg3", "q3", 1, priority_class="high-priority"),
        pod("preemptee1-1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee1-2", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee2-1", "pg2", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee2-2", "pg2", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
        pod("preemptor1", "pg3", res("1", "1G")),
    ]
    assert evicted(run(objs, reclaim_conf(*DEFAULT, "priority"))) == ["c1/preemptee2-1"]


def test_victims_from_the_lowest_priority_queue_go_first() -> None:
    objs = [
        *LEVELS,
        queue("q1", priority=5),
        queue("q2", priority=10),
        queue("q3", priority=1),
        node("n1", "4", "4Gi"),
        podgroup("pg1", "q1", 1, priority_class="mid-priority"),
        podgroup("pg2", "q2", 1, priority_class="mid-priority"),
        podgroup("pg3", "q3", 1, priority_class="mid-priority"),
        pod("preemptee1-1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee1-2", "pg1", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
        pod("preemptee2-1", "pg2", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee2-2", "pg2", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
        pod("preemptor1", "pg3", res("1", "1G")),
    ]
    assert evicted(run(objs, reclaim_conf(*DEFAULT))) == ["c1/preemptee1-1"]


def test_preemption_policy_never_is_skipped_but_the_next_task_reclaims() -> None:
    objs = [
        priority_class("low-priority", 100),
        priority_class("high-priority", 1000),
        queue("q1"),
        queue("q2"),
        node("n1", "2", "2G"),
        podgroup("pg-victim", "q1", 1, phase="Running", priority_class="low-priority"),
        podgroup("pg-preemptor", "q2", 2, priority_class="high-priority"),
        pod("victim-pod-no", "pg-victim", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
        pod("victim-pod", "pg-victim", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptor-a", "pg-preemptor", res("1", "1G"), preemption_policy="Never"),
        pod("preemptor-b", "pg-preemptor", res("1", "1G")),
    ]
    out = run(objs, reclaim_conf(*DEFAULT, "priority"))
    assert evicted(out) == ["c1/victim-pod"]
    assert out.pipelined == {"c1/preemptor-b": "n1"}


def test_closed_queue_may_not_reclaim() -> None:
    for plugins in (DEFAULT, ("conformance", "gang", "capacity")):
        objs = [
            *LEVELS,
            queue("q1"),
            queue("q2", state="Closed"),
            node("n1", "3", "3Gi"),
            podgroup("pg1", "q1", 1, phase="Running", priority_class="low-priority"),
            podgroup("pg2", "q2", 1, priority_class="high-priority"),
            pod("preemptee1", "pg1", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
            pod("preemptee2", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
            pod("preemptee3", "pg1", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
            pod("preemptor1", "pg2", res("1", "1G")),
        ]
        assert evicted(run(objs, reclaim_conf(*plugins))) == [], plugins


def test_node_idle_resources_count_towards_the_request() -> None:
    """cpu is plentiful, memory short by 1G: one 1G victim is enough (the lowest-priority queue's)."""
    objs = [
        *LEVELS,
        queue("q1", priority=1),
        queue("q2", priority=2),
        queue("q3", 3),
        node("n1", "10", "2Gi"),
        podgroup("pg1", "q1", 0, phase="Running", priority_class="mid-priority"),
        podgroup("pg2", "q2", 0, phase="Running", priority_class="mid-priority"),
        podgroup("pg3", "q3", 1, priority_class="mid-priority"),
        pod("preemptee1-1", "pg1", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptee2-1", "pg2", res("1", "1G"), "n1", labels=PREEMPTABLE),
        pod("preemptor1", "pg3", res("2", "1G")),
    ]
    assert evicted(run(objs, reclaim_conf(*DEFAULT, "priority"))) == ["c1/preemptee1-1"]


def test_no_eviction_when_the_node_already_fits() -> None:
    objs = [
        queue("q1", 1),
        queue("q2", 9),
        node("n1", "10", "10G"),
        podgroup("pg-victim", "q1", 0, phase="Running"),
        podgroup("pg-preemptor", "q2", 1),
        pod("victim-n1", "pg-victim", res("2", "2G"), "n1", labels=PREEMPTABLE),
        pod("preemptor1", "pg-preemptor", res("3", "3G")),
    ]
    out = run(objs, reclaim_conf(*DEFAULT))
    assert evicted(out) == []
    assert out.pipelined == {"c1/preemptor1": "n1"}


def test_only_running_tasks_of_reclaimable_queues_are_taken() -> None:
    base = [
        queue("q2"),
        node("n1", "2", "2G"),
        podgroup("pg1", "q1", 0, phase="Running"),
        podgroup("pg2", "q2", 1),
        pod("preemptor1", "pg2", res("1", "1G")),
    ]
    running = pod("victim", "pg1", res("2", "2G"), "n1")
    assert evicted(run([*base, queue("q1"), running], reclaim_conf(*DEFAULT))) == ["c1/victim"]
    # A Bound task (Pending phase with a node) may be preempted but never reclaimed.
    bound = pod("victim", "pg1", res("2", "2G"), "n1", phase="Pending")
    assert evicted(run([*base, queue("q1"), bound], reclaim_conf(*DEFAULT))) == []
    # A queue with reclaimable: false keeps its tasks.
    assert evicted(run([*base, queue("q1", reclaimable=False), running], reclaim_conf(*DEFAULT))) == []


def test_overused_queue_does_not_reclaim() -> None:
    """q2 holds its whole deserved share (capped by its capability), so it is overused and
    skipped, although q1 is over its own share; proportion's preemptive check is off here so
    that only the overuse check decides."""
    objs = [
        queue("q1", capability=res("2", "2G")),
        queue("q2", capability=res("1", "1G", {"pods": "1"})),
        node("n1", "4", "4G"),
        podgroup("pg1", "q1", 0, phase="Running"),
        podgroup("pg2", "q2", 0, phase="Running"),
        podgroup("pg3", "q2", 1),
        *(pod(f"q1-task-{i}", "pg1", res("1", "1G"), "n1") for i in range(3)),
        pod("q2-task", "pg2", res("1", "1G"), "n1"),
        pod("preemptor1", "pg3", res("1", "1G")),
    ]

    def cfg(overused: bool) -> Any:
        flags = ["enableReclaimable", "enableQueueOrder"] + (["enabledOverused"] if overused else [])
        return conf("reclaim", [TIER["conformance"], TIER["gang"], plugin("proportion", *flags)])

    assert evicted(run(objs, cfg(overused=True))) == []
    assert len(evicted(run(objs, cfg(overused=False)))) == 1


def test_evictions_are_discarded_when_the_job_cannot_be_pipelined() -> None:
    """minMember 2 and one reclaimable task: the first task's eviction is undone."""
    objs = [
        queue("q1"),
        queue("q2"),
        node("n1", "2", "2G"),
        podgroup("pg1", "q1", 0, phase="Running"),
        podgroup("pg2", "q2", 2),
        pod("victim", "pg1", res("1", "1G"), "n1"),
        pod("keeper", "pg1", res("1", "1G"), "n1", labels=NOT_PREEMPTABLE),
        pod("preemptor-0", "pg2", res("1", "1G")),
        pod("preemptor-1", "pg2", res("1", "1G")),
    ]
    cfg = conf(
        "reclaim",
        [
            TIER["conformance"],
            plugin("gang", "enableReclaimable", "enableJobStarving", "enableJobPipelined"),
            TIER["proportion"],
        ],
    )
    out = run(objs, cfg)
    assert evicted(out) == []
    assert out.pipelined == {}
    # With minMember 1 the same eviction is committed.
    objs[4] = podgroup("pg2", "q2", 1)
    assert evicted(run(objs, cfg)) == ["c1/victim"]


@settings(max_examples=60, deadline=None)
@given(st.composite(random_cluster)(queues=3))
def test_shortcuts_never_change_the_outcome(objs: list[Any]) -> None:
    cfg = reclaim_conf(*DEFAULT, "priority")
    fast = run(objs, cfg, seed=3)
    with unpruned():
        slow = run(objs, cfg, seed=3)
    assert (evicted(fast), fast.pipelined) == (evicted(slow), slow.pipelined)
