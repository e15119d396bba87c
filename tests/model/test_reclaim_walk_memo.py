"""Reclaim's walk memo (actions/reclaim_walk.py) walks exactly the nodes, in exactly the order,
that the plain path computes afresh for each reclaimer: the same evictions, pipelined tasks and
binds on random clusters of full nodes running jobs of queues over their share, and gangs of
queues under it (some too large to be placed, so their statements are discarded and the nodes
they touched come back)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_reclaim_shortcuts import outcome, vector_cover

from builders import node, pod, podgroup, priority_class, queue
from lahar_scheduler.actions import reclaim, reclaim_walk
from lahar_scheduler.actions.reclaim_bound import ReclaimBound
from lahar_scheduler.actions.reclaim_walk import ReclaimWalk
from lahar_scheduler.framework.jobs import TaskInfo

OVER = ("a", "b")
UNDER = ("c", "d")


@st.composite
def over_and_under(draw: st.DrawFn) -> list[Any]:
    objs: list[Any] = [priority_class("normal", 10)]
    objs += [queue(q, reclaimable=draw(st.sampled_from([True, True, False]))) for q in OVER]
    objs += [queue(q, draw(st.integers(1, 3))) for q in UNDER]
    nodes = draw(st.integers(2, 8))
    for n in range(nodes):
        cpu = draw(st.sampled_from([4, 8]))
        objs.append(node(f"n{n}", cpu=str(cpu), memory="64Gi"))
        # Full nodes: one running job each (some of its pods elsewhere), minMember low enough
        # that several may go.
        group = f"run-{n}"
        objs.append(
            podgroup(
                group,
                queue=draw(st.sampled_from(OVER)),
                min_member=draw(st.integers(1, 3)),
                phase="Running",
                priority_class="normal",
            )
        )
        for t in range(cpu):
            where = n if draw(st.integers(0, 4)) else draw(st.integers(0, nodes - 1))
            objs.append(
                pod(
                    f"{group}-{t}",
                    group=group,
                    cpu="1",
                    node_name=f"n{where}",
                    phase="Running",
                    priority_class="normal",
                )
            )
    for j in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 6))
        group = f"pend-{j}"
        objs.append(
            podgroup(
                group,
                queue=draw(st.sampled_from(UNDER)),
                min_member=draw(st.integers(1, size)),
                priority_class="normal",
            )
        )
        ask = str(draw(st.sampled_from([1, 1, 2, 4])))
        objs += [pod(f"{group}-{t}", group=group, cpu=ask, priority_class="normal") for t in range(size)]
    return objs


def plain(objs: list[Any]) -> tuple[Any, ...]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ReclaimWalk, "applies", staticmethod(lambda ssn, task: False))
        mp.setattr(reclaim, "fits_with_each", vector_cover)
        return outcome(objs)


@settings(max_examples=250, deadline=None, derandomize=True)
@given(over_and_under())
def test_reclaim_decides_the_same_without_its_walk_memo(objs: list[Any]) -> None:
    assert outcome(objs) == plain(objs)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(over_and_under())
def test_reclaim_decides_the_same_when_its_walks_settle_early(objs: list[Any]) -> None:
    """The same with the unknown rows settled as soon as the walk goes past its first node (the
    clusters above are too small for a walk to go that far)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reclaim_walk, "ARGMAX_STEPS", 1)
        mp.setattr(reclaim_walk, "SETTLE_SHARE", 10**6)
        fast = outcome(objs)
    assert fast == plain(objs)


def _unknown_ruled_out(self: ReclaimWalk, entry: Any, task: TaskInfo, queue: str, i: int) -> Any:
    """The memo with its resolution broken: a row that changed is never walked again."""
    return None if i in entry.unknown else _visit(self, entry, task, queue, i)


_visit = ReclaimWalk._visit


def test_a_memo_that_drops_changed_rows_decides_otherwise() -> None:
    """The property above can fail: a memo that never walks a node again once it changed
    walks other nodes on many of the same random clusters, and the clusters do reclaim.  (A
    memo that kept stale answers would seldom be caught: an eviction leaves a node's bound as
    it was (the victim's resources move from its sum to future idle), mostly a pipeline
    shrinks it, and walking a node outside the bound finds victims that cannot cover the
    reclaimer, so it changes nothing; only a discarded pipeline made before the mask grows it
    back.)"""
    differ = evicting = 0

    @settings(max_examples=120, deadline=None, derandomize=True)
    @given(over_and_under())
    def count(objs: list[Any]) -> None:
        nonlocal differ, evicting
        right = plain(objs)
        evicting += bool(right[0])
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(ReclaimWalk, "_visit", _unknown_ruled_out)
            differ += outcome(objs) != right

    count()
    assert evicting >= 20 and differ >= 10  # derandomized: the same 120 clusters each run


