"""PodGroups for plain pods (pure), after Volcano's podgroup controller.

A pod that names one of our schedulers and no group (annotation ``scheduling.k8s.io/group-name``
empty) gets a PodGroup of its own: ``podgroup-<uid of its controller owner>`` (so a Deployment's
ReplicaSet, a StatefulSet or a batch Job shares one group), else ``podgroup-<pod uid>``.  The group
is owned as the pod is (or by the pod itself), needs ``minMember`` pods (1, or the owner's
``scheduling.volcano.sh/group-min-member`` when owner annotations are inherited), and reserves
``minMember`` times the pod's quota usage.  The pod is then annotated with the group's name.

Workload events (ReplicaSet, StatefulSet added or updated) bring an existing group up to date with
the workload's first current pod, and a workload scaled to 0 loses its group.

PodGroup status counts (``running``, ``succeeded``, ``failed``) follow the phases of the group's
pods (:func:`status_counts`).  Objects are plain Kubernetes JSON; owners are looked up through a
function the caller supplies, so nothing here does I/O.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lahar.api.quantity import QuantityError, parse_quantity
from lahar.api.quota import pod_quota_usage, times, to_text

GROUP_NAME = "scheduling.k8s.io/group-name"
QUEUE_NAME = "scheduling.volcano.sh/queue-name"
GROUP_MIN_MEMBER = "scheduling.volcano.sh/group-min-member"
ANNOTATION_PREFIX = "volcano.sh/"
PREEMPTABLE = "volcano.sh/preemptable"
COOLDOWN = "volcano.sh/cooldown-time"
REVOCABLE_ZONE = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
TOPOLOGY_MODE = "volcano.sh/network-topology-mode"
TOPOLOGY_TIER = "volcano.sh/network-topology-highest-tier"
REVISION_HASH = "controller-revision-hash"
NAME_PREFIX = "podgroup-"
_INTEGER = re.compile(r"^[+-]?[0-9]+$")  # what Go's strconv accepts as a base-10 integer
# owners whose annotations a group inherits (batch/v1 Job under "Job")
OWNER_KINDS = ("ReplicaSet", "DaemonSet", "StatefulSet", "Job")

# (kind, namespace, name) -> the object, or None when it cannot be read
Lookup = Callable[[str, str, str], Mapping[str, Any] | None]


def _no_owner(kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
    return None


@dataclass(frozen=True)
class Options:
    scheduler_names: frozenset[str] = frozenset({"volcano"})
    inherit_owner_annotations: bool = True


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _meta(obj).get("annotations") or {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _meta(obj).get("labels") or {}


def needs_group(pod: Mapping[str, Any], options: Options) -> bool:
    """The pod is for one of our schedulers and belongs to no group yet."""
    scheduler = str((pod.get("spec") or {}).get("schedulerName") or "")
    return scheduler in options.scheduler_names and not _annotations(pod).get(GROUP_NAME)


def _controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in _meta(obj).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def group_name(pod: Mapping[str, Any]) -> str:
    """``podgroup-<controller owner uid>``, else ``podgroup-<pod uid>``."""
    ref = _controller_ref(pod)
    uid = (ref or {}).get("uid") or _meta(pod).get("uid") or ""
    return f"{NAME_PREFIX}{uid}"


def owner_references(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pod's own references when it has a controller owner, else a controller reference to it."""
    if _controller_ref(pod) is not None:
        return [dict(ref) for ref in _meta(pod).get("ownerReferences") or []]
    meta = _meta(pod)
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta.get("name") or "",
            "uid": meta.get("uid") or "",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def owner_annotations(pod: Mapping[str, Any], lookup: Lookup) -> dict[str, str]:
    """The annotations of the pod's owners (the first owner wins a key); owners that cannot be
    read are skipped."""
    out: dict[str, str] = {}
    namespace = str(_meta(pod).get("namespace") or "")
    for ref in _meta(pod).get("ownerReferences") or []:
        kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        if kind not in OWNER_KINDS or not name:
            continue
        owner = lookup(kind, namespace, name)
        for k, v in (_annotations(owner) if owner is not None else {}).items():
            out.setdefault(str(k), str(v))
    return out


