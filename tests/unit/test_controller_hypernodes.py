"""HyperNode discovery from node labels, as Volcano's label discoverer
(pkg/controllers/hypernode/discovery/label/label.go at ed72c7c8; cases from label_test.go's
shapes: a two-level topology type, nodes missing a key, the hostname key dropped)."""

from __future__ import annotations

from typing import Any

import pytest

from lahar_controller.hypernodes import SOURCE_LABEL, DiscoveryConfigError, parse_types, plan

TYPES = parse_types(
    {
        "a3": [
            {"nodeLabel": "volcano.sh/spine"},
            {"nodeLabel": "volcano.sh/tor"},
            {"nodeLabel": "kubernetes.io/hostname"},
        ]
    }
)


def node(name: str, **labels: str) -> dict[str, Any]:
    keys = {"spine": "volcano.sh/spine", "tor": "volcano.sh/tor"}
    return {"metadata": {"name": name, "labels": {keys[k]: v for k, v in labels.items()}}}


def members(obj: dict[str, Any]) -> list[str]:
    return [m["selector"]["exactMatch"]["name"] for m in obj["spec"]["members"]]


def test_parse_drops_the_hostname_key_and_orders_tiers_nearest_first() -> None:
    assert TYPES == {"a3": ["volcano.sh/tor", "volcano.sh/spine"]}
    with pytest.raises(DiscoveryConfigError, match="duplicate"):
        parse_types({"x": ["a", "a"]})
    with pytest.raises(DiscoveryConfigError, match="longer than 20"):
        parse_types({"x" * 21: ["a", "b"]})


def test_builds_a_two_tier_tree_from_labels() -> None:
    nodes = [
        node("n1", spine="s1", tor="t1"),
        node("n2", spine="s1", tor="t1"),
        node("n3", spine="s1", tor="t2"),
        node("n4", tor="t3"),  # no spine: a tier-1 HyperNode only
        node("n5"),  # no tor: in no HyperNode (the chain stops at the first missing key)
    ]
    todo = plan(TYPES, nodes, [])
    assert not todo.replace and not todo.delete
    by_label = {(o["spec"]["tierName"], o["metadata"]["labels"][o["spec"]["tierName"]]): o for o in todo.create}
    t1, t2, t3 = (by_label[("volcano.sh/tor", t)] for t in ("t1", "t2", "t3"))
    s1 = by_label[("volcano.sh/spine", "s1")]
    assert members(t1) == ["n1", "n2"] and members(t2) == ["n3"] and members(t3) == ["n4"]
    assert t1["spec"]["tier"] == 1 and t1["spec"]["members"][0]["type"] == "Node"
    assert s1["spec"]["tier"] == 2 and s1["spec"]["members"][0]["type"] == "HyperNode"
    assert members(s1) == sorted([t1["metadata"]["name"], t2["metadata"]["name"]])
    assert t1["metadata"]["name"].startswith("hypernode-a3-tier1-")
    assert t1["metadata"]["labels"][SOURCE_LABEL] == "label"
    assert len(todo.create) == 4


def test_updates_and_deletes_only_its_own_hypernodes() -> None:
    first = plan(TYPES, [node("n1", spine="s1", tor="t1"), node("n2", spine="s1", tor="t2")], [])
    manual = {"metadata": {"name": "by-hand", "labels": {}}, "spec": {"tier": 1, "members": []}}
    existing = [*first.create, manual]
    # n2 moves from t2 to t1: t1 gains it, t2 is gone, s1 loses t2; names are kept.
    todo = plan(TYPES, [node("n1", spine="s1", tor="t1"), node("n2", spine="s1", tor="t1")], existing)
    names = {
        o["metadata"]["labels"].get("volcano.sh/tor") or o["metadata"]["labels"]["volcano.sh/spine"]: o["metadata"][
            "name"
        ]
        for o in first.create
    }
    assert not todo.create
    assert {o["metadata"]["name"] for o in todo.replace} == {names["t1"], names["s1"]}
    assert todo.delete == [names["t2"]]  # never "by-hand"
    again = plan(TYPES, [node("n1", spine="s1", tor="t1"), node("n2", spine="s1", tor="t1")], [*todo.replace, manual])
    assert not (again.create or again.replace or again.delete)
