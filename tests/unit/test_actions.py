"""enqueue, allocate and backfill over small scenarios (default configuration unless stated)."""

from __future__ import annotations

from builders import (
    binds,
    make_conf,
    node,
    only,
    pod,
    podgroup,
    priority_class,
    queue,
    run,
    schedule,
    snapshot,
)
from lahar_scheduler.core import load_conf, run_session
from lahar_scheduler.framework.types import TaskStatus

S = TaskStatus
DEFAULT = load_conf(None)


def gang_job(name: str, n: int, *, queue_name: str = "q", min_member: int | None = None, cpu: str = "1", **pg):  # type: ignore[no-untyped-def]
    """A PodGroup and ``n`` pods ``<name>-t-<i>`` of ``cpu`` each."""
    objs = [podgroup(name, queue=queue_name, min_member=n if min_member is None else min_member, **pg)]
    objs += [pod(f"{name}-t-{i}", group=name, cpu=cpu, memory="1Gi") for i in range(n)]
    return objs


# -- enqueue -----------------------------------------------------------------------------------


def test_enqueue_admits_podgroups_without_min_resources() -> None:
    objs = [queue("q"), *gang_job("a", 2, phase="Pending"), *gang_job("b", 1, phase=None)]
    res = run(objs, make_conf("enqueue", [{"name": "gang"}, {"name": "proportion"}]))
    assert res.podgroups["default/a"].phase == "Inqueue"
    assert res.podgroups["default/b"].phase == "Inqueue"
    assert not res.binds


def test_enqueue_rejects_what_does_not_fit_and_keeps_it_pending() -> None:
    objs = [
        node("n1", cpu="4", memory="8Gi"),
        queue("q"),
        *gang_job("small", 1, phase="Pending", min_resources={"cpu": "2", "memory": "1Gi"}),
        *gang_job("huge", 1, phase="Pending", min_resources={"cpu": "40", "memory": "1Gi"}),
    ]
    res = run(objs, make_conf("enqueue", [{"name": "overcommit"}]))
    assert res.podgroups["default/small"].phase == "Inqueue"
    assert res.podgroups["default/huge"].phase == "Pending"
    assert res.decisions["default/huge"].outcome == "not enqueued"
    assert "overused cpu" in res.decisions["default/huge"].verdicts["enqueue"]


def test_enqueue_counts_admitted_jobs_against_later_ones() -> None:
    # 4 cpu × 1.2 = 4.8: the first two 2-cpu jobs fit, the third does not (job order = UID).
    objs = [node("n1", cpu="4", memory="8Gi"), queue("q")]
    for name in ("a", "b", "c"):
        objs += gang_job(name, 1, phase="Pending", min_resources={"cpu": "2"})
    res = run(objs, make_conf("enqueue", [{"name": "overcommit"}]))
    assert [res.podgroups[f"default/{n}"].phase for n in "abc"] == ["Inqueue", "Inqueue", "Pending"]


def test_enqueue_ignores_jobs_of_missing_queues_and_running_jobs() -> None:
    objs = [
        queue("q"),
        *gang_job("lost", 1, queue_name="nope", phase="Pending"),
        *gang_job("r", 1, phase="Running"),
    ]
    res = run(objs, make_conf("enqueue", [{"name": "gang"}]))
    assert "default/lost" not in res.podgroups
    # A Running job whose tasks are all Pending falls back to Pending at close (scheduled < min).
    assert res.podgroups["default/r"].phase == "Pending"


# -- allocate ------------------------------------------------------------------------------------


def test_gang_binds_all_or_nothing() -> None:
    objs = [node("n1", cpu="2", memory="8Gi"), queue("q"), *gang_job("g", 3)]
    snap = snapshot(objs)
    before = snap.nodes.used.copy()
    res = run_session(snap, DEFAULT)
    assert not res.binds
    assert (snap.nodes.used == before).all()  # tentative allocations undone
    assert all(t.status == S.PENDING and not t.node_name for t in snap.jobs["default/g"].tasks.values())
    update = res.podgroups["default/g"]
    assert update.phase == "Inqueue"
    cond = next(c for c in update.conditions if c.type == "Unschedulable")
    assert cond.status == "True" and cond.reason == "NotEnoughResources"
    # proportion's allocatable check stops the third task before any node is tried.
    assert cond.message.startswith("1/3 tasks in gang unschedulable: ")
    assert res.decisions["default/g"].verdicts["allocatable"] == "queue q has no room for g-t-2"
    # Without proportion the third task reaches the nodes, and the per-node reasons are given.
    res2 = run(objs, make_conf("allocate", [{"name": "gang"}, {"name": "predicates"}]))
    cond2 = next(c for c in res2.podgroups["default/g"].conditions if c.type == "Unschedulable")
    assert cond2.message.startswith("1/3 tasks in gang unschedulable: 1/1 nodes are unavailable: 1 Insufficient cpu")
    # Tasks placed tentatively then discarded are "Schedulable" once minAvailable is met; the one
    # that found no node is "Unschedulable".
    assert {k: r.reason for k, r in res2.task_reasons.items()} == {
        "default/g-t-0": "Schedulable",
        "default/g-t-1": "Schedulable",
        "default/g-t-2": "Unschedulable",
    }


