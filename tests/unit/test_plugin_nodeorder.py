"""nodeorder: kube-scheduler scores (0..100 each), weighted by the plugin's arguments and summed."""

from __future__ import annotations

from typing import Any

from builders import binds, make_conf, node, open_session, pod, podgroup, queue, run, scores

WEIGHTS = (
    "leastrequested.weight",
    "mostrequested.weight",
    "balancedresource.weight",
    "nodeaffinity.weight",
    "podaffinity.weight",
    "tainttoleration.weight",
    "podtopologyspread.weight",
)


def only_weights(**weights: int) -> Any:
    """nodeorder with every score weight 0 except those given (``least=2`` → leastrequested.weight)."""
    short = {w.split(".")[0].replace("requested", "").replace("resource", ""): w for w in WEIGHTS}
    args = {w: 0 for w in WEIGHTS}
    for k, v in weights.items():
        args[short[k]] = v
    return make_conf("allocate", [{"name": "gang"}, {"name": "nodeorder", "arguments": args}])


def ssn_for(nodes: list[Any], *pods: Any, conf: Any) -> Any:
    return open_session([*nodes, queue("q"), podgroup("pg", queue="q", min_member=1), *pods], conf)


TWO = [node("n1", cpu="4", memory="8Gi"), node("n2", cpu="2", memory="8Gi")]
IN = pod("in", group="pg", cpu="1", memory="2Gi")


def test_least_requested() -> None:
    # n1: cpu (4−1)/4 = 75, memory (8−2)/8 = 75 → 75.  n2: cpu 50, memory 75 → (50+75)/2 = 62 (int).
    assert scores(ssn_for(TWO, IN, conf=only_weights(least=1)), "default/in") == {"n1": 75, "n2": 62}


def test_least_requested_weight_multiplies() -> None:
    assert scores(ssn_for(TWO, IN, conf=only_weights(least=3)), "default/in") == {"n1": 225, "n2": 186}


def test_least_requested_counts_pods_already_there() -> None:
    busy = pod("busy", cpu="2", memory="2Gi", node_name="n1", phase="Running", scheduler="x")
    # n1: cpu (4−3)/4 = 25, memory (8−4)/8 = 50 → 37.
    assert scores(ssn_for(TWO, busy, IN, conf=only_weights(least=1)), "default/in")["n1"] == 37


def test_best_effort_pods_are_scored_with_default_requests() -> None:
    be = pod("in", group="pg")  # counts as 100m / 200Mi
    got = scores(ssn_for([node("n1", cpu="1", memory="1Gi")], be, conf=only_weights(least=1)), "default/in")
    # cpu (1000−100)/1000 = 90, memory (1024−200)/1024 → 80 (int) → (90+80)/2 = 85
    assert got == {"n1": 85}


def test_most_requested() -> None:
    # n1: cpu 25, memory 25 → 25.  n2: cpu 50, memory 25 → 37.
    assert scores(ssn_for(TWO, IN, conf=only_weights(most=1)), "default/in") == {"n1": 25, "n2": 37}


def test_balanced_allocation() -> None:
    # v1.36 scores the improvement: 50 + (50 + with − without) // 2; both nodes are empty (without = 100).
    # n1: fractions 0.25 / 0.25 → std 0 → with 100 → 50 + 50 // 2 = 75.
    # n2: 0.5 / 0.25 → |diff|/2 = 0.125 → with 87 (int) → 50 + 37 // 2 = 68.
    assert scores(ssn_for(TWO, IN, conf=only_weights(balanced=1)), "default/in") == {"n1": 75, "n2": 68}


def test_balanced_allocation_includes_gpus_when_requested() -> None:
    nodes = [
        node("g1", cpu="4", memory="8Gi", extra={"nvidia.com/gpu": "4"}),
        node("g2", cpu="4", memory="8Gi", extra={"nvidia.com/gpu": "1"}),
    ]
    gpu = pod("in", group="pg", cpu="1", memory="2Gi", extra={"nvidia.com/gpu": "1"})
    got = scores(ssn_for(nodes, gpu, conf=only_weights(balanced=1)), "default/in")
    # g1: 0.25 each → with 100 → 75.  g2: 0.25, 0.25, 1.0 → std = sqrt(((.25−.5)²·2 + .5²)/3) ≈ 0.354
    # → with 64 → 50 + (50 + 64 − 100) // 2 = 57.
    assert got == {"g1": 75, "g2": 57}


def test_balanced_allocation_skips_best_effort_pods() -> None:
    got = scores(ssn_for(TWO, pod("in", group="pg"), conf=only_weights(balanced=1)), "default/in")
    assert got == {"n1": 0, "n2": 0}


