"""Steps on Volcano's custom resources, watches, garbage collection and Table output."""

from __future__ import annotations

from lahar.sim.fidelity.client import Client, Reply
from lahar.sim.fidelity.compare import Obj, Record
from lahar.sim.fidelity.steps.common import (
    BATCH,
    CM,
    LABEL,
    SCHED,
    STRATEGIC,
    TABLE,
    Steps,
    configmap,
    create,
    gone,
    merge,
    metadata_of,
    names,
    ns_path,
    queue_path,
    registrar,
    volcano,
)

STEPS: Steps = []
step = registrar(STEPS)

# --- Volcano's custom resources and their status subresources -------------------------------------------


@step("queue: create drops status")
def queue_create(c: Client) -> Record:
    obj = {
        "apiVersion": SCHED,
        "kind": "Queue",
        "metadata": {"name": c.run_id + "-q", "labels": {LABEL: c.run_id}},
        "spec": {"reclaimable": True},
        "status": {"state": "Open"},
    }
    return c.call("POST", volcano(c, SCHED, "queues", namespaced=False), obj).record()


@step("queue: /status ignores spec, main resource ignores status")
def queue_status(c: Client) -> Record:
    via_status = merge(c, queue_path(c, "status"), {"spec": {"weight": 5}, "status": {"state": "Closed"}})
    via_main = merge(c, queue_path(c), {"spec": {"weight": 3}, "status": {"state": "Open", "pending": 4}})
    return {"via_status": via_status.record(), "via_main": via_main.record()}


@step("job: create, /status ignores spec, main resource ignores status")
def job_status(c: Client) -> Record:
    template = {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}
    obj = {
        "apiVersion": BATCH,
        "kind": "Job",
        "metadata": {"name": "job-a", "labels": {LABEL: c.run_id}},
        "spec": {
            "minAvailable": 1,
            "schedulerName": "volcano",
            "tasks": [{"name": "t", "replicas": 1, "template": template}],
        },
        "status": {"state": {"phase": "Running"}},
    }
    created = c.call("POST", volcano(c, BATCH, "jobs"), obj)
    path = volcano(c, BATCH, "jobs", "job-a")
    via_status = merge(c, path + "/status", {"spec": {"maxRetry": 9}, "status": {"state": {"phase": "Pending"}}})
    via_main = merge(c, path, {"spec": {"maxRetry": 7}, "status": {"state": {"phase": "Completed"}}})
    return {"created": created.record(), "via_status": via_status.record(), "via_main": via_main.record()}


@step("podgroup: no /status subresource; status through the main resource")
def podgroup_status(c: Client) -> Record:
    obj = {
        "apiVersion": SCHED,
        "kind": "PodGroup",
        "metadata": {"name": "pg-a", "labels": {LABEL: c.run_id}},
        "spec": {"minMember": 2, "queue": "default"},
        "status": {"phase": "Pending"},
    }
    created = c.call("POST", volcano(c, SCHED, "podgroups"), obj)
    path = volcano(c, SCHED, "podgroups", "pg-a")
    sub = merge(c, path + "/status", {"status": {"phase": "Running"}})
    main = merge(c, path, {"status": {"phase": "Inqueue"}, "spec": {"minMember": 3}})
    return {"created": created.record(), "status_sub": sub.record(), "main": main.record()}


@step("custom resource: strategic-merge patch refused (415)")
def custom_strategic(c: Client) -> Record:
    return c.call("PATCH", queue_path(c), {"spec": {"weight": 2}}, STRATEGIC).record()


# --- watch ---------------------------------------------------------------------------------------------


def summary(event: Obj) -> Record:
    """What a watch event means: its type and its object's name (whole object for errors and bookmarks)."""
    obj = event.get("object") or {}
    if event.get("type") in ("ERROR", "BOOKMARK"):
        return {"type": event.get("type"), "object": obj}
    return {"type": event.get("type"), "name": obj.get("metadata", {}).get("name")}


