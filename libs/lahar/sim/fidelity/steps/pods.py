"""Steps on pods (defaults, binding, eviction, status, deletion), Services, Secrets and discovery."""

from __future__ import annotations

from lahar.sim.fidelity.client import Client, Reply
from lahar.sim.fidelity.compare import Obj, Record
from lahar.sim.fidelity.steps.common import (
    CM,
    JSON_PATCH,
    LABEL,
    SCHED,
    Steps,
    binding,
    configmap,
    create,
    gone,
    merge,
    metadata_of,
    names,
    ns_path,
    pod,
    registrar,
)

STEPS: Steps = []
step = registrar(STEPS)

# --- pods: defaults, binding, eviction, status, deletion -----------------------------------------------


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


@step("pod: quantities in their canonical form")
def pod_quantities(c: Client) -> Record:
    obj = pod(c, "pod-q")
    obj["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1000m", "memory": "1024Mi", "ephemeral-storage": "0.5Gi"},
        "limits": {"cpu": "1.5", "memory": "1073741824"},
    }
    reply = c.call("POST", ns_path(c, "pods"), obj)
    body = reply.body if isinstance(reply.body, dict) else {}
    return {"code": reply.code, "resources": body.get("spec", {}).get("containers", [{}])[0].get("resources")}


@step("pod: priority from its PriorityClass; an unknown class (403)")
def pod_priority(c: Client) -> Record:
    known = pod(c, "pod-pc")
    known["spec"]["priorityClassName"] = "system-cluster-critical"
    made = c.call("POST", ns_path(c, "pods"), known)
    unknown = pod(c, "pod-nopc")
    unknown["spec"]["priorityClassName"] = "no-such-class"
    forced = pod(c, "pod-forced")
    forced["spec"]["priority"] = 7
    spec = made.body.get("spec", {}) if isinstance(made.body, dict) else {}
    return {
        "code": made.code,
        "priority": spec.get("priority"),
        "preemptionPolicy": spec.get("preemptionPolicy"),
        "unknown": c.call("POST", ns_path(c, "pods"), unknown).record(),
        "forced": c.call("POST", ns_path(c, "pods"), forced).record(),
    }


@step("pod: a watch on spec.nodeName= sees a binding as DELETED")
def pod_watch_binding(c: Client) -> Record:
    rv = c.get(ns_path(c, "pods"), fieldSelector="spec.nodeName=").body["metadata"]["resourceVersion"]
    create(c, ns_path(c, "pods"), pod(c, "pod-w"))
    c.call("POST", ns_path(c, "pods", "pod-w", "binding"), binding("pod-w", c.state["node"]))
    params = {"resourceVersion": rv, "fieldSelector": "spec.nodeName=,metadata.name=pod-w"}
    result = c.watch(ns_path(c, "pods"), params, lambda ev: len(ev) >= 2)
    events = [
        {"type": e.get("type"), "nodeName": (e.get("object") or {}).get("spec", {}).get("nodeName")}
        for e in result.get("events", [])
    ]
    return {"code": result.get("code"), "events": events}


@step("event: a core/v1 Event (defaults)")
def core_event(c: Client) -> Record:
    obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "ev-a"},
        "involvedObject": {"kind": "Pod", "name": "pod-nt", "namespace": c.run_id, "apiVersion": "v1"},
        "reason": "Checked",
        "message": "fidelity",
        "type": "Normal",
        "source": {"component": "lahar-fidelity"},
        "count": 1,
    }
    return c.call("POST", ns_path(c, "events"), obj).record()


@step("pod: status once running (simulated kubelet vs KWOK)")
def pod_running(c: Client) -> Record:
    create(c, ns_path(c, "pods"), pod(c, "pod-run", node=c.state["node"]))
    path = ns_path(c, "pods", "pod-run")
    running = c.poll(lambda: c.get(path).body.get("status", {}).get("phase") == "Running", 15)
    status = c.get(path).body.get("status", {})
    conditions = {x["type"]: x["status"] for x in status.get("conditions", [])}
    containers = [
        {
            "name": x.get("name"),
            "ready": x.get("ready"),
            "started": x.get("started"),
            "state": sorted(x.get("state", {})),
        }
        for x in status.get("containerStatuses", [])
    ]
    present = dict.fromkeys(sorted(status), True)  # which status fields are there
    return {"running": running, "fields": present, "conditions": conditions, "containers": containers}


@step("pod: a status update with a stale resourceVersion (409)")
def pod_status_stale(c: Client) -> Record:
    path = ns_path(c, "pods", "pod-nt")
    current = c.get(path).body
    stale = current["metadata"]["resourceVersion"]
    merge(c, path + "/status", {"status": {"message": "first"}})
    current["status"]["message"] = "second"
    current["metadata"]["resourceVersion"] = stale
    return c.call("PUT", path + "/status", current).record()


@step("node: what the scheduler reads of a node")
def node_fields(c: Client) -> Record:
    node = c.get(f"/api/v1/nodes/{c.state['node']}").body
    status = node.get("status", {})
    labels = node["metadata"].get("labels", {})
    return {
        "labels": sorted(k for k in labels if k != "type"),  # "type: kwok" marks lahar kube's nodes
        "taints": node.get("spec", {}).get("taints"),
        "unschedulable": node.get("spec", {}).get("unschedulable"),
        "allocatable": status.get("allocatable"),
        "capacity": status.get("capacity"),
        "conditions": {x["type"]: x["status"] for x in status.get("conditions", [])},
        "addresses": sorted(a.get("type") for a in status.get("addresses", [])),
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
