"""The corpus's expectation language (tests/conformance/controller/README.md), for the queue,
PodGroup, TTL and CronJob runners: partial matching with ``$absent``, ``$exact``, ``$contains``,
``$includes``, ``$absentOr``; resource lists by quantity value; objects by ``ref``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lahar.api.quantity import QuantityError, parse_quantity

MISSING: Any = object()
_RESOURCE_KEYS = ("minResources", "requests", "limits", "resources", "capability", "deserved", "guarantee")


def _empty(value: Any) -> bool:
    return value is MISSING or value is None or value in ("", 0, False) or value == {} or value == []


def _is_resource_path(path: str) -> bool:
    return any(f".{key}." in f".{path}" for key in _RESOURCE_KEYS)


def _same_scalar(expected: Any, actual: Any, path: str) -> bool:
    if expected == actual and type(expected) is type(actual):
        return True
    if isinstance(expected, bool) or isinstance(actual, bool):
        return False
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return expected == actual
    if _is_resource_path(path) and isinstance(expected, str | int) and isinstance(actual, str | int | float):
        try:
            return parse_quantity(expected) == parse_quantity(actual)
        except QuantityError:
            return False
    return False


def _strip(value: Any) -> Any:
    """For ``$exact``: empty or zero values count as absent."""
    if isinstance(value, Mapping):
        return {k: _strip(v) for k, v in value.items() if not _empty(v)}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _exact(expected: Any, actual: Any, path: str) -> list[str]:
    expected, actual = _strip(expected), _strip(MISSING if _empty(actual) else actual)
    if isinstance(expected, Mapping):
        if _empty(expected) and _empty(actual):
            return []
        if not isinstance(actual, Mapping):
            return [f"{path}: expected exactly {expected!r}, got {_shown(actual)}"]
        out = [f"{path}.{k}: unexpected {actual[k]!r}" for k in actual if k not in expected]
        for k, v in expected.items():
            out += _exact(v, actual.get(k, MISSING), f"{path}.{k}")
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected exactly {expected!r}, got {_shown(actual)}"]
        return [d for i, (e, a) in enumerate(zip(expected, actual, strict=True)) for d in _exact(e, a, f"{path}[{i}]")]
    if _empty(expected) and _empty(actual):
        return []
    return [] if _same_scalar(expected, actual, path) else [f"{path}: expected {expected!r}, got {_shown(actual)}"]


def _shown(value: Any) -> str:
    return "nothing" if value is MISSING else repr(value)


def compare(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Differences of ``actual`` from the partial expectation ``expected`` (empty: it matches)."""
    if isinstance(expected, Mapping) and any(str(k).startswith("$") for k in expected):
        return _matcher(expected, actual, path)
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return [f"{path}: expected {expected!r}, got {_shown(actual)}"]
        out: list[str] = []
        for k, v in expected.items():
            if k == "derived" and not path:
                continue  # facts read from Volcano's code, not asserted by its test: reported apart
            out += compare(v, actual.get(k, MISSING), f"{path}.{k}" if path else str(k))
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected {expected!r}, got {_shown(actual)}"]
        return [d for i, (e, a) in enumerate(zip(expected, actual, strict=True)) for d in compare(e, a, f"{path}[{i}]")]
    if expected is None:
        return [] if actual is None or actual is MISSING else [f"{path}: expected null, got {actual!r}"]
    if actual is MISSING:
        return [f"{path}: expected {expected!r}, got nothing"]
    return [] if _same_scalar(expected, actual, path) else [f"{path}: expected {expected!r}, got {actual!r}"]


def _matcher(expected: Mapping[str, Any], actual: Any, path: str) -> list[str]:
    if "$absent" in expected:
        missing = actual is MISSING
        if bool(expected["$absent"]) != missing:
            return [f"{path}: expected {'absent' if expected['$absent'] else 'present'}, got {_shown(actual)}"]
        return []
    if "$exact" in expected:
        return _exact(expected["$exact"], actual, path)
    if "$contains" in expected:
        ok = isinstance(actual, str) and str(expected["$contains"]) in actual
        return [] if ok else [f"{path}: expected to contain {expected['$contains']!r}, got {_shown(actual)}"]
    if "$includes" in expected:
        items = list(actual) if isinstance(actual, Iterable) and not isinstance(actual, str | bytes) else []
        lacking = [x for x in expected["$includes"] if x not in items]
        return [f"{path}: lacks {lacking!r} (has {items!r})"] if lacking else []
    if "$absentOr" in expected:
        return [] if actual is MISSING else compare(expected["$absentOr"], actual, path)
    return [f"{path}: unknown matcher {sorted(expected)}"]


def split_ref(ref: str) -> tuple[str, str, str]:
    """``Kind/namespace/name`` or ``Kind/name`` -> (kind, namespace, name)."""
    parts = ref.split("/")
    if len(parts) == 2:
        return parts[0], "", parts[1]
    return parts[0], parts[1], "/".join(parts[2:])


def key_of(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return str(obj.get("kind") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or "")


def compare_objects(expected: list[Mapping[str, Any]], objects: Iterable[Mapping[str, Any]]) -> list[str]:
    """``expect.objects``: each entry's ``ref`` names an object that must exist (or, with
    ``$absent: true``, must not) and partially match."""
    index = {key_of(o): o for o in objects}
    out: list[str] = []
    for entry in expected:
        ref = str(entry["ref"])
        obj = index.get(split_ref(ref))
        if entry.get("$absent"):
            if obj is not None:
                out.append(f"{ref}: expected absent, exists")
            continue
        if obj is None:
            out.append(f"{ref}: expected to exist, missing")
            continue
        body = {k: v for k, v in entry.items() if k not in ("ref", "$absent")}
        out += compare(body, obj, ref)
    return out


def compare_counts(expected: Mapping[str, int], objects: Iterable[Mapping[str, Any]]) -> list[str]:
    """``expect.counts``: ``{"Kind/namespace": n}``, exact numbers of objects."""
    seen = [key_of(o) for o in objects]
    out = []
    for where, n in expected.items():
        kind, _, ns = where.partition("/")
        got = sum(1 for k, namespace, _ in seen if k == kind and namespace == ns)
        if got != n:
            out.append(f"counts {where}: expected {n}, got {got}")
    return out


def find(objects: Iterable[Mapping[str, Any]], kind: str, ref: str) -> dict[str, Any]:
    """The object ``namespace/name`` (or ``name``) of ``kind`` among the case's objects."""
    ns, _, name = ref.rpartition("/")
    for obj in objects:
        if key_of(obj) == (kind, ns, name):
            return dict(obj)
    raise KeyError(f"no {kind} {ref} in given.objects")
