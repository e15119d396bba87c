"""binpack: prefer nodes that would be fullest after placing the task."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.rowcache import RowCache
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


def binpack_plan(table: NodeTable, task: TaskInfo, weights: dict[str, int]) -> tuple[IntArray, FloatArray, FloatArray]:
    """(columns, requests, weights) of the resources the task requests that carry a weight."""
    cols, reqs, ws = [], [], []
    for name in task.resreq.names():
        request = task.resreq.get(name)
        if request == 0 or name not in weights:
            continue
        col = table.space.index.get(name)
        cols.append(-1 if col is None else col)
        reqs.append(request)
        ws.append(weights[name])
    return np.array(cols, dtype=np.intp), np.array(reqs, dtype=float), np.array(ws, dtype=float)


def binpack_scores(
    table: NodeTable, task: TaskInfo, idx: IntArray, weights: dict[str, int], scale: float
) -> FloatArray:
    """Σ over requested resources of (used + request)·w / allocatable, over Σw, × 100 × scale.

    A node where any requested resource would exceed allocatable scores 0.
    """
    cols, reqs, ws = binpack_plan(table, task, weights)
    if not len(cols):
        return np.zeros(len(idx))
    known = cols >= 0
    rows = idx[:, None]
    safe = np.where(known, cols, 0)
    cap = np.where(known, table.alloc[rows, safe], 0.0)
    after = np.where(known, table.used[rows, safe], 0.0) + reqs
    scored = (cap != 0) & (ws != 0)
    over = (scored & (after > cap)).any(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        part = np.where(scored, after * ws / cap, 0.0)
    total = part.sum(axis=1) / ws.sum() if ws.sum() > 0 else part.sum(axis=1)
    return np.where(over, 0.0, total * 100 * scale)


def binpack_row(table: NodeTable, task: TaskInfo, i: int, weights: dict[str, int], scale: float) -> float:
    """Scalar twin of ``binpack_scores`` for one node (see RowCache)."""
    total, weight_sum = 0.0, 0
    for name in task.resreq.names():
        request = task.resreq.get(name)
        if request == 0 or name not in weights:
            continue
        w = weights[name]
        weight_sum += w
        col = table.space.index.get(name)
        cap = float(table.alloc[i, col]) if col is not None else 0.0
        if cap == 0 or w == 0:
            continue
        after = float(table.used[i, col]) + request
        if after > cap:
            return 0.0
        total += after * w / cap
    if weight_sum > 0:
        total /= weight_sum
    return total * 100 * scale


class BinpackPlugin(Plugin):
    name = "binpack"
    Args = BinpackArgs
    parse_args = staticmethod(parse_binpack_args)

    def on_session_open(self, ssn: Session) -> None:
        args: BinpackArgs = self.args or parse_binpack_args({}, "", [])
        if args.weight == 0:
            return
        table = ssn.nodes
        # Row-local, so cached per task shape and refreshed on changed nodes only.
        cache = RowCache(
            table,
            lambda task, rows: binpack_scores(table, task, rows, args.resources, args.weight),
            lambda task, i: binpack_row(table, task, i, args.resources, args.weight),
        )
        ssn.add(P.NODE_ORDER, lambda task, idx: cache.get(task.template_key, task)[idx])
