"""``lahar describe``'s text: kubectl's labels for fields, the generic layout of a PodGroup, the
pod layout, and the Events table with kubectl's "(xN over AGE)"."""

from __future__ import annotations

import time

from lahar.cli.describe import core_event, describe, event_selector, kubectl_time, label


def _stamp(seconds_ago: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds_ago))


def test_labels_as_kubectl_writes_them() -> None:
    assert label("minMember") == "Min Member"
    assert label("transitionID") == "Transition ID"
    assert label("uid") == "UID"
    assert label("lastTransitionTime") == "Last Transition Time"
    assert label("podIP") == "Pod IP"


def test_podgroup_generic_layout_with_events() -> None:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "big", "namespace": "ns", "uid": "u1", "managedFields": [{"x": 1}]},
        "spec": {"minMember": 3, "queue": "default"},
        "status": {"phase": "Inqueue", "conditions": [{"type": "Unschedulable", "status": "True"}]},
    }
    warning = {
        "type": "Warning",
        "reason": "Unschedulable",
        "lastTimestamp": _stamp(30),
        "firstTimestamp": _stamp(600),
        "count": 4,
        "source": {"component": "volcano"},
        "message": "3/3 tasks in gang unschedulable",
        "metadata": {},
    }
    out = describe(pg, [core_event(warning)])
    assert out.startswith("Name:         big\nNamespace:    ns\nLabels:       <none>\n")
    assert "Metadata:\n  UID:  u1\n" in out and "Managed" not in out
    assert "Spec:\n  Min Member:  3\n  Queue:       default\n" in out
    assert "Status:\n  Conditions:\n    Status:  True\n    Type:    Unschedulable\n  Phase:  Inqueue\n" in out
    events = out[out.index("Events:") :].splitlines()
    assert events[1].split() == ["Type", "Reason", "Age", "From", "Message"]
    assert events[3].startswith("  Warning  Unschedulable  30s (x4 over 10m)  volcano  3/3 tasks")


def test_pod_layout_and_no_events() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "annotations": {"scheduling.k8s.io/group-name": "pg"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "busybox"}]},
        "status": {"phase": "Running", "hostIP": "10.0.0.1", "startTime": "2026-01-02T03:04:05Z"},
    }
    out = describe(pod, [])
    assert "Node:             n1/10.0.0.1\n" in out
    assert "Start Time:       Fri, 02 Jan 2026 03:04:05 +0000\n" in out
    assert "Annotations:      scheduling.k8s.io/group-name: pg\n" in out
    assert "Containers:\n  main:\n    Image:  busybox\n" in out
    assert out.endswith("Events:  <none>\n")
    assert kubectl_time("not a time") == "not a time"


def test_event_selector_is_kubectls() -> None:
    obj = {"kind": "PodGroup", "metadata": {"name": "big", "namespace": "ns", "uid": "u1"}}
    assert event_selector(obj) == (
        "involvedObject.name=big,involvedObject.kind=PodGroup,involvedObject.namespace=ns,involvedObject.uid=u1"
    )


def test_the_emulators_event_table_has_the_api_servers_columns() -> None:
    from lahar.sim.resources import ResourceType
    from lahar.sim.tables import to_table

    event = {
        "metadata": {"name": "big.18ed"},
        "involvedObject": {"kind": "PodGroup", "name": "big"},
        "type": "Warning",
        "reason": "Unschedulable",
        "message": " 3/3 tasks in gang unschedulable ",
        "source": {"component": "volcano"},
        "firstTimestamp": _stamp(600),
        "lastTimestamp": _stamp(30),
        "count": 4,
    }
    table = to_table(ResourceType("", "v1", "events", "Event", True), [event], "7")
    names = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert [n for n, p in names if p == 0] == ["Last Seen", "Type", "Reason", "Object", "Message"]
    (row,) = table["rows"]
    assert row["cells"] == [
        "30s",
        "Warning",
        "Unschedulable",
        "podgroup/big",
        "",
        "volcano",
        "3/3 tasks in gang unschedulable",
        "10m",
        4,
        "big.18ed",
    ]
