"""The resource lists of a pod, checked as kube-apiserver checks them: every value a quantity
Lahar can hold, none negative.

kube-apiserver refuses a negative request or limit (``spec.containers[0].resources.requests[cpu]:
Invalid value: "-1": must be greater than or equal to 0``); a pod that carries one anyway (an API
server that does not check, a forged mirror entry) would *free* room on its node in every sum.
The emulator answers 422 with these causes, and the scheduler treats such a pod as unreadable
(a condition on the pod, never a placement).  Pods come as typed ``PodSpec`` (the scheduler) or
as plain JSON dicts (the emulator); both are walked to the same ``(field, resource list)`` pairs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from lahar.api.objects import PodSpec, ResourceRequirements
from lahar.api.quantity import Quantity, QuantityError

Cause = tuple[str, str]  # (field, why), as kube-apiserver's field errors print them


def _typed_lists(spec: PodSpec) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for group, containers in (("containers", spec.containers), ("initContainers", spec.init_containers)):
        for i, c in enumerate(containers):
            yield from _requirements(f"spec.{group}[{i}].resources", c.resources)
    if spec.resources is not None:
        yield from _requirements("spec.resources", spec.resources)
    yield "spec.overhead", spec.overhead


def _requirements(path: str, res: ResourceRequirements) -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield f"{path}.requests", res.requests
    yield f"{path}.limits", res.limits


def _raw_lists(spec: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    for group in ("containers", "initContainers"):
        containers = spec.get(group)
        for i, c in enumerate(containers if isinstance(containers, list) else []):
            res = c.get("resources") if isinstance(c, dict) else None
            if isinstance(res, dict):
                yield f"spec.{group}[{i}].resources.requests", res.get("requests")
                yield f"spec.{group}[{i}].resources.limits", res.get("limits")
    res = spec.get("resources")
    if isinstance(res, dict):
        yield "spec.resources.requests", res.get("requests")
        yield "spec.resources.limits", res.get("limits")
    yield "spec.overhead", spec.get("overhead")


def _shown(raw: Any) -> str:
    text = raw.text if isinstance(raw, Quantity) else raw
    shown = json.dumps(text if isinstance(text, str) else str(text))
    return shown if len(shown) <= 40 else shown[:36] + '..."'


def _list_causes(path: str, rl: Any) -> list[Cause]:
    if rl is None:
        return []
    if not isinstance(rl, Mapping):
        return [(path, "Invalid value: must be a map of resource name to quantity")]
    causes: list[Cause] = []
    for name, raw in rl.items():
        field = f"{path}[{name}]"
        try:
            q = raw if isinstance(raw, Quantity) else Quantity(raw)
        except QuantityError as exc:
            causes.append((field, f"Invalid value: {_shown(raw)}: {exc.why or 'must be a quantity'}"))
            continue
        if q.amount < 0:
            causes.append((field, f"Invalid value: {_shown(q)}: must be greater than or equal to 0"))
    return causes


def pod_resource_causes(spec: PodSpec | Mapping[str, Any]) -> list[Cause]:
    """Every value of the pod's requests, limits and overhead that is not a quantity Lahar can
    hold, or is negative."""
    lists = _typed_lists(spec) if isinstance(spec, PodSpec) else _raw_lists(spec)
    return [cause for path, rl in lists for cause in _list_causes(path, rl)]
