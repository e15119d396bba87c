"""The checks Volcano leaves to its CRD OpenAPI schemas (docs/volcano-admission.md §6).

A cluster whose CRDs lack those schemas would otherwise accept negative counts, bad names or a
zero weight, so the validating webhooks make these checks too, with the API server's schema
wording (``spec.tasks[0].replicas in body should be greater than or equal to 0``).

They read the object as sent (plain data), because "absent" matters: the schema default fills
an absent ``spec.queue``/``weight`` before validation, so only a value that is present is
checked.  An empty ``spec.queue`` is also left alone: the webhook treats it as "not set"
(conformance case ``podgroup-create-empty-queue``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lahar_admission import fielderr as fe
from lahar_admission.fielderr import FieldError
from lahar_admission.names import (
    DNS1123_LABEL_FMT,
    DNS1123_SUBDOMAIN_FMT,
    is_dns1123_label,
    is_dns1123_subdomain,
)

JOB_EVENTS = [
    "*",
    "PodPending",
    "PodRunning",
    "PodFailed",
    "PodEvicted",
    "Unknown",
    "TaskCompleted",
    "OutOfSync",
    "CommandIssued",
    "JobUpdated",
    "TaskFailed",
]
TOPOLOGY_POLICIES = ["none", "best-effort", "restricted", "single-numa-node"]
TOPOLOGY_MODES = ["hard", "soft"]
QUEUE_STATES = ["Open", "Closed", "Closing", "Unknown"]
DEQUEUE_STRATEGIES = ["fifo", "traverse"]
PODGROUP_PHASES = ["Pending", "Running", "Unknown", "Inqueue", "Completed"]
CONCURRENCY_POLICIES = ["Allow", "Forbid", "Replace"]
MEMBER_TYPES = ["Node", "HyperNode"]
# core/v1 PodSpec fields (Kubernetes 1.36).  The CRD embeds the full PodSpec schema, so with
# strict field validation a misspelt field is an error instead of being silently pruned.
POD_SPEC_FIELDS = frozenset(
    {
        "volumes",
        "initContainers",
        "containers",
        "ephemeralContainers",
        "restartPolicy",
        "terminationGracePeriodSeconds",
        "activeDeadlineSeconds",
        "dnsPolicy",
        "nodeSelector",
        "serviceAccountName",
        "serviceAccount",
        "automountServiceAccountToken",
        "nodeName",
        "hostNetwork",
        "hostPID",
        "hostIPC",
        "shareProcessNamespace",
        "securityContext",
        "imagePullSecrets",
        "hostname",
        "subdomain",
        "affinity",
        "schedulerName",
        "tolerations",
        "hostAliases",
        "priorityClassName",
        "priority",
        "dnsConfig",
        "readinessGates",
        "runtimeClassName",
        "enableServiceLinks",
        "preemptionPolicy",
        "overhead",
        "topologySpreadConstraints",
        "setHostnameAsFQDN",
        "os",
        "hostUsers",
        "schedulingGates",
        "resourceClaims",
        "resources",
        "hostnameOverride",
        "workloadRef",
    }
)


class _Checker:
    """Collects schema errors while walking plain data; wrong types are reported, not raised."""

    def __init__(self) -> None:
        self.errs: list[FieldError] = []

    def obj(self, data: Any, path: str) -> dict[str, Any]:
        if data is None:
            return {}
        if not isinstance(data, dict):
            self.errs.append(fe.invalid(path, data, f"{path} in body must be of type object"))
            return {}
        return data

    def items(self, data: Any, path: str) -> list[Any]:
        if data is None:
            return []
        if not isinstance(data, list):
            self.errs.append(fe.invalid(path, data, f"{path} in body must be of type array"))
            return []
        return data

    def minimum(self, data: dict[str, Any], key: str, path: str, low: int) -> None:
        value = data.get(key)
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            self.errs.append(fe.invalid(f"{path}.{key}", value, f"{path}.{key} in body must be of type integer"))
        elif value < low:
            self.errs.append(
                fe.invalid(f"{path}.{key}", value, f"{path}.{key} in body should be greater than or equal to {low}")
            )

    def maximum(self, data: dict[str, Any], key: str, path: str, high: int) -> None:
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > high:
            self.errs.append(
                fe.invalid(f"{path}.{key}", value, f"{path}.{key} in body should be less than or equal to {high}")
            )

    def string(self, data: dict[str, Any], key: str, path: str) -> str | None:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.errs.append(fe.invalid(f"{path}.{key}", value, f"{path}.{key} in body must be of type string"))
            return None
        return value

    def max_len(self, data: dict[str, Any], key: str, path: str, limit: int) -> None:
        value = self.string(data, key, path)
        if value is not None and len(value) > limit:
            self.errs.append(fe.FieldError(f"{path}.{key}", f"Too long: may not be more than {limit} bytes"))

    def enum(self, data: dict[str, Any], key: str, path: str, allowed: list[str]) -> None:
        value = self.string(data, key, path)
        if value is not None and value not in allowed:
            self.errs.append(fe.not_supported(f"{path}.{key}", value, allowed))

    def name(
        self,
        data: dict[str, Any],
        key: str,
        path: str,
        check: Callable[[str], Sequence[str]],
        fmt: str,
        allow_empty: bool = False,
    ) -> None:
        value = self.string(data, key, path)
        if value is None or (allow_empty and value == ""):
            return
        if check(value):
            self.errs.append(fe.invalid(f"{path}.{key}", value, f"{path}.{key} in body should match '^{fmt}$'"))

    def required(self, data: dict[str, Any], key: str, path: str) -> None:
        if data.get(key) is None:
            self.errs.append(fe.required(f"{path}.{key}"))


def _network_topology(c: _Checker, data: Any, path: str) -> None:
    nt = c.obj(data, path)
    c.enum(nt, "mode", path, TOPOLOGY_MODES)
    c.minimum(nt, "highestTierAllowed", path, 0)
    c.max_len(nt, "highestTierName", path, 253)


def _policies(c: _Checker, data: Any, path: str) -> None:
    for i, raw in enumerate(c.items(data, path)):
        c.enum(c.obj(raw, f"{path}[{i}]"), "event", f"{path}[{i}]", JOB_EVENTS)


def job_errors(obj: Any) -> list[FieldError]:
    c = _Checker()
    spec = c.obj(c.obj(obj, "").get("spec"), "spec")
    for key in ("minAvailable", "maxRetry", "ttlSecondsAfterFinished"):
        c.minimum(spec, key, "spec", 0)
    c.minimum(spec, "minSuccess", "spec", 1)
    c.name(spec, "queue", "spec", is_dns1123_subdomain, DNS1123_SUBDOMAIN_FMT, allow_empty=True)
    c.name(spec, "priorityClassName", "spec", is_dns1123_subdomain, DNS1123_SUBDOMAIN_FMT, allow_empty=True)
    c.max_len(spec, "schedulerName", "spec", 63)
    if spec.get("networkTopology") is not None:
        _network_topology(c, spec["networkTopology"], "spec.networkTopology")
    _policies(c, spec.get("policies"), "spec.policies")
    for i, raw in enumerate(c.items(spec.get("tasks"), "spec.tasks")):
        _task(c, c.obj(raw, f"spec.tasks[{i}]"), f"spec.tasks[{i}]")
    for i, raw in enumerate(c.items(spec.get("volumes"), "spec.volumes")):
        vol, path = c.obj(raw, f"spec.volumes[{i}]"), f"spec.volumes[{i}]"
        mount = c.string(vol, "mountPath", path)
        if mount and ":" in mount:
            c.errs.append(fe.invalid(f"{path}.mountPath", mount, f"{path}.mountPath in body should match '^[^:]*$'"))
        c.max_len(vol, "volumeClaimName", path, 253)
    return c.errs


def _task(c: _Checker, task: dict[str, Any], path: str) -> None:
    c.name(task, "name", path, is_dns1123_label, DNS1123_LABEL_FMT, allow_empty=True)
    for key in ("replicas", "minAvailable", "maxRetry"):
        c.minimum(task, key, path, 0)
    c.enum(task, "topologyPolicy", path, TOPOLOGY_POLICIES)
    template = task.get("template")
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    if isinstance(pod_spec, dict):
        c.errs.extend(
            fe.FieldError(f"{path}.template.spec.{key}", f'Invalid value: "{key}": field not declared in schema')
            for key in pod_spec
            if key not in POD_SPEC_FIELDS
        )
    _policies(c, task.get("policies"), f"{path}.policies")
    if task.get("partitionPolicy") is not None:
        pp, ppath = c.obj(task["partitionPolicy"], f"{path}.partitionPolicy"), f"{path}.partitionPolicy"
        c.required(pp, "totalPartitions", ppath)
        c.required(pp, "partitionSize", ppath)
        c.minimum(pp, "totalPartitions", ppath, 1)
        c.minimum(pp, "partitionSize", ppath, 1)
        c.minimum(pp, "minPartitions", ppath, 0)
        if pp.get("networkTopology") is not None:
            _network_topology(c, pp["networkTopology"], f"{ppath}.networkTopology")


def queue_errors(obj: Any) -> list[FieldError]:
    c = _Checker()
    root = c.obj(obj, "")
    spec = c.obj(root.get("spec"), "spec")
    c.minimum(spec, "weight", "spec", 1)
    c.maximum(spec, "weight", "spec", 65535)
    c.name(spec, "parent", "spec", is_dns1123_subdomain, DNS1123_SUBDOMAIN_FMT, allow_empty=True)
    c.minimum(spec, "priority", "spec", 0)
    c.enum(spec, "dequeueStrategy", "spec", DEQUEUE_STRATEGIES)
    c.max_len(spec, "type", "spec", 253)
    c.enum(c.obj(root.get("status"), "status"), "state", "status", QUEUE_STATES)
    return c.errs


def podgroup_errors(obj: Any) -> list[FieldError]:
    c = _Checker()
    root = c.obj(obj, "")
    spec = c.obj(root.get("spec"), "spec")
    c.minimum(spec, "minMember", "spec", 0)
    c.name(spec, "queue", "spec", is_dns1123_subdomain, DNS1123_SUBDOMAIN_FMT, allow_empty=True)
    c.max_len(spec, "priorityClassName", "spec", 253)
    if spec.get("networkTopology") is not None:
        _network_topology(c, spec["networkTopology"], "spec.networkTopology")
    for i, raw in enumerate(c.items(spec.get("subGroupPolicy"), "spec.subGroupPolicy")):
        path = f"spec.subGroupPolicy[{i}]"
        sg = c.obj(raw, path)
        c.max_len(sg, "name", path, 253)
        c.minimum(sg, "subGroupSize", path, 1)
        c.minimum(sg, "minSubGroups", path, 0)
        if sg.get("networkTopology") is not None:
            _network_topology(c, sg["networkTopology"], f"{path}.networkTopology")
    c.enum(c.obj(root.get("status"), "status"), "phase", "status", PODGROUP_PHASES)
    return c.errs


def hypernode_errors(obj: Any) -> list[FieldError]:
    c = _Checker()
    spec = c.obj(c.obj(obj, "").get("spec"), "spec")
    c.required(spec, "tier", "spec")
    c.minimum(spec, "tier", "spec", 0)
    c.max_len(spec, "tierName", "spec", 253)
    for i, raw in enumerate(c.items(spec.get("members"), "spec.members")):
        path = f"spec.members[{i}]"
        member = c.obj(raw, path)
        c.enum(member, "type", path, MEMBER_TYPES)
        _selector(c, c.obj(member.get("selector"), f"{path}.selector"), f"{path}.selector")
    return c.errs


def _selector(c: _Checker, sel: dict[str, Any], path: str) -> None:
    chosen = [k for k in ("exactMatch", "regexMatch", "labelMatch") if sel.get(k) is not None]
    if not chosen:
        c.errs.append(fe.invalid(path, sel, "Either ExactMatch or RegexMatch or LabelMatch must be specified"))
    elif len(chosen) > 1:
        c.errs.append(fe.invalid(path, sel, "Only one of ExactMatch, RegexMatch or LabelMatch can be specified"))
    if sel.get("exactMatch") is not None:
        em, epath = c.obj(sel["exactMatch"], f"{path}.exactMatch"), f"{path}.exactMatch"
        name = c.string(em, "name", epath)
        if not name:
            c.errs.append(fe.required(f"{epath}.name"))
        else:
            c.max_len(em, "name", epath, 253)
            c.name(em, "name", epath, is_dns1123_subdomain, DNS1123_SUBDOMAIN_FMT)
    if sel.get("regexMatch") is not None:
        rm, rpath = c.obj(sel["regexMatch"], f"{path}.regexMatch"), f"{path}.regexMatch"
        if not c.string(rm, "pattern", rpath):
            c.errs.append(fe.required(f"{rpath}.pattern"))


def cronjob_errors(obj: Any) -> list[FieldError]:
    c = _Checker()
    spec = c.obj(c.obj(obj, "").get("spec"), "spec")
    c.required(spec, "schedule", "spec")
    c.required(spec, "jobTemplate", "spec")
    c.enum(spec, "concurrencyPolicy", "spec", CONCURRENCY_POLICIES)
    c.minimum(spec, "startingDeadlineSeconds", "spec", 0)
    return c.errs
