"""Precomputed order keys (framework/pq.py) pop exactly what the comparators pop.

Random jobs (priority classes, creation stamps that are equal as times but not as strings, running
tasks so drf shares and gang readiness differ) and random tasks (pod priorities, names with and
without an index): a queue ordered by ``Session.job_sort_key`` / ``task_sort_key`` must give the
same sequence as one calling the session's comparator, through pushes and pops interleaved.
The node window without a sort is checked against the sorting version it replaced.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import make_conf, node, open_session, pod, podgroup, priority_class, queue
from lahar_scheduler.core import load_conf
from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
from lahar_scheduler.framework.nodewindow import nodes_to_find, window_positions
from lahar_scheduler.framework.pq import PriorityQueue
from lahar_scheduler.framework.session import Session, _by_creation, compare_task

STAMPS = ["", "2024-01-01T00:00:00Z", "2024-01-01T01:00:00+01:00", "2024-01-01T00:00:01Z", "2023-12-31T23:00:00Z"]


def _reference_job_less(ssn: Session) -> Any:
    """The default tiers' job order written out as the comparators were before the keys:
    priority (higher first), gang (unready first), drf (smaller share first), then creation."""
    drf: Any = next(p for p in ssn.plugins if p.name == "drf")

    def cmp(left: JobInfo, right: JobInfo) -> int:
        if left.priority != right.priority:
            return -1 if left.priority > right.priority else 1
        lr, rr = left.is_ready(), right.is_ready()
        if lr != rr:
            return 1 if lr else -1
        ls, rs = drf.attrs[left.uid].share, drf.attrs[right.uid].share
        if ls != rs:
            return -1 if ls < rs else 1
        return _by_creation(left.creation, left.uid, right.creation, right.uid)

    return lambda left, right: cmp(left, right) < 0


def _reference_task_less(left: TaskInfo, right: TaskInfo) -> bool:
    if left.priority != right.priority:
        return left.priority > right.priority
    return compare_task(left, right) < 0


def _drain(q: PriorityQueue[Any], pushes: list[Any], rng: random.Random) -> list[str]:
    """Push the items one by one, popping now and then; then pop the rest."""
    out: list[str] = []
    for item in pushes:
        q.push(item)
        if rng.random() < 0.3:
            out.append(q.pop().uid)
    while not q.empty():
        out.append(q.pop().uid)
    return out


def _objects(seed: int, jobs: int) -> list[Any]:
    rng = random.Random(seed)
    objs: list[Any] = [queue("q"), priority_class("low", 10), priority_class("high", 100)]
    objs += [node(f"n{i}", cpu="16", memory="64Gi") for i in range(4)]
    for j in range(jobs):
        name = f"job{j}"
        size = rng.randint(1, 4)
        objs.append(
            podgroup(
                name,
                queue="q",
                min_member=rng.randint(1, size),
                priority_class=rng.choice(["", "low", "high"]),
                creation=rng.choice(STAMPS) or None,
            )
        )
        running = rng.randint(0, size)
        for t in range(size):
            # Names with an index (``x-y-3``) and some without (``x-y``).
            tname = f"{name}-w-{t}" if rng.random() < 0.8 else f"{name}-w{t}"
            placed = t < running
            objs.append(
                pod(
                    tname,
                    group=name,
                    cpu=str(rng.choice([1, 2])),
                    memory="1Gi",
                    priority=rng.choice([None, 1, 5]),
                    node_name=f"n{rng.randrange(4)}" if placed else "",
                    phase="Running" if placed else "Pending",
                )
            )
    return objs


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 25))
def test_job_keys_pop_what_the_comparator_pops(seed: int, jobs: int) -> None:
    ssn = open_session(_objects(seed, jobs), load_conf(None))
    key = ssn.job_sort_key()
    assert key is not None  # priority, gang and drf all order by key
    order = list(ssn.jobs.values())
    random.Random(seed).shuffle(order)
    plain = _drain(PriorityQueue(ssn.job_order), order, random.Random(seed))
    keyed = _drain(PriorityQueue(ssn.job_order, key=key), order, random.Random(seed))
    reference = _drain(PriorityQueue(_reference_job_less(ssn)), order, random.Random(seed))
    assert keyed == plain == reference


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 25))
def test_task_keys_pop_what_the_comparator_pops(seed: int, jobs: int) -> None:
    ssn = open_session(_objects(seed, jobs), load_conf(None))
    for job in ssn.jobs.values():
        tasks = list(job.tasks.values())
        key = ssn.task_sort_key(tasks)
        if any(t.index is None for t in tasks):
            assert key is None  # the default order is not a key without indices
            continue
        assert key is not None
        plain = PriorityQueue(ssn.task_order, tasks)
        keyed = PriorityQueue(ssn.task_order, tasks, key=key)
        reference = PriorityQueue(_reference_task_less, tasks)
        got = [keyed.pop().uid for _ in tasks]
        assert got == [plain.pop().uid for _ in tasks] == [reference.pop().uid for _ in tasks]


def test_a_comparator_without_a_key_falls_back() -> None:
    # sla orders jobs by a comparator of its own: no key, queues call the comparators.
    conf = make_conf("allocate", [{"name": "priority"}, {"name": "gang"}, {"name": "sla"}], [{"name": "drf"}])
    ssn = open_session(_objects(1, 3), conf)
    assert ssn.job_sort_key() is None


def test_an_unparsable_stamp_falls_back() -> None:
    objs = [queue("q"), podgroup("a", queue="q", creation="not a time"), pod("a-w-0", group="a", cpu="1")]
    ssn = open_session(objs, load_conf(None))
    assert ssn.job_sort_key() is None


def _window_sorting(feasible: np.ndarray, start: int) -> tuple[np.ndarray, int]:
    """The window as it was computed before (flat positions, then a sort)."""
    total = len(feasible)
    if total == 0:
        return np.zeros(0, dtype=np.intp), 0
    start %= total
    wanted = nodes_to_find(total)
    ahead = np.flatnonzero(feasible[start:])[: wanted + 1] + start
    if len(ahead) <= wanted:
        ahead = np.concatenate((ahead, np.flatnonzero(feasible[:start])[: wanted + 1 - len(ahead)]))
    if len(ahead) <= wanted:
        return np.sort(ahead), start
    examined = (int(ahead[wanted]) - start) % total + 1
    return np.sort(ahead[:wanted]), (start + examined) % total


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 3000), st.floats(0.0, 1.0), st.integers(0, 4000), st.integers(0, 2**32 - 1))
def test_the_window_without_a_sort_is_the_sorted_window(total: int, density: float, start: int, seed: int) -> None:
    feasible = np.random.default_rng(seed).random(total) < density
    kept, nxt = window_positions(feasible, start)
    want, want_next = _window_sorting(feasible, start)
    assert kept.tolist() == want.tolist() and nxt == want_next
    # Verdict codes (0 infeasible, 1 or 2 feasible) walk as their mask does.
    codes = np.where(feasible, np.random.default_rng(seed + 1).integers(1, 3, total), 0).astype(np.int8)
    kept, nxt = window_positions(codes, start)
    assert kept.tolist() == want.tolist() and nxt == want_next
