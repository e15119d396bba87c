"""resource.k8s.io/v1 (dynamic resource allocation): ResourceClaims, ResourceClaimTemplates,
ResourceSlices and DeviceClasses as kube-apiserver 1.34 stores them.

Modelled where a scheduler or a driver would notice: a claim's (and a template's) exact requests
get their defaults (``allocationMode: ExactCount``, ``count: 1``), its status starts empty and its spec
is immutable; a status write may not reserve an unallocated claim, name a consumer twice or
without its resource, name and uid, nor change an allocation once set (it may only clear
it).  A slice needs its driver and pool and exactly one way of naming its nodes.  Slices and
classes count generations.  CEL selectors are stored, not compiled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]
Causes = list[tuple[str, str]]

GROUP = "resource.k8s.io"
CLAIMS = (GROUP, "resourceclaims")
SLICES = (GROUP, "resourceslices")
CLASSES = (GROUP, "deviceclasses")
TEMPLATES = (GROUP, "resourceclaimtemplates")
_NODE_SELECTION = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")


def _requests(obj: Obj) -> list[Obj]:
    spec = obj.get("spec")
    devices = spec.get("devices") if isinstance(spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    return [r for r in requests or [] if isinstance(r, dict)]


def _default_request(request: Obj) -> None:
    request.setdefault("allocationMode", "ExactCount")
    if request["allocationMode"] == "ExactCount" and not request.get("count"):
        request["count"] = 1


def prepare_claim_create(obj: Obj) -> None:
    obj["status"] = {}  # PrepareForCreate: a new claim is neither allocated nor reserved
    default_requests(obj)


def default_template(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("spec"), dict):
        default_requests({"spec": spec["spec"]})  # the claim spec it stamps out


def default_requests(obj: Obj) -> None:
    """SetDefaults_ExactDeviceRequest and SetDefaults_DeviceSubRequest."""
    for request in _requests(obj):
        exact = request.get("exactly")
        if isinstance(exact, dict):
            _default_request(exact)
        for sub in request.get("firstAvailable") or []:
            if isinstance(sub, dict):
                _default_request(sub)


def validate_claim(obj: Obj) -> Causes:
    causes: Causes = []
    seen: set[str] = set()
    for i, request in enumerate(_requests(obj)):
        path = f"spec.devices.requests[{i}]"
        name = request.get("name") or ""
        if not name:
            causes.append((f"{path}.name", "Required value"))
        elif name in seen:
            causes.append((f"{path}.name", f'Duplicate value: "{name}"'))
        seen.add(name)
        exact, first = request.get("exactly"), request.get("firstAvailable")
        if (exact is None) == (not first):
            causes.append((path, "Invalid value: exactly one of `exactly` or `firstAvailable` is required"))
        elif isinstance(exact, dict) and not exact.get("deviceClassName"):
            causes.append((f"{path}.exactly.deviceClassName", "Required value"))
    return causes


def prepare_claim_update(new: Obj, old: Obj) -> Causes:
    if new.get("spec") != old.get("spec"):
        return [("spec", "Invalid value: field is immutable")]
    return []


def prepare_claim_status(new: Obj, old: Obj) -> Causes:
    """ValidateResourceClaimStatusUpdate's invariants (the spec came from ``old`` already)."""
    status = new.get("status") or {}
    old_status = old.get("status") or {}
    causes: Causes = []
    allocation, old_allocation = status.get("allocation"), old_status.get("allocation")
    uids: set[str] = set()
    for i, ref in enumerate(status.get("reservedFor") or []):
        for field in ("resource", "name", "uid"):
            if not (isinstance(ref, dict) and ref.get(field)):
                causes.append((f"status.reservedFor[{i}].{field}", "Required value"))
        uid = ref.get("uid") if isinstance(ref, dict) else None
        if uid and uid in uids:
            causes.append((f"status.reservedFor[{i}].uid", f'Duplicate value: "{uid}"'))
        uids.add(uid or "")
    if status.get("reservedFor") and allocation is None:
        causes.append(("status.reservedFor", "Forbidden: may not be specified when `allocated` is not set"))
    if allocation is not None and old_allocation is not None and allocation != old_allocation:
        causes.append(("status.allocation", "Invalid value: field is immutable"))
    return causes


def validate_slice(obj: Obj) -> Causes:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [("spec", "Required value")]
    causes: Causes = []
    if not spec.get("driver"):
        causes.append(("spec.driver", "Required value"))
    pool = spec.get("pool")
    if not isinstance(pool, dict) or not pool.get("name"):
        causes.append(("spec.pool.name", "Required value"))
    chosen = [f for f in _NODE_SELECTION if spec.get(f)]
    if len(chosen) != 1:
        causes.append(
            (
                "spec",
                "Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                "`perDeviceNodeSelection` is required",
            )
        )
    return causes


PREPARE_CREATE: dict[tuple[str, str], Callable[[Obj], None]] = {
    CLAIMS: prepare_claim_create,
    TEMPLATES: default_template,
}
PREPARE_UPDATE: dict[tuple[str, str], Callable[[Obj, Obj], Causes]] = {CLAIMS: prepare_claim_update}
PREPARE_STATUS: dict[tuple[str, str], Callable[[Obj, Obj], Causes]] = {CLAIMS: prepare_claim_status}
VALIDATE: dict[tuple[str, str], Callable[[Obj], Causes]] = {CLAIMS: validate_claim, SLICES: validate_slice}
GENERATION = frozenset({SLICES, CLASSES})
RETURN_DELETED = frozenset({CLAIMS, SLICES, CLASSES, TEMPLATES})  # their stores set ReturnDeletedObject
