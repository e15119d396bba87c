"""proportion: weighted water-filling of deserved shares, overused, allocatable, enqueueable."""

from __future__ import annotations

from typing import Any

import pytest

from builders import binds, make_conf, node, only, open_session, pod, podgroup, queue, run, snapshot, task
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.session import Session
from lahar_scheduler.plugins.proportion import QueueAttr

GI = 2**30
ALL = ("enableQueueOrder", "enableReclaimable", "enabledOverused", "enabledAllocatable", "enablePreemptive")
CONF = make_conf("enqueue, allocate", [{"name": "gang"}, only("proportion", *ALL, "enableJobEnqueued")])


def jobs(queue_name: str, n: int, cpu: str = "1", memory: str | None = None, **pg: Any) -> list[Any]:
    name = f"{queue_name}-job"
    out: list[Any] = [podgroup(name, queue=queue_name, **pg)]
    out += [pod(f"{name}-t-{i}", group=name, cpu=cpu, memory=memory) for i in range(n)]
    return out


def attrs(ssn: Session) -> dict[str, QueueAttr]:
    plugin = next(p for p in ssn.plugins if p.name == "proportion")
    return plugin.attrs  # type: ignore[attr-defined,no-any-return]


def deserved(ssn: Session) -> dict[str, tuple[float, float, float]]:
    return {k: (a.deserved.milli_cpu, a.deserved.memory, a.deserved.get("pods")) for k, a in attrs(ssn).items()}


def test_water_filling_by_weight_capped_by_request() -> None:
    """Round 1 shares 12 units 1:2:3 (qb is capped at its request of 2 and is met); round 2 shares
    the 2 left over between qa and qc 1:3."""
    objs = [
        node("n1", cpu="12", memory="12Gi", pods="12"),
        queue("qa", 1),
        queue("qb", 2),
        queue("qc", 3),
        *jobs("qa", 8, memory="1Gi"),
        *jobs("qb", 2, memory="1Gi"),
        *jobs("qc", 10, memory="1Gi"),
    ]
    got = deserved(open_session(objs, CONF))
    assert got["qa"] == pytest.approx((2500, 2.5 * GI, 2.5))
    assert got["qb"] == pytest.approx((2000, 2 * GI, 2))
    assert got["qc"] == pytest.approx((7500, 7.5 * GI, 7.5))


def test_water_filling_respects_capability() -> None:
    """qa is capped at 2 cpu by its capability; qb takes the rest over later rounds."""
    objs = [
        node("n1", cpu="10", memory="20Gi", pods="100"),
        queue("qa", capability={"cpu": "2"}),
        queue("qb"),
        *jobs("qa", 8),
        *jobs("qb", 8),
    ]
    ssn = open_session(objs, CONF)
    got = deserved(ssn)
    # Dimensions a queue does not request get nothing (deserved is capped by request).
    assert got["qa"] == pytest.approx((2000, 0, 8))
    assert got["qb"] == pytest.approx((8000, 0, 8))
    a = attrs(ssn)["qa"]
    assert a.real_capability.milli_cpu == 2000
    assert a.real_capability.memory == 20 * GI  # memory capability unset: unbounded, so the cluster


def test_guarantee_is_a_floor_and_is_reserved_from_the_others() -> None:
    objs = [
        node("n1", cpu="10", memory="10Gi"),
        queue("qa", guarantee={"cpu": "4"}),
        queue("qb"),
        *jobs("qa", 1),
        *jobs("qb", 10),
    ]
    ssn = open_session(objs, CONF)
    a, b = attrs(ssn)["qa"], attrs(ssn)["qb"]
    assert a.deserved.milli_cpu == 4000  # request 1 cpu, but never below the guarantee
    assert b.real_capability.milli_cpu == 6000  # total − Σ guarantees (+ its own, none)
    assert a.real_capability.milli_cpu == 10000  # total − Σ guarantees + its own guarantee
    assert b.deserved.milli_cpu == 6000


def test_weight_zero_queue_gets_nothing() -> None:
    objs = [node("n1", cpu="4", memory="8Gi"), queue("zero", 0), *jobs("zero", 1, min_member=1)]
    ssn = open_session(objs, CONF)
    assert attrs(ssn)["zero"].deserved.milli_cpu == 0
    assert not run(objs, CONF).binds


def test_only_queues_with_jobs_get_attributes() -> None:
    objs = [node("n1"), queue("qa"), queue("idle"), *jobs("qa", 1)]
    assert set(attrs(open_session(objs, CONF))) == {"qa"}