ZONED = [
    node("a1", labels={"zone": "a", "disk": "ssd"}),
    node("a2", labels={"zone": "a"}),
    node("b1", labels={"zone": "b", "disk": "hdd"}),
]


def test_preferred_node_affinity() -> None:
    aff = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                },
                {
                    "weight": 30,
                    "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
                },
            ]
        }
    }
    p = pod("in", group="pg", cpu="1", affinity=aff)
    # raw 40 / 10 / 0, normalised so the best is 100.
    assert scores(ssn_for(ZONED, p, conf=only_weights(nodeaffinity=1)), "default/in") == {
        "a1": 100,
        "a2": 25,
        "b1": 0,
    }
    assert scores(ssn_for(ZONED, p, conf=only_weights(nodeaffinity=2)), "default/in") == {
        "a1": 200,
        "a2": 50,
        "b1": 0,
    }


def test_preferred_pod_affinity_and_anti_affinity() -> None:
    db = pod("db", cpu="100m", node_name="a1", phase="Running", scheduler="x", labels={"app": "db"})

    def preferred(kind: str) -> dict[str, Any]:
        t = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
        return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": t}]}}

    near = pod("in", group="pg", cpu="1", affinity=preferred("podAffinity"))
    far = pod("in", group="pg", cpu="1", affinity=preferred("podAntiAffinity"))
    conf = only_weights(podaffinity=1)
    assert scores(ssn_for(ZONED, db, near, conf=conf), "default/in") == {"a1": 100, "a2": 100, "b1": 0}
    assert scores(ssn_for(ZONED, db, far, conf=conf), "default/in") == {"a1": 0, "a2": 0, "b1": 100}


def test_existing_pods_required_affinity_attracts() -> None:
    t = {"labelSelector": {"matchLabels": {"app": "in"}}, "topologyKey": "zone"}
    fan = pod(
        "fan",
        cpu="100m",
        node_name="b1",
        phase="Running",
        scheduler="x",
        affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [t]}},
    )
    p = pod("in", group="pg", cpu="1", labels={"app": "in"})
    assert scores(ssn_for(ZONED, fan, p, conf=only_weights(podaffinity=1)), "default/in") == {
        "a1": 0,
        "a2": 0,
        "b1": 100,
    }


def test_prefer_no_schedule_taints() -> None:
    nodes = [
        node("clean"),
        node("one", taints=[{"key": "a", "effect": "PreferNoSchedule"}]),
        node(
            "two",
            taints=[{"key": "a", "effect": "PreferNoSchedule"}, {"key": "b", "effect": "PreferNoSchedule"}],
        ),
    ]
    conf = only_weights(tainttoleration=1)
    assert scores(ssn_for(nodes, pod("in", group="pg", cpu="1"), conf=conf), "default/in") == {
        "clean": 100,
        "one": 50,
        "two": 0,
    }
    tol = [{"key": "a", "operator": "Exists", "effect": "PreferNoSchedule"}]
    got = scores(ssn_for(nodes, pod("in", group="pg", cpu="1", tolerations=tol), conf=conf), "default/in")
    assert got == {"clean": 100, "one": 100, "two": 0}


def test_topology_spread_score() -> None:
    soft = {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "w"}},
    }
    placed = [
        pod(f"w{i}", cpu="100m", node_name="a1", phase="Running", scheduler="x", labels={"app": "w"}) for i in range(2)
    ]
    p = pod("in", group="pg", cpu="1", labels={"app": "w"}, spread=[soft])
    got = scores(ssn_for(ZONED, *placed, p, conf=only_weights(podtopologyspread=1)), "default/in")
    assert got["b1"] == 100 and got["a1"] == got["a2"] < got["b1"]


def test_default_weights() -> None:
    conf = make_conf("allocate", [{"name": "gang"}, {"name": "nodeorder"}])
    # least 1 × (75 | 62) + balanced 1 × (75 | 68) + tainttoleration 3 × 100 (no taints anywhere).
    assert scores(ssn_for(TWO, IN, conf=conf), "default/in") == {"n1": 450, "n2": 430}


def test_scores_pick_the_node() -> None:
    nodes = [node("big", cpu="8", memory="16Gi"), node("small", cpu="2", memory="4Gi")]
    objs = [
        *nodes,
        queue("q"),
        podgroup("pg", queue="q", min_member=1),
        pod("pg-t-0", group="pg", cpu="1", memory="1Gi"),
    ]
    for seed in range(3):
        assert binds(run(objs, only_weights(least=1), seed=seed)) == {"default/pg-t-0": "big"}
        assert binds(run(objs, only_weights(most=1), seed=seed)) == {"default/pg-t-0": "small"}
