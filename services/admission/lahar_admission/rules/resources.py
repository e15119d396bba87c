"""Container and pod-level resource requirements, as Kubernetes' pod validation checks them."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from lahar_admission import fielderr as fe
from lahar_admission.fielderr import FieldError
from lahar_admission.goquantity import (
    Quantity,
    QuantityError,
    canonical,
    canonical_of,
    format_of,
    is_extended_resource,
    is_hugepages,
    is_integer_resource,
    is_native_resource,
    overcommit_allowed,
)
from lahar_admission.names import is_qualified_name

QUANTITY_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
STANDARD_CONTAINER = frozenset({"cpu", "memory", "ephemeral-storage"})
STANDARD = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.storage",
        "services.nodeports",
        "services.loadbalancers",
    }
)


@dataclass
class Amount:
    q: Quantity

    @property
    def text(self) -> str:
        return canonical_of(self.q)


def parse_list(raw: Any, path: str, errs: list[FieldError]) -> dict[str, Quantity]:
    """A resource list; a value that is not a quantity is an error at its path."""
    out: dict[str, Quantity] = {}
    if raw is None:
        return out
    if not isinstance(raw, dict):
        errs.append(fe.invalid(path, raw, "must be a map of resource name to quantity"))
        return out
    for name in sorted(raw, key=str):
        value = raw[name]
        try:
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise QuantityError("not a quantity")
            out[str(name)] = Quantity(value)
        except QuantityError:
            errs.append(
                fe.invalid(f"{path}[{name}]", value, f"quantities must match the regular expression '{QUANTITY_RE}'")
            )
    return out


def quantity_value_errors(name: str, q: Quantity, path: str) -> list[FieldError]:
    """ValidateResourceQuantityValue: non-negative, and whole for integer resources."""
    errs: list[FieldError] = []
    if q.amount.numerator < 0:
        errs.append(fe.invalid(path, canonical_of(q), "must be greater than or equal to 0"))
    if is_integer_resource(name) and q.milli % 1000 != 0:
        errs.append(fe.invalid_raw(path, canonical_of(q), "must be an integer"))
    return errs


def _container_name_errors(name: str, path: str) -> list[FieldError]:
    return list(_container_name_errors_cached(name, path))


@lru_cache(maxsize=4096)
def _container_name_errors_cached(name: str, path: str) -> tuple[FieldError, ...]:
    return tuple(_container_name_check(name, path))


def _container_name_check(name: str, path: str) -> list[FieldError]:
    msgs = is_qualified_name(name)
    if msgs:
        return [fe.invalid(path, name, m) for m in msgs]
    errs: list[FieldError] = []
    unqualified = "/" not in name
    if unqualified and name not in STANDARD and not name.startswith(("hugepages-", "requests.hugepages-")):
        errs.append(fe.invalid(path, name, "must be a standard resource type or fully qualified"))
    if unqualified:
        if name in STANDARD_CONTAINER or is_hugepages(name):
            return errs
        return [*errs, fe.invalid(path, name, "must be a standard resource for containers")]
    if not is_native_resource(name) and not is_extended_resource(name):
        return [fe.invalid(path, name, "doesn't follow extended resource name standard")]
    return []


def _pod_name_errors(name: str, path: str) -> list[FieldError]:
    msgs = is_qualified_name(name)
    if msgs:
        return [fe.invalid(path, name, m) for m in msgs]
    if "/" not in name and name not in STANDARD and not name.startswith(("hugepages-", "requests.hugepages-")):
        return [fe.invalid(path, name, "must be a standard resource type or fully qualified")]
    if name in ("cpu", "memory") or is_hugepages(name):
        return []
    return [fe.not_supported(path, name, ["cpu", "hugepages-", "memory"])]


def _hugepage_errors(name: str, q: Quantity, path: str) -> list[FieldError]:
    try:
        page = Quantity(name[len("hugepages-") :])
    except QuantityError:
        page = None
    ok = page is not None and page.amount > 0 and page.milli % 1000 == 0 and q.units % page.units == 0
    if ok:
        return []
    shown = canonical_of(q)
    return [fe.invalid(path, shown, f"{shown} is not positive integer multiple of {name}")]


def requirements_errors(raw: Any, path: str, pod_level: bool) -> list[FieldError]:
    """validateResourceRequirements for one container (or the pod when ``pod_level``)."""
    errs: list[FieldError] = []
    if raw is None:
        return errs
    if not isinstance(raw, dict):
        return [fe.invalid(path, raw, "must be an object")]
    limits = parse_list(raw.get("limits"), f"{path}.limits", errs)
    requests = parse_list(raw.get("requests"), f"{path}.requests", errs)
    name_check = _pod_name_errors if pod_level else _container_name_errors
    compute = huge = False
    for name, q in limits.items():
        p = f"{path}.limits[{name}]"
        errs += name_check(name, p) + quantity_value_errors(name, q, p)
        if is_hugepages(name):
            huge = True
            errs += _hugepage_errors(name, q, p)
        compute = compute or name in ("cpu", "memory")
    for name, q in requests.items():
        p = f"{path}.requests[{name}]"
        errs += name_check(name, p) + quantity_value_errors(name, q, p)
        errs += _request_vs_limit(name, q, limits.get(name), path)
        if is_hugepages(name):
            huge = True
            errs += _hugepage_errors(name, q, p)
        compute = compute or name in ("cpu", "memory")
    if huge and not compute:
        errs.append(fe.forbidden(path, "HugePages require cpu or memory"))
    return errs


def _request_vs_limit(name: str, req: Quantity, limit: Quantity | None, path: str) -> list[FieldError]:
    if limit is None:
        if overcommit_allowed(name):
            return []
        return [fe.required(f"{path}.limits", "Limit must be set for non overcommitable resources")]
    if req.amount != limit.amount and not overcommit_allowed(name):
        return [
            fe.invalid(
                f"{path}.requests",
                canonical_of(req),
                f"must be equal to {name} limit of {canonical_of(limit)}",
            )
        ]
    if req.amount > limit.amount:
        return [
            fe.invalid(
                f"{path}.requests",
                canonical_of(req),
                f"must be less than or equal to {name} limit of {canonical_of(limit)}",
            )
        ]
    return []


# --- pod-level consistency ----------------------------------------------------------------


def _container_list(spec: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = spec.get(key)
    return [c for c in items if isinstance(c, dict)] if isinstance(items, list) else []


def _side(container: dict[str, Any], which: str) -> dict[str, Quantity]:
    res = container.get("resources")
    if not isinstance(res, dict):
        return {}
    scratch: list[FieldError] = []
    return parse_list(res.get(which), "", scratch)


class _Sum:
    """A per-resource sum that remembers the first quantity's format (Go's Add keeps it)."""

    def __init__(self) -> None:
        self.amount: dict[str, Fraction] = {}
        self.fmt: dict[str, str] = {}

    def add(self, rl: dict[str, Quantity]) -> None:
        for name, q in rl.items():
            self.amount[name] = self.amount.get(name, Fraction(0)) + q.amount
            self.fmt.setdefault(name, format_of(str(q.text)))

    def at_least(self, rl: dict[str, Fraction], fmt: dict[str, str]) -> None:
        for name, amount in rl.items():
            if amount > self.amount.get(name, Fraction(0)):
                self.amount[name] = amount
                self.fmt.setdefault(name, fmt.get(name, "decimal"))

    def show(self, name: str) -> str:
        return canonical(self.amount[name], self.fmt.get(name, "decimal"))


def aggregate(spec: dict[str, Any], which: str) -> _Sum:
    """The containers' effective total (PodRequests/PodLimits without overhead or pod-level)."""
    total = _Sum()
    for c in _container_list(spec, "containers"):
        total.add(_side(c, which))
    sidecars = _Sum()
    init_max = _Sum()
    for c in _container_list(spec, "initContainers"):
        rl = _side(c, which)
        if c.get("restartPolicy") == "Always":
            total.add(rl)
            sidecars.add(rl)
            continue
        step = _Sum()
        step.add(rl)
        for name, amount in sidecars.amount.items():
            step.amount[name] = step.amount.get(name, Fraction(0)) + amount
        init_max.at_least(step.amount, step.fmt)
    total.at_least(init_max.amount, init_max.fmt)
    return total


