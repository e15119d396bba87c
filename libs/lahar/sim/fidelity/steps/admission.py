"""Steps on admission webhooks: one that cannot be reached, then one that answers and records."""

from __future__ import annotations

from lahar.sim.fidelity.client import Client
from lahar.sim.fidelity.compare import Obj, Record
from lahar.sim.fidelity.steps.common import (
    CM,
    LABEL,
    MUTATING,
    WEBHOOKS,
    Steps,
    binding,
    configmap,
    create,
    merge,
    ns_path,
    pod,
    registrar,
)
from lahar.sim.fidelity.webhook import WebhookServer

STEPS: Steps = []
step = registrar(STEPS)

# --- admission webhooks (lightly: a webhook that cannot be reached) ------------------------------------


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
