"""A session's open and close take batches where the plain code went task by task or job by job
(NodeTable.remove_tasks and rescore, Snapshot.move_off, drf's and proportion's one-run sums):
on random contended clusters the snapshot is left, and the result reported, exactly as the
plain loops leave and report them, float bits included.

Requests are whole milli-units and bytes, so any summation order gives the same floats; these
tests give every task a fractional request vector of its own, so that a row summed in another
order than the loop's would differ in its last bits."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import make_conf, node, pod, podgroup, priority_class, queue, snapshot
from lahar.api.resource import Resource, exceeded_part
from lahar_scheduler.core import run_session
from lahar_scheduler.framework.jobs import TaskInfo
from lahar_scheduler.framework.nodes import NodeTable
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.snapshot import Snapshot
from lahar_scheduler.framework.sums import RunSums
from lahar_scheduler.framework.types import ALLOCATED_STATUSES, TaskStatus
from lahar_scheduler.plugins import PLUGINS
from lahar_scheduler.plugins.proportion import _add_positive, _usage
from lahar_scheduler.plugins.queueshare import job_usage

S = TaskStatus
T1 = [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]
T2 = [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}]
CONFS = {
    "preempt": make_conf("enqueue, allocate, preempt", T1, T2),
    "reclaim": make_conf("enqueue, allocate, reclaim", T1, T2),
}
ARRAYS = ("used", "idle", "releasing", "pipelined", "future", "requested", "nonzero", "pod_count", "row_version")


@st.composite
def contended(draw: st.DrawFn) -> list[Any]:
    """Full nodes of low-priority running jobs in two queues, pending gangs above them."""
    objs: list[Any] = [queue("a", draw(st.integers(1, 4))), queue("b", draw(st.integers(1, 4)))]
    objs += [priority_class("low", 10), priority_class("high", 100)]
    nodes = draw(st.integers(1, 6))
    for n in range(nodes):
        objs.append(node(f"n{n}", cpu=str(draw(st.sampled_from([4, 8]))), memory="64Gi"))
    for j in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 5))
        objs.append(
            podgroup(f"r{j}", queue=draw(st.sampled_from("ab")), min_member=draw(st.integers(1, size)), phase="Running")
        )
        cpu = str(draw(st.sampled_from([1, 2])))
        for t in range(size):
            at = f"n{draw(st.integers(0, nodes - 1))}"
            objs.append(pod(f"r{j}-{t}", group=f"r{j}", cpu=cpu, node_name=at, phase="Running", priority_class="low"))
    for j in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 4))
        q = draw(st.sampled_from("ab"))
        objs.append(podgroup(f"p{j}", queue=q, min_member=draw(st.integers(1, size)), priority_class="high"))
        cpu = str(draw(st.sampled_from([1, 2, 4])))
        for t in range(size):
            objs.append(pod(f"p{j}-{t}", group=f"p{j}", cpu=cpu, priority_class="high"))
    return objs


def fractional(snap: Snapshot, seed: int) -> None:
    """Every task a fractional request (one of a few, so runs of one request object span jobs),
    and every pending task its own request vectors with fractional amounts (the node rows of the
    tasks already placed stay as built: the tests never take those tasks back off)."""
    rng = random.Random(seed)
    # A few requests shared by several tasks (runs of one request object, across jobs too).
    requests = [Resource(rng.random() * 3000, rng.random() * 2**30, {"pods": 1.0}) for _ in range(3)]
    for t in sorted(snap.tasks.values(), key=lambda t: t.key):
        t.resreq = rng.choice(requests)
        if t.node_name:
            continue
        width = len(t.res_vec)
        t.res_vec = np.array([rng.random() * 3 for _ in range(width)])
        t.init_vec = t.res_vec + np.array([rng.random() for _ in range(width)])
        t.nonzero_vec = np.array([rng.random() * 5, rng.random() * 7])


def exact(r: Resource) -> tuple[str, ...]:
    """Every amount's bits (``repr`` of a Resource rounds), scalars in their order."""
    return (r.milli_cpu.hex(), r.memory.hex(), *(f"{k}={v.hex()}" for k, v in r.scalars.items()))


