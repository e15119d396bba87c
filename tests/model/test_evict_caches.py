"""Preempt's and reclaim's per-shape caches (candidate masks, unresolvable verdicts, the
one-node predicate through ``passes_row``) decide exactly what computing everything afresh for
each preemptor decides, on random contended clusters."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from test_preempt_ceiling import CONF, contended, no_ceiling, outcome

from builders import make_conf
from lahar_scheduler.actions import evictutil
from lahar_scheduler.actions.evictutil import UnresolvableCache, VictimBound, reclaimable_elsewhere
from lahar_scheduler.actions.preempt_walk import WalkMemo
from lahar_scheduler.actions.reclaim_bound import ReclaimBound
from lahar_scheduler.actions.reclaim_walk import ReclaimWalk
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import TaskInfo
from lahar_scheduler.framework.nodes import BoolArray
from lahar_scheduler.framework.predicate import fits_rows

RECLAIM = make_conf(
    "enqueue, allocate, reclaim",
    [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}],
    [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}],
)


def _fresh_candidates(self: VictimBound, task: TaskInfo, key: str) -> BoolArray:
    table = self.ssn.nodes
    extra = np.zeros_like(table.future)
    for node in table.infos:
        for t in node.tasks.values():
            if self.counts(t, key):
                extra[node.index] += t.res_vec
    return fits_rows(task, table.future + extra)


def _fresh_reclaim_candidates(self: ReclaimBound, task: TaskInfo, key: str) -> BoolArray:
    table = self.ssn.nodes
    counts = reclaimable_elsewhere(self.ssn)
    extra = np.zeros_like(table.future)
    for node in table.infos:
        for t in node.tasks.values():
            if counts(t, key):
                extra[node.index] += t.res_vec
    return fits_rows(task, table.future + extra)


def _fresh_unresolvable(self: UnresolvableCache, task: TaskInfo) -> BoolArray:
    rows = np.arange(len(self.ssn.nodes.infos), dtype=np.intp)
    return np.isin(rows, self.ssn.call(P.PREDICATE, task, rows).unresolvable)


def _fresh_passes(self: evictutil.NodePasses, task: TaskInfo, i: int) -> bool:
    return bool(len(self.ssn.call(P.PREDICATE, task, np.array([i], dtype=np.intp)).passed))


def uncached(objs: list[Any], conf: Any) -> tuple[Any, ...]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(VictimBound, "candidates", _fresh_candidates)
        mp.setattr(ReclaimBound, "candidates", _fresh_reclaim_candidates)
        mp.setattr(UnresolvableCache, "get", _fresh_unresolvable)
        mp.setattr(evictutil.NodePasses, "__call__", _fresh_passes)
        mp.setattr(WalkMemo, "applies", staticmethod(lambda ssn, task: False))  # the walk memos are caches too
        mp.setattr(ReclaimWalk, "applies", staticmethod(lambda ssn, task: False))
        # The ceiling is checked on its own (test_preempt_ceiling); here it is left out of both.
        no_ceiling(mp)
        return outcome(objs, conf)


def without_ceiling(objs: list[Any], conf: Any) -> tuple[Any, ...]:
    with pytest.MonkeyPatch.context() as mp:
        no_ceiling(mp)
        return outcome(objs, conf)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(contended())
def test_preempt_decides_the_same_with_its_caches(objs: list[Any]) -> None:
    assert without_ceiling(objs, CONF) == uncached(objs, CONF)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(contended())
def test_reclaim_decides_the_same_with_its_caches(objs: list[Any]) -> None:
    assert without_ceiling(objs, RECLAIM) == uncached(objs, RECLAIM)
