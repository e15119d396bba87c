"""Steps on plain objects (ConfigMaps): create, update, list and patch, with their errors."""

from __future__ import annotations

from lahar.sim.fidelity.client import Client
from lahar.sim.fidelity.compare import Record
from lahar.sim.fidelity.steps.common import (
    APPLY,
    CM,
    JSON_PATCH,
    LABEL,
    STRATEGIC,
    Steps,
    configmap,
    create,
    merge,
    names,
    ns_path,
    pod,
    registrar,
)

STEPS: Steps = []
step = registrar(STEPS)

# --- namespace and basic errors -------------------------------------------------------------------------


@step("namespace: create")
def create_namespace(c: Client) -> Record:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": c.run_id, "labels": {LABEL: c.run_id}}}
    reply = c.call("POST", "/api/v1/namespaces", ns)
    # Pods need the namespace's "default" ServiceAccount; the real controller manager makes it
    # soon, the emulator never: make it now (a 409 from the real one is as good).
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    c.call("POST", ns_path(c, "serviceaccounts"), sa)
    nodes = c.get("/api/v1/nodes").body["items"]
    c.state["node"] = sorted(n["metadata"]["name"] for n in nodes)[0]
    return reply.record()


@step("create: configmap (201)")
def create_configmap(c: Client) -> Record:
    return c.call("POST", ns_path(c, CM), configmap(c, "cm-a", {"app": "a", "tier": "web"}, k="v")).record()


@step("create: AlreadyExists (409)")
def create_existing(c: Client) -> Record:
    return c.call("POST", ns_path(c, CM), configmap(c, "cm-a")).record()


@step("get: NotFound (404)")
def get_missing(c: Client) -> Record:
    return c.get(ns_path(c, CM, "nope")).record()


@step("get: an unknown resource type (404)")
def get_unknown_type(c: Client) -> Record:
    return c.get(ns_path(c, "widgets")).record()


@step("create: generateName")
def create_generated(c: Client) -> Record:
    obj = configmap(c, "")
    obj["metadata"] = {"generateName": "gen-", "labels": obj["metadata"]["labels"]}
    return c.call("POST", ns_path(c, CM), obj).record()


@step("create: invalid name (422)")
def create_invalid_name(c: Client) -> Record:
    return c.call("POST", ns_path(c, CM), configmap(c, "Bad_Name")).record()


@step("create: invalid namespace name (422)")
def create_invalid_namespace(c: Client) -> Record:
    return c.call("POST", "/api/v1/namespaces", {"metadata": {"name": "Bad.Name"}}).record()


@step("create: neither name nor generateName (422)")
def create_no_name(c: Client) -> Record:
    obj = configmap(c, "")
    del obj["metadata"]["name"]
    return c.call("POST", ns_path(c, CM), obj).record()


@step("create: malformed JSON (400)")
def create_malformed(c: Client) -> Record:
    return c.call("POST", ns_path(c, CM), b'{"metadata": ').record()


@step("create: kind does not match the URL (400)")
def create_wrong_kind(c: Client) -> Record:
    obj = {**configmap(c, "cm-kind"), "kind": "Secret"}
    return c.call("POST", ns_path(c, CM), obj).record()


@step("create: namespace does not match the URL (400)")
def create_wrong_namespace(c: Client) -> Record:
    obj = configmap(c, "cm-ns")
    obj["metadata"]["namespace"] = "elsewhere"
    return c.call("POST", ns_path(c, CM), obj).record()


@step("create: resourceVersion set (500)")
def create_with_rv(c: Client) -> Record:
    obj = configmap(c, "cm-rv")
    obj["metadata"]["resourceVersion"] = "5"
    return c.call("POST", ns_path(c, CM), obj).record()


@step("create: dryRun=All stores nothing")
def create_dry_run(c: Client) -> Record:
    reply = c.call("POST", ns_path(c, CM), configmap(c, "cm-dry"), params={"dryRun": "All"})
    return {"create": reply.record(), "get": c.get(ns_path(c, CM, "cm-dry")).code}


