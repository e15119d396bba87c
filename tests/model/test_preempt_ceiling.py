"""The victim ceiling (framework/ceiling.py) only skips nodes where walking finds nothing: on
random contended clusters, preempt (normal and topology-aware) decides exactly the same with
and without it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import make_conf, node, pod, podgroup, priority_class, queue, snapshot
from lahar_scheduler.actions.preempt import PreemptAction
from lahar_scheduler.core import run_session
from lahar_scheduler.framework.ceiling import VictimCeiling

CONF = make_conf(
    "enqueue, allocate, preempt",
    [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}],
    [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}],
)


def no_ceiling(mp: pytest.MonkeyPatch) -> None:
    """The ceiling knows nothing: every path walks the nodes it would have spared (the walk
    memo's lazy vetoes included)."""
    mp.setattr(VictimCeiling, "keyed_tests", lambda self, preemptor, queue: None)


@st.composite
def contended(draw: st.DrawFn) -> list[Any]:
    weights = draw(st.tuples(st.integers(1, 4), st.integers(1, 4)))
    objs: list[Any] = [queue("a", weights[0]), queue("b", weights[1]), priority_class("low", 10)]
    objs.append(priority_class("mid", 50))
    objs.append(priority_class("high", 100))
    nodes = draw(st.integers(2, 8))
    for n in range(nodes):
        objs.append(node(f"n{n}", cpu=str(draw(st.sampled_from([4, 8, 16]))), memory="64Gi"))
    # Running jobs, spread over nodes, filling them up to their cpu.
    for j in range(draw(st.integers(1, 8))):
        size = draw(st.integers(1, 6))
        cls = draw(st.sampled_from(["low", "mid"]))
        q = draw(st.sampled_from(["a", "b"]))
        objs.append(
            podgroup(f"r{j}", queue=q, min_member=draw(st.integers(1, size)), phase="Running", priority_class=cls)
        )
        for t in range(size):
            at = draw(st.integers(0, nodes - 1))
            objs.append(
                pod(
                    f"r{j}-{t}",
                    group=f"r{j}",
                    cpu=str(draw(st.sampled_from([1, 2]))),
                    node_name=f"n{at}",
                    phase="Running",
                    priority_class=cls,
                )
            )
    for j in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 4))
        q = draw(st.sampled_from(["a", "b"]))
        cls = draw(st.sampled_from(["mid", "high"]))
        objs.append(podgroup(f"p{j}", queue=q, min_member=draw(st.integers(1, size)), priority_class=cls))
        for t in range(size):
            objs.append(pod(f"p{j}-{t}", group=f"p{j}", cpu=str(draw(st.sampled_from([1, 2, 4]))), priority_class=cls))
    return objs


def outcome(objs: list[Any], conf: Any = CONF) -> tuple[Any, ...]:
    result = run_session(snapshot(objs), conf)
    return (
        sorted((t.key, r) for t, r in result.evictions),
        sorted(result.pipelined.items()),
        sorted((t.key, n) for t, n in result.binds),
    )


def always_ceiling(objs: list[Any]) -> tuple[Any, ...]:
    """The normal path consults the ceiling only once a walk wasted a node; here from the start."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(PreemptAction, "wasteful", property(lambda self: True, lambda self, value: None), raising=False)
        return outcome(objs)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(contended())
def test_preempt_decides_the_same_without_the_ceiling(objs: list[Any]) -> None:
    with_ceiling = outcome(objs)
    assert always_ceiling(objs) == with_ceiling
    with pytest.MonkeyPatch.context() as mp:
        no_ceiling(mp)
        without = outcome(objs)
    assert with_ceiling == without


TOPOLOGY = make_conf(
    "enqueue, allocate, preempt",
    [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}],
    [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}],
    configurations=[{"name": "preempt", "arguments": {"enableTopologyAwarePreemption": True}}],
)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(contended())
def test_topology_aware_preempt_decides_the_same_without_the_ceiling(objs: list[Any]) -> None:
    with_ceiling = outcome(objs, TOPOLOGY)
    with pytest.MonkeyPatch.context() as mp:
        no_ceiling(mp)
        without = outcome(objs, TOPOLOGY)
    assert with_ceiling == without


def gang_above_min_member(n0_cpu: str = "4") -> list[Any]:
    """Job r (minMember 2) runs one task on n0 and two on n1, full; job p's task waits."""
    return [
        queue("a"),
        priority_class("low", 10),
        priority_class("high", 100),
        node("n0", cpu=n0_cpu),
        node("n1", cpu="4"),
        podgroup("r", queue="a", min_member=2, phase="Running", priority_class="low"),
        pod("r-0", group="r", cpu="2", node_name="n0", phase="Running", priority_class="low"),
        pod("r-1", group="r", cpu="2", node_name="n1", phase="Running", priority_class="low"),
        pod("r-2", group="r", cpu="2", node_name="n1", phase="Running", priority_class="low"),
        podgroup("p", queue="a", min_member=1, priority_class="high"),
        pod("p-0", group="p", cpu="2", priority_class="high"),
    ]