def test_gang_that_fits_binds_and_stays_inqueue() -> None:
    objs = [
        node("n1", cpu="2", memory="8Gi"),
        node("n2", cpu="2", memory="8Gi"),
        queue("q"),
        *gang_job("g", 3),
    ]
    res = run(objs)
    assert len(res.binds) == 3
    assert all(t.status == S.BINDING for t, _ in res.binds)
    update = res.podgroups["default/g"]
    # Binding tasks are not "scheduled": a freshly bound gang stays Inqueue.
    assert update.phase == "Inqueue"
    assert [c.type for c in update.conditions] == ["Scheduled"]


def test_pending_jobs_wait_for_enqueue_or_are_promoted_without_it() -> None:
    objs = [node("n1"), queue("q"), *gang_job("g", 1, phase="Pending")]
    with_enqueue = make_conf("enqueue, allocate", [{"name": "gang"}, {"name": "predicates"}])
    assert len(run(objs, with_enqueue).binds) == 1
    allocate_only_but_enqueue_listed = make_conf("allocate, enqueue", [{"name": "gang"}])
    # allocate runs first and skips the Pending job because enqueue is configured.
    assert not run(objs, allocate_only_but_enqueue_listed).binds
    no_enqueue = make_conf("allocate", [{"name": "gang"}])
    assert len(run(objs, no_enqueue).binds) == 1


def test_invalid_jobs_are_skipped() -> None:
    objs = [node("n1"), queue("q"), podgroup("g", queue="q", min_member=3), pod("g-t-0", group="g", cpu="1")]
    res = run(objs)
    assert not res.binds
    assert res.decisions["default/g"].outcome == "invalid"
    cond = next(c for c in res.podgroups["default/g"].conditions if c.type == "Unschedulable")
    assert "Not enough valid tasks for gang-scheduling, valid: 1, min: 3" in cond.message


def test_job_priority_decides_who_gets_the_last_slot() -> None:
    objs = [
        node("n1", cpu="1", memory="8Gi"),
        queue("q"),
        priority_class("high", 100),
        *gang_job("a", 1),
        *gang_job("b", 1, priority_class="high"),
    ]
    assert binds(run(objs)) == {"default/b-t-0": "n1"}


def test_task_priority_orders_tasks_within_a_job() -> None:
    objs = [
        node("n1", cpu="1", memory="8Gi"),
        queue("q"),
        podgroup("g", queue="q", min_member=1),
        pod("g-t-0", group="g", cpu="1", priority=1),
        pod("g-t-1", group="g", cpu="1", priority=5),
    ]
    assert binds(run(objs)) == {"default/g-t-1": "n1"}


def test_one_task_per_job_pop_once_ready_lets_queues_interleave() -> None:
    # minMember 1: after the first task the job is ready, so queues alternate task by task.
    objs = [node("n1", cpu="4", memory="8Gi"), queue("qa"), queue("qb")]
    objs += gang_job("a", 4, queue_name="qa", min_member=1)
    objs += gang_job("b", 4, queue_name="qb", min_member=1)
    got = binds(run(objs))
    assert sum(k.startswith("default/a") for k in got) == 2
    assert sum(k.startswith("default/b") for k in got) == 2


def test_queue_capability_limits_allocation() -> None:
    objs = [
        node("n1", cpu="8", memory="16Gi"),
        queue("q", capability={"cpu": "2"}),
        *gang_job("g", 4, min_member=1),
    ]
    assert len(run(objs).binds) == 2