# --- update and optimistic concurrency -------------------------------------------------------------------


@step("update: with the current resourceVersion (200)")
def update_current(c: Client) -> Record:
    current = c.get(ns_path(c, CM, "cm-a")).body
    c.state["cm-a-rv"] = current["metadata"]["resourceVersion"]
    current["data"] = {"k": "v1"}
    return c.call("PUT", ns_path(c, CM, "cm-a"), current).record()


@step("update: stale resourceVersion (409 Conflict)")
def update_stale(c: Client) -> Record:
    obj = configmap(c, "cm-a", {"app": "a", "tier": "web"}, k="stale")
    obj["metadata"]["resourceVersion"] = c.state["cm-a-rv"]
    return c.call("PUT", ns_path(c, CM, "cm-a"), obj).record()


@step("update: no resourceVersion (unconditional, 200)")
def update_unconditional(c: Client) -> Record:
    obj = configmap(c, "cm-a", {"app": "a", "tier": "web"}, k="v2")
    return c.call("PUT", ns_path(c, CM, "cm-a"), obj).record()


@step("update: missing object (404)")
def update_missing(c: Client) -> Record:
    return c.call("PUT", ns_path(c, CM, "cm-none"), configmap(c, "cm-none")).record()


@step("update: name differs from the URL (400)")
def update_other_name(c: Client) -> Record:
    return c.call("PUT", ns_path(c, CM, "cm-a"), configmap(c, "cm-b")).record()


# --- lists and selectors -------------------------------------------------------------------------------

_LABEL_QUERIES = (
    "fid=1,app=a",
    "fid=1,app in (a,b),tier!=web",
    "fid=1,!tier",
    "fid=1,tier",
    "fid=1,app notin (a)",
    "fid==1,app=b",
)


@step("list: label selectors")
def list_labels(c: Client) -> Record:
    create(c, ns_path(c, CM), configmap(c, "cm-b", {"app": "b"}))
    create(c, ns_path(c, CM), configmap(c, "cm-c", {"app": "a", "tier": "db"}))
    return {q: names(c.get(ns_path(c, CM), labelSelector=q)) for q in _LABEL_QUERIES}


@step("list: malformed label selector (400)")
def list_bad_label(c: Client) -> Record:
    return c.get(ns_path(c, CM), labelSelector="app in a").record()


@step("list: every configmap of the namespace")
def list_all(c: Client) -> Record:
    reply = c.get(ns_path(c, CM))
    return {"code": reply.code, "kind": reply.body.get("kind"), "names": names(reply)}


@step("list: field selectors")
def list_fields(c: Client) -> Record:
    queries = ("metadata.name=cm-a", "metadata.name!=cm-a", f"metadata.namespace={c.run_id}")
    return {q: names(c.get(ns_path(c, CM), labelSelector="fid=1", fieldSelector=q)) for q in queries}


@step("list: unsupported field selector (400)")
def list_bad_field(c: Client) -> Record:
    return c.get(ns_path(c, CM), fieldSelector="data.k=v").record()


@step("list: resourceVersionMatch without a resourceVersion (422)")
def list_match_alone(c: Client) -> Record:
    return c.get(ns_path(c, CM), resourceVersionMatch="NotOlderThan").record()


@step("list: an exact past resourceVersion")
def list_exact(c: Client) -> Record:
    before = c.get(ns_path(c, CM), labelSelector="fid=1").body["metadata"]["resourceVersion"]
    create(c, ns_path(c, CM), configmap(c, "cm-later"))
    reply = c.get(ns_path(c, CM), labelSelector="fid=1", resourceVersion=before, resourceVersionMatch="Exact")
    c.call("DELETE", ns_path(c, CM, "cm-later"))
    return {"code": reply.code, "names": names(reply)}


@step("list: limit and continue")
def list_pages(c: Client) -> Record:
    first = c.get(ns_path(c, CM), labelSelector="fid=1", limit="2")
    token = first.body["metadata"].get("continue", "")
    second = c.get(ns_path(c, CM), labelSelector="fid=1", limit="2", **{"continue": token})
    return {"first": names(first), "has_continue": bool(token), "second": names(second)}


