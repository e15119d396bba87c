"""Volcano's PredicateNodes window (pkg/scheduler/util/scheduler_helper.go
CalculateNumOfFeasibleNodesToFind with the default options, predicate_helper.go PredicateNodes):
how many feasible nodes allocate keeps, and where the next walk starts."""

from __future__ import annotations

import numpy as np
import pytest

from builders import make_conf, node, pod, podgroup, queue, snapshot
from lahar_scheduler.core import run_session
from lahar_scheduler.framework.nodewindow import nodes_to_find, window


@pytest.mark.parametrize(
    ("total", "wanted"),
    [(1, 1), (100, 100), (101, 100), (250, 120), (1000, 420), (5000, 500), (6000, 300), (20000, 1000)],
)
def test_nodes_to_find(total: int, wanted: int) -> None:
    # 250: 50 - 2 = 48% -> 120; 6000: 50 - 48 = 2% -> the 5% floor, 300; 20000: 5% -> 1000.
    assert nodes_to_find(total) == wanted


def test_the_walk_keeps_the_first_feasible_nodes_from_the_index_and_moves_past_the_next() -> None:
    total = 1000  # 420 wanted
    feasible = np.arange(0, 1000, 2, dtype=np.intp)  # 500 feasible: every even node
    kept, nxt = window(feasible, total, 900)
    # From 900: 900..998 (50 nodes), then 0..738 (370 nodes) = 420; the 421st is 740, examined too.
    assert len(kept) == 420 and kept[0] == 0 and kept[-1] == 998 and 740 not in kept and 738 in kept
    assert nxt == 741
    # Fewer feasible than wanted: every node is examined, the index ends where it began.
    kept, nxt = window(feasible[:400], total, 123)
    assert len(kept) == 400 and nxt == 123


def test_allocate_scores_only_the_window_and_each_node_gets_its_turn() -> None:
    """150 identical empty nodes (100 wanted): one task per session lands within the first 100
    nodes from the index, and the next session starts after the 101st."""
    objs = [queue("q"), *(node(f"n{i:03d}", cpu="4") for i in range(150))]
    objs += [podgroup("a", queue="q", min_member=1), pod("a-0", group="a", cpu="1")]
    snap = snapshot(objs)
    conf = make_conf("enqueue, allocate", [{"name": "gang"}], [{"name": "predicates"}, {"name": "nodeorder"}])
    snap.last_processed_node = 120
    result = run_session(snap, conf)
    ((_task, name),) = result.binds
    index = int(name[1:])
    assert index >= 120 or index < 70  # 120..149 then 0..69: the 100 nodes the walk kept
    assert snap.last_processed_node == 71  # the 101st feasible node, 70, was examined
