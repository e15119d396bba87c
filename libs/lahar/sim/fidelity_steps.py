"""The scripted sequence of ``lahar.sim.fidelity``: each step makes a few API calls and returns
what it saw.  Steps run in order on one server and may leave names for later ones in
``client.state``; everything lives in the run's namespace (``client.run_id``) or, when
cluster-scoped, is named after it and removed by ``cleanup``.

A step records codes and bodies as they came; ``fidelity.normalize`` takes out what may
differ between servers (uids, resourceVersions, timestamps, names made from the run id).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lahar.sim.fidelity import Client, Known, Obj, Record, Reply, Step, Verdict, compare
from lahar.sim.fidelity_webhook import WebhookServer

STEPS: list[tuple[str, Step]] = []
LABEL = "fidelity.lahar.io/run"  # on every object a run creates, for the cleanup
CM = "configmaps"


def step(name: str) -> Callable[[Step], Step]:
    def add(fn: Step) -> Step:
        STEPS.append((name, fn))
        return fn

    return add


# --- paths and objects ---------------------------------------------------------------------------------


def ns_path(c: Client, plural: str, name: str = "", sub: str = "", prefix: str = "/api/v1") -> str:
    path = f"{prefix}/namespaces/{c.run_id}/{plural}"
    return path + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")


def volcano(c: Client, group_version: str, plural: str, name: str = "", sub: str = "", namespaced: bool = True) -> str:
    if namespaced:
        return ns_path(c, plural, name, sub, prefix=f"/apis/{group_version}")
    return f"/apis/{group_version}/{plural}" + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")


def configmap(c: Client, name: str, labels: dict[str, str] | None = None, **data: str) -> Obj:
    meta: Obj = {"name": name, "labels": {"fid": "1", LABEL: c.run_id, **(labels or {})}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def pod(c: Client, name: str, node: str = "", image: str = "busybox") -> Obj:
    spec: Obj = {
        "containers": [{"name": "c", "image": image, "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {LABEL: c.run_id}}, "spec": spec}


def names(reply: Reply) -> list[str] | Any:
    """The names of a list reply's items, or the whole reply when it is not a list."""
    if reply.code != 200 or not isinstance(reply.body, dict):
        return reply.record()
    return [item["metadata"]["name"] for item in reply.body.get("items", [])]


def metadata_of(reply: Reply, *fields: str) -> Record:
    """The code and chosen metadata fields of a reply (whose other parts hold no semantics here)."""
    meta = reply.body.get("metadata", {}) if isinstance(reply.body, dict) else {}
    return {"code": reply.code, **{f: meta.get(f) for f in fields}}


def create(c: Client, path: str, obj: Obj) -> Reply:
    reply = c.call("POST", path, obj)
    if reply.code != 201:
        raise RuntimeError(f"creating {obj['metadata'].get('name')} at {path}: {reply.code} {reply.body}")
    return reply


def merge(c: Client, path: str, patch: Obj, params: dict[str, str] | None = None) -> Reply:
    return c.call("PATCH", path, patch, "application/merge-patch+json", params)


MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


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


# --- pods: defaults, binding, eviction, status, deletion -----------------------------------------------


def binding(name: str, node: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}}


def gone(c: Client, path: str, seconds: float = 15.0) -> bool:
    return c.poll(lambda: c.get(path).code == 404, seconds)


@step("pod: create (defaults)")
def pod_create(c: Client) -> Record:
    return c.call("POST", ns_path(c, "pods"), pod(c, "pod-a")).record()


@step("pod: create without an image (422)")
def pod_invalid(c: Client) -> Record:
    obj = pod(c, "pod-bad")
    del obj["spec"]["containers"][0]["image"]
    return c.call("POST", ns_path(c, "pods"), obj).record()


@step("pod: update of an immutable spec field (422)")
def pod_immutable(c: Client) -> Record:
    reply = merge(c, ns_path(c, "pods", "pod-a"), {"spec": {"restartPolicy": "Never"}})
    body = reply.body if isinstance(reply.body, dict) else {}
    return {"code": reply.code, "reason": body.get("reason"), "causes": body.get("details", {}).get("causes")}


