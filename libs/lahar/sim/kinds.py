"""Core kinds a job controller writes beside its pods: Services (defaults and a cluster IP),
Secrets (``stringData`` folded into base64 ``data``), PersistentVolumeClaims (Pending), and
``events.k8s.io/v1`` Events (the fields that API requires on create)."""

from __future__ import annotations

import base64
import binascii
import ipaddress
from collections.abc import Callable, Iterable
from typing import Any

from lahar.sim.errors import bad_request

Obj = dict[str, Any]
Causes = list[tuple[str, str]]

_SERVICE_RANGE = ipaddress.ip_network("10.96.0.0/12")
_EVENT_TYPES = ("Normal", "Warning")


# --- services ----------------------------------------------------------------------------------------


def default_service(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))


def allocate_cluster_ip(obj: Obj, services: Iterable[Obj]) -> None:
    """The first free address of the service range (headless services keep ``None``)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("type") == "ExternalName":
        return
    ip = spec.get("clusterIP") or ""
    if not ip:
        used = {(s.get("spec") or {}).get("clusterIP") for s in services}
        hosts = _SERVICE_RANGE.hosts()
        next(hosts)  # 10.96.0.1 is the kubernetes service's
        ip = next(str(h) for h in hosts if str(h) not in used)
    spec["clusterIP"] = ip
    spec["clusterIPs"] = [ip]
    spec.setdefault("ipFamilies", ["IPv4"])
    # A headless Service without a selector may take both families, as on the server.
    headless_any = ip == "None" and not spec.get("selector")
    spec.setdefault("ipFamilyPolicy", "RequireDualStack" if headless_any else "SingleStack")
    obj["status"] = {"loadBalancer": {}}


def prepare_service_update(new: Obj, old: Obj) -> Causes:
    default_service(new)
    spec, old_spec = new.get("spec"), old.get("spec") or {}
    if not isinstance(spec, dict):
        return [("spec", "Required value")]
    old_ip = old_spec.get("clusterIP")
    for field in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
        if not spec.get(field) and old_spec.get(field):  # omitted in an update: kept, as the server does
            spec[field] = old_spec[field]
    if old_ip and spec.get("clusterIP") != old_ip:
        return [("spec.clusterIPs[0]", f'Invalid value: "{spec.get("clusterIP")}": may not change once set')]
    return []


# --- secrets -----------------------------------------------------------------------------------------


def normalize_secret(obj: Obj) -> None:
    """``stringData`` is write-only: merged into ``data`` as base64; ``data`` must be base64."""
    obj.setdefault("type", "Opaque")
    data = obj.get("data") or {}
    if not isinstance(data, dict):
        raise bad_request("Secret.data: must be a map of strings")
    for value in data.values():
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            raise bad_request(
                f'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte '
                f"{_bad_base64_at(str(value))}"
            ) from None
    string_data = obj.pop("stringData", None) or {}
    for key, value in string_data.items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    if data:
        obj["data"] = data


def _bad_base64_at(text: str) -> int:
    """Where Go's decoder stops: the first byte outside the alphabet (else the end)."""
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
    return next((i for i, ch in enumerate(text) if ch not in alphabet), len(text))


def prepare_secret_update(new: Obj, old: Obj) -> Causes:
    del old
    normalize_secret(new)
    return []


# --- persistent volume claims ------------------------------------------------------------------------


def prepare_pvc_create(obj: Obj) -> None:
    obj["status"] = {"phase": "Pending"}  # no volume controller binds it


# --- events.k8s.io/v1 --------------------------------------------------------------------------------


def validate_event_v1(obj: Obj) -> Causes:
    """What ``ValidateEventCreate`` requires of an Event written through events.k8s.io/v1."""
    causes: Causes = []
    for field in ("eventTime", "reportingController", "reportingInstance", "action", "reason"):
        if not obj.get(field):
            causes.append((field, "Required value"))
    if obj.get("type") not in _EVENT_TYPES:
        causes.append(("type", f'Unsupported value: "{obj.get("type") or ""}": supported values: "Normal", "Warning"'))
    for field in ("action", "reason", "reportingInstance"):
        if len(str(obj.get(field) or "")) > 128:
            causes.append((field, "Too long: may not be more than 128 bytes"))
    if len(str(obj.get("note") or "").encode()) > 1024:
        causes.append(("note", "Too long: may not be more than 1024 bytes"))
    return causes


def default_core_event(obj: Obj) -> None:
    """Fields of a core/v1 Event the Go type always serialises (no omitempty)."""
    for field in ("firstTimestamp", "lastTimestamp", "eventTime"):
        obj.setdefault(field, None)
    for field in ("reportingComponent", "reportingInstance"):
        obj.setdefault(field, "")


_SERVICES = ("", "services")
_SECRETS = ("", "secrets")
PREPARE_CREATE: dict[tuple[str, str], Callable[[Obj], None]] = {
    _SERVICES: default_service,
    _SECRETS: normalize_secret,
    ("", "persistentvolumeclaims"): prepare_pvc_create,
    ("", "events"): default_core_event,
}
VALIDATE: dict[tuple[str, str], Callable[[Obj], Causes]] = {("events.k8s.io", "events"): validate_event_v1}
PREPARE_UPDATE: dict[tuple[str, str], Callable[[Obj, Obj], Causes]] = {
    _SERVICES: prepare_service_update,
    _SECRETS: prepare_secret_update,
}
