"""AdmissionReview ``admission.k8s.io/v1`` wire types, and the verdict the rules return.

The request keeps ``object``/``oldObject`` as raw JSON: each rule decodes them into the type it
needs (or reads them as plain data when it must hand back every field it did not look at, as
the job mutator does when it replaces ``/spec/tasks``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import msgspec

API_VERSION = "admission.k8s.io/v1"


class _Wire(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    pass


class GroupVersionKind(_Wire):
    group: str = ""
    version: str = ""
    kind: str = ""


class GroupVersionResource(_Wire):
    group: str = ""
    version: str = ""
    resource: str = ""

    def __str__(self) -> str:
        # Go's GroupVersionResource.String(), which Volcano puts in "expect resource to be …".
        return f"{self.group}/{self.version}, Resource={self.resource}"


class UserInfo(_Wire):
    username: str = ""
    uid: str = ""
    groups: list[str] = []


class AdmissionRequest(_Wire):
    uid: str = ""
    kind: GroupVersionKind = msgspec.field(default_factory=GroupVersionKind)
    resource: GroupVersionResource = msgspec.field(default_factory=GroupVersionResource)
    sub_resource: str = ""
    name: str = ""
    namespace: str = ""
    operation: str = ""
    user_info: UserInfo | None = None
    object: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    old_object: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    dry_run: bool | None = None


class Status(_Wire):
    code: int | None = None
    message: str = ""


class AdmissionResponse(_Wire):
    # No defaults: both must always be on the wire (omit_defaults would drop allowed=false).
    uid: str
    allowed: bool
    status: Status | None = None
    patch: str | None = None
    patch_type: str | None = None
    warnings: list[str] = []


class AdmissionReview(_Wire):
    api_version: str = API_VERSION
    kind: str = "AdmissionReview"
    request: AdmissionRequest | None = None
    response: AdmissionResponse | None = None


_review_decoder = msgspec.json.Decoder(AdmissionReview)
_encoder = msgspec.json.Encoder()


def decode_review(body: bytes) -> AdmissionReview:
    """Decode a review; raises ``msgspec.DecodeError`` / ``ValidationError`` naming the field."""
    return _review_decoder.decode(body)


def raw_present(raw: msgspec.Raw) -> bool:
    """True when an object was sent (absent and JSON ``null`` both mean "no object")."""
    data = bytes(raw)
    return bool(data) and data.strip() != b"null"


@dataclass
class Verdict:
    """What a rule decided: allowed or not, why, and the JSON-patch operations to apply."""

    allowed: bool
    message: str = ""
    patch: list[dict[str, Any]] = field(default_factory=list)
    # Shown to the client by kubectl even when the request is allowed.
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def allow(cls, patch: list[dict[str, Any]] | None = None) -> Verdict:
        return cls(True, "", list(patch or []))

    @classmethod
    def deny(cls, message: str) -> Verdict:
        return cls(False, message)


def to_response(uid: str, verdict: Verdict) -> AdmissionResponse:
    resp = AdmissionResponse(uid=uid, allowed=verdict.allowed)
    if not verdict.allowed:
        # 403 is what the API server shows for a webhook denial; the message carries the reason.
        resp.status = Status(code=403, message=verdict.message)
    if verdict.warnings:
        resp.warnings = list(verdict.warnings)
        if verdict.allowed:
            resp.status = Status(code=200, message="; ".join(verdict.warnings))
    if verdict.allowed and verdict.patch:
        resp.patch = base64.b64encode(_encoder.encode(verdict.patch)).decode()
        resp.patch_type = "JSONPatch"
    return resp


def encode_review(uid: str, verdict: Verdict) -> bytes:
    # Written out so apiVersion and kind are always present (omit_defaults would drop them).
    return _encoder.encode(
        {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": to_response(uid, verdict)}
    )
