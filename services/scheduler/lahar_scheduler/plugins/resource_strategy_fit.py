"""resource-strategy-fit: per-resource MostAllocated / LeastAllocated scoring."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.rowcache import RowCache
from lahar_scheduler.framework.session import Session
from lahar_scheduler.plugins.base import Plugin

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import FloatArray, IntArray, NodeTable

SCORING_TYPE_KEY = "volcano.sh/resource-strategy-scoring-type"
SCORING_WEIGHT_KEY = "volcano.sh/resource-strategy-weight"


class ResourceStrategy(msgspec.Struct, forbid_unknown_fields=True):
    type: str = "LeastAllocated"
    weight: int = 1


class PolicyToggle(msgspec.Struct):
    enable: bool = False


class ResourceStrategyFitArgs(msgspec.Struct, forbid_unknown_fields=True):
    weight: int = msgspec.field(default=10, name="resourceStrategyFitWeight")
    resources: dict[str, ResourceStrategy] = {}
    sra: PolicyToggle | None = None
    proportional: PolicyToggle | None = None

    def __post_init__(self) -> None:
        for name in ("sra", "proportional"):
            toggle = getattr(self, name)
            if toggle is not None and toggle.enable:
                raise ValueError(f"the {name} policy of resource-strategy-fit is not supported by lahar yet")


def _valid_pattern(key: str) -> bool:
    if "*" not in key:
        return True
    return key != "*" and key.endswith("*") and key.count("*") == 1


def effective_resources(args: ResourceStrategyFitArgs) -> dict[str, ResourceStrategy]:
    res = dict(args.resources) or {
        "cpu": ResourceStrategy("LeastAllocated", 1),
        "memory": ResourceStrategy("LeastAllocated", 1),
    }
    out = {}
    for key, cfg in res.items():
        if not _valid_pattern(key):
            continue
        kind = cfg.type if cfg.type in ("LeastAllocated", "MostAllocated") else "LeastAllocated"
        out[key] = ResourceStrategy(kind, cfg.weight if cfg.weight > 0 else 1)
    return out


def lookup(name: str, resources: dict[str, ResourceStrategy]) -> ResourceStrategy | None:
    """Exact name first, then the longest matching ``prefix*`` pattern."""
    if name in resources:
        return resources[name]
    best, found = "", None
    for key, cfg in resources.items():
        if "*" in key:
            prefix = key[:-1]
            if name.startswith(prefix) and len(prefix) > len(best):
                best, found = prefix, cfg
    return found


def strategy_scores(
    table: NodeTable, task: TaskInfo, idx: IntArray, resources: dict[str, ResourceStrategy], weight: int
) -> FloatArray:
    plan: list[tuple[str, str, int]] = []
    pod_type = task.pod.metadata.annotations.get(SCORING_TYPE_KEY, "")
    if pod_type:
        try:
            pod_weights = json.loads(task.pod.metadata.annotations.get(SCORING_WEIGHT_KEY, ""))
        except ValueError:
            return np.zeros(len(idx))
        if not isinstance(pod_weights, dict):
            return np.zeros(len(idx))
    for name in task.resreq.names():
        if pod_type:
            if name not in pod_weights:
                continue
            plan.append((name, pod_type, int(pod_weights[name])))
        else:
            cfg = lookup(name, resources)
            if cfg is not None:
                plan.append((name, cfg.type, cfg.weight))
    total = np.zeros(len(idx))
    fits = np.ones(len(idx), dtype=bool)
    weight_sum = 0
    for name, kind, w in plan:
        col = table.space.index.get(name)
        cap = table.alloc[idx, col] if col is not None else np.zeros(len(idx))
        used = table.used[idx, col] if col is not None else np.zeros(len(idx))
        after = used + task.resreq.get(name)
        scored = (cap != 0) & (w != 0)
        fits &= ~(scored & (after > cap))
        safe = np.where(cap == 0, 1, cap)
        part = after * w / safe if kind == "MostAllocated" else (cap - after) * w / safe
        total += np.where(scored, part, 0.0)
        weight_sum += w
    if weight_sum > 0:
        total /= weight_sum
    return np.where(fits, total * 100 * weight, 0.0)


class ResourceStrategyFitPlugin(Plugin):
    name = "resource-strategy-fit"
    Args = ResourceStrategyFitArgs

    def on_session_open(self, ssn: Session) -> None:
        args: ResourceStrategyFitArgs = self.args or ResourceStrategyFitArgs()
        weight = args.weight if args.weight >= 0 else 10
        resources = effective_resources(args)
        table = ssn.nodes
        if weight > 0:
            cache = RowCache(table, lambda task, rows: strategy_scores(table, task, rows, resources, weight))
            ssn.add(P.NODE_ORDER, lambda task, idx: cache.get(task.template_key, task)[idx])
