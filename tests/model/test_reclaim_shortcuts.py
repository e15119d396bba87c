"""Reclaim's shortcuts (actions/reclaim.py, actions/reclaim_bound.py) decide exactly what the
plain walk decides, on random clusters of several queues over and under their share: the
first victim taken without the victim heap, the keyed job and task queues, the walk memo
(actions/reclaim_walk.py), and the bound's shared row sums."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_evict_caches import _fresh_reclaim_candidates

from builders import make_conf, node, pod, podgroup, priority_class, queue, snapshot
from lahar_scheduler.actions import reclaim
from lahar_scheduler.actions.reclaim import ReclaimAction
from lahar_scheduler.actions.reclaim_bound import ReclaimBound
from lahar_scheduler.actions.reclaim_walk import ReclaimWalk
from lahar_scheduler.core import run_session
from lahar_scheduler.framework.jobs import TaskInfo
from lahar_scheduler.framework.nodes import FloatArray
from lahar_scheduler.framework.predicate import fits_vector
from lahar_scheduler.framework.session import Session

RECLAIM = make_conf(
    "enqueue, allocate, reclaim",
    [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}],
    [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}],
)
QUEUES = ("a", "b", "c")


@st.composite
def queues_over_and_under(draw: st.DrawFn) -> list[Any]:
    objs: list[Any] = [priority_class("low", 10), priority_class("high", 100)]
    for q in QUEUES:
        objs.append(queue(q, draw(st.integers(1, 4)), reclaimable=draw(st.sampled_from([True, True, False]))))
    nodes = draw(st.integers(2, 6))
    for n in range(nodes):
        objs.append(node(f"n{n}", cpu=str(draw(st.sampled_from([4, 8]))), memory="64Gi"))
    # Running jobs, some with pending tasks too (starving ones that may also be victims).
    for j in range(draw(st.integers(1, 8))):
        # Most names end in an index (Volcano orders tasks by it; the keyed orders need one).
        name = f"run-{j}" if draw(st.integers(0, 3)) else f"r{j}"
        size = draw(st.integers(1, 5))
        pending = draw(st.integers(0, 2))
        cls = draw(st.sampled_from(["low", "high"]))
        objs.append(
            podgroup(
                name,
                queue=draw(st.sampled_from(QUEUES)),
                min_member=draw(st.integers(1, size + pending)),
                phase="Running",
                priority_class=cls,
            )
        )
        for t in range(size + pending):
            placed = t < size
            objs.append(
                pod(
                    f"{name}-{t}",
                    group=name,
                    cpu=str(draw(st.sampled_from([1, 2]))),
                    node_name=f"n{draw(st.integers(0, nodes - 1))}" if placed else "",
                    phase="Running" if placed else "Pending",
                    priority_class=cls,
                )
            )
    for j in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 4))
        cls = draw(st.sampled_from(["low", "high"]))
        objs.append(
            podgroup(
                f"pend-{j}",
                queue=draw(st.sampled_from(QUEUES)),
                min_member=draw(st.integers(1, size)),
                priority_class=cls,
            )
        )
        for t in range(size):
            cpu = str(draw(st.sampled_from([1, 2, 4])))
            objs.append(pod(f"pend-{j}-{t}", group=f"pend-{j}", cpu=cpu, priority_class=cls))
    return objs


def outcome(objs: list[Any]) -> tuple[Any, ...]:
    result = run_session(snapshot(objs), RECLAIM)
    return (
        sorted((t.key, r) for t, r in result.evictions),
        sorted(result.pipelined.items()),
        sorted((t.key, n) for t, n in result.binds),
    )


def vector_cover(task: TaskInfo, base: FloatArray, victims: list[TaskInfo], _: Any) -> bool:
    """``victims_cover``'s numpy arithmetic, for the scalar twin reclaim uses."""
    have = base.copy()
    for v in victims:
        have += v.res_vec
    return fits_vector(task, have)


def plain(objs: list[Any]) -> tuple[Any, ...]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ReclaimAction, "_first_victim", lambda self, ssn, victims: None)
        mp.setattr(ReclaimAction, "_job_key", lambda self, ssn, starving: None)
        mp.setattr(ReclaimWalk, "applies", staticmethod(lambda ssn, task: False))
        mp.setattr(reclaim, "fits_with_each", vector_cover)
        mp.setattr(ReclaimBound, "candidates", _fresh_reclaim_candidates)
        mp.setattr(Session, "task_sort_key", lambda self, tasks: None)
        return outcome(objs)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(queues_over_and_under())
def test_reclaim_decides_the_same_without_its_shortcuts(objs: list[Any]) -> None:
    assert outcome(objs) == plain(objs)


def test_the_shortcuts_are_taken() -> None:
    """A queue under its share reclaims one task of another queue's job: the one-victim path."""
    objs: list[Any] = [queue("a"), queue("b"), priority_class("low", 10)]
    objs.append(node("n0", cpu="4", memory="64Gi"))
    objs.append(podgroup("run", queue="a", min_member=1, phase="Running", priority_class="low"))
    objs += [
        pod(f"run-0-{t}", group="run", cpu="1", node_name="n0", phase="Running", priority_class="low") for t in range(4)
    ]
    objs.append(podgroup("pend", queue="b", min_member=1, priority_class="low"))
    objs.append(pod("pend-0-0", group="pend", cpu="1", priority_class="low"))
    taken: list[TaskInfo] = []
    first = ReclaimAction._first_victim

    def spy(self: ReclaimAction, ssn: Session, victims: list[TaskInfo]) -> TaskInfo | None:
        got = first(self, ssn, victims)
        if got is not None:
            taken.append(got)
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ReclaimAction, "_first_victim", spy)
        fast = outcome(objs)
    assert len(taken) == 1
    assert fast == plain(objs)
    assert fast[0] == [(taken[0].key, "reclaim")]
