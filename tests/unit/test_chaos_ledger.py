"""The chaos ledger's invariants: over-commit at any event, partial gangs, unbound pods."""

from __future__ import annotations

from typing import Any

from lahar.chaos.ledger import Ledger


def _node(name: str, cpu: str = "8") -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}}}


def _pod(name: str, node: str = "", cpu: str = "1", group: str = "g", phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
        "status": {"phase": phase},
    }


def test_a_ninth_cpu_on_an_eight_cpu_node_is_a_violation_at_that_moment() -> None:
    led = Ledger()
    led.node(_node("n1"))
    for i in range(8):
        led.pod(_pod(f"p{i}", "n1"), False, now=1.0)
    assert not led.violations and led.overcommitted_now() == []
    led.pod(_pod("p8", "n1"), False, now=2.0)
    assert [(v.node, v.resource, v.used, v.allocatable, v.at) for v in led.violations] == [
        ("n1", "cpu", 9000, 8000, 2.0)
    ]
    assert led.overcommitted_now() == ["n1"]
    assert led.worst["cpu"] == 9 / 8


def test_finished_pods_free_their_room() -> None:
    led = Ledger()
    led.node(_node("n1", cpu="2"))
    led.pod(_pod("a", "n1"), False, 1.0)
    led.pod(_pod("b", "n1"), False, 1.0)
    led.pod(_pod("a", "n1", phase="Succeeded"), False, 2.0)
    led.pod(_pod("c", "n1"), False, 3.0)
    assert not led.violations


def test_a_gang_bound_below_its_minimum_is_partial_and_finished_pods_count() -> None:
    led = Ledger()
    led.node(_node("n1"))
    led.podgroup({"metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 3}})
    led.podgroup({"metadata": {"name": "h", "namespace": "ns"}, "spec": {"minMember": 2}})
    led.pod(_pod("g0", "n1"), False, 1.0)
    led.pod(_pod("g1", "n1", phase="Succeeded"), False, 1.0)
    led.pod(_pod("g2"), False, 1.0)
    led.pod(_pod("h0", group="h"), False, 1.0)
    assert led.partial_gangs() == [("ns/g", 2, 3)]
    assert led.unbound() == ["ns/g2", "ns/h0"]
    led.pod(_pod("g2", "n1"), False, 2.0)
    assert led.partial_gangs() == []
