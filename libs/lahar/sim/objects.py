"""Small helpers on object dicts and request bodies."""

from __future__ import annotations

import random
import uuid
from typing import Any

import msgspec

from lahar.sim.errors import ApiError, bad_request
from lahar.sim.resources import ResourceType

Obj = dict[str, Any]

_decode = msgspec.json.Decoder().decode
# The alphabet the API server uses for generateName suffixes (no vowels, no confusable digits).
_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"


def decode_json(body: bytes, what: str = "the request body") -> Any:
    if not body:
        raise bad_request(f"{what} is empty")
    try:
        return _decode(body)
    except msgspec.DecodeError as exc:
        raise bad_request(f"{what} could not be decoded: {exc}") from None


def decode_object(body: bytes, rtype: ResourceType) -> Obj:
    """A JSON object whose apiVersion/kind, when present, are those of ``rtype``; metadata is a dict."""
    try:
        obj = _decode(body)
    except msgspec.DecodeError as exc:
        # Worded as the server's decoder, which echoes the body.
        detail = "unexpected end of JSON input" if "truncated" in str(exc) else str(exc)
        raise bad_request(
            f"the object provided is unrecognized (must be of type {rtype.kind}): couldn't get version/kind; "
            f"json parse error: {detail} ({body.decode(errors='replace')})"
        ) from None
    if not isinstance(obj, dict):
        raise bad_request("the body of the request must be a JSON object")
    check_kind(obj, rtype)
    obj = {"apiVersion": obj.pop("apiVersion"), "kind": obj.pop("kind"), **obj}  # the usual key order
    meta = obj.get("metadata")
    if meta is None:
        obj["metadata"] = {}
    elif not isinstance(meta, dict):
        raise bad_request("metadata: must be an object")
    return obj


def check_kind(obj: Obj, rtype: ResourceType) -> None:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    # Custom resources may be written at any served version of their group.
    custom_ok = rtype.custom and str(api_version).startswith(rtype.group + "/")
    if api_version and api_version != rtype.api_version and not custom_ok:
        raise bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version ({rtype.api_version})"
        )
    if kind and kind != rtype.kind:
        if not rtype.custom and (not api_version or api_version == rtype.api_version):
            # The server decodes the body as the kind it names, then fails to convert it.
            internal = rtype.group.split(".")[0] or "core"
            raise bad_request(
                f'{kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
                f"converting ({rtype.version}.{kind}) to ({internal}.{rtype.kind}): unknown conversion"
            )
        raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rtype.kind})")
    obj["apiVersion"] = rtype.api_version
    obj["kind"] = rtype.kind


def new_uid() -> str:
    return str(uuid.uuid4())


def generated_name(prefix: str) -> str:
    return prefix + "".join(random.choices(_SUFFIX, k=5))


def spec_part(obj: Obj) -> Obj:
    """Everything but metadata and status: what a change of bumps metadata.generation."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def int_option(value: Any, name: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise bad_request(f"{name}: must be an integer")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise bad_request(f"{name}: {value!r} is not an integer") from None
    if number < 0:
        raise ApiError(422, "Invalid", f"{name}: Invalid value: {number}: must be >= 0")
    return number
