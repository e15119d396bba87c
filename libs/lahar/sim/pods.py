"""The pod subresources ``binding`` and ``eviction`` (and the legacy ``bindings`` resource).

A binding sets spec.nodeName, copies the Binding's annotations and adds the PodScheduled
condition, as the API server's binding storage does; it answers 201 with a Status.  An
eviction deletes the pod with its grace period (no PodDisruptionBudgets are emulated).
"""

from __future__ import annotations

from typing import Any

import msgspec

from lahar.sim.admission import Attributes
from lahar.sim.api import (
    Api,
    Query,
    Reply,
    Target,
    check_preconditions,
    is_dry_run,
    propagation_policy,
    request_options,
)
from lahar.sim.clock import iso
from lahar.sim.errors import ApiError, bad_request, conflict, invalid, not_found, success_status
from lahar.sim.objects import decode_json, int_option

Obj = dict[str, Any]
_encode = msgspec.json.Encoder().encode
_CREATED = _encode(success_status(201))


def _body(body: bytes, kind: str) -> Obj:
    obj = decode_json(body)
    if not isinstance(obj, dict):
        raise bad_request(f"the body of the request must be a {kind} object")
    if obj.get("kind") not in (None, kind):
        raise bad_request(f"the kind in the data ({obj.get('kind')}) does not match the expected kind ({kind})")
    meta = obj.get("metadata")
    if meta is None:
        obj["metadata"] = {}
    elif not isinstance(meta, dict):
        raise bad_request("metadata: must be an object")
    return obj


async def bind(api: Api, t: Target, body: bytes, query: Query) -> Reply:
    binding = _body(body, "Binding")
    meta = binding["metadata"]
    name = t.name or meta.get("name") or ""
    if t.name and meta.get("name") and meta["name"] != t.name:
        raise bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({t.name})")
    if meta.get("namespace") and meta["namespace"] != t.namespace:
        raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
    meta["namespace"] = t.namespace
    node = (binding.get("target") or {}).get("name") if isinstance(binding.get("target"), dict) else None
    if not name:
        raise invalid("Binding", "", "", [("metadata.name", "Required value")])
    if not node:
        raise ApiError(500, "", "target.name: Required value")  # a 500, as the binding storage answers
    pods = api.rtype("", "pods")
    if api.admission.active(pods):
        attrs = Attributes(
            pods,
            "binding",
            "CREATE",
            t.namespace,
            name,
            binding,
            None,
            is_dry_run(query),
            request_options("CreateOptions", is_dry_run(query)),
            ("", "v1", "Binding"),
        )
        await api.admission.mutate(attrs)
        await api.admission.validate(attrs)
    entry = api.store.get(pods, t.namespace, name)
    if entry is None:
        raise not_found("pods", "", name)
    pod = entry.obj
    pod_meta, spec = pod["metadata"], pod.get("spec") or {}
    if meta.get("uid") and meta["uid"] != pod_meta["uid"]:
        raise conflict(
            "pods/binding",
            "",
            name,
            f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {pod_meta['uid']}",
        )
    if pod_meta.get("deletionTimestamp"):
        raise conflict("pods/binding", "", name, f"pod {name} is being deleted, cannot be assigned to a host")
    if spec.get("nodeName"):
        raise conflict("pods/binding", "", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"')
    if is_dry_run(query):
        return 201, _CREATED
    api.store.put(api.table(pods), bound_pod(pod, node, meta.get("annotations") or {}), pod)
    return 201, _CREATED


def bound_pod(pod: Obj, node: str, annotations: dict[str, str]) -> Obj:
    meta = pod["metadata"]
    if annotations:
        meta = {**meta, "annotations": {**(meta.get("annotations") or {}), **annotations}}
    status = dict(pod.get("status") or {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": iso()})
    status["conditions"] = conditions
    return {**pod, "metadata": meta, "spec": {**pod["spec"], "nodeName": node}, "status": status}


async def evict(api: Api, t: Target, body: bytes, query: Query) -> Reply:
    eviction = _body(body, "Eviction")
    name = t.name or ""
    meta = eviction["metadata"]
    if meta.get("name") and meta["name"] != name:
        raise bad_request("name in URL does not match name in Eviction object")
    pods = api.rtype("", "pods")
    options = eviction.get("deleteOptions") or {}
    if not isinstance(options, dict):
        raise bad_request("deleteOptions: must be an object")
    grace = int_option(options.get("gracePeriodSeconds"), "deleteOptions.gracePeriodSeconds")
    policy = propagation_policy(options, {})
    if api.admission.active(pods):
        attrs = Attributes(
            pods,
            "eviction",
            "CREATE",
            t.namespace,
            name,
            eviction,
            None,
            is_dry_run(query),
            request_options("CreateOptions", is_dry_run(query)),
            ("policy", "v1", "Eviction"),
        )
        await api.admission.validate(attrs)
    entry = api.store.get(pods, t.namespace, name)
    if entry is None:
        raise not_found("pods", "", name)
    check_preconditions(pods, entry, options)
    if not is_dry_run(query):
        api.delete_object(api.table(pods), entry, grace, policy)
    return 201, _CREATED
