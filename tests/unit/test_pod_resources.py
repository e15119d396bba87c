"""Negative and out-of-bounds pod resources: refused with kube-apiserver's words, and a pod that
carries them anyway is an unreadable pod to the scheduler (a condition, never room freed)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from builders import node, pod, podgroup, queue
from lahar.adapters.mirror import MirrorState
from lahar.api.codec import DecodeError, decode_as, to_json
from lahar.api.objects import Pod
from lahar.api.podresources import pod_resource_causes
from lahar.wire.messages import Delta
from lahar_scheduler.decisions import Sent, pod_conditions
from lahar_scheduler.live import LiveView


def _raw_pod(name: str, requests: dict[str, Any], node_name: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": {"scheduling.k8s.io/group-name": "pg"}},
        "spec": {
            "schedulerName": "volcano",
            "nodeName": node_name,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}],
        },
    }


def test_typed_and_raw_pods_give_the_same_causes() -> None:
    raw = _raw_pod("p", {"cpu": "-1", "memory": "1Gi"})
    raw["spec"]["initContainers"] = [{"name": "i", "resources": {"limits": {"memory": "-5Gi"}}}]
    raw["spec"]["overhead"] = {"cpu": -2}
    expected = [
        ("spec.containers[0].resources.requests[cpu]", 'Invalid value: "-1": must be greater than or equal to 0'),
        (
            "spec.initContainers[0].resources.limits[memory]",
            'Invalid value: "-5Gi": must be greater than or equal to 0',
        ),
        ("spec.overhead[cpu]", 'Invalid value: "-2": must be greater than or equal to 0'),
    ]
    assert pod_resource_causes(raw["spec"]) == expected
    typed = decode_as(raw, Pod)
    assert pod_resource_causes(typed.spec) == expected
    assert pod_resource_causes(_raw_pod("ok", {"cpu": "0", "memory": 1})["spec"]) == []


def test_raw_values_that_are_not_quantities_are_causes() -> None:
    causes = pod_resource_causes(_raw_pod("p", {"cpu": "9" * 400, "memory": True, "x/y": "1e30"})["spec"])
    assert [field for field, _ in causes] == [
        "spec.containers[0].resources.requests[cpu]",
        "spec.containers[0].resources.requests[memory]",
        "spec.containers[0].resources.requests[x/y]",
    ]
    assert causes[0][1].endswith(": longer than 64 characters") and len(causes[0][1]) < 100
    assert causes[1][1] == 'Invalid value: "True": must be a quantity'
    assert causes[2][1] == 'Invalid value: "1e30": too large (more than 2^63-1 milli-units)'


def _view() -> LiveView:
    objects = {
        "nodes": {"n1": to_json(node("n1", cpu="4", memory="8Gi"))},
        "queues": {"default": to_json(queue("default"))},
        "podgroups": {"default/pg": to_json(podgroup("pg", min_member=1))},
    }
    view = LiveView(now=100.0)
    view.load(MirrorState(seq=1, stream="s", objects=objects), now=100.0)
    return view


def _delta(raw: dict[str, Any]) -> Delta:
    key = f"default/{raw['metadata']['name']}"
    return Delta(kind="pods", op="ADDED", key=key, rv="2", obj=msgspec.Raw(msgspec.json.encode(raw)))


@pytest.mark.parametrize(
    ("cpu", "why"),
    [
        ("-1", 'requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
        ("9" * 400, "is not a quantity: longer than 64 characters"),
        ("99999999999999999", "is not a quantity: too large (more than 2^63-1 milli-units)"),
    ],
)
def test_a_pending_pod_with_bad_requests_gets_a_condition_and_no_place(cpu: str, why: str) -> None:
    view = _view()
    with pytest.raises(DecodeError):  # the service dead-letters the delta and goes on
        view.apply(_delta(_raw_pod("bad", {"cpu": cpu})))
    assert "default/bad" not in view.snapshot.tasks
    assert why in view.invalid["default/bad"]
    conditions = pod_conditions(view.snapshot, view.invalid, "s1", 7, Sent())
    assert [(c.name, c.reason) for c in conditions] == [("bad", "Unschedulable")]
    assert conditions[0].message.startswith("ignored by the scheduler: pods/default/bad.spec.containers[0]")
    assert why in conditions[0].message


def test_a_bound_pod_with_a_negative_request_frees_no_room() -> None:
    view = _view()
    view.apply(_delta(_raw_pod("real", {"cpu": "2"}, node_name="n1")))
    assert view.snapshot.nodes.by_name["n1"].used.milli_cpu == 2000
    with pytest.raises(DecodeError, match="must be greater than or equal to 0"):
        view.apply(_delta(_raw_pod("neg", {"cpu": "-3"}, node_name="n1")))
    assert view.snapshot.nodes.by_name["n1"].used.milli_cpu == 2000


def test_a_mirror_load_skips_a_bad_pod_and_reports_it() -> None:
    objects = {
        "nodes": {"n1": to_json(node("n1", cpu="4", memory="8Gi"))},
        "pods": {
            "default/neg": msgspec.json.encode(_raw_pod("neg", {"cpu": "-1"})),
            "default/ok": to_json(pod("ok", group="pg", cpu="1")),
        },
    }
    view = LiveView(now=100.0)
    loaded = view.load(MirrorState(seq=1, stream="s", objects=objects), now=100.0)
    assert loaded.skipped is not None and [key for _, key, _ in loaded.skipped] == ["default/neg"]
    assert "default/ok" in view.snapshot.tasks and "default/neg" not in view.snapshot.tasks
    assert "must be greater than or equal to 0" in view.invalid["default/neg"]
