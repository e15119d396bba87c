"""Builders for scheduler test scenarios, from plain Kubernetes objects.

Every builder writes the object as the API server would serve it (camelCase dicts) and decodes
it with ``lahar.api.codec.decode_object``, so the tests exercise the same decoding path as real
input.  Defaults follow the conformance corpus conventions: pods name the ``volcano`` scheduler
and carry UID ``<namespace>-<name>``; nodes have capacity = allocatable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import yaml

from lahar.api.codec import decode_object
from lahar.api.objects import HyperNode, KubeObject, Node, Pod, PodGroup, PriorityClass, Queue
from lahar_scheduler.core import load_conf, run_session
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.conf import SchedulerConf
from lahar_scheduler.framework.jobs import TaskInfo
from lahar_scheduler.framework.session import Session, SessionResult
from lahar_scheduler.framework.snapshot import Snapshot
from lahar_scheduler.plugins import PLUGINS
from lahar_scheduler.simulation import Cluster, Outcome, simulate

GROUP = "scheduling.k8s.io/group-name"


def _decode(raw: dict[str, Any]) -> Any:
    obj = decode_object(raw)
    assert obj is not None, raw
    return obj


def resources(cpu: str | None = None, memory: str | None = None) -> dict[str, str]:
    out: dict[str, str] = {}
    if cpu is not None:
        out["cpu"] = cpu
    if memory is not None:
        out["memory"] = memory
    return out


def node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str | None = "110",
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    extra: Mapping[str, str] | None = None,
) -> Node:
    alloc: dict[str, str] = {"cpu": cpu, "memory": memory}
    if pods is not None:
        alloc["pods"] = pods
    alloc.update(extra or {})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return _decode(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": spec,
            "status": {"allocatable": alloc, "capacity": dict(alloc)},
        }
    )


def pod(
    name: str,
    namespace: str = "default",
    *,
    group: str | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    extra: Mapping[str, str] | None = None,
    node_name: str = "",
    phase: str = "Pending",
    priority: int | None = None,
    priority_class: str = "",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    affinity: Mapping[str, Any] | None = None,
    spread: Sequence[Mapping[str, Any]] = (),
    host_ports: Sequence[int] = (),
    init_requests: Mapping[str, str] | None = None,
    deleting: bool = False,
    scheduler: str = "volcano",
    nominated: str = "",
) -> Pod:
    """A one-container pod; ``cpu``/``memory``/``extra`` are its requests (none = BestEffort)."""
    requests = resources(cpu, memory)
    requests.update(extra or {})
    container: dict[str, Any] = {"name": "c", "resources": {"requests": requests} if requests else {}}
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in host_ports]
    annots = dict(annotations or {})
    if group is not None:
        annots[GROUP] = group
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"{namespace}-{name}",
        "labels": dict(labels or {}),
        "annotations": annots,
    }
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [container]}
    if init_requests is not None:
        spec["initContainers"] = [{"name": "init", "resources": {"requests": dict(init_requests)}}]
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if affinity:
        spec["affinity"] = dict(affinity)
    if spread:
        spec["topologySpreadConstraints"] = [dict(c) for c in spread]
    status: dict[str, Any] = {"phase": phase}
    if nominated:
        status["nominatedNodeName"] = nominated
    return _decode({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status})


def podgroup(
    name: str,
    namespace: str = "default",
    *,
    queue: str = "default",
    min_member: int = 0,
    phase: str | None = "Inqueue",
    min_resources: Mapping[str, str] | None = None,
    min_task_member: Mapping[str, int] | None = None,
    priority_class: str = "",
    annotations: Mapping[str, str] | None = None,
    creation: str | None = None,
    conditions: Sequence[Mapping[str, Any]] = (),
    network_topology: Mapping[str, Any] | None = None,
) -> PodGroup:
    spec: dict[str, Any] = {"queue": queue, "minMember": min_member}
    if network_topology is not None:
        spec["networkTopology"] = dict(network_topology)
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    if min_task_member is not None:
        spec["minTaskMember"] = dict(min_task_member)
    if priority_class:
        spec["priorityClassName"] = priority_class
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": dict(annotations or {})}
    if creation is not None:
        meta["creationTimestamp"] = creation
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if conditions:
        status["conditions"] = [dict(c) for c in conditions]
    return _decode(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": meta,
            "spec": spec,
            "status": status,
        }
    )


def queue(
    name: str,
    weight: int = 1,
    *,
    state: str = "Open",
    capability: Mapping[str, str] | None = None,
    guarantee: Mapping[str, str] | None = None,
    deserved: Mapping[str, str] | None = None,
    priority: int = 0,
    reclaimable: bool | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Queue:
    spec: dict[str, Any] = {"weight": weight}
    if capability is not None:
        spec["capability"] = dict(capability)
    if deserved is not None:
        spec["deserved"] = dict(deserved)
    if guarantee is not None:
        spec["guarantee"] = {"resource": dict(guarantee)}
    if priority:
        spec["priority"] = priority
    if reclaimable is not None:
        spec["reclaimable"] = reclaimable
    return _decode(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name, "annotations": dict(annotations or {})},
            "spec": spec,
            "status": {"state": state},
        }
    )


def priority_class(name: str, value: int, global_default: bool = False) -> PriorityClass:
    return _decode(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "globalDefault": global_default,
        }
    )


# -- configurations ------------------------------------------------------------------------


def hypernode(
    name: str,
    tier: int,
    *,
    nodes: Sequence[str] = (),
    hypernodes: Sequence[str] = (),
    regex: str | None = None,
    labels: Mapping[str, str] | None = None,
    tier_name: str = "",
) -> HyperNode:
    """A HyperNode with exact-name node members, exact-name HyperNode members, and optionally
    one regex and one label-selector node member."""
    members: list[dict[str, Any]] = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    members += [{"type": "HyperNode", "selector": {"exactMatch": {"name": h}}} for h in hypernodes]
    if regex is not None:
        members.append({"type": "Node", "selector": {"regexMatch": {"pattern": regex}}})
    if labels is not None:
        members.append({"type": "Node", "selector": {"labelMatch": {"matchLabels": dict(labels)}}})
    spec: dict[str, Any] = {"tier": tier, "members": members}
    if tier_name:
        spec["tierName"] = tier_name
    return _decode(
        {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name}, "spec": spec}
    )


def conf_text(actions: str, *tiers: Sequence[Mapping[str, Any]], configurations: Any = None) -> str:
    doc: dict[str, Any] = {"actions": actions, "tiers": [{"plugins": [dict(p) for p in t]} for t in tiers]}
    if configurations is not None:
        doc["configurations"] = configurations
    return yaml.safe_dump(doc, sort_keys=False)


def make_conf(actions: str, *tiers: Sequence[Mapping[str, Any]], configurations: Any = None) -> SchedulerConf:
    return load_conf(conf_text(actions, *tiers, configurations=configurations))


def only(name: str, *flags: str, **arguments: Any) -> dict[str, Any]:
    """A plugin option with just the listed enable flags on and every other flag off.

    Mirrors how Volcano's unit tests build options (unset = disabled), so a test sees exactly
    the extension points it means to exercise.
    """
    from lahar_scheduler.framework.conf import FLAGS

    opt: dict[str, Any] = {"name": name}
    for flag in FLAGS:
        opt[flag] = flag in flags
    if arguments:
        opt["arguments"] = arguments
    return opt


# -- running -------------------------------------------------------------------------------


def snapshot(objects: Iterable[KubeObject], now: float = 0.0) -> Snapshot:
    return Cluster(objects).snapshot(now)


def open_session(
    objects: Iterable[KubeObject], conf: SchedulerConf, *, seed: int = 0, now: float = 0.0, uid: str = "s1"
) -> Session:
    """A session with every plugin registered, for calling extension points directly."""
    return Session(snapshot(objects, now), conf, dict(PLUGINS), seed=seed, uid=uid).open()


def run(objects: Iterable[KubeObject], conf: SchedulerConf | None = None, *, seed: int = 0) -> SessionResult:
    return run_session(snapshot(objects), conf or load_conf(None), seed=seed)


def schedule(
    objects: Iterable[KubeObject], conf: SchedulerConf | None = None, *, cycles: int = 1, seed: int = 0
) -> Outcome:
    return simulate(list(objects), conf or load_conf(None), cycles=cycles, seed=seed)


def binds(result: SessionResult) -> dict[str, str]:
    return {t.key: n for t, n in result.binds}


def task(ssn: Session, key: str) -> TaskInfo:
    """A task of the session's snapshot by ``namespace/name``."""
    t = ssn.snapshot.tasks.get(key) or ssn.snapshot.others.get(key)
    assert t is not None, f"no task {key}"
    return t


def node_index(ssn: Session, name: str) -> int:
    return ssn.nodes.by_name[name].index


def all_nodes(ssn: Session) -> np.ndarray:
    return np.arange(len(ssn.node_list), dtype=np.intp)


def scores(ssn: Session, key: str) -> dict[str, float]:
    """The session's summed node-order score of one task on every node."""
    t = task(ssn, key)
    got = ssn.call(P.NODE_ORDER, t, all_nodes(ssn))
    return {n.name: float(s) for n, s in zip(ssn.node_list, got, strict=True)}


def passing(ssn: Session, key: str) -> set[str]:
    """Nodes where the plugin predicates (no resource fit) accept the task."""
    t = task(ssn, key)
    got = ssn.call(P.PREDICATE, t, all_nodes(ssn))
    return {ssn.node_list[i].name for i in got.passed}
