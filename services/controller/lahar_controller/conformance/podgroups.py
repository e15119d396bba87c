"""Runner for the podgroup-controller cases: PodGroups for plain pods."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from lahar_controller import podgroups as pgc
from lahar_controller.conformance.ctl_expect import (
    compare,
    compare_counts,
    compare_objects,
    find,
    key_of,
)

PENDING: dict[str, str] = {}

_WORKLOAD_OPS = {
    "addReplicaSet": "ReplicaSet",
    "updateReplicaSet": "ReplicaSet",
    "addStatefulSet": "StatefulSet",
    "updateStatefulSet": "StatefulSet",
}


class World:
    """The case's objects, changed as the controller's API calls would change them."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = [copy.deepcopy(o) for o in objects]
        self.queued: list[str] = []

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        for obj in self.objects:
            if key_of(obj) == (kind, namespace, name):
                return obj
        return None

    def put(self, obj: Mapping[str, Any]) -> None:
        self.delete(*key_of(obj))
        self.objects.append(dict(obj))

    def delete(self, kind: str, namespace: str, name: str) -> None:
        self.objects = [o for o in self.objects if key_of(o) != (kind, namespace, name)]

    def pod(self, pod: Mapping[str, Any], options: pgc.Options, refresh: bool) -> None:
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        existing = self.get("PodGroup", namespace, pgc.group_name(pod))
        plan = pgc.for_pod(pod, existing, options, self.get, refresh=refresh)
        if plan.create is not None and existing is None:
            self.put(plan.create)
        if plan.update is not None:
            self.put(plan.update)
        if plan.annotate:
            live = self.get(*key_of(pod))
            if live is not None:
                live.setdefault("metadata", {}).setdefault("annotations", {}).update(plan.annotate)

    def workload(self, kind: str, ref: str, options: pgc.Options) -> None:
        workload = find(self.objects, kind, ref)
        plan = pgc.for_workload(kind, workload, [o for o in self.objects if o.get("kind") == "Pod"], options)
        if plan.delete:
            self.delete("PodGroup", key_of(workload)[1], plan.delete)
        if plan.pod is not None:
            self.pod(plan.pod, options, refresh=True)

    def event(self, event: Mapping[str, Any], options: pgc.Options) -> None:
        op = str(event["op"])
        if op in _WORKLOAD_OPS:
            self.workload(_WORKLOAD_OPS[op], str(event["object"]), options)
        elif op == "addPod":
            self.queued.append(str(event["object"]))
        elif op == "processPod" and self.queued:
            pod = self.get("Pod", *self.queued.pop(0).split("/", 1))
            if pod is not None:
                self.pod(pod, options, refresh=False)
        elif op != "processPod":
            raise ValueError(f"unknown event {op!r}")


def _options(given: Mapping[str, Any]) -> pgc.Options:
    conf = given.get("controller") or {}
    return pgc.Options(
        scheduler_names=frozenset(conf.get("schedulerNames") or ["volcano"]),
        inherit_owner_annotations=bool(conf.get("inheritOwnerAnnotations", True)),
    )


def _outcome(world: World, expect: Mapping[str, Any]) -> list[str]:
    out = compare_objects(expect.get("objects") or [], world.objects)
    return out + compare_counts(expect.get("counts") or {}, world.objects)


def check(case: dict[str, Any]) -> list[str]:
    given, step = case["given"], case["step"]
    expect = {k: v for k, v in case["expect"].items() if k != "derived"}
    options, world = _options(given), World(given["objects"])
    kind = step["kind"]
    if kind == "pgControllerPod":
        refs = step["pod"] if isinstance(step["pod"], list) else [step["pod"]]
        for ref in refs:
            world.pod(find(world.objects, "Pod", ref), options, refresh=step["mode"] == "createOrUpdate")
        return _outcome(world, expect)
    if kind == "pgControllerWorkload":
        world.workload(_WORKLOAD_OPS[step["op"]], step["object"], options)
        return _outcome(world, expect)
    if kind == "deliverEvents":
        for event in step["events"]:
            world.event(event, options)
        return _outcome(world, expect)
    pod = find(world.objects, "Pod", step["pod"])
    if kind == "buildPodGroup":
        built = pgc.build(pod, step["name"], options, world.get)
        got = {"podGroup": built, "ownerReferenceCount": len(built["metadata"]["ownerReferences"])}
        return compare(expect, got)
    if kind == "podGroupNeedsUpdate":
        existing = find(world.objects, "PodGroup", step["podGroup"])
        fresh = pgc.updated(existing, pgc.build(pod, key_of(existing)[2], options, world.get))
        return compare(expect, {"needsUpdate": fresh is not None, "podGroup": fresh or existing})
    return [f"unknown step kind {kind!r}"]