def full_nodes(n: int, cpu: int) -> list[Any]:
    """Queue a (reclaimable) over its share: ``n`` nodes of ``cpu`` cpu, each full with one
    running job of 1-cpu pods (minMember 1, so all but one may go); queue b under it."""
    objs: list[Any] = [priority_class("normal", 10), queue("a", reclaimable=True), queue("b")]
    for i in range(n):
        objs.append(node(f"n{i}", cpu=str(cpu), memory="64Gi"))
        objs.append(podgroup(f"run-{i}", queue="a", min_member=1, phase="Running", priority_class="normal"))
        objs += [
            pod(f"run-{i}-{t}", group=f"run-{i}", cpu="1", node_name=f"n{i}", phase="Running", priority_class="normal")
            for t in range(cpu)
        ]
    return objs


def test_the_memo_is_made_once_and_resolves_only_the_nodes_walked() -> None:
    """Four nodes of four pods, a gang of six 1-cpu pods in queue b: the memo is made once,
    each reclaimer resolves the node it walks (changed by the one before), a node whose last
    pod may not go is walked past, and the nodes past the one that takes the reclaimer are never
    computed (no bound over every node either)."""
    objs = full_nodes(4, 4)
    objs.append(podgroup("pend", queue="b", min_member=6, priority_class="normal"))
    objs += [pod(f"pend-{t}", group="pend", cpu="1", priority_class="normal") for t in range(6)]
    calls: Counter[str] = Counter()
    resolved: Counter[int] = Counter()
    made, visit = reclaim_walk._Walk.__init__, ReclaimWalk._visit

    def spy_visit(self: ReclaimWalk, entry: Any, task: TaskInfo, queue: str, i: int) -> Any:
        if i in entry.unknown:
            resolved[i] += 1
        return visit(self, entry, task, queue, i)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reclaim_walk._Walk, "__init__", lambda self, *a: calls.update(["made"]) or made(self, *a))
        mp.setattr(ReclaimBound, "candidates", lambda self, *a: calls.update(["bound"]))
        mp.setattr(ReclaimWalk, "_visit", spy_visit)
        fast = outcome(objs)
    assert len(fast[0]) == 6 and len(fast[1]) == 6  # every pending pod reclaimed one of a's
    assert calls == {"made": 1}
    assert set(resolved) == {0, 1} and resolved[0] >= 4  # the fourth walks past node 0
    assert fast == plain(objs)


def test_a_long_walk_settles_the_unknown_rows_at_once() -> None:
    """Twelve nodes, the first ten full of pods of queue c, which allows no reclaiming: the
    first reclaimer resolves them one by one, here only until it has resolved more than a
    twelfth of the nodes past its first ``ARGMAX_STEPS``, then the rest through the bound over
    every node, and finds the nodes of queue a's pods."""
    objs: list[Any] = [priority_class("normal", 10), queue("a", reclaimable=True), queue("b")]
    objs.append(queue("c", 10, reclaimable=False))
    for i in range(12):
        owner = "c" if i < 10 else "a"
        objs.append(node(f"n{i}", cpu="2", memory="64Gi"))
        objs.append(podgroup(f"run-{i}", queue=owner, min_member=1, phase="Running", priority_class="normal"))
        objs += [
            pod(f"run-{i}-{t}", group=f"run-{i}", cpu="1", node_name=f"n{i}", phase="Running", priority_class="normal")
            for t in range(2)
        ]
    objs.append(podgroup("pend", queue="b", min_member=2, priority_class="normal"))
    objs += [pod(f"pend-{t}", group="pend", cpu="1", priority_class="normal") for t in range(2)]
    settled: list[int] = []
    settle = ReclaimWalk._settle

    def spy(self: ReclaimWalk, entry: Any, task: TaskInfo, queue: str) -> None:
        settled.append(len(entry.unknown))
        settle(self, entry, task, queue)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ReclaimWalk, "_settle", spy)
        mp.setattr(reclaim_walk, "SETTLE_SHARE", 12)
        fast = outcome(objs)
    assert len(fast[1]) == 2 and {n for _, n in fast[1]} <= {"n10", "n11"}
    assert settled and settled[0] == 11 - reclaim_walk.ARGMAX_STEPS  # nodes 9 to 11
    assert fast == plain(objs)


def test_the_memo_keeps_a_few_keys() -> None:
    """Each task shape is a key holding a bool per node: with more shapes than it keeps, the
    least recently used go."""
    objs = full_nodes(8, 8)
    shapes = reclaim_walk.WALKS_KEPT + 4
    for j in range(shapes):  # one pending pod per shape: its memory request differs
        objs.append(podgroup(f"pend-{j}", queue="b", min_member=1, priority_class="normal"))
        objs.append(pod(f"pend-{j}-0", group=f"pend-{j}", cpu="100m", memory=f"{j + 1}Mi", priority_class="normal"))
    memos: list[ReclaimWalk] = []
    init = ReclaimWalk.__init__

    def spy(self: ReclaimWalk, *args: Any) -> None:
        init(self, *args)
        memos.append(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ReclaimWalk, "__init__", spy)
        made = outcome(objs)
    assert len(made[1]) == shapes  # every shape reclaimed, each through its own key
    assert len(memos) == 1 and len(memos[0]._walks) == reclaim_walk.WALKS_KEPT
    assert made == plain(objs)