def test_best_effort_tasks_are_left_to_backfill() -> None:
    objs = [
        node("n1", cpu="1", memory="8Gi", pods="2"),
        queue("q"),
        podgroup("g", queue="q", min_member=0),
        pod("g-t-0", group="g"),
        pod("g-t-1", group="g"),
        pod("g-t-2", group="g"),
    ]
    assert not run(objs, make_conf("allocate", [{"name": "gang"}, {"name": "predicates"}])).binds
    got = binds(run(objs, make_conf("allocate, backfill", [{"name": "gang"}, {"name": "predicates"}])))
    assert got == {"default/g-t-0": "n1", "default/g-t-1": "n1"}  # the node holds two pods


def test_backfill_respects_predicates_and_skips_pending_jobs() -> None:
    objs = [
        node("n1", labels={"zone": "a"}),
        node("n2", labels={"zone": "b"}),
        queue("q"),
        podgroup("g", queue="q", min_member=0),
        pod("g-t-0", group="g", node_selector={"zone": "b"}),
        podgroup("p", queue="q", min_member=0, phase="Pending"),
        pod("p-t-0", group="p"),
    ]
    conf = make_conf("backfill", [{"name": "gang"}, {"name": "predicates"}])
    assert binds(run(objs, conf)) == {"default/g-t-0": "n2"}


def test_scheduling_gates_hold_pods() -> None:
    from lahar.api.objects import SchedulingGate

    external = pod("g-t-0", group="g", cpu="1")
    external.spec.scheduling_gates = [SchedulingGate(name="example.com/wait")]
    volcano = pod("g-t-1", group="g", cpu="1")
    volcano.spec.scheduling_gates = [SchedulingGate(name="scheduling.volcano.sh/queue-allocation-gate")]
    free = pod("g-t-2", group="g", cpu="1")
    objs = [node("n1"), queue("q"), podgroup("g", queue="q", min_member=1), external, volcano, free]
    # Gated pods are never placed (Volcano's own queue-allocation gate included: it is lifted
    # by the gate manager, not by allocate); the job's other pods are.
    assert binds(run(objs, make_conf("allocate", [{"name": "gang"}]))) == {"default/g-t-2": "n1"}


def test_pipelined_on_releasing_resources_is_not_bound() -> None:
    objs = [
        node("n1", cpu="2", memory="8Gi"),
        queue("q"),
        podgroup("old", queue="q", min_member=1, phase="Running"),
        pod("old-t-0", group="old", cpu="2", node_name="n1", phase="Running", deleting=True),
        *gang_job("new", 1),
    ]
    res = run(objs)
    assert not res.binds
    assert res.pipelined == {"default/new-t-0": "n1"}
    assert res.task_reasons["default/new-t-0"].reason == "Unschedulable"
    assert "once resource is released" in res.task_reasons["default/new-t-0"].message


def test_nodes_where_the_task_fits_now_are_preferred_to_future_idle() -> None:
    objs = [
        node("n1", cpu="2", memory="8Gi"),
        node("n2", cpu="2", memory="8Gi"),
        queue("q"),
        podgroup("old", queue="q", min_member=1, phase="Running"),
        pod("old-t-0", group="old", cpu="1", node_name="n2", phase="Running", deleting=True),
        pod("x", cpu="1", node_name="n1", phase="Running", scheduler="default-scheduler"),
        *gang_job("new", 1, cpu="2"),
    ]
    # n1 has 1 cpu idle (2 in future: no); n2 has 1 idle + 1 releasing: only future-fit → pipelined.
    res = run(objs)
    assert res.pipelined == {"default/new-t-0": "n2"}
    objs.append(node("n3", cpu="2", memory="8Gi"))
    assert binds(run(objs)) == {"default/new-t-0": "n3"}


def test_nominated_node_is_tried_first() -> None:
    objs = [node("n1"), node("n2"), queue("q"), podgroup("g", queue="q", min_member=1)]
    objs.append(pod("g-t-0", group="g", cpu="1", nominated="n2"))
    for seed in range(5):
        assert binds(run(objs, seed=seed)) == {"default/g-t-0": "n2"}


def test_role_with_failed_predicates_is_not_retried() -> None:
    objs = [
        node("n1", labels={"zone": "a"}),
        queue("q"),
        podgroup("g", queue="q", min_member=1),
        pod("g-w-0", group="g", cpu="1", node_selector={"zone": "x"}, labels={"volcano.sh/task-spec": "w"}),
        pod("g-w-1", group="g", cpu="1", node_selector={"zone": "x"}, labels={"volcano.sh/task-spec": "w"}),
        pod("g-m-2", group="g", cpu="1", labels={"volcano.sh/task-spec": "m"}),
    ]
    res = run(objs)
    assert binds(res) == {"default/g-m-2": "n1"}


