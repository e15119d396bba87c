"""``RowCache.rows`` (recompute only the rows asked for, mark the others) gives what computing
afresh gives, whatever the order of changes, ``rows`` and ``get`` reads; and nodeorder's cached
resource scores match its vector kernel on a session after many placements."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import node, open_session, pod, podgroup, queue
from lahar_scheduler.core import load_conf
from lahar_scheduler.framework.rowcache import RowCache
from lahar_scheduler.framework.statement import Statement


class _Table:
    """What RowCache reads of a NodeTable: ``infos`` (only its length) and ``changes``."""

    def __init__(self, n: int) -> None:
        self.infos = [None] * n
        self.changes: list[int] = []
        self.values = np.arange(n, dtype=np.float64)


class _Task:
    def __init__(self, factor: float) -> None:
        self.factor = factor


def _cache(table: _Table, scalar: bool) -> RowCache[Any]:
    def compute(task: Any, rows: np.ndarray) -> np.ndarray:
        return np.asarray(table.values[rows] * task.factor + 1.0)

    def row(task: Any, i: int) -> float:
        return float(table.values[i] * task.factor + 1.0)

    return RowCache(table, compute, row if scalar else None, size=2)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.booleans(), st.integers(0, 2**32 - 1), st.integers(1, 60))
def test_rows_give_what_computing_afresh_gives(n: int, scalar: bool, seed: int, steps: int) -> None:
    rng = np.random.default_rng(seed)
    table = _Table(n)
    cache = _cache(table, scalar)
    tasks = {b"a": _Task(2.0), b"b": _Task(-0.5), b"c": _Task(3.0)}  # 3 shapes, 2 entries: evictions
    for _ in range(steps):
        for _ in range(int(rng.integers(0, 12))):
            i = int(rng.integers(n))
            table.values[i] = float(rng.integers(-50, 50))
            table.changes.append(i)
        key = list(tasks)[int(rng.integers(3))]
        task = tasks[key]
        want = table.values * task.factor + 1.0
        if rng.random() < 0.25:
            assert cache.get(key, task).tolist() == want.tolist()
        else:
            idx = np.sort(rng.choice(n, size=int(rng.integers(0, n + 1)), replace=False)).astype(np.intp)
            assert cache.rows(key, task, idx).tolist() == want[idx].tolist()


def test_nodeorder_resource_scores_stay_fresh_over_placements() -> None:
    objs: list[Any] = [queue("q")]
    objs += [node(f"n{i:02d}", cpu=str(4 + i % 5), memory=f"{8 + 4 * (i % 3)}Gi") for i in range(30)]
    for j in range(12):
        objs.append(podgroup(f"j{j}", queue="q", min_member=1))
        objs += [pod(f"j{j}-w-{t}", group=f"j{j}", cpu=str(1 + j % 3), memory=f"{1 + j % 2}Gi") for t in range(3)]
    ssn = open_session(objs, load_conf(None))
    plugin: Any = next(p for p in ssn.plugins if p.name == "nodeorder")
    rng = np.random.default_rng(7)
    tasks = [t for j in ssn.jobs.values() for t in j.tasks.values()]
    stmt = Statement(ssn)
    for step, task in enumerate(tasks):
        # Ask for a random window first, so rows elsewhere are left marked.
        probe = tasks[int(rng.integers(len(tasks)))]
        idx = np.sort(rng.choice(30, size=int(rng.integers(1, 31)), replace=False)).astype(np.intp)
        got = plugin._local.rows(probe.template_key, probe, idx)
        assert got.tolist() == plugin._local_scores(probe, idx).tolist()
        stmt.allocate(task, ssn.node_list[(step * 7) % 30])
    for probe in tasks:
        everything = np.arange(30, dtype=np.intp)
        assert plugin._local.get(probe.template_key, probe).tolist() == plugin._local_scores(probe, everything).tolist()