def running_objs() -> list[Any]:
    return [
        node("n1", cpu="4", memory="4Gi", pods="4"),
        queue("qa"),
        queue("qb", priority=1),
        podgroup("a", queue="qa", min_member=1, phase="Running"),
        pod("a-t-0", group="a", cpu="2", memory="2Gi", node_name="n1", phase="Running"),
        pod("a-t-1", group="a", cpu="1", memory="1Gi", node_name="n1", phase="Running"),
        podgroup("b", queue="qb", min_member=1),
        pod("b-t-0", group="b", cpu="2", memory="2Gi"),
        pod("b-t-1", group="b", cpu="2", memory="2Gi"),
    ]


def test_share_queue_order_and_overused() -> None:
    ssn = open_session(running_objs(), CONF)
    a, b = attrs(ssn)["qa"], attrs(ssn)["qb"]
    # 4 cpu/4Gi/4 pods, weights 1:1, both request more than half: one round gives each half.
    # qa already holds 3 cpu / 3Gi.
    assert (a.deserved.milli_cpu, b.deserved.milli_cpu) == (2000, 2000)
    assert a.share == pytest.approx(1.5) and b.share == 0
    qa, qb = ssn.queues["qa"], ssn.queues["qb"]
    assert ssn.call(P.OVERUSED, qa) and not ssn.call(P.OVERUSED, qb)
    # qb has the higher spec.priority: it goes first whatever the shares.
    assert ssn.queue_order(qb, qa)


def test_overused_needs_every_dimension() -> None:
    objs = running_objs()
    objs[4] = pod("a-t-0", group="a", cpu="2", node_name="n1", phase="Running")  # no memory
    objs[5] = pod("a-t-1", group="a", cpu="1", node_name="n1", phase="Running")
    objs.append(pod("a-t-2", group="a", memory="2Gi"))  # qa also wants memory it does not hold
    ssn = open_session(objs, CONF)
    a = attrs(ssn)["qa"]
    assert a.allocated.milli_cpu >= a.deserved.milli_cpu and a.allocated.memory < a.deserved.memory
    assert not ssn.call(P.OVERUSED, ssn.queues["qa"])


def test_allocatable_up_to_deserved_on_requested_dimensions() -> None:
    ssn = open_session(running_objs(), CONF)
    qb = ssn.queues["qb"]
    b0, b1 = task(ssn, "default/b-t-0"), task(ssn, "default/b-t-1")
    assert ssn.call(P.ALLOCATABLE, qb, b0)
    ssn.statement().allocate(b0, ssn.nodes.by_name["n1"])
    assert not ssn.call(P.ALLOCATABLE, qb, b1)  # 2 + 2 cpu > deserved 2
    assert not ssn.call(P.PREEMPTIVE, qb, [b1])


def test_closed_queue_is_not_allocatable_nor_enqueueable() -> None:
    objs = [node("n1"), queue("q", state="Closed"), *jobs("q", 1, phase="Pending")]
    ssn = open_session(objs, CONF)
    job = ssn.jobs["default/q-job"]
    assert not ssn.call(P.ALLOCATABLE, ssn.queues["q"], task(ssn, "default/q-job-t-0"))
    assert not ssn.call(P.JOB_ENQUEUEABLE, job)
    assert job.job_fit_error == "queue q is Closed"


def test_enqueueable_against_real_capability_with_inqueue_and_elastic() -> None:
    objs = [
        node("n1", cpu="8", memory="8Gi"),
        queue("q", capability={"cpu": "4", "memory": "4Gi"}),
        # Running job: 1 cpu allocated, minResources 2 cpu → still reserves 1 cpu inqueue.
        podgroup("run", queue="q", min_member=1, phase="Running", min_resources={"cpu": "2"}),
        pod("run-t-0", group="run", cpu="1", memory="1Gi", node_name="n1", phase="Running"),
        podgroup("in", queue="q", phase="Inqueue", min_resources={"cpu": "1"}),
        podgroup("p1", queue="q", phase="Pending", min_resources={"cpu": "1", "memory": "1Gi"}),
        podgroup("p2", queue="q", phase="Pending", min_resources={"cpu": "2"}),
        podgroup("free", queue="q", phase="Pending"),
    ]
    ssn = open_session(objs, CONF)
    a = attrs(ssn)["q"]
    assert a.inqueue.milli_cpu == 2000  # 1 (run: 2 − 1 allocated) + 1 (in)
    assert a.allocated.milli_cpu == 1000
    p1, p2, free = (ssn.jobs[f"default/{n}"] for n in ("p1", "p2", "free"))
    assert ssn.call(P.JOB_ENQUEUEABLE, p1)  # 1 + 1 + 2 = 4 ≤ 4 cpu; memory 1 + 1 ≤ 4Gi
    ssn.call(P.JOB_ENQUEUED, p1)
    assert a.inqueue.milli_cpu == 3000
    assert not ssn.call(P.JOB_ENQUEUEABLE, p2)  # 2 + 1 + 3 = 6 > 4
    assert p2.job_fit_error == "queue resource quota insufficient: insufficient cpu"
    assert ssn.call(P.JOB_ENQUEUEABLE, free)  # no minResources