@step("pod: binding (201)")
def pod_bind(c: Client) -> Record:
    reply = c.call("POST", ns_path(c, "pods", "pod-a", "binding"), binding("pod-a", c.state["node"]))
    got = c.get(ns_path(c, "pods", "pod-a")).body
    scheduled = [x for x in got["status"].get("conditions", []) if x["type"] == "PodScheduled"]
    return {"reply": reply.record(), "nodeName": got["spec"].get("nodeName"), "scheduled": scheduled}


@step("pod: binding a bound pod (409)")
def pod_bind_again(c: Client) -> Record:
    return c.call("POST", ns_path(c, "pods", "pod-a", "binding"), binding("pod-a", c.state["node"])).record()


@step("pod: binding a missing pod (404)")
def pod_bind_missing(c: Client) -> Record:
    return c.call("POST", ns_path(c, "pods", "pod-none", "binding"), binding("pod-none", c.state["node"])).record()


@step("pod: binding without a target (500)")
def pod_bind_no_target(c: Client) -> Record:
    create(c, ns_path(c, "pods"), pod(c, "pod-nt"))
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "pod-nt"}, "target": {}}
    return c.call("POST", ns_path(c, "pods", "pod-nt", "binding"), body).record()


@step("pod: list by field selectors")
def pod_fields(c: Client) -> Record:
    queries = ("spec.nodeName=", f"spec.nodeName={c.state['node']}", "status.phase=Pending,spec.nodeName=")
    return {q: names(c.get(ns_path(c, "pods"), fieldSelector=q)) for q in queries}


@step("pod: /status ignores spec, main resource ignores status")
def pod_status(c: Client) -> Record:
    path = ns_path(c, "pods", "pod-nt")
    condition = {"type": "fidelity.lahar.io/checked", "status": "True"}
    via_status = merge(
        c, path + "/status", {"spec": {"activeDeadlineSeconds": 5}, "status": {"conditions": [condition]}}
    )
    via_main = merge(c, path, {"spec": {"activeDeadlineSeconds": 7}, "status": {"phase": "Running"}})
    return {
        "status.code": via_status.code,
        "status.spec": via_status.body["spec"].get("activeDeadlineSeconds"),
        "status.conditions": [x["type"] for x in via_status.body["status"].get("conditions", [])],
        "main.code": via_main.code,
        "main.spec": via_main.body["spec"].get("activeDeadlineSeconds"),
        "main.phase": via_main.body["status"].get("phase"),
    }


@step("pod: eviction (201)")
def pod_evict(c: Client) -> Record:
    create(c, ns_path(c, "pods"), pod(c, "pod-ev", node=c.state["node"]))
    path = ns_path(c, "pods", "pod-ev")
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "pod-ev"}}
    reply = c.call("POST", path + "/eviction", body)
    after = c.get(path)
    terminating = after.code == 404 or bool(after.body["metadata"].get("deletionTimestamp"))
    return {"reply": reply.record(), "terminating": terminating}


@step("pod: eviction of a missing pod (404)")
def pod_evict_missing(c: Client) -> Record:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "pod-none"}}
    return c.call("POST", ns_path(c, "pods", "pod-none", "eviction"), body).record()


@step("pod: delete with a grace period")
def pod_delete_grace(c: Client) -> Record:
    path = ns_path(c, "pods", "pod-a")
    reply = c.call("DELETE", path, {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 1})
    record = metadata_of(reply, "deletionTimestamp", "deletionGracePeriodSeconds")
    return {**record, "gone": gone(c, path)}


@step("pod: delete an unbound pod (at once)")
def pod_delete_unbound(c: Client) -> Record:
    path = ns_path(c, "pods", "pod-sm")
    reply = c.call("DELETE", path, params={"gracePeriodSeconds": "30"})
    return {**metadata_of(reply, "deletionTimestamp", "deletionGracePeriodSeconds"), "get": c.get(path).code}


