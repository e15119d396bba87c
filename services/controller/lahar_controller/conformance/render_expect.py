"""The corpus's expectation language (tests/conformance/controller/README.md, "Expectation
language"), as the render runner needs it: partial matching with ``$absent``, ``$exact``,
``$contains``, ``$includes``, ``$absentOr``; quantities compared by value inside resource lists;
object refs ``Kind/namespace/name``; the pod view.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from lahar.api.quantity import QuantityError, parse_quantity

MISSING = object()
RESOURCE_LISTS = frozenset({"minResources", "requests", "limits", "capacity", "allocatable", "overhead"})
MATCHERS = frozenset({"$absent", "$exact", "$contains", "$includes", "$absentOr"})


def _empty(value: Any) -> bool:
    return value is MISSING or value is None or value == "" or value == 0 or value is False or value in ({}, [])


def _absent(value: Any) -> bool:
    # an omitted field and an empty list or map read the same in Kubernetes JSON
    return value is MISSING or value is None or value in ({}, [])


def _normal(value: Any, quantities: bool = False) -> Any:
    """For ``$exact``: empty values dropped, quantities as numbers."""
    if isinstance(value, Mapping):
        return {
            k: _normal(v, quantities or k in RESOURCE_LISTS)
            for k, v in value.items()
            if not _empty(v) and k != "$derived"
        }
    if isinstance(value, list):
        return [_normal(v, quantities) for v in value]
    if quantities and isinstance(value, (str, int)) and not isinstance(value, bool):
        try:
            return parse_quantity(value)
        except QuantityError:
            return value
    return value


def _is_matcher(expected: Any) -> bool:
    return isinstance(expected, Mapping) and len(expected) == 1 and next(iter(expected)) in MATCHERS


def _scalar_equal(expected: Any, actual: Any, quantities: bool) -> bool:
    if expected == actual and type(expected) is type(actual):
        return True
    if quantities:
        try:
            return parse_quantity(expected) == parse_quantity(actual)
        except (QuantityError, TypeError):
            return False
    # YAML ints and floats, or 1 vs True, must not pass for each other
    return expected == actual and not isinstance(expected, bool) and not isinstance(actual, bool)


def _matcher(expected: Mapping[str, Any], actual: Any, path: str, quantities: bool) -> list[str]:
    key, arg = next(iter(expected.items()))
    if key == "$absent":
        if arg and not _absent(actual):
            return [f"{path}: expected absent, got {actual!r}"]
        if not arg and _absent(actual):
            return [f"{path}: expected present, is absent"]
        return []
    if key == "$absentOr":
        return [] if _absent(actual) else match(arg, actual, path, quantities)
    if key == "$contains":
        if not isinstance(actual, str) or str(arg) not in actual:
            return [f"{path}: expected text containing {arg!r}, got {_shown(actual)}"]
        return []
    if key == "$includes":
        items = actual if isinstance(actual, list) else []
        return [
            f"{path}: {item!r} not among {_shown(actual)}"
            for item in arg
            if not any(not match(item, have, path, quantities) for have in items)
        ]
    want, have = _normal(arg, quantities), _normal(None if actual is MISSING else actual, quantities)
    if want != have and not (_empty(want) and _empty(have)):
        return [f"{path}: expected exactly {arg!r}, got {_shown(actual)}"]
    return []


def _shown(value: Any) -> str:
    return "<absent>" if value is MISSING else repr(value)


def match(expected: Any, actual: Any, path: str = "", quantities: bool = False) -> list[str]:
    """Differences between a partial expectation and an actual value ([] = matches)."""
    if _is_matcher(expected):
        return _matcher(expected, actual, path, quantities)
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return [f"{path}: expected a map, got {_shown(actual)}"]
        out: list[str] = []
        for key, want in expected.items():
            if key == "$derived":
                continue
            out += match(want, actual.get(key, MISSING), f"{path}.{key}", quantities or key in RESOURCE_LISTS)
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected {expected!r}, got {_shown(actual)}"]
        return [
            d
            for i, (w, h) in enumerate(zip(expected, actual, strict=True))
            for d in match(w, h, f"{path}[{i}]", quantities)
        ]
    if actual is MISSING or not _scalar_equal(expected, actual, quantities):
        return [f"{path}: expected {expected!r}, got {_shown(actual)}"]
    return []


# --- objects ------------------------------------------------------------------------------------

Key = tuple[str, str, str]  # kind, namespace, name


def parse_ref(ref: str) -> tuple[str, str | None, str]:
    """``Kind/ns/name`` -> (kind, ns, name); ``Kind/name`` -> (kind, None (any), name)."""
    parts = ref.split("/")
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    return parts[0], None, parts[-1]


def find(store: Mapping[Key, dict[str, Any]], ref: str) -> dict[str, Any] | None:
    kind, namespace, name = parse_ref(ref)
    for (k, ns, n), obj in store.items():
        if k == kind and n == name and (namespace is None or ns == namespace):
            return obj
    return None


def _secret_view(obj: Mapping[str, Any], expected: Mapping[str, Any]) -> dict[str, Any]:
    view = dict(obj)
    raw = obj.get("data")
    data: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    if "dataDecoded" in expected:
        view["dataDecoded"] = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
    if "dataKeys" in expected:
        view["dataKeys"] = sorted(data)
    return view


def match_objects(expected: list[Any], store: Mapping[Key, dict[str, Any]], path: str) -> list[str]:
    out: list[str] = []
    for entry in expected:
        ref = str(entry.get("ref"))
        obj = find(store, ref)
        where = f"{path}[{ref}]"
        if entry.get("$absent") is True:
            if obj is not None:
                out.append(f"{where}: expected absent, exists")
            continue
        if obj is None:
            out.append(f"{where}: missing")
            continue
        want = {k: v for k, v in entry.items() if k not in ("ref", "$absent")}
        if "dataKeys" in want:
            want["dataKeys"] = sorted(want["dataKeys"])
        out += match(want, _secret_view(obj, want), where)
    return out


def match_counts(expected: Mapping[str, int], store: Mapping[Key, dict[str, Any]], path: str) -> list[str]:
    out = []
    for key, want in expected.items():
        kind, _, namespace = key.partition("/")
        have = sum(1 for (k, ns, _n) in store if k == kind and ns == namespace)
        if have != want:
            out.append(f"{path}[{key}]: expected {want} objects, have {have}")
    return out


# --- pod view -----------------------------------------------------------------------------------


def _container_view(c: Mapping[str, Any]) -> dict[str, Any]:
    env = [e for e in c.get("env") or [] if isinstance(e, Mapping)]
    ports = c.get("ports") or []
    mounts = [m for m in c.get("volumeMounts") or [] if isinstance(m, Mapping)]
    view: dict[str, Any] = {
        "env": {e["name"]: e["value"] for e in env if "value" in e and "valueFrom" not in e},
        "envList": env,
        "envNonEmpty": bool(env),
        "ports": ports,
        "volumeMounts": {m.get("name"): m for m in mounts},
        "volumeMountNames": [m.get("name") for m in mounts],
    }
    if env:
        view["env[0]"] = env[0]
    if ports:
        view["ports[0]"] = ports[0]
    return view


def pod_view(pod: Mapping[str, Any]) -> dict[str, Any]:
    raw = pod.get("spec")
    spec: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    containers = [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    volumes = [v for v in spec.get("volumes") or [] if isinstance(v, Mapping)]
    return {
        "metadata": pod.get("metadata", {}),
        "spec": spec,
        "containers": {c.get("name"): _container_view(c) for c in containers},
        "volumes": {v.get("name"): v for v in volumes},
        "initContainers": spec.get("initContainers", MISSING),
    }