def test_enqueue_action_uses_the_vote() -> None:
    objs = [
        node("n1", cpu="8", memory="8Gi"),
        queue("q", capability={"cpu": "2"}),
        podgroup("a", queue="q", phase="Pending", min_member=1, min_resources={"cpu": "2"}),
        pod("a-t-0", group="a", cpu="2"),
        podgroup("b", queue="q", phase="Pending", min_member=1, min_resources={"cpu": "1"}),
        pod("b-t-0", group="b", cpu="1"),
    ]
    res = run(objs, CONF)
    assert res.podgroups["default/a"].phase == "Inqueue"
    assert res.podgroups["default/b"].phase == "Pending"  # a's 2 cpu took the queue's capability
    assert binds(res) == {"default/a-t-0": "n1"}


def test_reclaimable_takes_victims_while_their_queue_is_over_deserved() -> None:
    objs = [
        node("n1", cpu="4", memory="4Gi", pods="10"),
        queue("qa"),
        queue("qb"),
        podgroup("a", queue="qa", phase="Running"),
        *[pod(f"a-t-{i}", group="a", cpu="1", memory="1Gi", node_name="n1", phase="Running") for i in range(4)],
        podgroup("b", queue="qb"),
        pod("b-t-0", group="b", cpu="1", memory="1Gi"),
        pod("b-t-1", group="b", cpu="1", memory="1Gi"),
    ]
    ssn = open_session(objs, CONF)
    assert attrs(ssn)["qa"].deserved.milli_cpu == 2000
    cands = [task(ssn, f"default/a-t-{i}") for i in range(4)]
    # qa holds 4, deserves 2: victims until what remains is within deserved (4 → 3 → 2).
    got = ssn.call(P.RECLAIMABLE, task(ssn, "default/b-t-0"), cands)
    assert [t.name for t in got] == ["a-t-0", "a-t-1"]


def test_allocation_stops_at_the_deserved_share() -> None:
    objs = [node("n1", cpu="4", memory="8Gi"), queue("qa"), queue("qb")]
    objs += jobs("qa", 4, min_member=1) + jobs("qb", 1, min_member=1)
    got = binds(run(objs, CONF))
    # qa deserves 3 cpu (qb asks only 1): it gets 3 of its 4 pods; qb gets its 1.
    assert sum(k.startswith("default/qa") for k in got) == 3
    assert "default/qb-job-t-0" in got


def test_no_double_counting_of_inqueue_jobs_whose_tasks_are_binding() -> None:
    """SKIPPED.md §2.8: in the second session job A's tasks are still Binding (assumed, not yet
    observed) and A is still Inqueue; its inqueue reservation is max(0, minResources − allocated)
    = 0, so B fits the queue's capability and is enqueued and bound."""
    from lahar_scheduler.core import run_session
    from lahar_scheduler.framework.types import TaskStatus

    snap = snapshot(
        [
            node("n1", cpu="4", memory="8Gi"),
            queue("q1", capability={"cpu": "4", "memory": "8Gi"}),
            podgroup("a", queue="q1", min_member=3, phase="Inqueue", min_resources={"cpu": "3", "memory": "3Gi"}),
            *[pod(f"a-t-{i}", group="a", cpu="1", memory="1Gi") for i in range(3)],
        ]
    )
    tiers = ([{"name": "gang"}], [{"name": "proportion"}, {"name": "predicates"}])
    first = run_session(snap, make_conf("allocate, enqueue", *tiers))
    assert len(first.binds) == 3
    a = snap.jobs["default/a"]
    assert a.phase == "Inqueue" and all(t.status == TaskStatus.BINDING for t in a.tasks.values())
    snap.upsert_podgroup(
        podgroup("b", queue="q1", phase="Pending", min_member=1, min_resources={"cpu": "1", "memory": "1Gi"})
    )
    snap.upsert_pod(pod("b-t-0", group="b", cpu="1", memory="1Gi"))
    second = run_session(snap, make_conf("enqueue, allocate", *tiers))
    assert second.podgroups["default/b"].phase == "Inqueue"
    assert binds(second) == {"default/b-t-0": "n1"}
