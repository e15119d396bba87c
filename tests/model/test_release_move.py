"""An eviction's move (a task on a node going to Releasing there) takes one pass over the node's
rows (``NodeTable.release``) where the plain move took the task off and put it back: every row
must come out bit for bit as the two calls leave it, the node's task order and the job's
buckets too.  Tasks get fractional request vectors, so that ``x - v + v`` differs from ``x``
and a pass that skipped the round trip would show."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_close_batches import ARRAYS, contended, exact

from builders import snapshot
from lahar_scheduler.framework.jobs import TaskInfo
from lahar_scheduler.framework.nodes import NodeInfo, NodeTable
from lahar_scheduler.framework.snapshot import Snapshot
from lahar_scheduler.framework.types import TaskStatus

S = TaskStatus


def plain_release(self: NodeTable, node: NodeInfo, task: TaskInfo) -> None:
    """What ``Snapshot.move`` did before: off the node, then on it again as Releasing."""
    self.remove_task(node, task)
    old, task.status = task.status, S.RELEASING  # add_task accounts by the task's status
    self.add_task(node, task)
    task.status = old  # the move then sets it through the job


def fractional_everywhere(snap: Snapshot, seed: int) -> None:
    """Fractional vectors for every task, its node rows rebuilt from them (so that what is
    taken off is what was put on)."""
    rng = random.Random(seed)
    table = snap.nodes
    placed = [(table.by_name[t.node_name], t) for t in snap.tasks.values() if t.node_name in table.by_name]
    for node, t in placed:
        table.remove_task(node, t)
    for t in sorted(snap.tasks.values(), key=lambda t: t.key):
        width = len(t.res_vec)
        t.res_vec = np.array([rng.random() * 3 for _ in range(width)])
        t.init_vec = t.res_vec + np.array([rng.random() for _ in range(width)])
        t.nonzero_vec = np.array([rng.random() * 5, rng.random() * 7])
        t.unscored = rng.random() < 0.2
    for node, t in placed:
        table.add_task(node, t)


def twins(objs: list[Any], seed: int) -> tuple[Snapshot, Snapshot]:
    """Two equal snapshots of ``objs`` with the same fractional vectors."""
    made = []
    for _ in range(2):
        snap = snapshot(objs)
        fractional_everywhere(snap, seed)
        made.append(snap)
    return made[0], made[1]


def state(snap: Snapshot) -> tuple[Any, ...]:
    table = snap.nodes
    return (
        [getattr(table, name).tobytes() for name in ARRAYS if name != "row_version"],
        sorted(set(table.changes)),
        [list(n.tasks) for n in table.infos],
        [(uid, [(s, list(b)) for s, b in j.status_index.items()], exact(j.allocated)) for uid, j in snap.jobs.items()],
        [(k, t.status, t.node_name, t.unscored) for k, t in snap.tasks.items()],
    )


@settings(max_examples=80, deadline=None)
@given(contended(), st.integers(0, 2**16))
def test_an_eviction_move_leaves_the_rows_as_off_and_on_again(objs: list[Any], seed: int) -> None:
    fast, slow = twins(objs, seed)
    rng = random.Random(seed)
    running = [k for k in sorted(fast.tasks) if fast.tasks[k].node_name and fast.tasks[k].status == S.RUNNING]
    picked = rng.sample(running, rng.randint(0, len(running)))
    before = len(fast.nodes.changes)
    for k in picked:
        fast.move(fast.tasks[k], S.RELEASING, fast.tasks[k].node_name)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(NodeTable, "release", plain_release)
        for k in picked:
            slow.move(slow.tasks[k], S.RELEASING, slow.tasks[k].node_name)
    assert state(fast) == state(slow)
    # Each evicted task's node is listed as changed, for every cache that reads the changes.
    assert set(fast.nodes.changes[before:]) == {fast.nodes.by_name[fast.tasks[k].node_name].index for k in picked}


@settings(max_examples=80, deadline=None)
@given(contended(), st.integers(0, 2**16))
def test_an_eviction_is_the_move_then_out_of_the_scorers_view(objs: list[Any], seed: int) -> None:
    """``Snapshot.release`` (what a statement's evict does) against the plain move to Releasing
    followed by ``set_scored(task, False)``, tasks already out of the view included."""
    fast, slow = twins(objs, seed)
    rng = random.Random(seed)
    placed = [k for k in sorted(fast.tasks) if fast.tasks[k].node_name]
    picked = rng.sample(placed, rng.randint(0, len(placed)))
    for k in picked:
        fast.release(fast.tasks[k])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(NodeTable, "release", plain_release)
        for k in picked:
            t = slow.tasks[k]
            slow.move(t, S.RELEASING, t.node_name)
            slow.nodes.set_scored(t, False)
    assert state(fast) == state(slow)
    assert all(fast.tasks[k].unscored and fast.tasks[k].status == S.RELEASING for k in picked)
