"""binpack and resource-strategy-fit node scores (binpack: SKIPPED.md §2.1)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from builders import (
    all_nodes,
    binds,
    make_conf,
    node,
    only,
    open_session,
    pod,
    podgroup,
    queue,
    run,
    scores,
    task,
)
from lahar_scheduler.core import load_conf
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.conf import ConfError
from lahar_scheduler.plugins.binpack import parse_binpack_args

GPU = "nvidia.com/gpu"
FOO = "example.com/foo"


def binpack_objects() -> list[Any]:
    """binpack_test.go TestNode: p1 is bound to n1 and p2 to n3 (Pending with a node: Bound)."""
    return [
        queue("c1"),
        podgroup("pg1", "c1", queue="c1", min_member=0, phase=None),
        node("n1", cpu="2", memory="4Gi", pods="10"),
        node("n2", cpu="4", memory="16Gi", pods="10", extra={GPU: "4"}),
        node("n3", cpu="2", memory="4Gi", pods="10", extra={FOO: "16"}),
        pod("p1", "c1", group="pg1", cpu="1", memory="1Gi", node_name="n1"),
        pod("p2", "c1", group="pg1", cpu="1.5", memory="0Gi", node_name="n3"),
        pod("p3", "c1", group="pg1", cpu="2", memory="10Gi", extra={GPU: "2"}),
        pod("p4", "c1", group="pg1", cpu="3", memory="4Gi", extra={FOO: "3"}),
    ]


BINPACK_CASES = [
    (
        {
            "binpack.weight": 10,
            "binpack.cpu": 2,
            "binpack.memory": 3,
            "binpack.resources": "nvidia.com/gpu, example.com/foo",
            "binpack.resources.nvidia.com/gpu": 7,
            "binpack.resources.example.com/foo": 8,
        },
        {
            "c1/p1": {"n1": 700, "n2": 137.5, "n3": 0},
            "c1/p2": {"n1": 0, "n2": 375, "n3": 0},
            "c1/p3": {"n1": 0, "n2": 531.25, "n3": 0},
            "c1/p4": {"n1": 0, "n2": 173.076923076, "n3": 0},
        },
    ),
    (
        {
            "binpack.weight": 1,
            "binpack.cpu": 1,
            "binpack.memory": 1,
            "binpack.resources": "nvidia.com/gpu",
            "binpack.resources.nvidia.com/gpu": 23,
        },
        {
            "c1/p1": {"n1": 75, "n2": 15.625, "n3": 0},
            "c1/p2": {"n1": 0, "n2": 37.5, "n3": 0},
            "c1/p3": {"n1": 0, "n2": 50.5, "n3": 0},
            "c1/p4": {"n1": 0, "n2": 50, "n3": 0},
        },
    ),
]


@pytest.mark.parametrize(("arguments", "expected"), BINPACK_CASES)
def test_binpack_node_scores(arguments: dict[str, Any], expected: dict[str, dict[str, float]]) -> None:
    """Volcano's session NodeOrderFn(task, node) with only binpack (enableNodeOrder) configured.

    E.g. p1 on n1: ((1 + 1 cpu)·2 / 2 + (1 + 1 Gi)·3 / 4) / (2 + 3) × 100 × 10 = 700.  A resource a
    node does not have scores 0 but keeps its weight (p4 on n2: foo's 8 counts, 173.07…); a
    resource that would exceed the node makes the whole score 0 (p1 on n3, where p2 holds 1.5 cpu).
    """
    conf = make_conf("allocate", [only("binpack", "enableNodeOrder", **arguments)])
    ssn = open_session(binpack_objects(), conf)
    for key, per_node in expected.items():
        assert scores(ssn, key) == pytest.approx(per_node, abs=1e-8), key


def test_binpack_callback_is_vectorised_over_node_indices() -> None:
    conf = make_conf("allocate", [only("binpack", "enableNodeOrder", **BINPACK_CASES[0][0])])
    ssn = open_session(binpack_objects(), conf)
    t = task(ssn, "c1/p1")
    # Any subset and order of node indices: one score per index, in that order.
    idx = np.array([2, 0], dtype=np.intp)
    assert ssn.call(P.NODE_ORDER, t, idx) == pytest.approx([0, 700])
    assert ssn.call(P.NODE_ORDER, t, all_nodes(ssn)) == pytest.approx([700, 137.5, 0])


def test_binpack_arguments() -> None:
    """binpack_test.go TestArguments: a negative resource weight is replaced by 1."""
    errors: list[str] = []
    args = parse_binpack_args(
        {
            "binpack.weight": 10,
            "binpack.cpu": 5,
            "binpack.memory": 2,
            "binpack.resources": "nvidia.com/gpu, example.com/foo",
            "binpack.resources.nvidia.com/gpu": 7,
            "binpack.resources.example.com/foo": -3,
        },
        "args",
        errors,
    )
    assert errors == []
    assert (args.weight, args.cpu, args.memory) == (10, 5, 2)
    assert args.resources == {GPU: 7, FOO: 1, "cpu": 5, "memory": 2}


def test_binpack_argument_defaults_and_rules() -> None:
    errors: list[str] = []
    args = parse_binpack_args({}, "a", errors)
    assert (args.weight, args.resources) == (1, {"cpu": 1, "memory": 1})
    # Negative cpu/memory weights become 1; a weight for a resource not listed is ignored.
    args = parse_binpack_args({"binpack.cpu": -1, "binpack.memory": -5, "binpack.resources.x/y": 4}, "a", errors)
    assert args.resources == {"cpu": 1, "memory": 1} and errors == []
    with pytest.raises(ConfError) as info:
        load_conf("actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n    arguments: {binpack.cpu: 1.5}\n")
    assert info.value.errors == ["tiers[0].plugins[0].arguments.binpack.cpu: expected an integer, got 1.5"]


def test_binpack_weight_zero_registers_nothing() -> None:
    conf = make_conf("allocate", [only("binpack", "enableNodeOrder", **{"binpack.weight": 0})])
    ssn = open_session(binpack_objects(), conf)
    assert not ssn.has(P.NODE_ORDER)


def test_binpack_fills_the_busiest_node_first() -> None:
    objs = [
        node("empty", cpu="4", memory="8Gi"),
        node("half", cpu="4", memory="8Gi"),
        queue("q"),
        pod("x", cpu="2", memory="4Gi", node_name="half", phase="Running", scheduler="other"),
        podgroup("pg", queue="q", min_member=1),
        pod("pg-t-0", group="pg", cpu="1", memory="1Gi"),
    ]
    conf = make_conf("allocate", [{"name": "gang"}, {"name": "predicates"}, {"name": "binpack"}])
    for seed in range(3):
        assert binds(run(objs, conf, seed=seed)) == {"default/pg-t-0": "half"}


# -- resource-strategy-fit ---------------------------------------------------------------------------


def rsf_ssn(arguments: dict[str, Any] | None = None, **pod_kw: Any) -> Any:
    objs = [
        node("n1", cpu="4", memory="8Gi", extra={GPU: "4"}),
        node("n2", cpu="8", memory="8Gi", extra={GPU: "8"}),
        queue("q"),
        pod("x", cpu="2", memory="4Gi", node_name="n1", phase="Running", scheduler="other"),
        podgroup("pg", queue="q", min_member=1),
        pod("in", group="pg", **pod_kw),
    ]
    conf = make_conf("allocate", [only("resource-strategy-fit", "enableNodeOrder", **(arguments or {}))])
    return open_session(objs, conf)


def test_rsf_default_is_least_allocated_on_cpu_and_memory() -> None:
    # weight 10; n1: cpu (4−3)/4 = .25, memory (8−6)/8 = .25 → .25 × 100 × 10 = 250.
    # n2: cpu 7/8, memory 6/8 → (.875 + .75) / 2 = .8125 → 812.5.
    got = scores(rsf_ssn(cpu="1", memory="2Gi"), "default/in")
    assert got == pytest.approx({"n1": 250, "n2": 812.5})


def test_rsf_most_allocated_per_resource_and_weights() -> None:
    args = {
        "resourceStrategyFitWeight": 1,
        "resources": {
            "cpu": {"type": "MostAllocated", "weight": 3},
            "nvidia.com/*": {"type": "LeastAllocated", "weight": 1},
        },
    }
    got = scores(rsf_ssn(args, cpu="1", memory="2Gi", extra={GPU: "2"}), "default/in")
    # memory has no strategy; gpu matches the "nvidia.com/*" prefix.
    # n1: (3 × 3/4 + 1 × 2/4) / 4 = .6875 → 68.75.  n2: (3 × 1/8 + 6/8) / 4 = .28125 → 28.125.
    assert got == pytest.approx({"n1": 68.75, "n2": 28.125})


def test_rsf_request_that_does_not_fit_scores_zero() -> None:
    got = scores(rsf_ssn(cpu="3", memory="1Gi"), "default/in")
    assert got["n1"] == 0 and got["n2"] > 0


def test_rsf_pod_annotations_override() -> None:
    ann = {
        "volcano.sh/resource-strategy-scoring-type": "MostAllocated",
        "volcano.sh/resource-strategy-weight": '{"cpu": 1}',
    }
    got = scores(rsf_ssn(cpu="1", memory="2Gi", annotations=ann), "default/in")
    # Only cpu, most allocated: n1 3/4 → 750; n2 1/8 → 125.
    assert got == pytest.approx({"n1": 750, "n2": 125})
    bad = {**ann, "volcano.sh/resource-strategy-weight": "not json"}
    assert scores(rsf_ssn(cpu="1", annotations=bad), "default/in") == {"n1": 0, "n2": 0}


def test_rsf_arguments_are_validated() -> None:
    with pytest.raises(ConfError) as info:
        load_conf(
            "actions: allocate\ntiers:\n- plugins:\n  - name: resource-strategy-fit\n"
            "    arguments: {sra: {enable: true}}\n"
        )
    assert "sra policy" in info.value.errors[0]