def state(snap: Snapshot) -> tuple[Any, ...]:
    table = snap.nodes
    return (
        [getattr(table, name).tobytes() for name in ARRAYS],
        table.generation,
        list(table.changes),
        [list(n.tasks) for n in table.infos],
        [
            (uid, [(s, list(b)) for s, b in j.status_index.items()], j.pending_best_effort, exact(j.allocated))
            for uid, j in snap.jobs.items()
        ],
        [(k, t.status, t.node_name, t.unscored) for k, t in snap.tasks.items()],
    )


def as_run_and_plain(
    objs: list[Any], kind: str, seed: int, plain: list[tuple[Any, str, Any]]
) -> tuple[Snapshot, Any, Snapshot, Any]:
    """The session of ``kind`` on ``objs`` (fractional vectors from ``seed``) as it runs, then
    on a twin snapshot with ``plain``'s (owner, name, plain function) patched in: both
    snapshots and both results."""
    fast = snapshot(objs)
    fractional(fast, seed)
    got = run_session(fast, CONFS[kind])
    slow = snapshot(objs)
    fractional(slow, seed)
    with pytest.MonkeyPatch.context() as mp:
        for owner, name, fn in plain:
            mp.setattr(owner, name, fn)
        want = run_session(slow, CONFS[kind])
    return fast, got, slow, want


def plain_rollback(self: Session) -> None:
    """The close's undo as a loop of moves (what Session._rollback_uncommitted batches)."""
    for key, (task, status, at) in reversed(list(self._touched.items())):
        if key in self._committed:
            continue
        if task.status != status or task.node_name != at:
            self.move(task, status, at)
    self._touched.clear()


def plain_queue_status(self: Session) -> None:
    """Each queue's held tasks added one by one, job by job (what _update_queue_status sums)."""
    allocated = {name: Resource() for name in self.queues}
    for job in self.jobs.values():
        for status in ALLOCATED_STATUSES:
            for t in job.tasks_in(status):
                allocated[job.queue].add(t.resreq)
    self.result.queues = allocated


def plain_rescore(self: NodeTable, tasks: list[TaskInfo]) -> None:
    for task in tasks:
        self.set_scored(task, True)


@settings(max_examples=80, deadline=None)
@given(contended(), st.sampled_from(sorted(CONFS)), st.integers(0, 2**16))
def test_close_leaves_the_snapshot_as_the_plain_loops_do(objs: list[Any], kind: str, seed: int) -> None:
    plain = [
        (Session, "_rollback_uncommitted", plain_rollback),
        (NodeTable, "rescore", plain_rescore),
        (Session, "_update_queue_status", plain_queue_status),
    ]
    fast, got, slow, want = as_run_and_plain(objs, kind, seed, plain)
    assert state(fast) == state(slow)
    assert repr((got.podgroups, got.task_reasons, got.pipelined)) == repr(
        (want.podgroups, want.task_reasons, want.pipelined)
    )
    assert {q: exact(r) for q, r in got.queues.items()} == {q: exact(r) for q, r in want.queues.items()}


@settings(max_examples=80, deadline=None)
@given(contended(), st.integers(0, 2**16))
def test_moves_off_their_nodes_in_a_batch_are_the_moves_one_by_one(objs: list[Any], seed: int) -> None:
    """Pipelined, allocated and running tasks (and tasks already off a node) sent back to
    Pending in one batch, against the same moves one at a time."""
    snaps = []
    for _ in range(2):
        snap = snapshot(objs)
        fractional(snap, seed)
        rng = random.Random(seed)
        nodes = [n.name for n in snap.nodes.infos]
        for t in sorted(snap.tasks.values(), key=lambda t: t.key):
            if not t.node_name:  # place pending tasks the way a session would
                status = rng.choice([S.PIPELINED, S.ALLOCATED, S.PENDING])
                snap.move(t, status, rng.choice(nodes) if status != S.PENDING else "")
            if rng.random() < 0.3:
                snap.nodes.set_scored(t, False)
        snaps.append(snap)
    fast, slow = snaps
    rng = random.Random(seed + 1)
    keys = sorted(fast.tasks)
    rng.shuffle(keys)
    picked = keys[: rng.randint(0, len(keys))]
    fast.move_off([(fast.tasks[k], S.PENDING) for k in picked])
    for k in picked:
        slow.move(slow.tasks[k], S.PENDING, "")
    assert state(fast) == state(slow)