def pod_consistency_errors(spec: dict[str, Any], path: str) -> list[FieldError]:
    res = spec.get("resources")
    if not isinstance(res, dict):
        return []
    scratch: list[FieldError] = []
    pod_req = parse_list(res.get("requests"), "", scratch)
    pod_lim = parse_list(res.get("limits"), "", scratch)
    errs: list[FieldError] = []
    reqs = aggregate(spec, "requests")
    for name in sorted(reqs.amount):
        if name in pod_req and reqs.amount[name] > pod_req[name].amount:
            errs.append(
                fe.invalid(
                    f"{path}.requests[{name}]",
                    canonical_of(pod_req[name]),
                    f"must be greater than or equal to aggregate container requests of {reqs.show(name)}",
                )
            )
    lims = aggregate(spec, "limits")
    for name in sorted(lims.amount):
        if is_hugepages(name) and name in pod_lim and lims.amount[name] > pod_lim[name].amount:
            errs.append(
                fe.invalid(
                    f"{path}.limits[{name}]",
                    canonical_of(pod_lim[name]),
                    f"must be greater than or equal to aggregate container limits of {lims.show(name)}",
                )
            )
    for i, c in enumerate(_container_list(spec, "containers")):
        for name, q in _side(c, "limits").items():
            if name in pod_lim and q.amount > pod_lim[name].amount:
                errs.append(
                    fe.invalid(
                        f"{path}.containers[{i}][{name}].limits",
                        canonical_of(q),
                        f"must be less than or equal to pod limits of {canonical_of(pod_lim[name])}",
                    )
                )
    return errs
