"""Table output (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``), what ``kubectl get``
asks for: the columns of the API server's printers for a few built-in kinds (pods, nodes,
namespaces, configmaps), ``additionalPrinterColumns`` for custom resources, and the server's
default (Name, Created At) for everything else.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

from lahar.sim.resources import ResourceType

Obj = dict[str, Any]
Column = dict[str, Any]
_NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources may "
    "allow a client to request the generation of an appropriate name automatically. Name is primarily intended "
    "for creation idempotence and configuration definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_CREATED_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
    "guaranteed to be set in happens-before order across separate operations. Clients may not set this value. "
    "It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. "
    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
NAME = {"name": "Name", "type": "string", "format": "name", "description": _NAME_DOC, "priority": 0}


def wants_table(accept: str) -> bool:
    """Whether the client asks for a Table first (kubectl lists Table, then plain JSON)."""
    first = accept.split(",")[0].replace(" ", "")
    return "as=Table" in first and "g=meta.k8s.io" in first


def column(name: str, type_: str = "string", description: str = "", priority: int = 0, fmt: str = "") -> Column:
    return {"name": name, "type": type_, "format": fmt, "description": description, "priority": priority}


def age(obj: Obj, now: datetime.datetime | None = None) -> str:
    stamp = obj["metadata"].get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    created = datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    now = now or datetime.datetime.now(datetime.UTC)
    return human_duration((now - created).total_seconds())


def human_duration(seconds: float) -> str:
    """Go's ``duration.HumanDuration``: 45s, 3m20s, 15m, 5h10m, 3d4h, 2y30d."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes, hours = s // 60, s // 3600
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


# --- custom resources: additionalPrinterColumns ---------------------------------------------------------

_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


def json_path(obj: Any, path: str) -> Any:
    """The simple JSONPaths printer columns use: ``.status.phase``, ``.spec.tasks[0].name``."""
    value = obj
    for key, index in _STEP.findall(path.strip().removeprefix("{").removesuffix("}")):
        if key and isinstance(value, dict):
            value = value.get(key)
        elif index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return None
    return value


def custom_cell(col: Obj, obj: Obj) -> Any:
    value = json_path(obj, col.get("jsonPath", ""))
    kind = col.get("type", "string")
    if value is None:
        return None
    if kind == "date":
        return age({"metadata": {"creationTimestamp": value}}) if isinstance(value, str) else None
    if kind == "integer":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == "number":
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if isinstance(value, str):
        return value
    return str(value).lower() if isinstance(value, bool) else _go_text(value)


def _go_text(value: Any) -> str:
    import msgspec

    return msgspec.json.encode(value).decode() if isinstance(value, dict | list) else str(value)


