"""NodeResourcesBalancedAllocation as kube-scheduler v1.36 scores it: the improvement in balance.

Every expected number is computed by hand from the v1.36 formula
``50 + (50 + with − without) // 2`` where ``with`` / ``without`` are ``floor((1 − std) × 100)`` of the
node's requested fractions with and without the pod (issue 11, divergence 1).
"""

from __future__ import annotations

import pytest

from builders import all_nodes, make_conf, node, open_session, pod, podgroup, queue, scores, task
from lahar.api.objects import Pod
from lahar_scheduler.framework.session import Session
from lahar_scheduler.plugins.k8s import scores as kube

ARGS = {
    "leastrequested.weight": 0,
    "mostrequested.weight": 0,
    "balancedresource.weight": 1,
    "nodeaffinity.weight": 0,
    "podaffinity.weight": 0,
    "tainttoleration.weight": 0,
    "podtopologyspread.weight": 0,
}
CONF = make_conf("allocate", [{"name": "gang"}, {"name": "nodeorder", "arguments": ARGS}])
# B already runs a cpu-only pod: fractions 0.5 / 0 → std 0.25 → without = 75.
BUSY = pod("busy", cpu="2", node_name="b", phase="Running", scheduler="x")


def _ssn(incoming: Pod) -> Session:
    nodes = [node("a", cpu="4", memory="8Gi"), node("b", cpu="4", memory="8Gi")]
    ssn: Session = open_session([*nodes, BUSY, queue("q"), podgroup("pg", queue="q", min_member=1), incoming], CONF)
    return ssn


def test_improvement_wins_over_balance_with_the_pod() -> None:
    p = pod("in", group="pg", cpu="500m", memory="2Gi")
    # a (empty): 0.125 / 0.25 → std 0.0625 → with 93, without 100 → 50 + 43 // 2 = 71.
    # b: 0.625 / 0.25 → std 0.1875 → with 81, without 75 → 50 + 56 // 2 = 78.
    # The pre-v1.36 formula (with only) gave a 93, b 81: the other node.
    assert scores(_ssn(p), "default/in") == {"a": 71, "b": 78}


def test_a_pod_that_restores_balance_scores_high() -> None:
    p = pod("in", group="pg", memory="4Gi")  # memory only: the actual cpu request is 0
    # a: 0 / 0.5 → with 75, without 100 → 50 + 25 // 2 = 62.
    # b: 0.5 / 0.5 → with 100, without 75 → 50 + 75 // 2 = 87.
    assert scores(_ssn(p), "default/in") == {"a": 62, "b": 87}


@pytest.mark.parametrize(("cpu", "memory"), [("500m", "2Gi"), ("3", "1Gi"), ("1", "8Gi"), ("100m", "")])
def test_row_version_agrees_with_the_vector_version(cpu: str, memory: str) -> None:
    ssn = _ssn(pod("in", group="pg", cpu=cpu, memory=memory or None))
    t = task(ssn, "default/in")
    table = ssn.nodes
    vector = kube.balanced_allocation(table, t, all_nodes(ssn))
    assert vector is not None
    rows = [kube.balanced_allocation_row(table, t, i) for i in range(len(vector))]
    assert rows == [float(v) for v in vector]
    assert all(v is not None and 50 <= v <= 100 for v in rows)
