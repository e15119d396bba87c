"""The topology-aware preempt path's shortcuts against their plain forms: victim rows kept as
Python lists against the victims they name, packed rows against the lists, stale marks one by
one against an index array, the chosen victims against their mask, and ``preempt_nodes``
without re-indexing against the indexing."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_preempt_topology_fast import BENCH_TIERS, NO_QUEUE, ONE_TIER, contended, topology_conf

from lahar_scheduler.actions import ACTIONS, evictutil, preempt_topology_fast
from lahar_scheduler.actions.preempt_filters import OtherJobs, SameJob
from lahar_scheduler.actions.preempt_topology_cache import Row, View, _stale, rows_for, start_time
from lahar_scheduler.bench_preempt import TOPOLOGY_CONF, cluster
from lahar_scheduler.core import load_conf
from lahar_scheduler.framework.conf import SchedulerConf
from lahar_scheduler.framework.session import Session
from lahar_scheduler.plugins import PLUGINS
from lahar_scheduler.simulation import Cluster


def _run_actions(ssn: Session, conf: SchedulerConf) -> None:
    for name in conf.actions:
        ACTIONS[name](conf.action_arguments(name)).execute(ssn)


def _rows_match_their_victims(ssn: Session) -> int:
    """Every current row that is not odd holds exactly its victims' values, read afresh; the
    number of rows checked."""
    checked = 0
    for view in rows_for(ssn)._views.values():
        # The scan head's one test stands for the two it replaced, on every current row.
        valid = view.valid
        assert (view.usable[valid] == ((view.count > 0) & ~view.odd)[valid]).all()
        for i in np.flatnonzero(view.valid & ~view.odd).tolist():
            victims = view.victims[i]
            row = view.data[i]
            assert row.res == [t.res_vec.tolist() for t in victims]
            assert row.queue == [[float(t.resreq.milli_cpu), float(t.resreq.memory)] for t in victims]
            assert row.prio == [t.pod.spec.priority or 0 for t in victims]
            assert row.start == [start_time(t, ssn.now) for t in victims]
            assert view.count[i] == len(victims)
            checked += 1
    return checked


def test_bench_rows_after_a_session_hold_their_victims_values() -> None:
    """The bench's rows are refreshed after each eviction on their node: each current one
    holds what its victims say."""
    conf = load_conf(TOPOLOGY_CONF)
    ssn = Session(cluster(60, 60), conf, dict(PLUGINS)).open()
    _run_actions(ssn, conf)
    assert _rows_match_their_victims(ssn) >= 50
    assert any((view.filled >= 2).any() for view in rows_for(ssn)._views.values())  # some were refreshed
    assert len(ssn.result.evictions) == 60
    ssn.close()


@settings(max_examples=60, deadline=None)
@given(contended(), st.sampled_from([BENCH_TIERS, ONE_TIER, NO_QUEUE]))
def test_rows_hold_their_victims_values(objs: list[Any], tiers: list[list[str]]) -> None:
    conf = topology_conf(tiers, 100, False)
    ssn = Session(Cluster(objs).snapshot(), conf, dict(PLUGINS)).open()
    _run_actions(ssn, conf)
    _rows_match_their_victims(ssn)
    ssn.close()


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_packed_rows_are_the_rows_padded_with_zeros(data: Any) -> None:
    nodes, width = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 4))
    view = View(0, nodes, width, 0, 0)
    floats = st.floats(-1e6, 1e6, allow_nan=False)
    for i in range(nodes):
        m = data.draw(st.integers(0, 5))
        view.data[i] = Row(
            [data.draw(st.lists(floats, min_size=width, max_size=width)) for _ in range(m)],
            [data.draw(st.lists(floats, min_size=2, max_size=2)) for _ in range(m)],
            data.draw(st.lists(st.integers(-(2**31) + 1, 2**31 - 1), min_size=m, max_size=m)),
            data.draw(st.lists(floats, min_size=m, max_size=m)),
        )
    rows = np.array(data.draw(st.lists(st.integers(0, nodes - 1), min_size=1, max_size=8)), dtype=np.intp)
    depth = max(len(view.data[i].prio) for i in rows.tolist()) + data.draw(st.integers(0, 2))
    res, queue_vec, prio, start = view.pack(rows, depth)
    for j, i in enumerate(rows.tolist()):
        row = view.data[i]
        m = len(row.prio)
        assert res[j, :m].tolist() == row.res and not res[j, m:].any()
        assert queue_vec[j, :m].tolist() == row.queue and not queue_vec[j, m:].any()
        assert prio[j, :m].tolist() == row.prio and not prio[j, m:].any()
        assert start[j, :m].tolist() == row.start and not start[j, m:].any()


@given(st.lists(st.integers(0, 19), max_size=30), st.lists(st.booleans(), min_size=20, max_size=20))
def test_stale_marks_one_by_one_as_an_index_array(rows: list[int], valid: list[bool]) -> None:
    one_by_one = np.array(valid)
    _stale(one_by_one, set(rows))
    together = np.array(valid)
    together[np.array(rows, dtype=np.intp)] = False
    assert one_by_one.tolist() == together.tolist()


class _Verdicts:
    def __init__(self, unresolvable: np.ndarray) -> None:
        self.unresolvable = unresolvable

    def get(self, _: Any) -> np.ndarray:
        return self.unresolvable


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=40), st.lists(st.integers(0, 39), max_size=5))
def test_preempt_nodes_is_the_nodes_less_the_unresolvable(unresolvable: list[bool], failed: list[int]) -> None:
    """With local predicates: every node minus those allocate found unresolvable, minus those
    the cached verdicts say are; an all-resolvable cluster keeps them all."""
    n = len(unresolvable)
    by_name = {f"n{i}": SimpleNamespace(index=i) for i in range(n)}
    errors = SimpleNamespace(unresolvable=[f"n{i}" for i in failed])
    task = SimpleNamespace(job="j", uid="t")
    ssn: Any = SimpleNamespace(
        candidate_nodes=lambda: np.arange(n, dtype=np.intp),
        jobs={"j": SimpleNamespace(fit_errors={"t": errors})},
        nodes=SimpleNamespace(by_name=by_name),
        predicates_local=lambda _: True,
    )
    mask = np.array(unresolvable)
    got = evictutil.preempt_nodes(ssn, task, _Verdicts(mask))  # type: ignore[arg-type]
    want = [i for i in range(n) if not mask[i] and i not in failed]
    assert got.tolist() == want


@settings(max_examples=60, deadline=None)
@given(contended(), st.sampled_from([BENCH_TIERS, ONE_TIER]), st.booleans())
def test_the_bound_sum_of_one_row_is_the_sum_of_the_rows(
    objs: list[Any], tiers: list[list[str]], reclaim: bool
) -> None:
    """VictimBound's one-node sum (its cache's scalar row) adds what its vector compute adds, in
    the same order, on nodes after preemptions moved tasks; the cache, refreshed by either,
    holds the sums of all nodes computed afresh."""
    conf = topology_conf(tiers, 100, False)
    ssn = Session(Cluster(objs).snapshot(), conf, dict(PLUGINS)).open()
    counts = evictutil.reclaimable_elsewhere(ssn) if reclaim else evictutil.preemptable_in_queue(ssn)
    bound = evictutil.VictimBound(ssn, counts)
    task = next(t for job in ssn.jobs.values() for t in job.tasks.values())
    for q in ssn.queues:
        bound._cache(q).get(b"bound", task)  # read before the moves: refreshed row by row after
    _run_actions(ssn, conf)
    everything = np.arange(len(ssn.nodes.infos), dtype=np.intp)
    for q in ssn.queues:
        fresh = bound._compute(q)(task, everything)
        one = bound._sum_row(q)
        assert [one(task, i).tolist() for i in everything.tolist()] == fresh.tolist()
        assert bound._cache(q).get(b"bound", task).tolist() == fresh.tolist()
    ssn.close()


@given(st.lists(st.booleans(), max_size=12), st.integers(0, 4))
def test_chosen_victims_are_the_masked_ones_last_first(flags: list[bool], pad: int) -> None:
    """The fast path's chosen victims: the mask's positions (padded past the row, as the
    outcomes' masks are), most important (last) first."""
    ordered: list[Any] = [object() for _ in flags]
    mask = np.array(flags + [False] * pad, dtype=bool)
    got = preempt_topology_fast._chosen(ordered, mask)
    assert got == [ordered[p] for p in np.flatnonzero(mask)[::-1].tolist()]


@settings(max_examples=60, deadline=None)
@given(contended(), st.sampled_from([BENCH_TIERS, ONE_TIER]), st.booleans())
def test_the_candidates_verdict_of_one_row_is_the_verdict_of_the_rows(
    objs: list[Any], tiers: list[list[str]], reclaim: bool
) -> None:
    """VictimBound's one-node candidates verdict (scalar_fit's twin, its cache's scalar row)
    is what its vector compute says of that node, for every task shape, on nodes after
    preemptions moved tasks; the cache, refreshed row by row, holds the fresh verdicts."""
    conf = topology_conf(tiers, 100, False)
    ssn = Session(Cluster(objs).snapshot(), conf, dict(PLUGINS)).open()
    counts = evictutil.reclaimable_elsewhere(ssn) if reclaim else evictutil.preemptable_in_queue(ssn)
    bound = evictutil.VictimBound(ssn, counts)
    tasks = [t for job in ssn.jobs.values() for t in job.tasks.values()]
    for q in ssn.queues:
        for task in tasks:
            bound.candidates(task, q)  # read before the moves: refreshed row by row after
    _run_actions(ssn, conf)
    everything = np.arange(len(ssn.nodes.infos), dtype=np.intp)
    for q in ssn.queues:
        one = bound._fits_row(q)
        for task in tasks:
            fresh = bound._compute_fits(q)(task, everything).tolist()
            assert [one(task, i) for i in everything.tolist()] == fresh
            assert bound.candidates(task, q).tolist() == fresh
    ssn.close()


@settings(max_examples=60, deadline=None)
@given(contended(), st.data())
def test_the_inlined_other_jobs_filter_keeps_what_the_filter_keeps(objs: list[Any], data: Any) -> None:
    """The rows' fill reads preempt's other-jobs filter inline: on every node, for any
    preemptor (BestEffort or not) and queue, the tasks it keeps are the filter's, in node
    order; another filter is called as it is."""
    conf = topology_conf(BENCH_TIERS, 100, False)
    ssn = Session(Cluster(objs).snapshot(), conf, dict(PLUGINS)).open()
    _run_actions(ssn, conf)
    rows = rows_for(ssn)
    tasks = [t for job in ssn.jobs.values() for t in job.tasks.values()]
    preemptor = data.draw(st.sampled_from(tasks))
    preemptor.best_effort = data.draw(st.booleans())
    for queue_name in [*ssn.queues, "elsewhere"]:
        for keep in (OtherJobs(ssn, preemptor, queue_name), SameJob(preemptor)):
            kept = rows._candidates(keep)
            for info in ssn.nodes.infos:
                assert kept(info.tasks.values()) == [t for t in info.tasks.values() if keep(t)]
    ssn.close()