def test_overused_queue_is_dropped_for_the_rest_of_the_action() -> None:
    # qa (weight 1) already holds 2 of the 4 cpus, its deserved share is 2: it is overused and
    # gets nothing more, although its job sorts first.
    objs = [
        node("n1", cpu="4", memory="8Gi", pods="110"),
        queue("qa"),
        queue("qb"),
        podgroup("a", queue="qa", min_member=1, phase="Running"),
        pod("a-t-0", group="a", cpu="2", memory="1Gi", node_name="n1", phase="Running"),
        pod("a-t-1", group="a", cpu="1", memory="1Gi"),
        *gang_job("b", 2, queue_name="qb", min_member=1),
    ]
    conf = make_conf(
        "allocate",
        [{"name": "gang"}],
        [{"name": "proportion"}, {"name": "predicates"}],
    )
    got = binds(run(objs, conf))
    assert got == {"default/b-t-0": "n1", "default/b-t-1": "n1"}


# -- requests: every pod takes a pod slot and its init containers' peak --------------------------


def test_pod_slots_are_node_resources_even_without_the_predicates_plugin() -> None:
    """Every task requests ``pods: 1`` and the node's idle ``pods`` shrinks with each placement, so a
    node with 2 pod slots takes 2 pods whatever plugins are configured (Volcano's fit check)."""
    objs = [node("n1", cpu="8", memory="8Gi", pods="2"), queue("q"), *gang_job("g", 3, min_member=1)]
    conf = make_conf("allocate", [{"name": "gang"}])
    assert len(run(objs, conf).binds) == 2


def test_init_container_peak_is_held_on_the_node() -> None:
    """A pod whose init container needs more than its containers holds the peak on the node (kube's
    effective request); two such 2-cpu pods cannot share a 3-cpu node."""
    objs = [node("n1", cpu="3", memory="8Gi"), queue("q"), podgroup("g", queue="q", min_member=1)]
    for i in range(2):
        objs.append(pod(f"g-t-{i}", group="g", cpu="1", memory="1Gi", init_requests={"cpu": "2"}))
    res = run(objs)
    assert len(res.binds) == 1
    out = schedule(objs, cycles=2)
    assert len(out.binds) == 1  # still one after the first pod runs


def test_drf_shares_count_pod_slots() -> None:
    """DRF's dominant share ranges over every cluster resource, pods included (Volcano counts
    ``pods: 1`` per task).  Here both jobs hold one of 3 pod slots, so their shares tie at 1/3 and
    the job UID decides: ``a`` goes first although it holds more cpu."""
    objs = [
        node("n1", cpu="100", memory="100Gi", pods="3"),
        queue("q"),
        podgroup("a", queue="q", min_member=1, phase="Running"),
        pod("a-t-0", group="a", cpu="3", memory="1Gi", node_name="n1", phase="Running"),
        pod("a-t-1", group="a", cpu="1", memory="1Gi"),
        podgroup("b", queue="q", min_member=1, phase="Running"),
        pod("b-t-0", group="b", cpu="1", memory="1Gi", node_name="n1", phase="Running"),
        pod("b-t-1", group="b", cpu="1", memory="1Gi"),
    ]
    conf = make_conf(
        "allocate",
        [only("gang", "enableJobReady", "enableJobPipelined"), only("drf", "enableJobOrder")],
        [only("predicates", "enablePredicate")],
    )
    assert binds(run(objs, conf)) == {"default/a-t-1": "n1"}


def test_pod_with_only_init_container_requests_is_scheduled() -> None:
    """Not BestEffort (its init container requests cpu), so allocate must place it; were its
    request taken from the regular containers alone, allocate would skip it as BestEffort and
    backfill as not BestEffort, and it would never be scheduled."""
    objs = [node("n1"), queue("q"), podgroup("g", queue="q", min_member=1)]
    objs.append(pod("g-t-0", group="g", init_requests={"cpu": "1"}))
    assert binds(run(objs)) == {"default/g-t-0": "n1"}
    assert binds(run(objs, make_conf("allocate", [{"name": "gang"}]))) == {"default/g-t-0": "n1"}
