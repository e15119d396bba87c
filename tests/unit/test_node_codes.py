"""allocate's per-node verdict codes: the vector kernel, its scalar twin and the formula written
out with ``fits`` agree on random clusters (some nodes full, some pods too big, GPU asks)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_scores_fast import _session

from lahar_scheduler.actions.allocate import FITS_FUTURE, FITS_IDLE, NO_FIT, NodeCaches, fits


def _reference(caches: NodeCaches, task: Any, rows: np.ndarray) -> list[int]:
    table = caches.table
    ok = fits(task, table.future, rows) & caches._predicates(task, rows)
    now = fits(task, table.idle, rows)
    return np.where(ok, np.where(now, FITS_IDLE, FITS_FUTURE), NO_FIT).tolist()  # type: ignore[no-any-return]


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 100_000))
def test_codes_scalar_and_vector_agree(seed: int) -> None:
    ssn = _session(seed)
    caches = NodeCaches(ssn)
    rows = np.arange(len(ssn.node_list), dtype=np.intp)
    for job in ssn.jobs.values():
        for task in job.tasks.values():
            want = _reference(caches, task, rows)
            assert caches._codes(task, rows).tolist() == want
            assert [caches._code_row(task, i) for i in rows.tolist()] == want