def custom_columns(rtype: ResourceType) -> tuple[list[Column], list[Callable[[Obj], Any]]]:
    cols = rtype.printer_columns or [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    defs = [NAME] + [
        column(
            c["name"], c.get("type", "string"), c.get("description", ""), int(c.get("priority", 0)), c.get("format", "")
        )
        for c in cols
    ]
    cells: list[Callable[[Obj], Any]] = [lambda o: o["metadata"]["name"]]
    cells += [_custom_getter(c) for c in cols]
    return defs, cells


def _custom_getter(col: Obj) -> Callable[[Obj], Any]:
    return lambda obj: custom_cell(col, obj)


# --- built-in kinds -------------------------------------------------------------------------------------


def _default() -> tuple[list[Column], list[Callable[[Obj], Any]]]:
    defs = [NAME, column("Created At", "date", _CREATED_DOC)]
    return defs, [lambda o: o["metadata"]["name"], lambda o: o["metadata"].get("creationTimestamp")]


def _pods() -> tuple[list[Column], list[Callable[[Obj], Any]]]:
    defs = [
        NAME,
        column("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
        column("Status", description="The aggregate status of the containers in this pod."),
        column("Restarts", description="The number of times the containers in this pod have been restarted."),
        column("Age", description=_CREATED_DOC),
        column("IP", description="IP address allocated to the pod.", priority=1),
        column("Node", description="The node the pod is bound to.", priority=1),
        column("Nominated Node", description="The node the scheduler nominated for this pod.", priority=1),
        column("Readiness Gates", description="The pod's readiness gates.", priority=1),
    ]
    cells: list[Callable[[Obj], Any]] = [
        lambda o: o["metadata"]["name"],
        _pod_ready,
        pod_status_text,
        lambda o: str(sum(int(c.get("restartCount") or 0) for c in _status(o).get("containerStatuses") or ())),
        age,
        lambda o: _status(o).get("podIP") or "<none>",
        lambda o: (o.get("spec") or {}).get("nodeName") or "<none>",
        lambda o: _status(o).get("nominatedNodeName") or "<none>",
        _readiness_gates,
    ]
    return defs, cells


def _status(obj: Obj) -> Obj:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def _pod_ready(obj: Obj) -> str:
    containers = (obj.get("spec") or {}).get("containers") or []
    ready = sum(1 for c in _status(obj).get("containerStatuses") or () if c.get("ready"))
    return f"{ready}/{len(containers)}"


def pod_status_text(obj: Obj) -> str:
    """kubectl's STATUS: the phase, a container's waiting or terminated reason, or Terminating."""
    status = _status(obj)
    reason = status.get("reason") or status.get("phase") or ""
    for c in status.get("containerStatuses") or ():
        state = c.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated") or {}
        if waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated.get("reason"):
            reason = terminated["reason"]
    if obj["metadata"].get("deletionTimestamp") and status.get("phase") not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return str(reason)


def _readiness_gates(obj: Obj) -> str:
    gates = (obj.get("spec") or {}).get("readinessGates") or []
    if not gates:
        return "<none>"
    true = {c.get("type") for c in _status(obj).get("conditions") or () if c.get("status") == "True"}
    return f"{sum(1 for g in gates if g.get('conditionType') in true)}/{len(gates)}"


def _configmaps() -> tuple[list[Column], list[Callable[[Obj], Any]]]:
    defs = [NAME, column("Data", "string", "Number of data in configmap"), column("Age", description=_CREATED_DOC)]
    count = lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {})  # noqa: E731
    return defs, [lambda o: o["metadata"]["name"], count, age]


def _namespaces() -> tuple[list[Column], list[Callable[[Obj], Any]]]:
    defs = [NAME, column("Status", description="The status of the namespace"), column("Age", description=_CREATED_DOC)]
    return defs, [lambda o: o["metadata"]["name"], lambda o: _status(o).get("phase") or "", age]


def _nodes() -> tuple[list[Column], list[Callable[[Obj], Any]]]:
    defs = [
        NAME,
        column("Status", description="The status of the node"),
        column("Roles", description="The roles of the node"),
        column("Age", description=_CREATED_DOC),
        column("Version", description="Kubelet Version reported by the node."),
        column("Internal-IP", description="List of internal IPs.", priority=1),
        column("External-IP", description="List of external IPs.", priority=1),
        column("OS-Image", description="OS Image reported by the node from /etc/os-release.", priority=1),
        column("Kernel-Version", description="Kernel Version reported by the node.", priority=1),
        column("Container-Runtime", description="Container Runtime Version reported by the node.", priority=1),
    ]
    cells: list[Callable[[Obj], Any]] = [
        lambda o: o["metadata"]["name"],
        _node_status,
        _node_roles,
        age,
        info("kubeletVersion"),
        lambda o: _address(o, "InternalIP"),
        lambda o: _address(o, "ExternalIP"),
        info("osImage"),
        info("kernelVersion"),
        info("containerRuntimeVersion"),
    ]
    return defs, cells


def info(key: str) -> Callable[[Obj], str]:
    """A field of a node's status.nodeInfo."""
    return lambda obj: str((_status(obj).get("nodeInfo") or {}).get(key) or "")


def _node_status(obj: Obj) -> str:
    ready = next((c for c in _status(obj).get("conditions") or () if c.get("type") == "Ready"), None)
    text = "Ready" if ready and ready.get("status") == "True" else "NotReady" if ready else "Unknown"
    return text + (",SchedulingDisabled" if (obj.get("spec") or {}).get("unschedulable") else "")


def _node_roles(obj: Obj) -> str:
    prefix = "node-role.kubernetes.io/"
    labels = obj["metadata"].get("labels") or {}
    roles = sorted(k[len(prefix) :] for k in labels if k.startswith(prefix) and k != prefix)
    return ",".join(roles) or "<none>"


def _address(obj: Obj, kind: str) -> str:
    found = [a.get("address") for a in _status(obj).get("addresses") or () if a.get("type") == kind]
    return ",".join(found) or "<none>"


PRINTERS: dict[tuple[str, str], Callable[[], tuple[list[Column], list[Callable[[Obj], Any]]]]] = {
    ("", "pods"): _pods,
    ("", "configmaps"): _configmaps,
    ("", "namespaces"): _namespaces,
    ("", "nodes"): _nodes,
}


def to_table(rtype: ResourceType, objects: list[Obj], resource_version: str, include: str = "Metadata") -> Obj:
    """A ``meta.k8s.io/v1`` Table of ``objects``; rows carry the object as ``include`` says."""
    if rtype.custom:
        defs, cells = custom_columns(rtype)
    else:
        defs, cells = PRINTERS.get(rtype.key, _default)()
    rows = []
    for obj in objects:
        row: Obj = {"cells": [cell(obj) for cell in cells]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": defs,
        "rows": rows,
    }
