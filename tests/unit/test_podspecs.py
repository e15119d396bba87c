"""A load's pod decoder (each distinct spec decoded once) gives exactly what ``decode_raw`` gives,
pod by pod, errors included, and the shape keys ``Snapshot`` derives from it are the same bytes;
whatever the JSON looks like: ``nodeName`` nested or escaped, spaced, repeated, empty, odd."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lahar.api.objects import Pod
from lahar_scheduler.deltas import decode_raw
from lahar_scheduler.framework.snapshot import shape_key, shape_keys
from lahar_scheduler.podspecs import PodDecoder, unplaced
from lahar_scheduler.restart_cluster import build

PLAIN = ["node-1", "node-2", "node-3", "node-4"]  # most pods: what the search can empty
NODES = [*PLAIN, *PLAIN, "", "nodé-ü", "a\u00a0b", "tab\there", 'q"uote', "back\\slash", "x" * 70, "\u2028"]


def _spec(draw: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [
            {
                "name": "main",
                "command": draw(st.sampled_from([["sleep"]] * 6 + [["nodeName"], ['"nodeName":"x"'], ["a\\b"]])),
                "resources": {"requests": {"cpu": draw(st.sampled_from(["1", "2", "500m"] * 3 + ["-1", "lots"]))}},
            }
        ],
    }
    if draw(st.booleans()):
        spec["nodeSelector"] = {draw(st.sampled_from(["nodeName", "zone", "zone"])): draw(st.sampled_from(NODES))}
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    if draw(st.booleans()):
        spec["affinity"] = {"nodeAffinity": {}}
    return spec


@st.composite
def pods(draw: Any) -> list[bytes]:
    """Pods of a few shared specs, each on one of a few nodes (or none, or twice)."""
    templates = [_spec(draw) for _ in range(draw(st.integers(1, 3)))]
    out = []
    for i in range(draw(st.integers(1, 12))):
        spec = dict(draw(st.sampled_from(templates)))
        where = draw(st.sampled_from(["none", "first", "last", "last", "last", "twice"]))
        node = draw(st.sampled_from(NODES))
        if where == "first":
            spec = {"nodeName": node, **spec}
        elif where == "last":
            spec["nodeName"] = node
        text = json.dumps(
            spec, ensure_ascii=draw(st.booleans()), separators=draw(st.sampled_from([(",", ":")] * 3 + [(", ", ": ")]))
        )
        if where == "twice":
            text = text[:-1] + f', "nodeName":{json.dumps(node)},"nodeName":"node-9"}}'
        if draw(st.integers(0, 20)) == 0:
            text = text.replace("volcano", "vol\x01cano")  # a raw control character: not JSON
        meta = {"name": f"p-{i}", "namespace": "ns", "labels": {"a": "b"}}
        out.append(b'{"metadata":' + json.dumps(meta).encode() + b',"spec":' + text.encode() + b',"status":{}}')
    return out


def _exact(key: str, raw: bytes) -> Pod | str:
    try:
        return decode_raw("pods", key, raw)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


@settings(max_examples=300, deadline=None)
@given(pods())
def test_the_decoder_is_decode_raw(raws: list[bytes]) -> None:
    decoder = PodDecoder()
    for i, raw in enumerate(raws):
        key = f"ns/p-{i}"
        want = _exact(key, raw)
        try:
            got, part = decoder.decode(key, raw)
        except Exception as exc:
            assert f"{type(exc).__name__}: {exc}" == want
            continue
        assert isinstance(want, Pod), want
        assert got == want
        assert shape_key(got, part) == shape_key(want)


def test_pods_of_one_job_share_one_template_across_nodes() -> None:
    cluster = build(nodes=8, pods=60, pending=10)
    decoder = PodDecoder()
    decoded = [decoder.decode(key, raw) for key, raw in cluster.objects["pods"]]
    # one per resource shape, placed or not (a pending pod has no nodeName at all)
    assert len({id(pod.spec.containers) for pod, _ in decoded}) <= 6
    assert {pod.spec.node_name for pod, _ in decoded} >= {"node-00000", "node-00007", ""}
    for (pod, _), (key, raw) in zip(decoded, cluster.objects["pods"], strict=True):
        assert pod == decode_raw("pods", key, raw)


@pytest.mark.parametrize(
    ("raw", "node"),
    [
        (b'{"a":1,"nodeName":"n-1"}', "n-1"),
        (b'{"nodeName":""}', None),  # already empty
        (b'{"nodeName" : "n"}', None),  # spaced: not searched
        (b'{"nodeName":"n","x":{"nodeName":"m"}}', None),  # twice
        (b'{"nodeName":"n","x":"\\u0041"}', None),  # an escape somewhere
        (b'{"nodeName":"a\x01b"}', None),  # a control character
        (b'{"x":"nodeName""nodeName":"n"}', None),  # overlapping another (not JSON anyway)
        (b'{"nodeName":"n","nodeName":"m"}', None),  # repeated
    ],
)
def test_what_the_search_empties(raw: bytes, node: str | None) -> None:
    key, found = unplaced(raw)
    assert found == node
    if node is None:
        assert key == raw
    else:
        assert msgspec.json.decode(key)["nodeName"] == ""


def test_shared_shape_keys_are_each_pods_own() -> None:
    cluster = build(nodes=8, pods=60, pending=10)
    decoder = PodDecoder()
    pods, parts = zip(*(decoder.decode(key, raw) for key, raw in cluster.objects["pods"]), strict=True)
    keys = shape_keys(pods, parts)
    assert keys == [shape_key(pod) for pod in pods]
    assert len({id(k) for k in keys}) <= 6


def test_pods_that_share_no_spec_stop_the_search_and_decode_as_ever() -> None:
    decoder = PodDecoder()
    raws = []
    for i in range(1200):  # a hostname per pod (Volcano's svc plugin sets one): no two specs alike
        spec = {"schedulerName": "volcano", "hostname": f"p-{i}", "nodeName": f"node-{i % 7}", "containers": [{}]}
        raws.append(json.dumps({"metadata": {"name": f"p-{i}", "namespace": "ns"}, "spec": spec}).encode())
    for i, raw in enumerate(raws):
        got, _ = decoder.decode(f"ns/p-{i}", raw)
        assert got == decode_raw("pods", f"ns/p-{i}", raw)
    assert not decoder.sharing
