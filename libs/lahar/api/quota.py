"""A pod's quota usage, as Kubernetes' ResourceQuota evaluator counts it, in Volcano's spelling.

Volcano sizes a PodGroup's ``minResources`` with this usage (``minMember`` copies of it for a plain
pod's group; the first ``minAvailable`` pods for a Job's group).  For a pod it is:

- ``count/pods: 1`` always, and unless the pod has finished (Succeeded or Failed): ``pods: 1``;
- ``cpu``/``requests.cpu``, ``memory``/``requests.memory``, ``ephemeral-storage``/
  ``requests.ephemeral-storage`` from the pod's requests, and ``limits.<name>`` from its limits;
- ``hugepages-*`` under its own name and ``requests.``; extended resources (``nvidia.com/gpu``)
  under ``requests.<name>`` — which Volcano copies back to the bare name.

The pod's requests are those the scheduler sees: the sum over containers; the larger of that and
each init container (restartable "sidecar" init containers add to both); the pod-level
``spec.resources`` when set; plus ``spec.overhead``.  A container with a limit and no request for
a resource requests its limit (the API server's defaulting).  Pods are plain Kubernetes JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from lahar.api.quantity import QuantityError, parse_quantity

ResourceList = dict[str, Fraction]
_COMPUTE = ("cpu", "memory", "ephemeral-storage")
_FINISHED = frozenset({"Succeeded", "Failed"})


def _list(raw: Any) -> ResourceList:
    out: ResourceList = {}
    if not isinstance(raw, Mapping):
        return out
    for name, value in raw.items():
        try:
            out[str(name)] = parse_quantity(value)
        except QuantityError:
            continue  # the API server refuses such a pod; here it simply counts for nothing
    return out


def resource_list(raw: Any) -> ResourceList:
    """A ResourceList's quantities; an invalid one is left out."""
    return _list(raw)


def _add(into: ResourceList, more: Mapping[str, Fraction]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, Fraction(0)) + v


def _max(into: ResourceList, other: Mapping[str, Fraction]) -> None:
    for k, v in other.items():
        if v > into.get(k, Fraction(-1)):
            into[k] = v


def _container(c: Mapping[str, Any], which: str) -> ResourceList:
    res = c.get("resources") or {}
    out = _list(res.get(which))
    if which == "requests":
        for k, v in _list(res.get("limits")).items():
            out.setdefault(k, v)
    return out


def _aggregate(spec: Mapping[str, Any], which: str) -> ResourceList:
    total: ResourceList = {}
    for c in spec.get("containers") or []:
        _add(total, _container(c, which))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for c in spec.get("initContainers") or []:
        own = _container(c, which)
        if c.get("restartPolicy") == "Always":  # a sidecar runs beside the containers
            _add(total, own)
            _add(sidecars, own)
            step = dict(sidecars)
        else:
            step = dict(own)
            _add(step, sidecars)
        _max(init_peak, step)
    _max(total, init_peak)
    pod_level = _list((spec.get("resources") or {}).get(which))
    total.update({k: v for k, v in pod_level.items() if k in ("cpu", "memory")})
    overhead = _list(spec.get("overhead"))
    if which == "limits":  # overhead raises only the limits that are set
        overhead = {k: v for k, v in overhead.items() if k in total}
    _add(total, overhead)
    return total


def pod_requests(pod: Mapping[str, Any]) -> ResourceList:
    """The pod's effective requests (see the module text)."""
    return _aggregate(pod.get("spec") or {}, "requests")


def pod_limits(pod: Mapping[str, Any]) -> ResourceList:
    return _aggregate(pod.get("spec") or {}, "limits")


def is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    return not is_native(name) and not name.startswith("requests.")


def pod_quota_usage(pod: Mapping[str, Any]) -> ResourceList:
    """What the pod counts for in a ResourceQuota, plus Volcano's bare extended-resource names."""
    usage: ResourceList = {"count/pods": Fraction(1)}
    if str((pod.get("status") or {}).get("phase") or "") in _FINISHED:
        return usage
    usage["pods"] = Fraction(1)
    requests, limits = pod_requests(pod), pod_limits(pod)
    for name in _COMPUTE:
        if name in requests:
            usage[name] = usage[f"requests.{name}"] = requests[name]
        if name in limits:
            usage[f"limits.{name}"] = limits[name]
    for name, amount in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = usage[f"requests.{name}"] = amount
        elif _is_extended(name):
            usage[f"requests.{name}"] = usage[name] = amount
    return usage


def times(usage: Mapping[str, Fraction], n: int) -> ResourceList:
    return {k: v * n for k, v in usage.items()}


def total(lists: Iterable[Mapping[str, Fraction]]) -> ResourceList:
    out: ResourceList = {}
    for rl in lists:
        _add(out, rl)
    return out


def quantity_text(amount: Fraction) -> str:
    """A canonical quantity for an object: ``3``, ``1500m``, ``2Gi`` (exact binary multiples of
    Mi and up keep a binary suffix, as memory written that way does)."""
    if amount.denominator == 1:
        whole = amount.numerator
        for suffix, size in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
            if whole and whole % size == 0:
                return f"{whole // size}{suffix}"
        return str(whole)
    milli = amount * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    nano = -((-amount.numerator * 10**9) // amount.denominator)  # rounded up, as Kubernetes does
    return f"{nano}n"


def to_text(rl: Mapping[str, Fraction]) -> dict[str, str]:
    return {k: quantity_text(v) for k, v in sorted(rl.items())}
