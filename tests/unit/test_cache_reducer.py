"""The cache's pure rules: which objects are mirrored and which delta each change becomes."""

from __future__ import annotations

import json

from lahar.adapters.kube import WatchEvent, item
from lahar_cache.reducer import Known, on_event, relist, wanted


def pod(name: str, rv: str, scheduler: str = "volcano", node: str = "") -> bytes:
    spec = {"schedulerName": scheduler, "nodeName": node, "containers": []}
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv},
            "spec": spec,
        }
    ).encode()


def test_pods_of_other_schedulers_are_mirrored_only_once_on_a_node() -> None:
    assert wanted("pods", pod("a", "1"))
    assert not wanted("pods", pod("a", "1", scheduler="default-scheduler"))
    assert wanted("pods", pod("a", "1", scheduler="default-scheduler", node="n1"))
    assert wanted("nodes", b"{}")


def test_events_become_deltas_once() -> None:
    known = Known()
    added = on_event(known, "pods", WatchEvent("ADDED", item(pod("a", "5"))))
    assert added is not None and added.op == "ADDED" and added.key == "ns/a" and added.rv == "5"
    known.remember(added)
    assert on_event(known, "pods", WatchEvent("MODIFIED", item(pod("a", "5")))) is None
    changed = on_event(known, "pods", WatchEvent("MODIFIED", item(pod("a", "6", node="n1"))))
    assert changed is not None and changed.op == "MODIFIED"
    known.remember(changed)
    gone = on_event(known, "pods", WatchEvent("DELETED", item(pod("a", "7"))))
    assert gone is not None and gone.op == "DELETED"
    known.remember(gone)
    assert on_event(known, "pods", WatchEvent("DELETED", item(pod("a", "7")))) is None


def test_bookmarks_and_unwanted_pods_make_no_delta() -> None:
    known = Known()
    assert on_event(known, "pods", WatchEvent("BOOKMARK", item(pod("x", "9")))) is None
    other = pod("b", "3", scheduler="default-scheduler")
    assert on_event(known, "pods", WatchEvent("ADDED", item(other))) is None


def test_relist_after_gone_emits_missed_deletions_and_changes() -> None:
    known = Known()
    for d in relist(known, "pods", [item(pod("a", "1")), item(pod("b", "1")), item(pod("c", "1"))]):
        known.remember(d)
    deltas = relist(known, "pods", [item(pod("a", "1")), item(pod("b", "2")), item(pod("d", "1"))])
    ops = {(d.op, d.key) for d in deltas}
    assert ops == {("MODIFIED", "ns/b"), ("ADDED", "ns/d"), ("DELETED", "ns/c")}


def workload(scheduler: str) -> bytes:
    template = {"spec": {"schedulerName": scheduler, "containers": []}}
    return json.dumps({"metadata": {"name": "w", "namespace": "ns"}, "spec": {"template": template}}).encode()


def test_workloads_are_mirrored_only_when_their_pods_are_ours() -> None:
    for kind in ("replicasets", "statefulsets", "daemonsets", "batchjobs"):
        assert wanted(kind, workload("volcano"))
        assert not wanted(kind, workload("default-scheduler"))
        assert not wanted(kind, workload(""))
    assert wanted("cronjobs", workload("")) and wanted("commands", b"{}")
