"""The common case's resource score kernels (plugins/k8s/scores_fast.py) equal the general ones.

Random nodes (cpu and memory, some GPUs), random running pods (with and without requests, so
kube's non-zero defaults count), random pending pods; weights as configured or others.  The fast
vector and scalar kernels must give exactly the general kernels' numbers wherever ``applies``.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import make_conf, node, open_session, pod, podgroup, queue
from lahar_scheduler.actions.preempt_walk import WalkMemo
from lahar_scheduler.core import load_conf
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.conf import SchedulerConf
from lahar_scheduler.plugins.k8s import scores, scores_fast


def _session(seed: int, conf: SchedulerConf | None = None) -> Any:
    rng = random.Random(seed)
    objs: list[Any] = [queue("q")]
    n = rng.randint(1, 25)
    for i in range(n):
        extra = {"nvidia.com/gpu": str(rng.choice([2, 4]))} if rng.random() < 0.2 else None
        objs.append(node(f"n{i}", cpu=str(rng.randint(1, 64)), memory=f"{rng.randint(1, 256)}Gi", extra=extra))
    for j in range(rng.randint(1, 30)):
        cpu = rng.choice([None, "100m", "250m", "1", "3", "7"])
        memory = rng.choice([None, "128Mi", "1Gi", "5Gi", "30Gi"])
        gpu = {"nvidia.com/gpu": "1"} if rng.random() < 0.15 else None
        placed = rng.random() < 0.6
        objs.append(podgroup(f"g{j}", queue="q", min_member=1))
        objs.append(
            pod(
                f"g{j}-w-0",
                group=f"g{j}",
                cpu=cpu,
                memory=memory,
                extra=gpu,
                node_name=f"n{rng.randrange(n)}" if placed else "",
                phase="Running" if placed else "Pending",
                deleting=placed and rng.random() < 0.3,  # releasing: room in future idle only
            )
        )
    return open_session(objs, conf or load_conf(None))


def _general(ssn: Any, task: Any, rows: np.ndarray, least_weight: int, balanced_weight: int) -> np.ndarray:
    table = ssn.nodes
    total = np.zeros(len(rows))
    if least_weight:
        total += scores.least_allocated(table, task, rows) * least_weight
    if balanced_weight:
        got = scores.balanced_allocation(table, task, rows)
        if got is not None:
            total += got * balanced_weight
    return total


def _general_row(ssn: Any, task: Any, i: int, least_weight: int, balanced_weight: int) -> float:
    table = ssn.nodes
    total = 0.0
    if least_weight:
        total += scores.least_allocated_row(table, task, i) * least_weight
    if balanced_weight:
        got = scores.balanced_allocation_row(table, task, i)
        if got is not None:
            total += got * balanced_weight
    return total


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 100_000), st.sampled_from([(1, 1), (1, 0), (0, 1), (3, 2)]))
def test_fast_kernels_equal_the_general_ones(seed: int, weights: tuple[int, int]) -> None:
    ssn = _session(seed)
    table = ssn.nodes
    if not scores_fast.every_node_has_cpu_and_memory(table):
        return
    rows = np.arange(len(table.infos), dtype=np.intp)
    for job in ssn.jobs.values():
        for task in job.tasks.values():
            if not scores_fast.applies(table, task, 0):
                continue
            fast = scores_fast.local_scores(table, task, rows, *weights)
            assert fast.tolist() == _general(ssn, task, rows, *weights).tolist()
            for i in range(len(rows)):
                assert scores_fast.local_score_row(table, task, i, *weights) == _general_row(ssn, task, i, *weights)


def test_the_common_case_excludes_gpu_asks_most_allocated_and_empty_requests() -> None:
    objs = [
        queue("q"),
        node("n0", cpu="8", memory="16Gi", extra={"nvidia.com/gpu": "4"}),
        podgroup("a", queue="q", min_member=1),
        pod("a-w-0", group="a", cpu="1", memory="1Gi"),
        podgroup("b", queue="q", min_member=1),
        pod("b-w-0", group="b", cpu="1", memory="1Gi", extra={"nvidia.com/gpu": "1"}),
    ]
    ssn = open_session(objs, load_conf(None))
    plain, gpu = (next(iter(ssn.jobs[f"default/{g}"].tasks.values())) for g in ("a", "b"))
    assert scores_fast.applies(ssn.nodes, plain, 0)
    assert not scores_fast.applies(ssn.nodes, plain, 1)  # MostAllocated weighted
    assert not scores_fast.applies(ssn.nodes, gpu, 0)  # balanced over the GPU too


NODE_ORDER_WEIGHTS = [
    {},
    {"leastrequested.weight": 3, "balancedresource.weight": 2, "tainttoleration.weight": 5},
    {"leastrequested.weight": 0, "mostrequested.weight": 2, "tainttoleration.weight": 0},
]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 100_000), st.sampled_from(NODE_ORDER_WEIGHTS))
def test_one_node_scores_equal_the_node_order_call(seed: int, weights: dict[str, int]) -> None:
    """nodeorder's ``score_row`` (and the walk memo's sum over such twins) gives each node
    exactly what the node-order call gives it, for every task whose scores are local."""
    rng = random.Random(seed)
    conf = make_conf("allocate", [{"name": "predicates"}, {"name": "nodeorder", "arguments": weights}])
    ssn = _session(seed, conf)
    memo = WalkMemo(ssn, None, None, None)  # type: ignore[arg-type]  # only its scoring is used
    assert memo._score_rows is not None
    rows = np.arange(len(ssn.nodes.infos), dtype=np.intp)
    checked = 0
    for job in ssn.jobs.values():
        for task in job.tasks.values():
            if not ssn.scores_local(task):
                continue
            whole = ssn.call(P.NODE_ORDER, task, rows).tolist()
            some = rng.sample(range(len(rows)), min(3, len(rows)))
            assert memo._scores(task, some) == [whole[i] for i in some]
            checked += 1
    assert checked