# --- patches -------------------------------------------------------------------------------------------


@step("patch: json-patch")
def patch_json(c: Client) -> Record:
    ops = [
        {"op": "add", "path": "/metadata/labels/patched", "value": "json"},
        {"op": "replace", "path": "/data/k", "value": "v3"},
    ]
    return c.call("PATCH", ns_path(c, CM, "cm-a"), ops, JSON_PATCH).record()


@step("patch: json-patch test fails (422)")
def patch_json_test(c: Client) -> Record:
    ops = [{"op": "test", "path": "/data/k", "value": "nope"}]
    return c.call("PATCH", ns_path(c, CM, "cm-a"), ops, JSON_PATCH).record()


@step("patch: json-patch removes a missing path (422)")
def patch_json_missing(c: Client) -> Record:
    ops = [{"op": "remove", "path": "/data/absent"}]
    return c.call("PATCH", ns_path(c, CM, "cm-a"), ops, JSON_PATCH).record()


@step("patch: json-patch that is not a list (400)")
def patch_json_not_list(c: Client) -> Record:
    return c.call("PATCH", ns_path(c, CM, "cm-a"), {"op": "add"}, JSON_PATCH).record()


@step("patch: merge-patch, null deletes")
def patch_merge(c: Client) -> Record:
    body = {"metadata": {"labels": {"patched": None, "merge": "yes"}}, "data": {"k2": "v"}}
    return merge(c, ns_path(c, CM, "cm-a"), body).record()


@step("patch: merge-patch with a stale resourceVersion (409)")
def patch_merge_stale(c: Client) -> Record:
    body = {"metadata": {"resourceVersion": c.state["cm-a-rv"]}, "data": {"k": "stale"}}
    return merge(c, ns_path(c, CM, "cm-a"), body).record()


@step("patch: strategic-merge, finalizers as a set")
def patch_strategic(c: Client) -> Record:
    path = ns_path(c, CM, "cm-a")
    add = {"metadata": {"finalizers": ["fidelity.lahar.io/a"]}, "data": {"k3": "v"}}
    first = c.call("PATCH", path, add, STRATEGIC)
    again = c.call("PATCH", path, {"metadata": {"finalizers": ["fidelity.lahar.io/b"]}}, STRATEGIC)
    drop = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["fidelity.lahar.io/a", "fidelity.lahar.io/b"]}}
    last = c.call("PATCH", path, drop, STRATEGIC)
    return {"first": first.record(), "again": again.body["metadata"].get("finalizers"), "last": last.record()}


@step("patch: strategic-merge of a pod's containers by name")
def patch_strategic_pod(c: Client) -> Record:
    create(c, ns_path(c, "pods"), pod(c, "pod-sm"))
    patch = {"metadata": {"labels": {"x": "y"}}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
    reply = c.call("PATCH", ns_path(c, "pods", "pod-sm"), patch, STRATEGIC)
    return {
        "code": reply.code,
        "containers": reply.body["spec"]["containers"],
        "labels": reply.body["metadata"]["labels"],
    }


@step("patch: apply (server-side apply)")
def patch_apply(c: Client) -> Record:
    obj = configmap(c, "cm-applied", {"app": "applied"}, k="v")
    reply = c.call("PATCH", ns_path(c, CM, "cm-applied"), obj, APPLY, {"fieldManager": "fidelity"})
    c.call("DELETE", ns_path(c, CM, "cm-applied"))  # the later selections must not see it
    return reply.record()


@step("patch: unsupported media type (415)")
def patch_unknown_type(c: Client) -> Record:
    return c.call("PATCH", ns_path(c, CM, "cm-a"), {"data": {}}, "text/plain").record()


@step("patch: missing object (404)")
def patch_missing(c: Client) -> Record:
    return merge(c, ns_path(c, CM, "cm-none"), {"data": {"k": "v"}}).record()
