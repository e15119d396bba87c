"""What the cluster holds, as the API server shows it, and the invariants a scheduler must keep
(pure: the monitor feeds it watch events).

* **No over-commit, ever.**  At every event, every node's sum of requests of the pods bound to it
  and not finished stays within its allocatable.  ``violations`` keeps every moment it did not.
* **No partial gang at settle.**  A PodGroup has either none of its pods bound, or at least
  ``minMember`` of them (finished pods count: they were bound together).
* **Every pod that fits is bound at settle** (the chaos workloads fit the cluster).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from lahar.api.quantity import milli_value, parse_quantity

GROUP = "scheduling.k8s.io/group-name"
FINISHED = frozenset({"Succeeded", "Failed"})
RESOURCES = ("cpu", "memory", "pods")


@dataclass(frozen=True, slots=True)
class Violation:
    at: float  # seconds since the ledger started
    node: str
    resource: str
    used: int  # milli-units
    allocatable: int


@dataclass
class PodView:
    node: str
    phase: str
    group: str
    requests: dict[str, int]  # milli-units


@dataclass
class Ledger:
    pods: dict[str, PodView] = field(default_factory=dict)
    allocatable: dict[str, dict[str, int]] = field(default_factory=dict)
    min_member: dict[str, int] = field(default_factory=dict)  # "ns/podgroup" -> minMember
    violations: list[Violation] = field(default_factory=list)
    ever_bound: set[str] = field(default_factory=set)
    worst: dict[str, float] = field(default_factory=dict)  # resource -> highest used/allocatable seen
    _used: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> requests of live pods on it

    # -- events ------------------------------------------------------------------------------
    def node(self, obj: dict[str, Any], deleted: bool = False) -> None:
        name = obj["metadata"]["name"]
        if deleted:
            self.allocatable.pop(name, None)
            return
        alloc = (obj.get("status") or {}).get("allocatable") or {}
        self.allocatable[name] = {r: _milli(alloc.get(r, 0)) for r in RESOURCES}

    def podgroup(self, obj: dict[str, Any], deleted: bool = False) -> None:
        key = f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
        if deleted:
            self.min_member.pop(key, None)
        else:
            self.min_member[key] = int((obj.get("spec") or {}).get("minMember") or 0)

    def pod(self, obj: dict[str, Any], deleted: bool, now: float) -> None:
        meta = obj["metadata"]
        key = f"{meta.get('namespace', '')}/{meta['name']}"
        old = self.pods.pop(key, None)
        if old is not None:
            self._count(old, -1)
        if deleted:
            return
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        group = (meta.get("annotations") or {}).get(GROUP, "")
        view = PodView(spec.get("nodeName") or "", status.get("phase") or "", group, _requests(spec))
        self.pods[key] = view
        self._count(view, +1)
        if view.node:
            self.ever_bound.add(key)
            self._check(view.node, now)

    def _count(self, pod: PodView, sign: int) -> None:
        if not pod.node or pod.phase in FINISHED:
            return
        used = self._used.setdefault(pod.node, dict.fromkeys(RESOURCES, 0))
        for r in RESOURCES:
            used[r] += sign * pod.requests.get(r, 0)

    # -- invariants ----------------------------------------------------------------------------
    def _check(self, node: str, now: float) -> None:
        alloc = self.allocatable.get(node)
        if alloc is None:
            return
        used = self.used(node)
        for r in RESOURCES:
            if alloc[r] > 0:
                self.worst[r] = max(self.worst.get(r, 0.0), used[r] / alloc[r])
            if used[r] > alloc[r]:
                self.violations.append(Violation(now, node, r, used[r], alloc[r]))

    def used(self, node: str) -> dict[str, int]:
        return dict(self._used.get(node) or dict.fromkeys(RESOURCES, 0))

    def overcommitted_now(self) -> list[str]:
        """Nodes holding more than they can, at this moment."""
        alloc = self.allocatable
        return sorted(n for n, u in self._used.items() if n in alloc and any(u[r] > alloc[n][r] for r in RESOURCES))

    def partial_gangs(self) -> list[tuple[str, int, int]]:
        """(PodGroup, pods bound, minMember) of every gang bound below its minimum."""
        bound: dict[str, int] = defaultdict(int)
        for key, p in self.pods.items():
            if p.group and key in self.ever_bound:
                bound[f"{key.rpartition('/')[0]}/{p.group}"] += 1
        return sorted(
            (g, n, self.min_member[g]) for g, n in bound.items() if g in self.min_member and 0 < n < self.min_member[g]
        )

    def unbound(self, keys: set[str] | None = None) -> list[str]:
        """Pods (of ``keys``, default all of ours) that never got a node."""
        return sorted(k for k in (keys if keys is not None else set(self.pods)) if k not in self.ever_bound)


def _requests(spec: dict[str, Any]) -> dict[str, int]:
    total = dict.fromkeys(RESOURCES, 0)
    for c in spec.get("containers") or []:
        for r, q in ((c.get("resources") or {}).get("requests") or {}).items():
            if r in total:
                total[r] += _milli(q)
    total["pods"] = 1000
    return total


def _milli(value: Any) -> int:
    try:
        return milli_value(parse_quantity(value))
    except (ValueError, ArithmeticError):  # a quantity nobody can hold counts for nothing here
        return 0