def min_member(annotations: Mapping[str, str]) -> int:
    """The owner's ``group-min-member``; 1 when absent, negative or not a number."""
    text = annotations.get(GROUP_MIN_MEMBER)
    if text is None:
        return 1
    if not _INTEGER.match(text):
        return 1
    value = int(text)
    return value if 0 <= value < 2**31 else 1


def network_topology(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """``spec.networkTopology`` from the pod's annotations: mode hard (soft only when asked),
    and the highest tier when it is a number."""
    annotations = _annotations(pod)
    if TOPOLOGY_MODE not in annotations and TOPOLOGY_TIER not in annotations:
        return None
    mode = str(annotations.get(TOPOLOGY_MODE, "")).lower()
    out: dict[str, Any] = {"mode": mode if mode in ("hard", "soft") else "hard"}
    tier = str(annotations.get(TOPOLOGY_TIER, ""))
    if _INTEGER.match(tier):
        out["highestTierAllowed"] = int(tier)
    return out


def _queue(pod: Mapping[str, Any], namespace: Mapping[str, Any] | None) -> str:
    own = _annotations(pod).get(QUEUE_NAME)
    if own is not None:
        return str(own)
    return str(_annotations(namespace).get(QUEUE_NAME) or "") if namespace is not None else ""


def _group_annotations(pod: Mapping[str, Any], inherited: Mapping[str, str], options: Options) -> dict[str, str]:
    out = (
        {k: v for k, v in inherited.items() if k.startswith(ANNOTATION_PREFIX)}
        if options.inherit_owner_annotations
        else {}
    )
    own = _annotations(pod)
    for key in (PREEMPTABLE, COOLDOWN, REVOCABLE_ZONE):
        if key in own:
            out[key] = str(own[key])
    if JDB_MIN_AVAILABLE in own:  # the pod's own disruption budget replaces any inherited one
        out[JDB_MIN_AVAILABLE] = str(own[JDB_MIN_AVAILABLE])
    elif JDB_MAX_UNAVAILABLE in own:
        out[JDB_MAX_UNAVAILABLE] = str(own[JDB_MAX_UNAVAILABLE])
    return out


def build(
    pod: Mapping[str, Any],
    name: str,
    options: Options,
    lookup: Lookup = _no_owner,
    namespace: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The PodGroup the controller makes for ``pod`` under ``name`` (``namespace``: the pod's
    Namespace object, whose queue annotation applies when the pod names no queue)."""
    inherited = owner_annotations(pod, lookup) if options.inherit_owner_annotations else {}
    members = min_member(inherited) if options.inherit_owner_annotations else 1
    spec: dict[str, Any] = {"minMember": members, "minResources": to_text(times(pod_quota_usage(pod), members))}
    priority = (pod.get("spec") or {}).get("priorityClassName")
    if priority:
        spec["priorityClassName"] = priority
    queue = _queue(pod, namespace)
    if queue:
        spec["queue"] = queue
    topology = network_topology(pod)
    if topology is not None:
        spec["networkTopology"] = topology
    labels = {k: str(_labels(pod)[k]) for k in (PREEMPTABLE, COOLDOWN) if k in _labels(pod)}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": _meta(pod).get("namespace") or "",
            "ownerReferences": owner_references(pod),
            "annotations": _group_annotations(pod, inherited, options),
            "labels": labels,
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def _same_spec(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    def norm(spec: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in spec.items() if v not in (None, "", {}, [])}
        if "minResources" in out:
            with contextlib.suppress(QuantityError, AttributeError):  # unreadable: compared as written
                out["minResources"] = {k: parse_quantity(v) for k, v in out["minResources"].items()}
        return out

    return norm(a) == norm(b)


def updated(existing: Mapping[str, Any], built: Mapping[str, Any]) -> dict[str, Any] | None:
    """``existing`` with the spec, labels and annotations of ``built`` where they differ; None
    when nothing differs."""
    meta = dict(_meta(existing))
    spec = existing.get("spec") or {}
    changed = False
    if not _same_spec(spec, built.get("spec") or {}):
        spec, changed = built.get("spec") or {}, True
    for key in ("labels", "annotations"):
        want = _meta(built).get(key) or {}
        if (meta.get(key) or {}) != want:
            meta[key], changed = dict(want), True
    if not changed:
        return None
    return {**existing, "metadata": meta, "spec": dict(spec)}


@dataclass
class PodPlan:
    """What one pod asks of the controller."""

    group: str = ""  # the group the pod belongs to ("" : the pod is not ours to group)
    create: dict[str, Any] | None = None  # a PodGroup to create
    update: dict[str, Any] | None = None  # a PodGroup to write back
    annotate: dict[str, str] = field(default_factory=dict)  # annotations to patch onto the pod


def for_pod(
    pod: Mapping[str, Any],
    existing: Mapping[str, Any] | None,
    options: Options,
    lookup: Lookup = _no_owner,
    *,
    refresh: bool = False,
    namespace: Mapping[str, Any] | None = None,
) -> PodPlan:
    """The pod-event path (``refresh`` False: create the group if missing) and the workload-event
    path (``refresh`` True: also bring an existing group up to date).  ``existing`` is the
    PodGroup named :func:`group_name` if it exists."""
    if not needs_group(pod, options):
        return PodPlan()
    name = group_name(pod)
    out = PodPlan(group=name, annotate={GROUP_NAME: name})
    if existing is None:
        out.create = build(pod, name, options, lookup, namespace)
    elif refresh:
        out.update = updated(existing, build(pod, name, options, lookup, namespace))
    return out


@dataclass
class WorkloadPlan:
    delete: str = ""  # a PodGroup to delete (the workload was scaled to 0)
    pod: Mapping[str, Any] | None = None  # the pod whose group to create or refresh


def _selects(selector: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    labels = _labels(pod)
    return all(labels.get(k) == v for k, v in selector.items())


def for_workload(
    kind: str, workload: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], options: Options
) -> WorkloadPlan:
    """A ReplicaSet or StatefulSet was added or updated.  ``pods``: the pods of its namespace."""
    spec = workload.get("spec") or {}
    replicas = spec.get("replicas", 1)
    if replicas == 0:
        return WorkloadPlan(delete=f"{NAME_PREFIX}{_meta(workload).get('uid') or ''}")
    selector = dict((spec.get("selector") or {}).get("matchLabels") or {})
    if kind == "StatefulSet":  # only pods of the revision being rolled out
        selector[REVISION_HASH] = str((workload.get("status") or {}).get("updateRevision") or "")
    namespace = _meta(workload).get("namespace") or ""
    chosen = sorted(
        (p for p in pods if (_meta(p).get("namespace") or "") == namespace and _selects(selector, p)),
        key=lambda p: str(_meta(p).get("name") or ""),
    )
    if not chosen or not needs_group(chosen[0], options):
        return WorkloadPlan()
    return WorkloadPlan(pod=chosen[0])


def status_counts(pods: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """A PodGroup's ``status.running``, ``succeeded`` and ``failed`` from its pods' phases (a pod
    being deleted no longer runs)."""
    counts = {"running": 0, "succeeded": 0, "failed": 0}
    for pod in pods:
        phase = str((pod.get("status") or {}).get("phase") or "")
        if phase == "Running" and not _meta(pod).get("deletionTimestamp"):
            counts["running"] += 1
        elif phase == "Succeeded":
            counts["succeeded"] += 1
        elif phase == "Failed":
            counts["failed"] += 1
    return counts


def group_of(pod: Mapping[str, Any]) -> str:
    """The PodGroup a pod belongs to ("" when none)."""
    return str(_annotations(pod).get(GROUP_NAME) or "")