def test_a_job_changing_on_one_node_refreshes_its_other_nodes() -> None:
    """Gang's test reads the job's ready count: evicting the job's task on n0 takes its n1 tasks
    out of the ceiling (it is at minMember), and discarding the eviction puts them back, though
    n1 itself never changed."""
    from builders import open_session, task
    from lahar_scheduler.actions.evictutil import preemptable_in_queue
    from lahar_scheduler.framework import points as P

    objs = gang_above_min_member()
    # One tier: with drf in a second tier, drf would name them still (a vetoed tier falls through).
    ssn = open_session(objs, make_conf("preempt", [{"name": "priority"}, {"name": "gang"}]))
    ceiling = VictimCeiling(ssn, P.PREEMPTABLE, preemptable_in_queue(ssn))
    preemptor = task(ssn, "default/p-0")
    n1 = ssn.nodes.by_name["n1"].index
    cpu = ssn.nodes.space.index["cpu"]

    def on_n1() -> float:
        got = ceiling.nodes(preemptor, "a")
        assert got is not None
        return float(got[n1, cpu])

    assert on_n1() == 4000  # 3 ready of minMember 2: both n1 tasks could go
    stmt = ssn.statement()
    stmt.evict(task(ssn, "default/r-0"), "preempt")
    assert on_n1() == 0  # now at minMember: gang names nothing of r
    stmt.discard()
    assert on_n1() == 4000


@settings(max_examples=100, deadline=None, derandomize=True)
@given(contended())
def test_a_rows_holding_check_is_the_vector_rows(objs: list[Any]) -> None:
    """``row_holds`` (the walk memo's one-row question, in Python floats) answers what
    ``fits_vector`` over future idle plus the ceiling's vector row answers, for every pending
    task and node, with the grouped and the per-task tests."""
    from builders import open_session
    from lahar_scheduler.actions.evictutil import preemptable_in_queue
    from lahar_scheduler.framework import points as P
    from lahar_scheduler.framework.predicate import fits_vector
    from lahar_scheduler.framework.types import PREEMPTABLE_STATUSES, TaskStatus

    ssn = open_session(objs, CONF)
    ceiling = VictimCeiling(ssn, P.PREEMPTABLE, preemptable_in_queue(ssn), PREEMPTABLE_STATUSES)
    asked = 0
    for job in ssn.jobs.values():
        for t in job.tasks_in(TaskStatus.PENDING):
            keyed = ceiling.keyed_tests(t, job.queue)
            assert keyed is not None
            for tests in (
                keyed[1],
                [[None if c is None else (lambda x, c=c: c(x)) for c in tier] for tier in keyed[1]],
            ):
                for i in range(len(ssn.node_list)):
                    rows = ceiling._compute(job.queue, tests, np.array([i], dtype=np.intp))
                    want = fits_vector(t, ssn.nodes.future[i] + rows[0])
                    assert ceiling.row_holds(t, job.queue, tests, i) == want
                    asked += 1
    assert asked or not any(j.tasks_in(TaskStatus.PENDING) for j in ssn.jobs.values())
