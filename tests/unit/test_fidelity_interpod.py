"""InterPodAffinity normalised over the candidates' actual min and max, as kube-scheduler v1.36 does.

Raw scores are Σ weight over matching pods in the node's zone; the normalised score is
``int(100 × (raw − min) / (max − min))`` (issue 11, divergence 4).
"""

from __future__ import annotations

from typing import Any

from builders import make_conf, node, open_session, pod, podgroup, queue, scores

ARGS = {
    "leastrequested.weight": 0,
    "mostrequested.weight": 0,
    "balancedresource.weight": 0,
    "nodeaffinity.weight": 0,
    "podaffinity.weight": 1,
    "tainttoleration.weight": 0,
    "podtopologyspread.weight": 0,
}
CONF = make_conf("allocate", [{"name": "gang"}, {"name": "nodeorder", "arguments": ARGS}])
NODES = [node("a1", labels={"zone": "a"}), node("a2", labels={"zone": "a"}), node("b1", labels={"zone": "b"})]


def _db(name: str, at: str) -> Any:
    return pod(name, cpu="100m", node_name=at, phase="Running", scheduler="x", labels={"app": "db"})


def _incoming(kind: str) -> Any:
    term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
    preferred = {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term}]}
    return pod("in", group="pg", cpu="1", affinity={kind: preferred})


def _scores(*objs: Any) -> dict[str, float]:
    got: dict[str, float] = scores(
        open_session([*NODES, queue("q"), podgroup("pg", queue="q"), *objs], CONF), "default/in"
    )
    return got


# One db pod in zone a, two in zone b.
DBS = [_db("db0", "a1"), _db("db1", "b1"), _db("db2", "b1")]


def test_anti_affinity_on_every_node_gives_the_least_bad_node_100() -> None:
    # raw a = −5, b = −10 → a: 100 × 5/5 = 100, b: 0.  (A range forced to include 0 gave a only 50.)
    assert _scores(*DBS, _incoming("podAntiAffinity")) == {"a1": 100, "a2": 100, "b1": 0}


def test_affinity_on_every_node_gives_the_weaker_node_0() -> None:
    # raw a = 5, b = 10 → a: 0, b: 100.  (A range forced to include 0 gave a 50.)
    assert _scores(*DBS, _incoming("podAffinity")) == {"a1": 0, "a2": 0, "b1": 100}


def test_equal_raw_scores_everywhere_give_0() -> None:
    even = [_db("db0", "a1"), _db("db1", "b1")]
    assert _scores(*even, _incoming("podAntiAffinity")) == {"a1": 0, "a2": 0, "b1": 0}
