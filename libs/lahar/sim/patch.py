"""The three patch formats of the API server.

* JSON Patch (RFC 6902) is applied with the ``jsonpatch`` library.
* JSON merge patch (RFC 7386) is a dozen lines, written here (``jsonpatch`` does not do it).
* Strategic merge patch is a subset, written here because its real rules live in Go struct tags:
  maps merge, ``null`` deletes, and the lists Pods and Nodes need (containers, conditions,
  volumes, env, taints, ...) merge by their key; other lists are replaced.  The directives
  ``$patch: replace|delete``, ``$retainKeys`` and ``$deleteFromPrimitiveList/<field>`` are honoured;
  ``$setElementOrder/<field>`` is dropped.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from lahar.sim.errors import ApiError, bad_request

Obj = dict[str, Any]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# Lists merged by a key field; taken from the patchMergeKey tags of the core/v1 types.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "taints": "key",
    "addresses": "type",
    "ownerReferences": "uid",
    "podIPs": "ip",
    "hostIPs": "ip",
    "resourceClaims": "name",
    "schedulingGates": "name",
}
# Lists of scalars whose patch strategy is "merge" (set union).
PRIMITIVE_MERGE = frozenset({"finalizers"})


def check_patch_type(content_type: str, strategic_allowed: bool) -> None:
    """Refuse a patch type before anything else, with the server's 415s."""
    if content_type not in (JSON_PATCH, MERGE_PATCH, STRATEGIC, APPLY_PATCH):
        raise ApiError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})
    if content_type == STRATEGIC and not strategic_allowed:
        raise ApiError(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            f"{JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}",
        )
    if content_type == APPLY_PATCH:
        raise ApiError(415, "UnsupportedMediaType", "server-side apply is not supported by the Lahar emulator")


def apply_patch(content_type: str, target: Obj, patch: Any, strategic_allowed: bool) -> Obj:
    """Return a new object; ``target`` is not modified."""
    check_patch_type(content_type, strategic_allowed)
    if content_type == JSON_PATCH:
        return _json_patch(target, patch)
    if not isinstance(patch, dict):
        what = "merge patch" if content_type == MERGE_PATCH else "strategic merge patch"
        raise bad_request(f"{what}: the body must be a JSON object")
    if content_type == MERGE_PATCH:
        merged: Obj = merge_patch(target, patch)
        return merged
    result: Obj = strategic_merge(target, patch)
    return result


def _json_patch(target: Obj, patch: Any) -> Obj:
    if not isinstance(patch, list):
        # What the server's decoder says of anything but a list.
        kind = "object" if isinstance(patch, dict) else type(patch).__name__
        raise bad_request(
            f"error decoding patch: json: cannot unmarshal {kind} into Go value of type []handlers.jsonPatchOp"
        )
    try:
        result = jsonpatch.apply_patch(target, patch, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError) as exc:
        # The server decodes the operations first (a 400 when that fails) and answers any failure
        # to apply them, a failed "test" included, with this 422.
        del exc
        raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request", {}) from None
    if not isinstance(result, dict):
        raise bad_request("json patch: the result is not an object")
    return result


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge(target: Any, patch: Obj) -> Any:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            drop = set(value or [])
            result[field] = [v for v in result.get(field) or [] if v not in drop]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = value
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    if not isinstance(current, list):
        current = []
    if field in PRIMITIVE_MERGE:
        # The patch's items first, then those only the server had: the order the server's merge gives.
        return [*dict.fromkeys(patch), *(v for v in current if v not in patch)]
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(item, dict) for item in patch):
        return copy.deepcopy(patch)
    if any(item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if i.get("$patch") != "replace"]
    merged = list(current)
    for item in patch:
        index = next(
            (i for i, cur in enumerate(merged) if isinstance(cur, dict) and cur.get(key) == item.get(key)),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del merged[index]
        elif index is None:
            merged.append(strategic_merge({}, item))
        else:
            merged[index] = strategic_merge(merged[index], item)
    return merged