@step("delete: uid precondition fails (409)")
def delete_precondition(c: Client) -> Record:
    options = {"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}
    return c.call("DELETE", ns_path(c, "pods", "pod-nt"), options).record()


@step("delete: a configmap (the reply)")
def delete_configmap(c: Client) -> Record:
    create(c, ns_path(c, CM), configmap(c, "cm-del"))
    return c.call("DELETE", ns_path(c, CM, "cm-del")).record()


@step("delete: missing object (404)")
def delete_missing(c: Client) -> Record:
    return c.call("DELETE", ns_path(c, CM, "cm-none")).record()


@step("pod: binding a pod being deleted (409)")
def pod_bind_terminating(c: Client) -> Record:
    obj = pod(c, "pod-fin")
    obj["metadata"]["finalizers"] = ["fidelity.lahar.io/hold"]
    create(c, ns_path(c, "pods"), obj)
    path = ns_path(c, "pods", "pod-fin")
    c.call("DELETE", path)
    reply = c.call("POST", path + "/binding", binding("pod-fin", c.state["node"]))
    c.call("PATCH", path, [{"op": "remove", "path": "/metadata/finalizers"}], JSON_PATCH)
    return {"reply": reply.record(), "gone": gone(c, path)}


# --- objects the controller writes: headless Services, NetworkPolicies, Secrets ------------------------


def service(c: Client, name: str, spec: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {LABEL: c.run_id}},
        "spec": spec,
    }


@step("service: a headless Service (defaults)")
def service_headless(c: Client) -> Record:
    spec = {"clusterIP": "None", "selector": {"job": "j"}, "publishNotReadyAddresses": True}
    return c.call("POST", ns_path(c, "services"), service(c, "svc-a", spec)).record()


@step("service: a ClusterIP Service with a port (defaults)")
def service_cluster_ip(c: Client) -> Record:
    spec = {"selector": {"job": "j"}, "ports": [{"name": "http", "port": 80}]}
    return c.call("POST", ns_path(c, "services"), service(c, "svc-b", spec)).record()


@step("networkpolicy: create (defaults)")
def network_policy(c: Client) -> Record:
    selector = {"matchLabels": {"job": "j"}}
    spec = {"podSelector": selector, "ingress": [{"from": [{"podSelector": selector}]}], "policyTypes": ["Ingress"]}
    obj = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "np-a", "labels": {LABEL: c.run_id}},
        "spec": spec,
    }
    return c.call("POST", ns_path(c, "networkpolicies", prefix="/apis/networking.k8s.io/v1"), obj).record()


@step("secret: stringData folded into data")
def secret_string_data(c: Client) -> Record:
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sec-a"}, "stringData": {"k": "v"}}
    return c.call("POST", ns_path(c, "secrets"), obj).record()


@step("secret: data that is not base64 (400)")
def secret_bad_data(c: Client) -> Record:
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sec-b"}, "data": {"k": "not base64!"}}
    return c.call("POST", ns_path(c, "secrets"), obj).record()


# --- discovery -----------------------------------------------------------------------------------------


def resource_entries(reply: Reply, wanted: tuple[str, ...]) -> Record:
    found = {r["name"]: r for r in reply.body.get("resources", [])} if isinstance(reply.body, dict) else {}
    keep = ("name", "namespaced", "kind", "verbs", "shortNames", "group", "version", "singularName", "categories")
    return {
        "code": reply.code,
        "kind": (reply.body or {}).get("kind"),
        "resources": {n: {k: found[n].get(k) for k in keep} if n in found else None for n in wanted},
    }


@step("discovery: /api/v1 (pods and their subresources)")
def discovery_core(c: Client) -> Record:
    wanted = ("pods", "pods/binding", "pods/eviction", "pods/status", "configmaps", "namespaces", "nodes", "services")
    return resource_entries(c.get("/api/v1"), wanted)


@step("discovery: Volcano's scheduling group")
def discovery_volcano(c: Client) -> Record:
    return resource_entries(c.get(f"/apis/{SCHED}"), ("podgroups", "queues", "queues/status", "podgroups/status"))


# --- Volcano's custom resources and their status subresources -------------------------------------------

SCHED = "scheduling.volcano.sh/v1beta1"
BATCH = "batch.volcano.sh/v1alpha1"


def queue_path(c: Client, sub: str = "") -> str:
    return volcano(c, SCHED, "queues", c.run_id + "-q", sub, namespaced=False)


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


# --- admission webhooks (lightly: a webhook that cannot be reached) ------------------------------------

WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def webhook_configuration(c: Client, policy: str) -> Obj:
    hook = {
        "name": "deny.fidelity.lahar.io",
        # Nothing listens on port 1: every call fails, so failurePolicy decides.
        "clientConfig": {"url": "https://127.0.0.1:1/validate"},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": c.run_id}},
        "objectSelector": {"matchLabels": {"hook": "yes"}},
        "failurePolicy": policy,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 2,
    }
    meta = {"name": c.run_id + "-hook", "labels": {LABEL: c.run_id}}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": meta,
        "webhooks": [hook],
    }


@step("admission: an unreachable webhook with failurePolicy Fail (500)")
def webhook_fail(c: Client) -> Record:
    made = c.call("POST", WEBHOOKS, webhook_configuration(c, "Fail"))
    hooked = configmap(c, "cm-hooked", {"hook": "yes"})
    # The real server picks up a new configuration within a second or so: probe with dry runs.
    c.poll(lambda: c.call("POST", ns_path(c, CM), hooked, params={"dryRun": "All"}).code == 500, 10)
    refused = c.call("POST", ns_path(c, CM), hooked)
    other = c.call("POST", ns_path(c, CM), configmap(c, "cm-unhooked", {"hook": "no"}))
    return {"config": made.code, "refused": refused.record(), "not_selected": other.code}


@step("admission: the same webhook with failurePolicy Ignore")
def webhook_ignore(c: Client) -> Record:
    path = f"{WEBHOOKS}/{c.run_id}-hook"
    current = c.get(path).body
    current["webhooks"][0]["failurePolicy"] = "Ignore"
    updated = c.call("PUT", path, current)
    hooked = configmap(c, "cm-hooked", {"hook": "yes"})
    c.poll(lambda: c.call("POST", ns_path(c, CM), hooked, params={"dryRun": "All"}).code == 201, 10)
    return {"update": updated.code, "create": c.call("POST", ns_path(c, CM), hooked).code}


@step("admission: invalid webhook configuration (422)")
def webhook_invalid(c: Client) -> Record:
    obj = webhook_configuration(c, "Sometimes")
    obj["metadata"]["name"] = c.run_id + "-bad"
    reply = c.call("POST", WEBHOOKS, obj)
    body = reply.body if isinstance(reply.body, dict) else {}
    return {"code": reply.code, "reason": body.get("reason")}


# --- admission webhooks that answer: the reviews each server sends ---------------------------------------


