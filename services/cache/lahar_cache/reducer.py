"""The cache's pure rules: which watched objects the mirror keeps, and what delta each change is.

``Known`` remembers, per kind, the resourceVersion of every object the mirror holds.  An event
becomes a delta only if it changes that (watches can repeat events after a reconnect).  A relist
after 410 Gone is diffed against ``Known`` so deletions missed while the watch was down are
emitted too.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from lahar.adapters.kube import Item, WatchEvent
from lahar.wire.messages import Delta, Op

SCHEDULER_NAMES = frozenset({"volcano", "lahar"})


class _PodSpec(msgspec.Struct):
    schedulerName: str = ""
    nodeName: str = ""


class _PodView(msgspec.Struct):
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)


class _Template(msgspec.Struct):
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)


class _WorkloadSpec(msgspec.Struct):
    template: _Template = msgspec.field(default_factory=_Template)


class _WorkloadView(msgspec.Struct):
    spec: _WorkloadSpec = msgspec.field(default_factory=_WorkloadSpec)


_pod_view = msgspec.json.Decoder(_PodView)
_workload_view = msgspec.json.Decoder(_WorkloadView)
# Workloads are mirrored for the controller, which reads the owners of pods that get PodGroups.
WORKLOADS = frozenset({"replicasets", "statefulsets", "daemonsets", "batchjobs"})


def wanted(kind: str, raw: bytes, scheduler_names: frozenset[str] = SCHEDULER_NAMES) -> bool:
    """Pods are mirrored when our scheduler places them or when they hold node resources;
    workloads when their pods are ours; every object of the other kinds."""
    if kind == "pods":
        spec = _pod_view.decode(raw).spec
        return spec.schedulerName in scheduler_names or bool(spec.nodeName)
    if kind in WORKLOADS:
        return _workload_view.decode(raw).spec.template.spec.schedulerName in scheduler_names
    return True


class Known:
    def __init__(self) -> None:
        self.versions: dict[str, dict[str, str]] = {}

    def of(self, kind: str) -> dict[str, str]:
        return self.versions.setdefault(kind, {})

    def remember(self, d: Delta) -> None:
        kind = self.of(d.kind)
        if d.op == "DELETED":
            kind.pop(d.key, None)
        else:
            kind[d.key] = d.rv


def on_event(
    known: Known, kind: str, ev: WatchEvent, scheduler_names: frozenset[str] = SCHEDULER_NAMES
) -> Delta | None:
    """The delta for one watch event, or None when the mirror already reflects it."""
    if ev.type == "BOOKMARK":
        return None
    held = known.of(kind)
    key, rv = ev.item.key, ev.item.meta.resourceVersion
    if ev.type == "DELETED" or not wanted(kind, ev.item.raw, scheduler_names):
        if key not in held:
            return None
        return Delta(kind=kind, op="DELETED", key=key, rv=rv, obj=msgspec.Raw(ev.item.raw))
    if held.get(key) == rv:
        return None
    op: Op = "MODIFIED" if key in held else "ADDED"
    return Delta(kind=kind, op=op, key=key, rv=rv, obj=msgspec.Raw(ev.item.raw))


def relist(
    known: Known, kind: str, items: Iterable[Item], scheduler_names: frozenset[str] = SCHEDULER_NAMES
) -> list[Delta]:
    """Deltas that bring the mirror of ``kind`` to a fresh list, deletions included."""
    held = known.of(kind)
    out: list[Delta] = []
    seen: set[str] = set()
    for it in items:
        if not wanted(kind, it.raw, scheduler_names):
            continue
        seen.add(it.key)
        if held.get(it.key) != it.meta.resourceVersion:
            op: Op = "MODIFIED" if it.key in held else "ADDED"
            out.append(Delta(kind=kind, op=op, key=it.key, rv=it.meta.resourceVersion, obj=msgspec.Raw(it.raw)))
    for key in sorted(set(held) - seen):
        out.append(Delta(kind=kind, op="DELETED", key=key, rv=held[key]))
    return out
