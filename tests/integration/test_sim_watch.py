"""Watch: replay from a resourceVersion, 410 Gone then relist, bookmarks, timeouts,
selector transitions."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from kubernetes import client, watch


def raw_watch(url: str, path: str, params: dict[str, Any], until: int, timeout: float = 10.0) -> list[dict]:
    """Read watch events with plain HTTP until ``until`` events arrived or the stream ended."""
    events: list[dict] = []
    with (
        httpx.Client(base_url=url, trust_env=False, timeout=timeout) as http,
        http.stream("GET", path, params={"watch": "true", **params}) as reply,
    ):
        assert reply.status_code == 200
        for line in reply.iter_lines():
            if line:
                events.append(json.loads(line))
            if len(events) >= until:
                break
    return events


def test_watch_replays_every_later_event(sim, core: client.CoreV1Api, ns: str) -> None:
    start = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    core.patch_namespaced_config_map("a", ns, {"data": {"k": "v"}})
    core.delete_namespaced_config_map("a", ns)
    events = raw_watch(sim.url, f"/api/v1/namespaces/{ns}/configmaps", {"resourceVersion": start}, until=3)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(start)


def test_official_client_watch_sees_live_events(core: client.CoreV1Api, ns: str, pod) -> None:
    start = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, pod("w"))
    seen = []
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_pod, ns, resource_version=start, timeout_seconds=5):
        seen.append((event["type"], event["object"].metadata.name))
        w.stop()
    assert seen == [("ADDED", "w")]


def test_watch_without_resource_version_starts_with_current_state(sim, core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "x"}})
    events = raw_watch(sim.url, f"/api/v1/namespaces/{ns}/configmaps", {}, until=2)
    # the namespace's kube-root-ca.crt, then x, in name order
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "kube-root-ca.crt"),
        ("ADDED", "x"),
    ]


def test_gone_when_history_is_compacted_then_relist(make_sim) -> None:
    small = make_sim(watch_cache_size=5)
    api = small.api_client()
    core = client.CoreV1Api(api)
    start = core.list_namespaced_config_map("default").metadata.resource_version
    for i in range(10):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    events = raw_watch(small.url, "/api/v1/namespaces/default/configmaps", {"resourceVersion": start}, until=1)
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["kind"] == "Status" and status["code"] == 410 and status["reason"] == "Expired"
    assert "too old resource version" in status["message"]
    # the client relists and watches from the list's resourceVersion
    relisted = core.list_namespaced_config_map("default")
    assert len(relisted.items) == 11  # and the namespace's kube-root-ca.crt
    core.create_namespaced_config_map("default", {"metadata": {"name": "after"}})
    events = raw_watch(
        small.url,
        "/api/v1/namespaces/default/configmaps",
        {"resourceVersion": relisted.metadata.resource_version},
        until=1,
    )
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "after"
    api.close()


def test_official_client_watch_raises_410(make_sim) -> None:
    small = make_sim(watch_cache_size=2)
    api = small.api_client()
    core = client.CoreV1Api(api)
    start = core.list_namespaced_config_map("default").metadata.resource_version
    for i in range(5):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    try:
        for _ in watch.Watch().stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=start,
            timeout_seconds=3,
            _request_timeout=5,
        ):
            raise AssertionError("expected a 410")
    except client.exceptions.ApiException as exc:
        assert exc.status == 410
    api.close()


def test_bookmarks(sim, ns: str) -> None:
    # the session emulator sends bookmarks every 0.3 s
    events = raw_watch(
        sim.url,
        f"/api/v1/namespaces/{ns}/pods",
        {"resourceVersion": "1", "allowWatchBookmarks": "true"},
        until=1,
    )
    bookmark = events[-1]
    assert bookmark["type"] == "BOOKMARK"
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) > 1
    assert bookmark["object"]["kind"] == "Pod"


def test_initial_events_end_bookmark(sim, core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "x", "labels": {"w": "1"}}})
    events = raw_watch(
        sim.url,
        f"/api/v1/namespaces/{ns}/configmaps",
        {
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
            "allowWatchBookmarks": "true",
            "labelSelector": "w",  # not the namespace's kube-root-ca.crt
        },
        until=2,
    )
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_timeout_seconds_ends_the_watch(sim, ns: str) -> None:
    began = time.monotonic()
    events = raw_watch(
        sim.url, f"/api/v1/namespaces/{ns}/pods", {"resourceVersion": "1", "timeoutSeconds": "1"}, until=100
    )
    elapsed = time.monotonic() - began
    assert events == [] and 0.8 <= elapsed < 5


def test_selector_transitions_are_added_and_deleted(sim, core: client.CoreV1Api, ns: str, pod) -> None:
    from lahar.sim import bind_pod

    start = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, pod("t"))
    bind_pod(core.api_client, ns, "t", "node-0001")
    events = raw_watch(
        sim.url,
        f"/api/v1/namespaces/{ns}/pods",
        {"resourceVersion": start, "fieldSelector": "spec.nodeName="},
        until=2,
    )
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]
    # the DELETED carries the last matching state at the binding's resourceVersion
    assert "nodeName" not in events[1]["object"]["spec"]
    events = raw_watch(
        sim.url,
        f"/api/v1/namespaces/{ns}/pods",
        {"resourceVersion": start, "fieldSelector": "spec.nodeName=node-0001"},
        until=1,
    )
    assert events[0]["type"] == "ADDED" and events[0]["object"]["spec"]["nodeName"] == "node-0001"