def watch_summary(result: Obj) -> Record:
    if "events" not in result:
        return result
    return {"code": result["code"], "events": [summary(e) for e in result["events"]]}


@step("watch: from a resourceVersion replays later events")
def watch_from_rv(c: Client) -> Record:
    rv = c.get(ns_path(c, CM), labelSelector="w=1").body["metadata"]["resourceVersion"]
    create(c, ns_path(c, CM), configmap(c, "cm-w", {"w": "1"}))
    merge(c, ns_path(c, CM, "cm-w"), {"data": {"k": "changed"}})
    c.call("DELETE", ns_path(c, CM, "cm-w"))
    result = c.watch(ns_path(c, CM), {"resourceVersion": rv, "labelSelector": "w=1"}, lambda ev: len(ev) >= 3)
    return watch_summary(result)


@step("watch: objects entering and leaving a label selection")
def watch_selection(c: Client) -> Record:
    create(c, ns_path(c, CM), configmap(c, "cm-s", {"sel": "out"}))
    rv = c.get(ns_path(c, CM), labelSelector="sel=in").body["metadata"]["resourceVersion"]
    merge(c, ns_path(c, CM, "cm-s"), {"metadata": {"labels": {"sel": "in"}}})
    merge(c, ns_path(c, CM, "cm-s"), {"metadata": {"labels": {"sel": "out"}}})
    result = c.watch(ns_path(c, CM), {"resourceVersion": rv, "labelSelector": "sel=in"}, lambda ev: len(ev) >= 2)
    return watch_summary(result)


@step("watch: sendInitialEvents ends with the initial-events-end bookmark")
def watch_initial_events(c: Client) -> Record:
    params = {
        "sendInitialEvents": "true",
        "allowWatchBookmarks": "true",
        "resourceVersionMatch": "NotOlderThan",
        "labelSelector": "fid=1,app",
    }
    result = c.watch(ns_path(c, CM), params, lambda ev: any(e.get("type") == "BOOKMARK" for e in ev))
    return watch_summary(result)


@step("watch: the bookmark of a pod watch")
def watch_pod_bookmark(c: Client) -> Record:
    params = {
        "sendInitialEvents": "true",
        "allowWatchBookmarks": "true",
        "resourceVersionMatch": "NotOlderThan",
        "fieldSelector": "metadata.name=no-such-pod",
    }
    result = c.watch(ns_path(c, "pods"), params, lambda ev: any(e.get("type") == "BOOKMARK" for e in ev))
    return watch_summary(result)


@step("watch: a too old resourceVersion (410 Expired)")
def watch_too_old(c: Client) -> Record:
    # Queues: their watch cache began when their CRD was made, well after resourceVersion 1.
    params = {"resourceVersion": "1", "labelSelector": f"{LABEL}={c.run_id}"}
    return watch_summary(c.watch(f"/apis/{SCHED}/queues", params, lambda ev: len(ev) >= 1))


@step("watch: an invalid resourceVersion (500)")
def watch_bad_rv(c: Client) -> Record:
    return c.watch(ns_path(c, CM), {"resourceVersion": "abc"}, lambda ev: len(ev) >= 1)


# --- ownerReferences and garbage collection --------------------------------------------------------------


def family(c: Client, parent: str, block: bool = False) -> tuple[str, str]:
    """A parent configmap and a child it owns; their paths."""
    made = create(c, ns_path(c, CM), configmap(c, parent)).body["metadata"]
    child = configmap(c, parent + "-child")
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": parent, "uid": made["uid"]}
    if block:
        owner["blockOwnerDeletion"] = True
    child["metadata"]["ownerReferences"] = [owner]
    create(c, ns_path(c, CM), child)
    return ns_path(c, CM, parent), ns_path(c, CM, parent + "-child")


