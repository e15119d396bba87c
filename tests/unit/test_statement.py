"""Statement: tentative allocate/pipeline/evict, exact undo on discard, decisions on commit."""

from __future__ import annotations

from typing import Any

import numpy as np

from builders import make_conf, node, open_session, pod, podgroup, queue, task
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.types import TaskStatus

S = TaskStatus
ARRAYS = ("used", "idle", "releasing", "pipelined", "future", "requested", "nonzero", "pod_count")


def scenario() -> Session:
    objs = [
        node("n1", cpu="4", memory="8Gi"),
        node("n2", cpu="4", memory="8Gi"),
        node("n3", cpu="4", memory="8Gi", extra={"nvidia.com/gpu": "2"}),
        queue("q"),
        podgroup("pg", queue="q", min_member=2),
        pod("pg-t-0", group="pg", cpu="1", memory="1Gi"),
        pod("pg-t-1", group="pg", cpu="2", memory="2Gi", extra={"nvidia.com/gpu": "1"}),
        pod("pg-t-2", group="pg"),  # BestEffort
        podgroup("run", queue="q", min_member=1, phase="Running"),
        pod("run-t-0", group="run", cpu="3", memory="1Gi", node_name="n3", phase="Running"),
    ]
    conf = make_conf("allocate", [{"name": "gang"}, {"name": "drf"}, {"name": "proportion"}, {"name": "predicates"}])
    return open_session(objs, conf)


def state(ssn: Session) -> dict[str, Any]:
    """Everything a statement may touch: node arrays and tasks, job counters, plugin shares."""
    table = ssn.nodes
    out: dict[str, Any] = {name: getattr(table, name).copy() for name in ARRAYS}
    out["node_tasks"] = {n.name: sorted(n.tasks) for n in ssn.node_list}
    for job in ssn.jobs.values():
        out[job.uid] = (
            {st: sorted(b) for st, b in job.status_index.items() if b},
            # A scalar that went up and back down stays as a 0 entry (as in Volcano's maps);
            # only the amounts must be restored.
            (job.allocated.milli_cpu, job.allocated.memory),
            {k: v for k, v in job.allocated.scalars.items() if v},
            job.pending_best_effort,
            job.ready_num(),
            job.waiting_num(),
        )
    out["tasks"] = {t.key: (t.status, t.node_name) for t in ssn.snapshot.tasks.values()}
    drf = next(p for p in ssn.plugins if p.name == "drf")
    out["drf"] = dict(drf.shares)  # type: ignore[attr-defined]
    prop = next(p for p in ssn.plugins if p.name == "proportion")
    out["proportion"] = {
        k: (a.allocated.milli_cpu, a.allocated.memory, a.share)
        for k, a in prop.attrs.items()  # type: ignore[attr-defined]
    }
    return out


