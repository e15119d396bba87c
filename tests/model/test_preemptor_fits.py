"""Preempt's fit check (``PreemptorFits``) reads a preemptor's request as Python floats, kept per
task: its answer on the node's room must be ``fits_vector``'s bit for bit, at the edges too.
And the other-jobs filter's one-loop ``select`` keeps what the filter keeps."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_preempt_walk_memo import PREEMPT, contended
from test_scalar_fit import WIDTH, rows

from builders import open_session
from lahar_scheduler.actions.preempt import PreemptorFits
from lahar_scheduler.actions.preempt_filters import OtherJobs
from lahar_scheduler.framework.predicate import fits_vector
from lahar_scheduler.framework.types import TaskStatus


@st.composite
def rooms(draw: st.DrawFn) -> tuple[Any, Any]:
    cols = sorted(draw(st.sets(st.integers(0, WIDTH - 1), max_size=WIDTH)))
    future = np.stack([draw(rows) - draw(rows) for _ in range(3)])
    init = draw(rows)
    if draw(st.booleans()):  # at the edge: the room plus epsilon, or one ulp either side
        edge = future[draw(st.integers(0, 2))] + 0.1
        init = np.nextafter(edge, draw(st.sampled_from([-np.inf, np.inf]))) if draw(st.booleans()) else edge
    task = SimpleNamespace(uid="p", init_vec=init, fit_cols=np.array(cols, dtype=np.intp))
    return task, future


def fits(future: Any) -> PreemptorFits:
    check = PreemptorFits.__new__(PreemptorFits)
    check.allocatable = lambda queue, task: True
    check.passes = lambda task, i: True  # type: ignore[assignment]
    check.nodes = SimpleNamespace(future=future)  # type: ignore[assignment]
    check.needs = {}
    return check


@settings(max_examples=500, deadline=None, derandomize=True)
@given(rooms())
def test_the_fit_check_is_fits_vector(case: tuple[Any, Any]) -> None:
    task, future = case
    check = fits(future)
    for i in range(len(future)):
        node = SimpleNamespace(index=i)
        assert check(None, task, node) == fits_vector(task, future[i])  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(contended())
def test_the_other_jobs_filter_selects_what_it_keeps(objs: list[Any]) -> None:
    """``OtherJobs.select`` (one loop per walked node) keeps exactly the tasks, in order, that
    the filter called on each keeps, for every pending preemptor and queue."""
    ssn = open_session(objs, PREEMPT)
    for job in ssn.jobs.values():
        for preemptor in job.tasks_in(TaskStatus.PENDING):
            for queue in ("a", "b"):
                keep = OtherJobs(ssn, preemptor, queue)
                for node in ssn.node_list:
                    tasks = list(node.tasks.values())
                    assert keep.select(tasks) == [t for t in tasks if keep(t)]
