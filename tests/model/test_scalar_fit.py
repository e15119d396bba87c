"""The scalar fit checks (actions/scalar_fit.py) answer bit for bit what the vector code they
stand for answers: ``fits_vector`` over a base row plus a sum from zero (the victim bound), and
over a copy of the base with each request added in turn (``victims_cover``), on random
requests, including fractions whose sums round differently in another order."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lahar_scheduler.actions.scalar_fit import column_sum, fits_with_each, fits_with_sum
from lahar_scheduler.framework.predicate import fits_vector

WIDTH = 4
amounts = st.one_of(
    st.integers(0, 4000).map(float),
    st.floats(0, 1e3, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.1, 0.2, 0.3, 1e16, -0.0, 1 / 3]),
)
rows = st.lists(amounts, min_size=WIDTH, max_size=WIDTH).map(np.array)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Any, Any, list[Any]]:
    cols = sorted(draw(st.sets(st.integers(0, WIDTH - 1), max_size=WIDTH)))
    task = SimpleNamespace(init_vec=draw(rows), fit_cols=np.array(cols, dtype=np.intp))
    base = draw(rows) - draw(rows)  # future idle may be negative
    tasks = [SimpleNamespace(uid=f"t{i}", res_vec=v) for i, v in enumerate(draw(st.lists(rows, max_size=9)))]
    # Needs at the edge, where rounding decides: one ulp either side of a total plus epsilon,
    # the total summed in either order.
    if draw(st.booleans()) and tasks:
        each = draw(st.booleans())
        total = base.copy() if each else np.zeros(WIDTH)
        for t in tasks:
            total += t.res_vec
        if not each:
            total = base + total
        edge = total + 0.1
        task.init_vec = np.nextafter(edge, draw(st.sampled_from([-np.inf, np.inf]))) if draw(st.booleans()) else edge
    return task, base, tasks


@settings(max_examples=500, deadline=None, derandomize=True)
@given(cases())
def test_the_bound_twin_sums_from_zero(case: tuple[Any, Any, list[Any]]) -> None:
    task, base, tasks = case
    total = np.zeros(WIDTH)
    for t in tasks:
        total += t.res_vec
    assert fits_with_sum(task, base, tasks, {}) == fits_vector(task, base + total)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(cases())
def test_a_column_sum_is_the_bound_rows_column(case: tuple[Any, Any, list[Any]]) -> None:
    _, _, tasks = case
    total = np.zeros(WIDTH)
    for t in tasks:
        total += t.res_vec
    requests: dict[str, list[float]] = {}
    assert [column_sum(tasks, c, requests) for c in range(WIDTH)] == total.tolist()


@settings(max_examples=500, deadline=None, derandomize=True)
@given(cases())
def test_the_cover_twin_adds_each_in_turn(case: tuple[Any, Any, list[Any]]) -> None:
    task, base, tasks = case
    have = base.copy()
    for t in tasks:
        have += t.res_vec
    assert fits_with_each(task, base, tasks, {}) == fits_vector(task, have)


def test_the_two_orders_can_differ() -> None:
    """Why there are two twins: the bound's order and victims_cover's round differently."""
    task: Any = SimpleNamespace(init_vec=np.array([0.7]), fit_cols=np.array([0], dtype=np.intp))
    base = np.array([0.1])
    tasks: list[Any] = [SimpleNamespace(uid=u, res_vec=np.array([r])) for u, r in (("a", 0.2), ("b", 0.3))]
    assert (0.1 + (0.2 + 0.3)) != ((0.1 + 0.2) + 0.3)
    task.init_vec = np.array([(0.1 + (0.2 + 0.3)) + 0.1])  # fits only the larger of the two sums
    assert fits_with_sum(task, base, tasks, {}) != fits_with_each(task, base, tasks, {})