def assert_same_state(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            assert np.array_equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key


def test_operations_update_accounting() -> None:
    ssn = scenario()
    n1, n2, n3 = (ssn.nodes.by_name[n] for n in ("n1", "n2", "n3"))
    t0, t1, run = task(ssn, "default/pg-t-0"), task(ssn, "default/pg-t-1"), task(ssn, "default/run-t-0")
    job = ssn.jobs["default/pg"]
    stmt = ssn.statement()

    stmt.allocate(t0, n1)
    assert (t0.status, t0.node_name) == (S.ALLOCATED, "n1")
    assert n1.idle.milli_cpu == 3000 and n1.used.milli_cpu == 1000
    assert n1.idle.scalars["pods"] == 109  # every task takes a pod slot
    assert job.ready_num() == 1 and job.allocated.milli_cpu == 1000

    stmt.pipeline(t1, "n2", eviction_occurred=False)
    assert (t1.status, t1.node_name) == (S.PIPELINED, "n2")
    assert n2.pipelined.milli_cpu == 2000
    assert n2.idle.milli_cpu == 4000  # pipelined consumes future idle only
    assert n2.future_idle().milli_cpu == 2000
    assert job.waiting_num() == 1

    stmt.evict(run, "preempted")
    assert (run.status, run.node_name) == (S.RELEASING, "n3")
    assert n3.releasing.milli_cpu == 3000
    assert n3.used.milli_cpu == 3000 and n3.idle.milli_cpu == 1000  # still held until it leaves
    assert n3.future_idle().milli_cpu == 4000  # idle + releasing − pipelined
    assert stmt.has_evictions() and len(stmt) == 3


def test_discard_restores_everything_exactly() -> None:
    ssn = scenario()
    before = state(ssn)
    n1, n2 = ssn.nodes.by_name["n1"], ssn.nodes.by_name["n2"]
    stmt = ssn.statement()
    stmt.allocate(task(ssn, "default/pg-t-0"), n1)
    stmt.allocate(task(ssn, "default/pg-t-2"), n1)
    stmt.pipeline(task(ssn, "default/pg-t-1"), "n2", eviction_occurred=True)
    stmt.evict(task(ssn, "default/run-t-0"), "reclaimed")
    assert not np.array_equal(state(ssn)["used"], before["used"])
    stmt.discard()
    assert_same_state(state(ssn), before)
    assert len(stmt) == 0
    # Discarded tasks remember where they had been placed (gang's "Schedulable" reason).
    t0 = task(ssn, "default/pg-t-0")
    assert (t0.last_status, t0.last_node) == (S.ALLOCATED, "n1")
    assert not ssn.result.binds and not ssn.result.evictions
    assert n2.pipelined.milli_cpu == 0


def test_discard_fires_the_opposite_events_in_reverse_order() -> None:
    ssn = scenario()
    events: list[str] = []
    ssn.add_event_handler(EventHandler(lambda t: events.append(f"+{t.name}"), lambda t: events.append(f"-{t.name}")))
    stmt = ssn.statement()
    stmt.allocate(task(ssn, "default/pg-t-0"), ssn.nodes.by_name["n1"])
    stmt.pipeline(task(ssn, "default/pg-t-1"), "n2", eviction_occurred=False)
    stmt.evict(task(ssn, "default/run-t-0"), "x")
    stmt.discard()
    assert events == ["+pg-t-0", "+pg-t-1", "-run-t-0", "+run-t-0", "-pg-t-1", "-pg-t-0"]


def test_commit_produces_binds_and_evictions() -> None:
    ssn = scenario()
    t0, t1, run = task(ssn, "default/pg-t-0"), task(ssn, "default/pg-t-1"), task(ssn, "default/run-t-0")
    stmt = ssn.statement()
    stmt.evict(run, "preempted by pg")
    stmt.allocate(t0, ssn.nodes.by_name["n1"])
    stmt.pipeline(t1, "n3", eviction_occurred=True)
    stmt.commit()
    assert [(t.key, n) for t, n in ssn.result.binds] == [("default/pg-t-0", "n1")]
    assert [(t.key, r) for t, r in ssn.result.evictions] == [("default/run-t-0", "preempted by pg")]
    assert t0.status == S.BINDING
    assert t1.status == S.PIPELINED  # a pipeline is not a bind
    assert len(stmt) == 0
    result = ssn.close()
    assert result.pipelined == {"default/pg-t-1": "n3"}
    # The pipelined task was placed after an eviction: it nominates its node.
    assert result.task_reasons["default/pg-t-1"].nominated_node == "n3"


def test_close_undoes_what_was_not_committed_and_keeps_commits_assumed() -> None:
    ssn = scenario()
    table = ssn.nodes
    used_before = table.used.copy()
    t0, t1 = task(ssn, "default/pg-t-0"), task(ssn, "default/pg-t-1")
    kept = ssn.statement()
    kept.allocate(t0, ssn.nodes.by_name["n1"])
    kept.commit()
    loose = ssn.statement()  # neither committed nor discarded (allocate's pipelined-only case)
    loose.allocate(t1, ssn.nodes.by_name["n3"])
    ssn.close()
    # t0 stays assumed as Binding on n1; t1 is Pending again and n3 is as before.
    assert (t0.status, t0.node_name) == (S.BINDING, "n1")
    assert (t1.status, t1.node_name) == (S.PENDING, "")
    expected = used_before.copy()
    expected[ssn.nodes.by_name["n1"].index] += t0.res_vec
    assert np.array_equal(table.used, expected)


def test_merge_moves_operations() -> None:
    ssn = scenario()
    a, b = ssn.statement(), ssn.statement()
    b.allocate(task(ssn, "default/pg-t-0"), ssn.nodes.by_name["n1"])
    b.evict(task(ssn, "default/run-t-0"), "x")
    assert not a.has_evictions()
    a.merge(b)
    assert len(a) == 2 and len(b) == 0 and a.has_evictions()
    a.discard()
    assert task(ssn, "default/pg-t-0").status == S.PENDING
    assert task(ssn, "default/run-t-0").status == S.RUNNING


def test_unpipeline_returns_task_to_pending() -> None:
    ssn = scenario()
    t1 = task(ssn, "default/pg-t-1")
    n2 = ssn.nodes.by_name["n2"]
    stmt = ssn.statement()
    stmt.pipeline(t1, "n2", eviction_occurred=False)
    stmt.unpipeline(t1)
    assert (t1.status, t1.node_name) == (S.PENDING, "")
    assert n2.pipelined.milli_cpu == 0 and n2.future_idle().milli_cpu == 4000
