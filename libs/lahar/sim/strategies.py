"""Per-resource rules applied on create and update: defaults, validation, immutable fields.

Only what clients of a scheduler notice is modelled (see README.md for the gaps).  Each
function works on a fresh dict owned by the request, so it may modify it in place.
"""

from __future__ import annotations

import re
from typing import Any

from lahar.api.podresources import pod_resource_causes
from lahar.api.quantity import QuantityError, canonical_text
from lahar.sim.clock import iso
from lahar.sim.objects import generated_name
from lahar.sim.resources import ResourceType

Obj = dict[str, Any]
Causes = list[tuple[str, str]]

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Names the real API server validates as DNS labels rather than subdomains.
_LABEL_NAMED = frozenset({"namespaces", "services"})


def validate_name(rtype: ResourceType, name: str) -> Causes:
    if rtype.plural in _LABEL_NAMED:
        if len(name) > 63 or not _LABEL.match(name):
            return [
                (
                    "metadata.name",
                    f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of lower '
                    "case alphanumeric characters or '-', and must start and end with an "
                    "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
                    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                )
            ]
        return []
    if rtype.plural == "events":  # event names carry timestamps and dots; only length matters
        return [] if len(name) <= 253 else [("metadata.name", "Too long: must have at most 253 bytes")]
    if len(name) > 253 or not _SUBDOMAIN.match(name):
        return [
            (
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower '
                "case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character (e.g. 'example.com', regex used for validation is "
                r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            )
        ]
    return []


def validate_metadata(meta: Obj) -> Causes:
    """Labels and annotations are string maps and finalizers a string list: selectors and
    watchers read them, so a malformed one is refused rather than stored."""
    causes: Causes = []
    for field in ("labels", "annotations"):
        value = meta.get(field)
        if value is not None and (not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values())):
            causes.append((f"metadata.{field}", "Invalid value: must be a map of string keys to string values"))
    finalizers = meta.get("finalizers")
    if finalizers is not None and (not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)):
        causes.append(("metadata.finalizers", "Invalid value: must be a list of strings"))
    return causes


# --- pods ------------------------------------------------------------------------------------------


def _qos(spec: Obj) -> str:
    requests_seen = limits_seen = False
    guaranteed = True
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        requests_seen |= bool(requests)
        limits_seen |= bool(limits)
        for res in ("cpu", "memory"):
            if res not in limits or requests.get(res, limits[res]) != limits[res]:
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def default_pod_spec(spec: Obj) -> None:
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        if isinstance(container, dict):
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            container.setdefault("imagePullPolicy", image_pull_policy(container.get("image")))
            container.setdefault("resources", {})
            canonical_resources(container["resources"])
    if isinstance(spec.get("overhead"), dict):
        spec["overhead"] = _canonical_map(spec["overhead"])


def canonical_resources(resources: Any) -> None:
    """Requests and limits as the server stores them (``1000m`` → ``1``); a bad one is left for validation."""
    if not isinstance(resources, dict):
        return
    for key in ("requests", "limits"):
        if isinstance(resources.get(key), dict):
            resources[key] = _canonical_map(resources[key])


def _canonical_map(quantities: Obj) -> Obj:
    out = {}
    for name, text in quantities.items():
        try:
            out[name] = canonical_text(text) if isinstance(text, str | int | float) else text
        except QuantityError:
            out[name] = text
    return out


def image_pull_policy(image: Any) -> str:
    """Always for ``:latest`` or no tag (unless pinned by digest), else IfNotPresent: the server's default."""
    ref = str(image or "")
    if "@" in ref:
        return "IfNotPresent"
    last = ref.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
# Tolerations the DefaultTolerationSeconds admission plugin adds to every pod.
DEFAULT_TOLERATIONS = tuple(
    {"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    for key in ("not-ready", "unreachable")
)


def admit_service_account(spec: Obj) -> None:
    """The ServiceAccount admission plugin: the ``default`` account, and its token, the cluster's CA
    and the namespace mounted as the projected volume ``kube-api-access-XXXXX`` in every container."""
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec["serviceAccountName"] = spec["serviceAccount"] = account
    if spec.get("automountServiceAccountToken") is False:
        return
    containers = [
        c for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])] if isinstance(c, dict)
    ]
    if any(m.get("mountPath") == SA_MOUNT for c in containers for m in c.get("volumeMounts") or ()):
        return
    name = generated_name("kube-api-access-")
    sources = [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {
            "downwardAPI": {
                "items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]
            }
        },
    ]
    spec["volumes"] = [
        *(spec.get("volumes") or []),
        {"name": name, "projected": {"sources": sources, "defaultMode": 420}},
    ]
    for c in containers:
        c["volumeMounts"] = [*(c.get("volumeMounts") or []), {"name": name, "readOnly": True, "mountPath": SA_MOUNT}]