@step("gc: background deletion removes dependents")
def gc_background(c: Client) -> Record:
    parent, child = family(c, "gc-bg")
    reply = c.call("DELETE", parent, {"propagationPolicy": "Background"})
    return {"code": reply.code, "parent_gone": c.get(parent).code == 404, "child_gone": gone(c, child)}


@step("gc: foreground deletion waits for dependents")
def gc_foreground(c: Client) -> Record:
    parent, child = family(c, "gc-fg", block=True)
    reply = c.call("DELETE", parent, {"propagationPolicy": "Foreground"})
    first = metadata_of(reply, "deletionTimestamp", "finalizers")
    return {"reply": first, "child_gone": gone(c, child), "parent_gone": gone(c, parent)}


@step("gc: orphan deletion keeps dependents, without the ownerReference")
def gc_orphan(c: Client) -> Record:
    parent, child = family(c, "gc-or")
    reply = c.call("DELETE", parent, {"propagationPolicy": "Orphan"})
    parent_gone = gone(c, parent)
    orphaned = c.poll(lambda: not c.get(child).body["metadata"].get("ownerReferences"), 10)
    return {"code": reply.code, "parent_gone": parent_gone, "child": c.get(child).code, "orphaned": orphaned}


@step("gc: invalid propagationPolicy (422)")
def gc_bad_policy(c: Client) -> Record:
    return c.call("DELETE", ns_path(c, CM, "cm-c"), {"propagationPolicy": "Sometimes"}).record()


@step("deletecollection: by label selector")
def delete_collection(c: Client) -> Record:
    reply = c.call("DELETE", ns_path(c, CM), params={"labelSelector": "fid=1,app=b"})
    return {"reply": reply.record(), "left": names(c.get(ns_path(c, CM), labelSelector="app=b"))}


# --- Table output (kubectl get) ------------------------------------------------------------------------

_AGE = ("Age", "Created At", "AGE")


def table_summary(reply: Reply) -> Record:
    body = reply.body if isinstance(reply.body, dict) else {}
    if body.get("kind") != "Table":
        return {"code": reply.code, "kind": body.get("kind")}
    columns = body.get("columnDefinitions", [])
    ages = {i for i, col in enumerate(columns) if col.get("name") in _AGE}
    return {
        "code": reply.code,
        "kind": body["kind"],
        "apiVersion": body.get("apiVersion"),
        "columns": [{k: col.get(k) for k in ("name", "type", "format", "priority")} for col in columns],
        "rows": [
            {
                "cells": [cell for i, cell in enumerate(row.get("cells", [])) if i not in ages],
                "object": {k: row.get("object", {}).get(k) for k in ("kind", "apiVersion")},
            }
            for row in body.get("rows", [])
        ],
    }


@step("table: pods as kubectl asks for them")
def table_pods(c: Client) -> Record:
    reply = c.call("GET", ns_path(c, "pods"), params={"fieldSelector": "metadata.name=pod-nt"}, accept=TABLE)
    return table_summary(reply)


@step("table: configmaps")
def table_configmaps(c: Client) -> Record:
    reply = c.call("GET", ns_path(c, CM), params={"labelSelector": "fid=1,app"}, accept=TABLE)
    return table_summary(reply)


@step("table: a Volcano queue (printer columns)")
def table_queue(c: Client) -> Record:
    return table_summary(c.call("GET", queue_path(c), accept=TABLE))


@step("table: Volcano podgroups (printer columns)")
def table_podgroups(c: Client) -> Record:
    return table_summary(c.call("GET", volcano(c, SCHED, "podgroups"), accept=TABLE))


@step("delete: a queue (the reply)")
def delete_queue(c: Client) -> Record:
    obj = {"apiVersion": SCHED, "kind": "Queue", "metadata": {"name": c.run_id + "-q2", "labels": {LABEL: c.run_id}}}
    create(c, volcano(c, SCHED, "queues", namespaced=False), obj)
    return c.call("DELETE", volcano(c, SCHED, "queues", c.run_id + "-q2", namespaced=False)).record()
