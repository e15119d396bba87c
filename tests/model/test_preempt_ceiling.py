"""The victim ceiling (framework/ceiling.py) only skips nodes where walking finds nothing: on
random contended clusters, preempt decides exactly the same with and without it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import make_conf, node, pod, podgroup, priority_class, queue, snapshot
from lahar_scheduler.core import run_session
from lahar_scheduler.framework.ceiling import VictimCeiling

CONF = make_conf(
    "enqueue, allocate, preempt",
    [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}],
    [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}],
)


@st.composite
def contended(draw: st.DrawFn) -> list[Any]:
    objs: list[Any] = [queue("a"), queue("b"), priority_class("low", 10), priority_class("mid", 50)]
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


def outcome(objs: list[Any]) -> tuple[Any, ...]:
    result = run_session(snapshot(objs), CONF)
    return (
        sorted((t.key, r) for t, r in result.evictions),
        sorted(result.pipelined.items()),
        sorted((t.key, n) for t, n in result.binds),
    )


@settings(max_examples=150, deadline=None, derandomize=True)
@given(contended())
def test_preempt_decides_the_same_without_the_ceiling(objs: list[Any]) -> None:
    with_ceiling = outcome(objs)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(VictimCeiling, "nodes", lambda self, preemptor, queue: None)
        without = outcome(objs)
    assert with_ceiling == without
