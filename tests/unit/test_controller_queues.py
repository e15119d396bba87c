"""Queue rules beyond the Volcano corpus: the status counters, the standard queues, the
parent/child propagation of close and open, and that a request writes only what changes."""

from __future__ import annotations

from typing import Any

from lahar_controller import queues as q


def queue(name: str, state: str = "Open", parent: str = "root", closed_by_parent: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if closed_by_parent is not None:
        meta["annotations"] = {q.CLOSED_BY_PARENT: closed_by_parent}
    return {"kind": "Queue", "metadata": meta, "spec": {"parent": parent}, "status": {"state": state}}


def pg(phase: str) -> dict[str, Any]:
    return {"kind": "PodGroup", "status": {"phase": phase}}


def test_status_counts_podgroups_by_phase() -> None:
    counts = q.status_counts([pg("Pending"), pg("Running"), pg("Running"), pg("Inqueue"), pg("Completed"), pg("")])
    assert counts == {"pending": 1, "running": 2, "unknown": 0, "inqueue": 1, "completed": 1}


def test_sync_writes_counts_and_only_what_changed() -> None:
    plan = q.plan(queue("a"), q.SYNC_QUEUE, [pg("Running")], [queue("root", parent="")])
    assert plan.state == "Open"
    assert plan.status == {"pending": 0, "running": 1, "unknown": 0, "inqueue": 0, "completed": 0}
    synced = queue("a")
    synced["status"].update(plan.status)
    assert q.plan(synced, q.SYNC_QUEUE, [pg("Running")], [queue("root", parent="")]).status == {}


def test_new_queue_gets_root_parent_and_opens() -> None:
    new = {"kind": "Queue", "metadata": {"name": "a"}, "spec": {}}
    plan = q.plan(new, q.SYNC_QUEUE, [], [])
    assert plan.state == "Open" and plan.status["state"] == "Open"
    assert plan.spec == {"parent": "root"}
    assert q.plan(queue("root", parent=""), q.SYNC_QUEUE, [], []).spec == {}


def test_close_busy_queue_waits_in_closing_then_closes() -> None:
    busy = q.plan(queue("a"), q.CLOSE_QUEUE, [pg("Running")], [])
    assert busy.state == "Closing" and busy.status["state"] == "Closing"
    assert ("Normal", "CloseQueue", "Close queue succeed") in busy.events
    still = q.plan(queue("a", "Closing"), q.SYNC_QUEUE, [pg("Running")], [])
    assert still.state == "Closing" and "state" not in still.status
    done = q.plan(queue("a", "Closing"), q.SYNC_QUEUE, [], [])
    assert done.state == "Closed" and done.status["state"] == "Closed"


def test_unknown_stored_state_drops_the_request() -> None:
    plan = q.plan(queue("a", "Weird"), q.OPEN_QUEUE, [], [])
    assert plan.state is None and plan.status == {} and plan.requests == []


def test_root_queue_is_never_closed() -> None:
    plan = q.plan(queue("root", parent=""), q.CLOSE_QUEUE, [], [])
    assert plan.state is None and plan.status == {}


def test_closing_parent_closes_open_children_and_reopening_reopens_them() -> None:
    parent, child, other = queue("p"), queue("c", parent="p"), queue("d", "Closed", parent="p")
    every = [parent, child, other]
    closing = q.plan(parent, q.CLOSE_QUEUE, [], every)
    assert closing.requests == [("c", "CloseQueue")]
    assert closing.annotations == {"c": {q.CLOSED_BY_PARENT: "true"}}
    # the children as the requests leave them, the parent closed
    closed_parent = queue("p", "Closed", closed_by_parent="false")
    child_closed = queue("c", "Closed", parent="p", closed_by_parent="true")
    opening = q.plan(closed_parent, q.OPEN_QUEUE, [], [closed_parent, child_closed, other])
    assert opening.state == "Open"
    assert opening.requests == [("c", "OpenQueue")]  # d was closed by hand: it stays closed


def test_open_child_under_closed_parent_is_refused_and_sync_recloses_it() -> None:
    parent = queue("p", "Closed")
    child = queue("c", "Closed", parent="p")
    refused = q.plan(child, q.OPEN_QUEUE, [], [parent, child])
    assert refused.error and refused.status == {}
    opened = queue("c", "Open", parent="p")
    sync = q.plan(opened, q.SYNC_QUEUE, [], [parent, opened])
    assert sync.requests == [("c", "CloseQueue")]


def test_missing_standard_queues() -> None:
    assert [x["metadata"]["name"] for x in q.missing_queues([])] == ["root", "default"]
    assert [x["metadata"]["name"] for x in q.missing_queues([queue("default")])] == ["root"]
    assert q.missing_queues([queue("default"), queue("root", parent="")]) == []
    assert q.desired_state({"status": {}}) == "Open" and q.desired_state(queue("a", "Closed")) is None
