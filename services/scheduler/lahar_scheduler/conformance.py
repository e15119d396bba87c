"""Scheduler conformance cases: objects + a volcano-scheduler.conf in, Volcano's outcome expected.

The file shape is described in the corpus README: ``schedulerConf``, ``objects``, ``cycles`` and
``expect`` with ``binds``, ``evictions``, ``pipelined`` and ``podGroupPhases``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from lahar.api.codec import DecodeError, decode_object
from lahar_scheduler.core import load_conf
from lahar_scheduler.framework.conf import ConfError
from lahar_scheduler.simulation import Outcome, simulate


@dataclass
class CaseResult:
    name: str
    passed: bool
    differences: list[str] = field(default_factory=list)
    outcome: Outcome | None = None


def is_scheduler_case(doc: Any) -> bool:
    return isinstance(doc, dict) and "schedulerConf" in doc and "objects" in doc


def objects_of(doc: dict[str, Any], where: str = "") -> list[Any]:
    out = []
    for i, raw in enumerate(doc.get("objects") or []):
        obj = decode_object(raw, f"{where}objects[{i}]")
        if obj is not None:
            out.append(obj)
    return out


def run_case(doc: dict[str, Any], seed: int = 0) -> CaseResult:
    name = str(doc.get("name", "?"))
    try:
        conf = load_conf(doc["schedulerConf"])
        objects = objects_of(doc)
    except (ConfError, DecodeError) as exc:
        return CaseResult(name, False, [f"input rejected: {exc}"])
    outcome = simulate(objects, conf, cycles=int(doc.get("cycles", 1)), seed=seed)
    diffs = compare(doc.get("expect") or {}, outcome)
    return CaseResult(name, not diffs, diffs, outcome)


def compare(expect: dict[str, Any], got: Outcome) -> list[str]:
    diffs: list[str] = []
    if "binds" in expect:
        want = dict(expect["binds"] or {})
        exact = expect.get("exact", True)
        for pod, node in sorted(want.items()):
            if got.binds.get(pod) != node:
                diffs.append(f"bind {pod}: want {node}, got {got.binds.get(pod, 'nothing')}")
        if exact:
            for pod, node in sorted(got.binds.items()):
                if pod not in want:
                    diffs.append(f"bind {pod}: want nothing, got {node}")
    if "bindCount" in expect and len(got.binds) != int(expect["bindCount"]):
        diffs.append(f"bind count: want {expect['bindCount']}, got {len(got.binds)}")
    if "evictions" in expect:
        want_ev = Counter(expect["evictions"] or [])
        got_ev = Counter(got.evictions)
        if want_ev != got_ev:
            diffs.append(f"evictions: want {sorted(want_ev.elements())}, got {sorted(got_ev.elements())}")
    for pod, node in sorted((expect.get("pipelined") or {}).items()):
        if got.pipelined.get(pod) != node:
            diffs.append(f"pipelined {pod}: want {node}, got {got.pipelined.get(pod, 'not pipelined')}")
    for pg, phase in sorted((expect.get("podGroupPhases") or {}).items()):
        if got.phases.get(pg) != phase:
            diffs.append(f"phase {pg}: want {phase}, got {got.phases.get(pg, 'none')}")
    return diffs
