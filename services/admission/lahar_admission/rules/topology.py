"""The task ``topologyPolicy`` rule: whole, non-zero CPU on every container."""

from __future__ import annotations

from typing import Any

from lahar_admission.goquantity import Quantity, QuantityError
from lahar_admission.types import TaskSpec


def _guaranteed_cpus(container: Any) -> int:
    """Volcano's guaranteedCPUs: the CPU request (limits when no requests) if whole, else 0."""
    if not isinstance(container, dict):
        return 0
    res = container.get("resources")
    res = res if isinstance(res, dict) else {}
    requests = res.get("requests") if isinstance(res.get("requests"), dict) and res.get("requests") else None
    chosen = requests if requests is not None else res.get("limits")
    raw = chosen.get("cpu") if isinstance(chosen, dict) else None
    if raw is None:
        return 0
    try:
        q = Quantity(raw)
    except (QuantityError, TypeError):
        return 0
    if q.units * 1000 != q.milli:
        return 0
    return q.units


def topology_policy_fragment(task: TaskSpec, index: int) -> str:
    if task.topology_policy in ("", "none"):
        return ""
    spec = task.template.get("spec") if isinstance(task.template, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    for k, container in enumerate(containers):
        if _guaranteed_cpus(container) == 0:
            return f"the cpu request isn't an integer in spec.task[{index}] container[{k}]."
    return ""