@settings(max_examples=60, deadline=None)
@given(contended(), st.integers(0, 2**16))
def test_rescore_is_set_scored_one_by_one(objs: list[Any], seed: int) -> None:
    snaps = [snapshot(objs) for _ in range(2)]
    rng = random.Random(seed)
    keys = sorted(snaps[0].tasks)
    out = [k for k in keys if rng.random() < 0.6]
    back = [k for k in keys if rng.random() < 0.7]
    rng.shuffle(back)
    for snap in snaps:
        fractional(snap, seed)
        for t in snap.tasks.values():
            if not t.node_name:
                snap.move(t, S.PIPELINED, snap.nodes.infos[0].name)
        for k in out:
            snap.nodes.set_scored(snap.tasks[k], False)
    fast, slow = snaps
    fast.nodes.rescore([fast.tasks[k] for k in back])
    for k in back:
        slow.nodes.set_scored(slow.tasks[k], True)
    assert state(fast) == state(slow)


def test_the_batches_change_nothing_when_given_nothing() -> None:
    snap = snapshot([node("n0"), queue("a"), podgroup("g", queue="a"), pod("g-0", group="g", cpu="1")])
    before = state(snap)
    snap.move_off([])
    snap.nodes.remove_tasks([])
    snap.nodes.rescore([])
    assert state(snap) == before


@settings(max_examples=80, deadline=None)
@given(contended(), st.integers(0, 2**16))
def test_open_sums_are_the_plain_sums(objs: list[Any], seed: int) -> None:
    """proportion's per-job usage and elastic part, and drf's held sum, from the one-run memo,
    against the plain per-task sums, on jobs moved into mixed statuses."""
    snap = snapshot(objs)
    fractional(snap, seed)
    rng = random.Random(seed)
    for t in sorted(snap.tasks.values(), key=lambda t: t.key):
        if rng.random() < 0.3:
            status = rng.choice([S.PIPELINED, S.ALLOCATED, S.BINDING, S.RELEASING])
            snap.move(t, status, t.node_name or snap.nodes.infos[0].name)
    sums = RunSums()
    for job in snap.jobs.values():
        got, want = _usage(sums, job), job_usage(job)
        assert [exact(r) for r in got] == [exact(r) for r in want]
        one = sums.one_run(job.status_index, tuple(ALLOCATED_STATUSES))
        assert one is None or exact(one) == exact(job_usage(job)[0])
    ssn = Session(snap, CONFS["preempt"], dict(PLUGINS)).open()
    drf: Any = next(p for p in ssn.plugins if p.name == "drf")
    for job in ssn.jobs.values():
        held = Resource()
        for status in ALLOCATED_STATUSES:
            for t in job.tasks_in(status):
                held.add(t.resreq)
        attr = drf.attrs[job.uid]
        assert exact(attr.allocated) == exact(held) and attr.share == drf.dominant(held)
        assert attr.allocated is not drf.attrs[next(iter(ssn.jobs))].allocated or job is next(iter(ssn.jobs.values()))


@pytest.mark.parametrize(
    "held",
    [
        Resource(1500.0, 2.5, {"pods": 3.0, "nvidia.com/gpu": 0.0}),
        Resource(0.0, -1.0, {"pods": -2.0}),
        Resource(-0.0, 0.25),
        Resource(),
    ],
)
def test_the_positive_part_added_is_the_exceeded_part_added(held: Resource) -> None:
    for start in (Resource(), Resource(-0.0, 3.0, {"pods": 1.0, "x": 2.0})):
        fast, slow = start.clone(), start.clone()
        _add_positive(fast, held)
        slow.add(exceeded_part(held, Resource()))
        assert exact(fast) == exact(slow)
