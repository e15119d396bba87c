"""Run an admission conformance case (conformance/README.md, "Admission cases").

``run_case(doc, text)`` sends the case's request to the webhook named on the file's first line,
with the case's ``existing`` objects as the cluster, and compares the verdict with ``expect``.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonpatch
import msgspec

from lahar.api import safeyaml
from lahar_admission.review import AdmissionResponse, AdmissionReview, decode_review
from lahar_admission.rules import WEBHOOKS, UnknownPath, admit
from lahar_admission.settings import RuleSettings, load_time_zones
from lahar_admission.view import ObjectError, view_from_objects

_HEADER = re.compile(r"^#\s*webhook:\s*(\S+)")
_SETTINGS: RuleSettings | None = None


@dataclass
class CaseResult:
    name: str
    passed: bool
    differences: list[str] = field(default_factory=list)


def settings() -> RuleSettings:
    """The shipped webhook-manager defaults every case assumes (time zones loaded once)."""
    global _SETTINGS
    if _SETTINGS is None:
        _SETTINGS = RuleSettings(time_zones=load_time_zones())
    return _SETTINGS


def webhook_path(doc: dict[str, Any], text: str) -> str | None:
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    m = _HEADER.match(first)
    if m:
        return m.group(1)
    # Fallback rule from the README: a case with patchedPaths targets a mutating path.
    return None


def review_body(doc: dict[str, Any], uid: str = "conformance") -> bytes:
    """The case's request as the AdmissionReview JSON an API server would send."""
    request = dict(doc.get("request") or {})
    request.setdefault("uid", uid)
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()


def run_case(doc: dict[str, Any], text: str) -> CaseResult:
    name = str(doc.get("name", "?")) if isinstance(doc, dict) else "?"
    if not isinstance(doc, dict):
        return CaseResult(name, False, ["case is not a mapping"])
    path = webhook_path(doc, text) or _guess_path(doc)
    if path is None:
        return CaseResult(name, False, ["no '# webhook: /path' line and no way to infer the webhook"])
    try:
        view = view_from_objects(doc.get("existing") or [])
        review = decode_review(review_body(doc))
        assert review.request is not None
        verdict = admit(path, review.request, view, settings())
    except (ObjectError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        return CaseResult(name, False, [f"case does not load: {exc}"])
    except UnknownPath:
        return CaseResult(name, False, [f"unknown webhook path {path}"])
    from lahar_admission.review import to_response

    diffs = compare(doc.get("expect") or {}, to_response("conformance", verdict), doc["request"].get("object"))
    return CaseResult(name, not diffs, diffs)


def _guess_path(doc: dict[str, Any]) -> str | None:
    resource = ((doc.get("request") or {}).get("resource") or {}).get("resource")
    mutating = "patchedPaths" in (doc.get("expect") or {})
    for hook in WEBHOOKS.values():
        if hook.resource == resource and hook.mutating == mutating:
            return hook.path
    return None


def patch_ops(resp: AdmissionResponse) -> list[dict[str, Any]]:
    if not resp.patch:
        return []
    ops = json.loads(base64.b64decode(resp.patch))
    return ops if isinstance(ops, list) else []


def compare(expect: dict[str, Any], resp: AdmissionResponse, obj: Any) -> list[str]:
    """Differences between ``expect`` and a response (empty when it matches)."""
    diffs: list[str] = []
    message = resp.status.message if resp.status else ""
    if "allowed" in expect and bool(expect["allowed"]) != resp.allowed:
        diffs.append(f"allowed: expected {expect['allowed']}, got {resp.allowed} (message: {message!r})")
    want = expect.get("messageContains")
    if want is not None and str(want) not in message:
        diffs.append(f"message: expected to contain {want!r}, got {message!r}")
    ops = patch_ops(resp)
    paths = [op.get("path") for op in ops]
    if "patchedPaths" in expect:
        wanted = list(expect["patchedPaths"] or [])
        if not wanted and ops:
            diffs.append(f"patch: expected no operations, got paths {paths}")
        diffs.extend(f"patch: no operation on {p} (got {paths})" for p in wanted if p not in paths)
    diffs.extend(f"patch: unexpected operation on {p}" for p in expect.get("absentPaths") or [] if p in paths)
    if expect.get("patchedValues"):
        diffs.extend(_value_diffs(expect["patchedValues"], ops, obj))
    return diffs


def _value_diffs(wanted: dict[str, Any], ops: list[dict[str, Any]], obj: Any) -> list[str]:
    try:
        patched = jsonpatch.apply_patch(copy.deepcopy(obj), ops)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        return [f"patch does not apply: {exc}"]
    diffs = []
    for pointer, value in wanted.items():
        try:
            got = jsonpatch.JsonPointer(pointer).resolve(patched)
        except jsonpatch.JsonPointerException:
            diffs.append(f"value at {pointer}: expected {value!r}, path absent after patch")
            continue
        if got != value:
            diffs.append(f"value at {pointer}: expected {value!r}, got {got!r}")
    return diffs


__all__ = ["AdmissionReview", "CaseResult", "compare", "run_case"]


def case_files(folder: Path) -> list[Path]:
    """The case files of a folder, sorted (INDEX.md and other non-YAML files are skipped)."""
    return sorted(folder.glob("*.yaml"))


def load_case(path: Path) -> tuple[dict[str, Any], str]:
    text = path.read_text()
    doc = safeyaml.load(text, str(path))
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a case (expected a mapping)")
    return doc, text
