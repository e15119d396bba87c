"""Preempt keeps each queue's eviction need per the allocatable callbacks' ``shortfall_key``
(framework/victims.py, ``NeedMemo``): every answer it gives is the one ``eviction_need`` and
``need_vector`` compute afresh at that moment, and the session decides the same without it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from test_preempt_walk_memo import contended, full_nodes, outcome

from builders import pod, podgroup
from lahar_scheduler.actions.evictutil import need_vector
from lahar_scheduler.framework import victims
from lahar_scheduler.framework.victims import NeedMemo, eviction_need


def checked(objs: list[Any]) -> tuple[tuple[Any, ...], int, int]:
    """The outcome, how many answers came from the memo, and how many were asked for."""
    kept = 0
    asked = 0
    call = NeedMemo.__call__

    def compare(self: NeedMemo[Any], queue: Any, task: Any) -> Any:
        nonlocal kept, asked
        before = len(self._kept)
        got = call(self, queue, task)
        asked += 1
        kept += self.keys is not None and len(self._kept) == before
        fresh = eviction_need(self.ssn, queue, task)
        if fresh is None:
            assert got is None
        else:
            assert got is not None and repr(got[0]) == repr(fresh)
            assert np.array_equal(got[1], need_vector(self.ssn, fresh))
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(NeedMemo, "__call__", compare)
        return outcome(objs), kept, asked


def uncached(objs: list[Any]) -> tuple[Any, ...]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(victims.AllocatableWithBound, "__init__", _without_key)
        return outcome(objs)


_init = victims.AllocatableWithBound.__init__


def _without_key(self: victims.AllocatableWithBound, check: Any, shortfall: Any, shortfall_key: Any = None) -> None:
    _init(self, check, shortfall, None)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(contended())
def test_kept_needs_are_the_fresh_ones_and_decide_the_same(objs: list[Any]) -> None:
    got, _, _ = checked(objs)
    assert got == uncached(objs)


def test_a_queue_coming_back_to_the_same_allocation_reuses_its_need() -> None:
    """Each preemptor evicts one pod of its size and is pipelined: the queue's allocation comes
    back to where it was, so after the first preemptor the need is the kept one."""
    objs = full_nodes(4)
    objs.append(podgroup("pend", queue="a", min_member=8, priority_class="high"))
    objs += [pod(f"pend-{t}", group="pend", cpu="1", priority_class="high") for t in range(8)]
    got, kept, asked = checked(objs)
    assert len(got[0]) == 8  # eight evictions
    assert asked >= 8 and kept >= asked - 2
    assert got == uncached(objs)
