"""Preempt's walk memo (actions/preempt_walk.py) walks exactly the nodes, in exactly the order,
that the plain path computes afresh for each preemptor: the same evictions, pipelined tasks and
binds on random clusters of low-priority running jobs and starving high-priority gangs, with
the victim ceiling and the queue's eviction need in play."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import make_conf, node, pod, podgroup, priority_class, queue, snapshot
from lahar_scheduler.actions import preempt_walk
from lahar_scheduler.actions.preempt_walk import WalkMemo
from lahar_scheduler.core import run_session

PREEMPT = make_conf(
    "enqueue, allocate, preempt",
    [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}],
    [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}],
)
QUEUES = ("a", "b")
CLASSES = ("low", "mid", "high")


@st.composite
def contended(draw: st.DrawFn) -> list[Any]:
    objs: list[Any] = [priority_class("low", 10), priority_class("mid", 50), priority_class("high", 100)]
    objs += [queue(q, draw(st.integers(1, 3))) for q in QUEUES]
    nodes = draw(st.integers(2, 6))
    for n in range(nodes):
        cpu = draw(st.sampled_from([4, 8]))
        objs.append(node(f"n{n}", cpu=str(cpu), memory="64Gi"))
        # Most nodes full: a running job per node, some of whose tasks run elsewhere.
        size = draw(st.integers(1, cpu))
        cls = draw(st.sampled_from(CLASSES[:2]))
        group = f"run-{n}"
        objs.append(
            podgroup(
                group,
                queue=draw(st.sampled_from(QUEUES)),
                min_member=draw(st.integers(1, size)),
                phase="Running",
                priority_class=cls,
            )
        )
        for t in range(size):
            where = n if draw(st.integers(0, 3)) else draw(st.integers(0, nodes - 1))
            objs.append(
                pod(f"{group}-{t}", group=group, cpu="1", node_name=f"n{where}", phase="Running", priority_class=cls)
            )
    for j in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 5))
        cls = draw(st.sampled_from(CLASSES[1:]))
        group = f"pend-{j}"
        objs.append(
            podgroup(
                group, queue=draw(st.sampled_from(QUEUES)), min_member=draw(st.integers(1, size)), priority_class=cls
            )
        )
        cpu = str(draw(st.sampled_from([1, 2, 4])))
        objs += [pod(f"{group}-{t}", group=group, cpu=cpu, priority_class=cls) for t in range(size)]
    return objs


def outcome(objs: list[Any]) -> tuple[Any, ...]:
    result = run_session(snapshot(objs), PREEMPT)
    return (
        sorted((t.key, r) for t, r in result.evictions),
        sorted(result.pipelined.items()),
        sorted((t.key, n) for t, n in result.binds),
        sorted((k, v.reason, v.message) for k, v in result.task_reasons.items()),
    )


def plain(objs: list[Any]) -> tuple[Any, ...]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(WalkMemo, "applies", staticmethod(lambda ssn, task: False))
        return outcome(objs)


@settings(max_examples=250, deadline=None, derandomize=True)
@given(contended())
def test_preempt_decides_the_same_without_its_walk_memo(objs: list[Any]) -> None:
    assert outcome(objs) == plain(objs)


def full_nodes(n: int) -> list[Any]:
    """Queue a, and ``n`` nodes of ``n`` cpu, each full with one running job of 1-cpu
    low-priority pods (minMember 1, so all but one may go)."""
    objs: list[Any] = [priority_class("low", 10), priority_class("high", 100), queue("a")]
    for i in range(n):
        objs.append(node(f"n{i}", cpu=str(n), memory="64Gi"))
        objs.append(podgroup(f"run-{i}", queue="a", min_member=1, phase="Running", priority_class="low"))
        objs += [
            pod(f"run-{i}-{t}", group=f"run-{i}", cpu="1", node_name=f"n{i}", phase="Running", priority_class="low")
            for t in range(n)
        ]
    return objs


def test_the_memo_is_refreshed_and_walked_past_its_best_node() -> None:
    """Four nodes of low-priority pods, one starving gang of high-priority pods: the memo is made
    once, refreshed on the rows each preemptor changed, and a node whose victims run out is
    walked past (the rest of the walk comes from the memo too)."""
    objs = full_nodes(4)
    objs.append(podgroup("pend", queue="a", min_member=8, priority_class="high"))
    objs += [pod(f"pend-{t}", group="pend", cpu="1", priority_class="high") for t in range(8)]
    calls: Counter[str] = Counter()
    full, refresh, walk = WalkMemo._full, WalkMemo._refresh, preempt_walk._walk

    def spy_walk(masked: Any, best: int) -> Any:
        for i, node_index in enumerate(walk(masked, best)):
            calls["past the best node" if i else "best node"] += 1
            yield node_index

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(WalkMemo, "_full", lambda self, *a: calls.update(["full"]) or full(self, *a))
        mp.setattr(WalkMemo, "_refresh", lambda self, *a: calls.update(["refresh"]) or refresh(self, *a))
        mp.setattr(preempt_walk, "_walk", spy_walk)
        fast = outcome(objs)
    assert len(fast[0]) == 8 and len(fast[1]) == 8  # every pending task preempted a low one
    assert calls["refresh"] >= 6 and calls["best node"] == 8
    assert calls["full"] < calls["refresh"]
    assert fast == plain(objs)


def test_the_random_clusters_preempt() -> None:
    """The property above is not vacuous: its clusters make evictions."""
    evicting = 0

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(contended())
    def count(objs: list[Any]) -> None:
        nonlocal evicting
        evicting += bool(outcome(objs)[0])

    count()
    assert evicting >= 5  # derandomized: the same 60 clusters each run


def test_the_memo_keeps_a_few_keys() -> None:
    """Each task shape (and each queue need) is a key holding a float per node: with more shapes
    than it keeps, the least recently used go."""
    objs = full_nodes(8)
    shapes = preempt_walk.WALKS_KEPT + 4
    for j in range(shapes):  # one pending pod per shape: its memory request differs
        objs.append(podgroup(f"pend-{j}", queue="a", min_member=1, priority_class="high"))
        objs.append(pod(f"pend-{j}-0", group=f"pend-{j}", cpu="1", memory=f"{j + 1}Mi", priority_class="high"))
    memos: list[WalkMemo] = []
    init = WalkMemo.__init__

    def spy(self: WalkMemo, *args: Any) -> None:
        init(self, *args)
        memos.append(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(WalkMemo, "__init__", spy)
        made = outcome(objs)
    assert len(made[0]) == shapes  # every shape preempted, each through its own key
    assert len(memos) == 1 and len(memos[0]._walks) == preempt_walk.WALKS_KEPT


def test_a_node_the_ceiling_rules_out_is_vetoed_until_its_jobs_change() -> None:
    """Four nodes of four 1-cpu low pods (three may go from each), a gang of twelve: once a node
    is down to its last pod, the next preemptor walks it, finds too little, and the ceiling
    vetoes it, so no later preemptor walks it again (without the veto each would)."""
    objs = full_nodes(4)
    objs.append(podgroup("pend", queue="a", min_member=12, priority_class="high"))
    objs += [pod(f"pend-{t}", group="pend", cpu="1", priority_class="high") for t in range(12)]
    uncovered: Counter[int] = Counter()
    vetoed: Counter[int] = Counter()
    seen = preempt_walk.Walk.uncovered

    def spy(self: preempt_walk.Walk, i: int) -> None:
        uncovered[i] += 1
        seen(self, i)
        vetoed[i] += i in self.entry.vetoed

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(preempt_walk.Walk, "uncovered", spy)
        fast = outcome(objs)
    assert len(fast[0]) == 12 and len(fast[1]) == 12
    assert uncovered == vetoed  # every node walked in vain was vetoed, then never walked again
    assert set(uncovered) == {0, 1, 2} and max(uncovered.values()) == 1
    assert fast == plain(objs)


def test_a_veto_lifts_when_a_job_on_its_node_changes_elsewhere() -> None:
    """Gang's test reads job r's ready count: with r's task on n0 evicted, r is at minMember and
    the ceiling vetoes n1 (r's other tasks); discarding the eviction changes r, not n1, and the
    next walk offers n1 again."""
    from test_preempt_ceiling import gang_above_min_member

    from builders import open_session, task
    from lahar_scheduler.actions.evictutil import UnresolvableCache, VictimBound, preemptable_in_queue
    from lahar_scheduler.framework import points as P
    from lahar_scheduler.framework.ceiling import VictimCeiling
    from lahar_scheduler.framework.types import PREEMPTABLE_STATUSES

    objs = gang_above_min_member(n0_cpu="2")
    ssn = open_session(objs, make_conf("preempt", [{"name": "priority"}, {"name": "gang"}]))
    counts = preemptable_in_queue(ssn)
    ceiling = VictimCeiling(ssn, P.PREEMPTABLE, counts, PREEMPTABLE_STATUSES)
    memo = WalkMemo(ssn, VictimBound(ssn, counts), ceiling, UnresolvableCache(ssn))
    preemptor, n1 = task(ssn, "default/p-0"), ssn.nodes.by_name["n1"].index

    def walked() -> list[int]:
        walk = memo.order(preemptor, "a", None, ceiling=True)
        return [] if walk is None else list(walk)

    assert n1 in walked()
    stmt = ssn.statement()
    stmt.evict(task(ssn, "default/r-0"), "preempt")
    walk = memo.order(preemptor, "a", None, ceiling=True)
    assert walk is not None
    walk.uncovered(n1)  # what the walk reports when n1's victims fall short
    assert n1 not in walked()  # vetoed: r is at minMember, gang names nothing of it
    stmt.discard()
    assert n1 in walked()


@settings(max_examples=120, deadline=None, derandomize=True)
@given(contended())
def test_the_ceiling_key_alone_is_the_key_the_tests_come_with(objs: list[Any]) -> None:
    """The memo keys a walk by the plugins' ``victim_ceiling_key``s and makes the tests only
    when a node falls short: each key must be the one ``victim_ceiling`` gives with its test."""
    from lahar_scheduler.framework.ceiling import VictimCeiling

    key = VictimCeiling.key

    def compare(self: VictimCeiling, preemptor: Any, queue: str) -> Any:
        got = key(self, preemptor, queue)
        keyed = self.keyed_tests(preemptor, queue)
        assert self._keys is not None  # every plugin of the conf gives its key alone
        assert got == (None if keyed is None else keyed[0])
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(VictimCeiling, "key", compare)
        outcome(objs)
