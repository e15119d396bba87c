"""binpack: prefer nodes that would be fullest after placing the task."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from lahar_scheduler.framework.session import Session
from lahar_scheduler.plugins.base import Plugin

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import FloatArray, IntArray, NodeTable

PREFIX = "binpack.resources."


class BinpackArgs(msgspec.Struct):
    weight: int = 1
    cpu: int = 1
    memory: int = 1
    resources: dict[str, int] = {}


def parse_binpack_args(raw: dict[str, Any], path: str, errors: list[str]) -> BinpackArgs:
    """``binpack.resources.<name>`` keys are open-ended, so these arguments are parsed by hand."""
    out = BinpackArgs()
    listed: list[str] = []
    weights: dict[str, int] = {}
    for key, val in raw.items():
        key = str(key)
        if key == "binpack.resources":
            if not isinstance(val, str):
                errors.append(f"{path}.{key}: expected a comma-separated string of resource names")
                continue
            listed = [r.strip() for r in val.split(",") if r.strip()]
            continue
        if key in ("binpack.weight", "binpack.cpu", "binpack.memory") or key.startswith(PREFIX):
            if not isinstance(val, int) or isinstance(val, bool):
                errors.append(f"{path}.{key}: expected an integer, got {val!r}")
                continue
            if key == "binpack.weight":
                out.weight = val
            elif key == "binpack.cpu":
                out.cpu = val if val >= 0 else 1
            elif key == "binpack.memory":
                out.memory = val if val >= 0 else 1
            else:
                weights[key[len(PREFIX) :]] = val if val >= 0 else 1
            continue
        errors.append(
            f"{path}.{key}: unknown argument (known: binpack.weight, binpack.cpu, binpack.memory, "
            "binpack.resources, binpack.resources.<name>)"
        )
    out.resources = {name: weights.get(name, 1) for name in listed}
    out.resources["cpu"] = out.cpu
    out.resources["memory"] = out.memory
    return out


def binpack_scores(
    table: NodeTable, task: TaskInfo, idx: IntArray, weights: dict[str, int], scale: float
) -> FloatArray:
    """Σ over requested resources of (used + request)·w / allocatable, over Σw, × 100 × scale.

    A node where any requested resource would exceed allocatable scores 0.
    """
    total = np.zeros(len(idx))
    weight_sum = 0
    fits = np.ones(len(idx), dtype=bool)
    space = table.space
    for name in task.resreq.names():
        request = task.resreq.get(name)
        if request == 0 or name not in weights:
            continue
        w = weights[name]
        col = space.index.get(name)
        cap = table.alloc[idx, col] if col is not None else np.zeros(len(idx))
        used = table.used[idx, col] if col is not None else np.zeros(len(idx))
        after = used + request
        scored = (cap != 0) & (w != 0)
        fits &= ~(scored & (after > cap))
        total += np.where(scored, after * w / np.where(cap == 0, 1, cap), 0.0)
        weight_sum += w
    if weight_sum > 0:
        total /= weight_sum
    return np.where(fits, total * 100 * scale, 0.0)


class BinpackPlugin(Plugin):
    name = "binpack"
    Args = BinpackArgs
    parse_args = staticmethod(parse_binpack_args)

    def on_session_open(self, ssn: Session) -> None:
        args: BinpackArgs = self.args or parse_binpack_args({}, "", [])
        if args.weight == 0:
            return
        table = ssn.nodes
        ssn.add("node_order", lambda task, idx: binpack_scores(table, task, idx, args.resources, args.weight))
