"""A pod template's quota usage, as Kubernetes' ResourceQuota evaluator counts it.

Volcano sizes a Job's PodGroup ``minResources`` with that evaluator, so the PodGroup carries the
same resource names a quota would (``cpu`` and ``requests.cpu``, ``limits.cpu``, ``pods``,
``count/pods``, extended resources with and without the ``requests.`` prefix).  Values are exact
``Fraction``s; ``quantity_text`` writes them back as quantities.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from lahar.api.quantity import QuantityError, parse_quantity

Usage = dict[str, Fraction]

_COMPUTE = ("cpu", "memory", "ephemeral-storage")
_POD_LEVEL = ("cpu", "memory")


def _list(raw: Any) -> Usage:
    out: Usage = {}
    if not isinstance(raw, Mapping):
        return out
    for name, value in raw.items():
        try:
            out[str(name)] = parse_quantity(value)
        except QuantityError:
            continue  # admission refuses such a pod; here it simply counts for nothing
    return out


def _add(into: Usage, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, Fraction(0)) + value


def _max_into(into: Usage, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        if name not in into or value > into[name]:
            into[name] = value


def _containers(spec: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    raw = spec.get(key)
    return [c for c in raw if isinstance(c, Mapping)] if isinstance(raw, list) else []


def _resources(container: Mapping[str, Any], which: str) -> Usage:
    res = container.get("resources")
    return _list(res.get(which)) if isinstance(res, Mapping) else {}


def _effective(spec: Mapping[str, Any], which: str) -> Usage:
    """Requests (or limits) of the pod: the regular containers and sidecars run together; each
    ordinary init container runs alone beside the sidecars started before it; the larger wins."""
    total: Usage = {}
    for c in _containers(spec, "containers"):
        _add(total, _resources(c, which))
    sidecars: Usage = {}
    init_peak: Usage = {}
    for c in _containers(spec, "initContainers"):
        own = _resources(c, which)
        if c.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            _max_into(init_peak, dict(sidecars))
        else:
            alone = dict(own)
            _add(alone, sidecars)
            _max_into(init_peak, alone)
    _max_into(total, init_peak)
    pod_level = spec.get("resources")
    if isinstance(pod_level, Mapping):
        for name, value in _list(pod_level.get(which)).items():
            if name in _POD_LEVEL:
                total[name] = value
    overhead = _list(spec.get("overhead"))
    if which == "requests":
        _add(total, overhead)
    else:
        _add(total, {n: v for n, v in overhead.items() if n in total})
    return total


def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def pod_quota_usage(spec: Mapping[str, Any]) -> Usage:
    """The quota usage of one pod built from ``spec`` (a pod that has not finished)."""
    requests, limits = _effective(spec, "requests"), _effective(spec, "limits")
    usage: Usage = {"count/pods": Fraction(1), "pods": Fraction(1)}
    for name in _COMPUTE:
        if name in requests:
            usage[name] = usage[f"requests.{name}"] = requests[name]
        if name in limits:
            usage[f"limits.{name}"] = limits[name]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = usage[f"requests.{name}"] = value
        elif not _native(name) and not name.startswith("requests."):
            # Volcano adds the bare name of an extended resource next to the quota's prefixed one
            usage[f"requests.{name}"] = usage[name] = value
    return usage


def scaled(usage: Mapping[str, Fraction], count: int) -> Usage:
    return {name: value * count for name, value in usage.items()} if count > 0 else {}


def total(parts: Iterable[Mapping[str, Fraction]]) -> Usage:
    out: Usage = {}
    for part in parts:
        _add(out, part)
    return out


def quantity_text(amount: Fraction) -> str:
    """A quantity string of exactly ``amount`` (to the nano unit, rounded up as Go does)."""
    if amount.denominator == 1:
        return str(amount.numerator)
    milli = amount * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return f"{math.ceil(amount * 10**9)}n"


def as_resource_list(usage: Mapping[str, Fraction]) -> dict[str, str]:
    return {name: quantity_text(value) for name, value in sorted(usage.items())}


def parse_resource_list(raw: Any) -> Usage:
    return _list(raw)