def admit_default_tolerations(spec: Obj) -> None:
    """The DefaultTolerationSeconds admission plugin: tolerate not-ready and unreachable nodes for 300 s."""
    tolerations = spec.get("tolerations") or []
    for default in DEFAULT_TOLERATIONS:
        if not any(t.get("key") == default["key"] and t.get("effect") in ("NoExecute", None, "") for t in tolerations):
            tolerations = [*tolerations, dict(default)]
    spec["tolerations"] = tolerations


def prepare_pod_create(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    if isinstance(spec, dict):
        default_pod_spec(spec)
    obj["status"] = {"phase": "Pending", "qosClass": _qos(spec if isinstance(spec, dict) else {})}


def validate_pod(obj: Obj) -> Causes:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [("spec", "Required value")]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [("spec.containers", "Required value")]
    causes: Causes = []
    for i, container in enumerate(containers):
        if not isinstance(container, dict):
            causes.append((f"spec.containers[{i}]", "Invalid value: must be an object"))
            continue
        if not container.get("name"):
            causes.append((f"spec.containers[{i}].name", "Required value"))
        if not container.get("image"):
            causes.append((f"spec.containers[{i}].image", "Required value"))
    return causes + pod_resource_causes(spec)


_POD_MUTABLE = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates")
_POD_SET_BY_ADMISSION = ("priority", "preemptionPolicy", "nodeName")


def _masked_spec(spec: Obj) -> Obj:
    masked = {k: v for k, v in spec.items() if k not in _POD_MUTABLE}
    for field in ("containers", "initContainers"):
        masked[field] = [
            {k: v for k, v in c.items() if k != "image"} for c in spec.get(field) or [] if isinstance(c, dict)
        ]
    return masked


def prepare_pod_update(new: Obj, old: Obj) -> Causes:
    spec = new.setdefault("spec", {})
    if not isinstance(spec, dict):
        return [("spec", "Invalid value: must be an object")]
    default_pod_spec(spec)
    old_spec = old.get("spec") or {}
    # Fields the server set (admission, binding) come back when a client omits them.
    for field in _POD_SET_BY_ADMISSION:
        if field in old_spec and field not in spec:
            spec[field] = old_spec[field]
    if _masked_spec(spec) != _masked_spec(old_spec):
        return [
            (
                "spec",
                # The server follows this with a diff of its internal Go struct, not emulated.
                "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                "(allow it to be set to 1 if it was previously negative)",
            )
        ]
    return []


# --- nodes, namespaces -------------------------------------------------------------------------------


def prepare_node_create(obj: Obj) -> None:
    # Every node is served by a simulated kubelet, so a node created bare reports Ready.
    status = obj.setdefault("status", {})
    if not isinstance(status, dict):
        return
    if "capacity" in status and "allocatable" not in status:
        status["allocatable"] = dict(status["capacity"])
    if not status.get("conditions"):
        now = iso()
        status["conditions"] = [
            {
                "type": ctype,
                "status": value,
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
                "reason": reason,
                "message": message,
            }
            for ctype, value, reason, message in _NODE_CONDITIONS
        ]


# What a healthy kubelet (and KWOK) reports; the network condition is a route controller's.
_NODE_CONDITIONS = (
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status (simulated)"),
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
)


def prepare_namespace_create(obj: Obj) -> None:
    meta = obj["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}
    obj.setdefault("spec", {"finalizers": ["kubernetes"]})
    obj["status"] = {"phase": "Active"}


# --- admission registration, priority classes ---------------------------------------------------------


def validate_webhook_configuration(obj: Obj) -> Causes:
    causes: Causes = []
    hooks = obj.get("webhooks") or []
    if not isinstance(hooks, list):
        return [("webhooks", "Invalid value: must be a list")]
    for i, hook in enumerate(hooks):
        where = f"webhooks[{i}]"
        if not isinstance(hook, dict):
            causes.append((where, "Invalid value: must be an object"))
            continue
        if not hook.get("name"):
            causes.append((f"{where}.name", "Required value"))
        config = hook.get("clientConfig") or {}
        url, service = config.get("url"), config.get("service")
        if bool(url) == bool(service):
            causes.append((f"{where}.clientConfig", "Required value: exactly one of url or service is required"))
        elif url and not str(url).startswith("https://"):
            causes.append((f"{where}.clientConfig.url", f'Unsupported value: "{url}": supported values: "https"'))
        if hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
            causes.append(
                (
                    f"{where}.sideEffects",
                    f'Unsupported value: "{hook.get("sideEffects", "")}": supported values: "None", "NoneOnDryRun"',
                )
            )
        if "v1" not in (hook.get("admissionReviewVersions") or []):
            causes.append((f"{where}.admissionReviewVersions", "Required value: must include v1"))
        if hook.get("failurePolicy", "Fail") not in ("Fail", "Ignore"):
            causes.append((f"{where}.failurePolicy", 'Unsupported value: supported values: "Fail", "Ignore"'))
    return causes


def validate_priority_class(obj: Obj) -> Causes:
    value = obj.get("value")
    if not isinstance(value, int) or isinstance(value, bool):
        return [("value", "Required value: an integer")]
    return []


SYSTEM_PRIORITY_CLASSES = (("system-node-critical", 2000001000), ("system-cluster-critical", 2000000000))