def hook_spec(c: Client, name: str, path: str, rules: list[Obj], selector: Obj | None) -> Obj:
    hook: Obj = {
        "name": name,
        "clientConfig": {"url": c.state["hook"].url + path, "caBundle": c.state["hook"].ca_bundle},
        "rules": rules,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": c.run_id}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    }
    if selector:
        hook["objectSelector"] = {"matchLabels": selector}
    return hook


def cm_rule(*operations: str) -> list[Obj]:
    return [{"operations": list(operations), "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]


def reviews(c: Client) -> list[Record]:
    """The reviews the webhook got since the last call: path and request (who asked: keys only)."""
    out = []
    for path, request in c.state["hook"].taken():
        request = dict(request)
        request["userInfo"] = sorted(request.get("userInfo") or {})
        out.append({"path": path, "request": request})
    return out


@step("admission: answering webhooks registered")
def webhooks_registered(c: Client) -> Record:
    c.state["hook"] = WebhookServer()
    meta = {"labels": {LABEL: c.run_id}}
    validating = [
        hook_spec(c, "review.fidelity.lahar.io", "/allow", cm_rule("CREATE", "UPDATE", "DELETE"), {"hook": "review"}),
        hook_spec(c, "deny.fidelity.lahar.io", "/deny", cm_rule("CREATE"), {"hook": "deny"}),
        hook_spec(
            c,
            "bind.fidelity.lahar.io",
            "/allow",
            [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/binding"]}],
            None,
        ),
    ]
    mutating = [hook_spec(c, "mutate.fidelity.lahar.io", "/mutate", cm_rule("CREATE"), {"hook": "mutate"})]
    codes = [
        c.call("POST", WEBHOOKS, {**_config("Validating", c.run_id + "-review", meta), "webhooks": validating}).code,
        c.call("POST", MUTATING, {**_config("Mutating", c.run_id + "-mutate", meta), "webhooks": mutating}).code,
    ]
    # The real server picks new configurations up within a second or so: probe with dry runs.
    deny, mutate = configmap(c, "cm-probe", {"hook": "deny"}), configmap(c, "cm-probe", {"hook": "mutate"})
    dry = {"dryRun": "All"}
    active = c.poll(lambda: c.call("POST", ns_path(c, CM), deny, params=dry).code == 403, 10) and c.poll(
        lambda: "mutated" in c.call("POST", ns_path(c, CM), mutate, params=dry).body["metadata"].get("labels", {}), 10
    )
    c.state["hook"].taken()
    return {"codes": codes, "active": active}


def _config(kind: str, name: str, meta: Obj) -> Obj:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": f"{kind}WebhookConfiguration",
        "metadata": {"name": name, **meta},
    }


@step("admission: the review of a CREATE")
def review_create(c: Client) -> Record:
    reply = c.call("POST", ns_path(c, CM), configmap(c, "cm-rev", {"hook": "review"}, k="v"))
    return {"code": reply.code, "reviews": reviews(c)}


@step("admission: the review of an UPDATE (a merge patch)")
def review_update(c: Client) -> Record:
    reply = merge(c, ns_path(c, CM, "cm-rev"), {"data": {"k": "v2"}})
    return {"code": reply.code, "reviews": reviews(c)}


@step("admission: the review of a dry-run UPDATE (PUT)")
def review_dry_update(c: Client) -> Record:
    current = c.get(ns_path(c, CM, "cm-rev")).body
    current["data"] = {"k": "v3"}
    reply = c.call("PUT", ns_path(c, CM, "cm-rev"), current, params={"dryRun": "All"})
    return {"code": reply.code, "reviews": reviews(c)}


@step("admission: the review of a DELETE")
def review_delete(c: Client) -> Record:
    reply = c.call("DELETE", ns_path(c, CM, "cm-rev"), {"propagationPolicy": "Background"})
    return {"code": reply.code, "reviews": reviews(c)}


@step("admission: the review of a pods/binding")
def review_binding(c: Client) -> Record:
    create(c, ns_path(c, "pods"), pod(c, "pod-hook"))
    reviews(c)
    reply = c.call("POST", ns_path(c, "pods", "pod-hook", "binding"), binding("pod-hook", c.state["node"]))
    return {"code": reply.code, "reviews": reviews(c)}


@step("admission: a denial (the webhook's code and message)")
def review_denied(c: Client) -> Record:
    reply = c.call("POST", ns_path(c, CM), configmap(c, "cm-denied", {"hook": "deny"}))
    return {"reply": reply.record(), "reviews": reviews(c)}


@step("admission: a mutation (JSONPatch applied before validation)")
def review_mutated(c: Client) -> Record:
    reply = c.call("POST", ns_path(c, CM), configmap(c, "cm-mutated", {"hook": "mutate"}))
    return {"reply": reply.record(), "reviews": reviews(c)}


# --- the end -------------------------------------------------------------------------------------------


@step("namespace: delete")
def delete_namespace(c: Client) -> Record:
    reply = c.call("DELETE", f"/api/v1/namespaces/{c.run_id}")
    body = reply.body if isinstance(reply.body, dict) else {}
    return {"code": reply.code, "kind": body.get("kind"), "phase": body.get("status", {}).get("phase")}


def cleanup(c: Client) -> None:
    """Remove what a run made outside its namespace, and the namespace (whatever the steps did)."""
    selector = {"labelSelector": f"{LABEL}={c.run_id}"}
    for path in (WEBHOOKS, MUTATING, f"/apis/{SCHED}/queues"):
        c.call("DELETE", path, params=selector)
    hook = c.state.pop("hook", None)
    if hook is not None:
        hook.close()
    c.call("DELETE", f"/api/v1/namespaces/{c.run_id}")


def run(left: Client, right: Client, known: list[Known]) -> list[Verdict]:
    """The whole sequence on both servers, compared; what the runs made is removed whatever happens."""
    try:
        verdicts, _, _ = compare(left, right, STEPS, known)
    finally:
        for client in (left, right):
            cleanup(client)
    return verdicts
