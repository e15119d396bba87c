"""The corpus's expectation language and cluster model, for the job-lifecycle runner.

``Cluster`` holds ``given.objects`` and applies a step's effects (create, update, delete, annotate)
the way an API server would for these purposes.  ``differences`` compares an expectation with a
value: maps by key (partial), lists in order and by length, and the ``$`` matchers of the corpus
README (``$absent``, ``$exact``, ``$contains``, ``$includes``, ``$absentOr``).
"""

from __future__ import annotations

import copy
from typing import Any

from lahar_controller.job.effects import Annotate, Apply, Create, Delete, Effect, Event, Update, UpdateStatus
from lahar_controller.job.status import prune

Obj = dict[str, Any]
Key = tuple[str, str, str]  # kind, namespace, name
MISSING: Any = object()


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return str(obj.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", ""))


def parse_ref(ref: str) -> Key:
    parts = ref.split("/")
    if len(parts) == 2:
        return parts[0], "", parts[1]
    return parts[0], parts[1], "/".join(parts[2:])


class Cluster:
    def __init__(self, objects: list[Obj]) -> None:
        self.objects: dict[Key, Obj] = {}
        self.events: list[Event] = []
        self._uids = 0
        for obj in objects:
            self.objects[key_of(obj)] = copy.deepcopy(obj)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self.objects.get((kind, namespace, name))

    def of_kind(self, kind: str, namespace: str | None = None) -> list[Obj]:
        return [o for (k, ns, _), o in self.objects.items() if k == kind and (namespace is None or ns == namespace)]

    def apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            self._apply(effect)

    def _apply(self, effect: Effect) -> None:
        if isinstance(effect, Create | Apply):
            key = key_of(effect.obj)
            if isinstance(effect, Apply) or key not in self.objects:
                obj = copy.deepcopy(effect.obj)
                meta = obj.setdefault("metadata", {})
                if not meta.get("uid"):
                    self._uids += 1
                    meta["uid"] = f"generated-{self._uids}"
                self.objects[key] = obj
        elif isinstance(effect, Update):
            old = self.objects.get(key_of(effect.obj), {})
            self.objects[key_of(effect.obj)] = {**copy.deepcopy(effect.obj), "status": old.get("status")}
        elif isinstance(effect, UpdateStatus):
            key = key_of(effect.obj)
            if key in self.objects:
                self.objects[key]["status"] = copy.deepcopy(effect.obj.get("status"))
        elif isinstance(effect, Delete):
            self.objects.pop((effect.kind, effect.namespace, effect.name), None)
        elif isinstance(effect, Annotate):
            target = self.objects.get((effect.kind, effect.namespace, effect.name))
            if target is not None:
                target.setdefault("metadata", {}).setdefault("annotations", {}).update(effect.annotations)
        elif isinstance(effect, Event):
            self.events.append(effect)


def _is_matcher(expected: Any) -> bool:
    return isinstance(expected, dict) and any(str(k).startswith("$") for k in expected)


def _matcher(expected: Obj, actual: Any, path: str) -> list[str]:
    if "$absent" in expected:
        if expected["$absent"] and actual is not MISSING:
            return [f"{path}: expected absent, found {actual!r}"]
        if not expected["$absent"] and actual is MISSING:
            return [f"{path}: expected present, missing"]
        return []
    if "$absentOr" in expected:
        return [] if actual is MISSING else differences(expected["$absentOr"], actual, path)
    if "$exact" in expected:
        want, got = prune(expected["$exact"]), prune(None if actual is MISSING else actual)
        return [] if want == got else [f"{path}: expected exactly {want!r}, found {got!r}"]
    if "$contains" in expected:
        ok = actual is not MISSING and str(expected["$contains"]) in str(actual)
        return [] if ok else [f"{path}: expected to contain {expected['$contains']!r}, found {actual!r}"]
    if "$includes" in expected:
        have = actual if isinstance(actual, list) else []
        lost = [item for item in expected["$includes"] if item not in have]
        return [f"{path}: missing {lost!r} in {actual!r}"] if lost else []
    return [f"{path}: unknown matcher {sorted(expected)}"]


def differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    if _is_matcher(expected):
        return _matcher(expected, actual, path)
    if actual is MISSING:
        return [f"{path}: missing, expected {expected!r}"]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected a map, found {actual!r}"]
        out: list[str] = []
        for k, v in expected.items():
            out.extend(differences(v, actual.get(k, MISSING), f"{path}.{k}" if path else str(k)))
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected {expected!r}, found {actual!r}"]
        out = []
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            out.extend(differences(e, a, f"{path}[{i}]"))
        return out
    if expected != actual:
        return [f"{path}: expected {expected!r}, found {actual!r}"]
    return []


def object_differences(entries: list[Obj], cluster: Cluster) -> list[str]:
    out: list[str] = []
    for entry in entries:
        ref = str(entry["ref"])
        obj = cluster.get(*parse_ref(ref))
        fields = {k: v for k, v in entry.items() if k not in ("ref", "$absent", "$derived")}
        if entry.get("$absent"):
            if obj is not None:
                out.append(f"{ref}: expected absent, exists")
            continue
        if obj is None:
            out.append(f"{ref}: missing")
            continue
        out.extend(differences(fields, obj, ref))
    return out


def count_differences(counts: Obj, cluster: Cluster) -> list[str]:
    out = []
    for spec_, want in counts.items():
        kind, _, namespace = spec_.partition("/")
        have = len(cluster.of_kind(kind, namespace))
        if have != want:
            out.append(f"counts.{spec_}: expected {want}, found {have}")
    return out
