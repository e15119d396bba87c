"""elect, reserve and the reservation plugin: TARGET_JOB and RESERVED_NODES dispatched.

Volcano's own tests of these went with them (b27b4bbe7 removed actions/elect/elect_test.go); the
selection rule is its reservation plugin's (highest priority, then longest wait), and the node
rule its getUnlockedNodesWithMaxIdle.  Unlike Volcano's, allocate here honours the locks."""

from __future__ import annotations

from builders import make_conf, node, pod, podgroup, priority_class, queue, snapshot
from lahar_scheduler.core import run_session
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.session import Session
from lahar_scheduler.plugins import PLUGINS

CONF = make_conf(
    "elect, reserve, allocate",
    [{"name": "priority"}, {"name": "gang"}, {"name": "reservation"}],
    [{"name": "predicates"}, {"name": "nodeorder"}],
)
# The same without the plugin: nothing elected, nothing locked.
PLAIN = make_conf(
    "elect, reserve, allocate",
    [{"name": "priority"}, {"name": "gang"}],
    [{"name": "predicates"}, {"name": "nodeorder"}],
)


def cluster(*extra):  # type: ignore[no-untyped-def]
    return [
        queue("q"),
        priority_class("high", 100),
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        node("n3", cpu="4"),
        # What runs: n1 has 1 cpu idle, n2 3, n3 2.
        podgroup("run", queue="q", min_member=1, phase="Running"),
        pod("run-0", group="run", cpu="3", node_name="n1", phase="Running"),
        pod("run-1", group="run", cpu="1", node_name="n2", phase="Running"),
        pod("run-2", group="run", cpu="2", node_name="n3", phase="Running"),
        # The big job: not admitted (Pending), top priority.
        podgroup("big", queue="q", min_member=3, phase="Pending", priority_class="high"),
        *(pod(f"big-{i}", group="big", cpu="4", priority_class="high") for i in range(3)),
        *extra,
    ]


def small(n: int):  # type: ignore[no-untyped-def]
    return [podgroup("small", queue="q", min_member=1), *(pod(f"small-{i}", group="small", cpu="1") for i in range(n))]


def test_target_job_is_highest_priority_then_longest_waiting() -> None:
    objs = [
        queue("q"),
        priority_class("high", 100),
        podgroup("old-low", queue="q", phase="Pending", creation="2024-01-01T00:00:00Z"),
        podgroup("new-high", queue="q", phase="Pending", priority_class="high", creation="2024-01-03T00:00:00Z"),
        podgroup("old-high", queue="q", phase="Pending", priority_class="high", creation="2024-01-02T00:00:00Z"),
    ]
    ssn = Session(snapshot(objs), CONF, dict(PLUGINS)).open()
    jobs = list(ssn.jobs.values())
    target = ssn.call(P.TARGET_JOB, jobs)
    assert target is not None and target.name == "old-high"
    assert ssn.call(P.TARGET_JOB, []) is None


def test_target_job_without_a_plugin_is_none() -> None:
    conf = make_conf("elect", [{"name": "priority"}])
    ssn = Session(snapshot([queue("q"), podgroup("a", queue="q", phase="Pending")]), conf, dict(PLUGINS)).open()
    assert not ssn.has(P.TARGET_JOB)
    assert ssn.call(P.TARGET_JOB, list(ssn.jobs.values())) is None


def test_reserve_locks_the_most_idle_node_and_allocate_keeps_others_off_it() -> None:
    snap = snapshot(cluster(*small(2)))
    result = run_session(snap, CONF)
    assert snap.reservation.target == "default/big"
    assert snap.reservation.locked == ["n2"]  # 3 cpu idle, the most
    placed = {t.name: n for t, n in result.binds}
    assert sorted(placed) == ["small-0", "small-1"] and "n2" not in placed.values()
    plain = run_session(snapshot(cluster(*small(2))), PLAIN)
    assert {t.name: n for t, n in plain.binds}["small-0"] == "n2"  # least requested, were it open


def test_locked_nodes_grow_per_session_and_refusals_name_the_target() -> None:
    snap = snapshot(cluster(*small(4)))
    first = run_session(snap, CONF)
    assert snap.reservation.locked == ["n2"]
    assert len(first.binds) == 3  # n3 takes 2, n1 takes 1; n2 is locked
    second = run_session(snap, CONF)
    # n1 and n3 have no cpu left; n1 has more pod slots idle (2 pods against 3), so n3 is not at
    # least as idle in every dimension and n1 stays the pick.
    assert snap.reservation.locked == ["n2", "n1"]
    assert not second.binds
    reasons = second.task_reasons["default/small-3"].message
    assert "node(s) were reserved for job default/big" in reasons


def test_reservation_is_released_when_the_target_goes() -> None:
    snap = snapshot(cluster())
    run_session(snap, CONF)
    assert snap.reservation.locked == ["n2"]
    snap.delete_podgroup("default", "big")
    run_session(snap, CONF)
    assert snap.reservation.target is None and snap.reservation.locked == []
    # Ready also releases: a new target is elected only among Pending jobs.
    snap = snapshot(cluster())
    run_session(snap, CONF)
    snap.upsert_podgroup(podgroup("big", queue="q", min_member=0, phase="Running", priority_class="high"))
    run_session(snap, CONF)
    assert snap.reservation.locked == []
