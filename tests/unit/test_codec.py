"""Decoding Kubernetes objects: errors name the document and field path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lahar.api.codec import DecodeError, decode_object, iter_documents, to_builtins, to_json
from lahar.api.files import FileError, Skipped, load_file
from lahar.api.objects import Node, Pod, PodGroup, PriorityClass, Queue
from lahar.api.quantity import Quantity


def _pod(requests: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}], **spec},
    }


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_pod({"cpu": "1x"}), "objects[3].spec.containers[0].resources.requests.cpu: '1x' is not a quantity"),
        (
            _pod({"memory": "1Gi", "nvidia.com/gpu": "2 gpus"}),
            "objects[3].spec.containers[0].resources.requests.nvidia.com/gpu: '2 gpus' is not a quantity",
        ),
        (_pod({"cpu": True}), "objects[3].spec.containers[0].resources.requests.cpu: True is not a quantity"),
        (_pod({}, priority="high"), "objects[3].spec.priority: expected int | null, got str"),
        (
            _pod({}, tolerations=[{"key": "a"}, {"operator": 3}]),
            "objects[3].spec.tolerations[1].operator: expected str, got int",
        ),
        (
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": 5}},
            "objects[3].metadata.name: expected str, got int",
        ),
        (
            {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "spec": {"minMember": "x"}},
            "objects[3].spec.minMember: expected int, got str",
        ),
        (
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "spec": {"capability": {"cpu": "-"}},
            },
            "objects[3].spec.capability.cpu: '-' is not a quantity",
        ),
        (
            {"apiVersion": "v1", "kind": "Node", "status": {"allocatable": {"pods": "ten"}}},
            "objects[3].status.allocatable.pods: 'ten' is not a quantity",
        ),
        ([1, 2], "objects[3]: expected an object, got list"),
    ],
)
def test_decode_errors_name_the_path(raw: Any, message: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode_object(raw, "objects[3]")
    assert str(info.value) == message
    assert info.value.path == message.split(": ", 1)[0]


def test_unknown_kinds_are_skipped_not_errors() -> None:
    assert decode_object({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": 1}}) is None
    assert decode_object({"apiVersion": "apps/v1", "kind": "Deployment"}) is None


def test_kinds_are_matched_by_group_not_version() -> None:
    assert isinstance(decode_object({"apiVersion": "v1", "kind": "Pod"}), Pod)
    assert isinstance(decode_object({"apiVersion": "scheduling.volcano.sh/v1", "kind": "Queue"}), Queue)
    assert isinstance(
        decode_object({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PriorityClass"}), PriorityClass
    )


def test_unknown_fields_are_ignored_and_camel_case_is_read() -> None:
    raw = _pod({"cpu": "500m"}, nodeName="n1", somethingNew={"x": 1}, priorityClassName="high")
    raw["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    p = decode_object(raw)
    assert isinstance(p, Pod)
    assert p.spec.node_name == "n1"
    assert p.spec.priority_class_name == "high"
    assert p.metadata.creation_timestamp == "2024-01-01T00:00:00Z"
    assert p.spec.containers[0].resources.requests["cpu"] == Quantity("0.5")


def test_round_trip_keeps_quantity_text() -> None:
    raw = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"zone": "a"}},
        "status": {"allocatable": {"cpu": "1500m", "memory": "2Gi", "pods": 10}},
    }
    n = decode_object(raw)
    assert isinstance(n, Node)
    out = to_builtins(n)
    assert out["apiVersion"] == "v1" and out["kind"] == "Node"
    assert out["status"]["allocatable"] == {"cpu": "1500m", "memory": "2Gi", "pods": 10}
    assert b'"1500m"' in to_json(n)
    assert decode_object(out) == n


def test_podgroup_defaults() -> None:
    pg = decode_object({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup"})
    assert isinstance(pg, PodGroup)
    assert pg.spec.min_member == 0 and pg.spec.min_resources is None and pg.status.phase == ""


def test_iter_documents_expands_lists() -> None:
    text = """
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: a}}
- {apiVersion: v1, kind: Node, metadata: {name: b}}
---
---
apiVersion: v1
kind: Pod
metadata: {name: p}
"""
    kinds = [(d["kind"], d["metadata"]["name"]) for d in iter_documents(text)]
    assert kinds == [("Node", "a"), ("Node", "b"), ("Pod", "p")]


def test_load_file_names_file_document_object_and_field(tmp_path: Path) -> None:
    f = tmp_path / "objs.yaml"
    f.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\n"
        "spec: {containers: [{name: c, resources: {requests: {cpu: 1x}}}]}\n"
    )
    with pytest.raises(FileError) as info:
        load_file(f)
    assert str(info.value) == (
        f"{f}: document 2 (Pod ns/p): spec.containers[0].resources.requests.cpu: '1x' is not a quantity"
    )


def test_load_file_reads_cases_lists_and_skips_unknown_kinds(tmp_path: Path) -> None:
    f = tmp_path / "case.yaml"
    f.write_text(
        "name: x\nschedulerConf: 'actions: allocate'\nobjects:\n"
        "- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n"
        "- {apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}\n"
        "---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n2}}\n"
    )
    loaded = load_file(f)
    assert [o.metadata.name for o in loaded.objects] == ["n1", "n2"]
    assert loaded.case is not None and loaded.case["name"] == "x"
    assert loaded.skipped == [Skipped(f"{f}: document 1, objects[1]", "v1", "ConfigMap", "cm")]


def test_load_file_errors_for_unreadable_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(FileError, match="cannot read"):
        load_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1,\n")
    with pytest.raises(FileError, match="not valid YAML"):
        load_file(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(FileError, match="document 1: expected a Kubernetes object, got int"):
        load_file(scalar)
