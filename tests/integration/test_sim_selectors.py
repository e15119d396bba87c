"""Label and field selectors on list (and their parser's errors)."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lahar.sim import bind_pod
from lahar.sim.errors import ApiError
from lahar.sim.selectors import parse_label_selector


@pytest.fixture
def labelled(core: client.CoreV1Api, ns: str, pod) -> str:
    specs = {"a": {"app": "x", "tier": "web"}, "b": {"app": "y", "tier": "db"}, "c": {"app": "z"}, "d": {}}
    for name, labels in specs.items():
        core.create_namespaced_pod(ns, pod(name, labels=labels or None))
    return ns


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=x", ["a"]),
        ("app==x", ["a"]),
        ("app!=x", ["b", "c", "d"]),
        ("app in (x,y)", ["a", "b"]),
        ("app notin (x, y)", ["c", "d"]),
        ("tier", ["a", "b"]),
        ("!tier", ["c", "d"]),
        ("app,!tier", ["c"]),
        ("app in (x,y),tier=db", ["b"]),
        ("", ["a", "b", "c", "d"]),
    ],
)
def test_label_selectors(core: client.CoreV1Api, labelled: str, selector: str, expected: list[str]) -> None:
    names = [p.metadata.name for p in core.list_namespaced_pod(labelled, label_selector=selector).items]
    assert names == expected


def test_field_selectors(core: client.CoreV1Api, labelled: str) -> None:
    ns = labelled
    bind_pod(core.api_client, ns, "a", "node-0001")
    bind_pod(core.api_client, ns, "b", "node-0002")

    def names(selector: str) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod(ns, field_selector=selector).items]

    assert names("spec.nodeName=") == ["c", "d"]
    assert names("spec.nodeName!=") == ["a", "b"]
    assert names("spec.nodeName=node-0001") == ["a"]
    assert names("spec.nodeName==node-0002") == ["b"]
    assert names("metadata.name=c") == ["c"]
    assert names(f"metadata.namespace={ns},metadata.name!=c") == ["a", "b", "d"]
    assert names("spec.schedulerName=default-scheduler") == ["a", "b", "c", "d"]
    assert names("status.phase=Pending,spec.nodeName=") == ["c", "d"]
    all_ns = core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={ns},spec.nodeName=")
    assert sorted(p.metadata.name for p in all_ns.items) == ["c", "d"]


def test_unknown_field_is_400(core: client.CoreV1Api, ns: str) -> None:
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod(ns, field_selector="spec.bogus=1")
    assert err.value.status == 400 and "field label not supported: spec.bogus" in err.value.body


def test_bad_label_selector_is_400(core: client.CoreV1Api, ns: str) -> None:
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod(ns, label_selector="app in (x")
    assert err.value.status == 400


def test_node_labels_and_selectors(core: client.CoreV1Api) -> None:
    gpu = core.list_node(label_selector="zone=b").items
    assert [n.metadata.name for n in gpu] == ["gpu-0001", "gpu-0002"]
    assert gpu[0].status.allocatable["nvidia.com/gpu"] == "4"
    assert gpu[0].spec.taints[0].key == "dedicated" and gpu[0].spec.taints[0].effect == "NoSchedule"
    assert [n.metadata.name for n in core.list_node(field_selector="metadata.name=node-0003").items] == ["node-0003"]


@pytest.mark.parametrize("text", ["a=", "a in ()", "a>3", "x/y=z", "a notin (b,c),d!=e"])
def test_parser_accepts(text: str) -> None:
    assert parse_label_selector(text) is not None


@pytest.mark.parametrize("text", ["a b", "=x", "a in x", "a>b", "-a=b", "a=b c"])
def test_parser_refuses(text: str) -> None:
    with pytest.raises(ApiError) as err:
        parse_label_selector(text)
    assert err.value.code == 400
