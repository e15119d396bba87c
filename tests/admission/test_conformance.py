"""Every admission conformance case, through the pure rules and through the HTTPS service."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from lahar_admission.conformance import case_files, compare, load_case, review_body, run_case, webhook_path
from lahar_admission.review import AdmissionResponse
from lahar_admission.view import view_from_objects

CASES = Path(__file__).parent / "cases"
SHARED_CASES = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "admission"

FILES = case_files(CASES)


def test_the_copied_corpus_is_complete() -> None:
    assert len(FILES) >= 139
    assert (CASES / "INDEX.md").is_file()
    for path in FILES:
        assert "source:" in path.read_text(), f"{path.name} lost its source line"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_case_through_rules(path: Path) -> None:
    doc, text = load_case(path)
    result = run_case(doc, text)
    assert result.name == path.stem
    assert result.passed, result.differences


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_case_through_https(path: Path, live, proxy_view) -> None:  # type: ignore[no-untyped-def]
    doc, text = load_case(path)
    proxy_view.target = view_from_objects(doc.get("existing") or [])
    hook = webhook_path(doc, text)
    with live.client() as client:
        reply = client.post(
            f"{hook}?timeout=10s",
            content=review_body(doc, uid=f"uid-{path.stem}"),
            headers={"Content-Type": "application/json"},
        )
    assert reply.status_code == 200, reply.text
    review = reply.json()
    assert review["apiVersion"] == "admission.k8s.io/v1"
    assert review["kind"] == "AdmissionReview"
    resp = review["response"]
    assert resp["uid"] == f"uid-{path.stem}"
    if "patch" in resp:
        assert resp["patchType"] == "JSONPatch"
        assert isinstance(json.loads(base64.b64decode(resp["patch"])), list)
    parsed = AdmissionResponse(
        uid=resp["uid"], allowed=resp["allowed"], patch=resp.get("patch"), patch_type=resp.get("patchType")
    )
    if resp.get("status"):
        from lahar_admission.review import Status

        parsed.status = Status(code=resp["status"].get("code"), message=resp["status"].get("message", ""))
    assert compare(doc["expect"], parsed, doc["request"].get("object")) == []


@pytest.mark.skipif(not SHARED_CASES.is_dir(), reason="../shared is not present")
def test_copy_matches_shared() -> None:
    shared = {p.name: p.read_text() for p in SHARED_CASES.glob("*.yaml")}
    ours = {p.name: p.read_text() for p in FILES}
    assert set(shared) <= set(ours), f"cases missing from tests/admission/cases: {sorted(set(shared) - set(ours))}"
    for name, text in shared.items():
        assert ours[name] == text, f"{name} differs from ../shared"
