"""Volcano's example manifests: valid objects are admitted, the known-broken ones are refused.

The examples are copied under tests/admission/examples (paths and README kept).  Each object
that one of our webhooks handles goes through the mutating webhook (patch applied) and then the
validating one, as an API server would send it.  The README names what is meant to fail.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonpatch
import msgspec
import pytest
import yaml

from lahar_admission.conformance import settings
from lahar_admission.review import AdmissionRequest, GroupVersionKind, GroupVersionResource, Verdict
from lahar_admission.rules import WEBHOOKS, admit, is_known_resource
from lahar_admission.view import view_from_objects

EXAMPLES = Path(__file__).parent / "examples"
# Known-broken inputs (examples/README.md) and the words their refusal must contain.
BROKEN = {
    "invalid_jobs/duplicatedPolicyEvent-webhook-deny.yaml": "duplicate event PodFailed",
    "invalid_jobs/duplicatedTaskName-webhook-deny.yaml": "duplicated task name task-1",
    "invalid_jobs/minAvailable-webhook-deny.yaml": ("job 'minAvailable' should not be greater than total replicas"),
    # `priorityClass` is not a PodSpec field (meant: priorityClassName).
    "task-priority/elastic-job.yaml": (
        'template.spec.priorityClass: Invalid value: "priorityClass": field not declared'
    ),
    # Legacy API group, not the one the PodGroup webhooks serve.
    "spark-sample/spark-pi.yaml": "expect resource to be scheduling.volcano.sh/v1beta1, Resource=podgroups",
}
# Removed API versions with no webhook of ours: the service answers 404 for them.
UNSERVED_LEGACY = {"task-priority/high-priority.yaml", "task-priority/normal-priority.yaml"}
QUEUES = ["default", "test", "root-eng-prod", "root-eng-dev", "root-sci-prod", "root-sci-dev"]
RESOURCES = {
    "Job": ("batch.volcano.sh", "jobs"),
    "Queue": ("scheduling.volcano.sh", "queues"),
    "PodGroup": ("scheduling.volcano.sh", "podgroups"),
    "CronJob": ("batch.volcano.sh", "cronjobs"),
    "JobFlow": ("flow.volcano.sh", "jobflows"),
    "PriorityClass": ("scheduling.k8s.io", "priorityclasses"),
    "Pod": ("", "pods"),
}


def _files() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*.yaml"))


def _key(path: Path) -> str:
    return "/".join(path.parts[-2:])


def _cluster() -> Any:
    return view_from_objects(
        {"kind": "Queue", "metadata": {"name": q}, "spec": {"weight": 1}, "status": {"state": "Open"}} for q in QUEUES
    )


def _request(obj: dict[str, Any], kind: str, op: str = "CREATE") -> AdmissionRequest:
    group, resource = RESOURCES[kind]
    version = str(obj.get("apiVersion", "v1")).split("/")[-1]
    meta = obj.get("metadata") or {}
    return AdmissionRequest(
        uid="example",
        kind=GroupVersionKind(group, version, kind),
        resource=GroupVersionResource(
            str(obj.get("apiVersion", "")).rpartition("/")[0] if "/" in str(obj.get("apiVersion", "")) else "",
            version,
            resource,
        ),
        name=meta.get("name", ""),
        namespace=meta.get("namespace", "default"),
        operation=op,
        object=msgspec.Raw(msgspec.json.encode(obj)),
    )


def _pods_of(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods a Deployment/ReplicaSet would create."""
    template = (obj.get("spec") or {}).get("template") or {}
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**(template.get("metadata") or {}), "name": "example-pod", "namespace": "default"},
            "spec": template.get("spec") or {},
        }
    ]


def _admit_through(obj: dict[str, Any], kind: str) -> Verdict:
    """Mutate (when a mutating webhook exists), apply the patch, then validate."""
    view, rules = _cluster(), settings()
    mutating = [w for w in WEBHOOKS.values() if w.kind == kind and w.mutating]
    for hook in mutating:
        req = _request(obj, kind)
        verdict = admit(hook.path, req, view, rules)
        if not verdict.allowed:
            return verdict
        obj = jsonpatch.apply_patch(copy.deepcopy(obj), verdict.patch)
    validating = [w for w in WEBHOOKS.values() if w.kind == kind and not w.mutating]
    verdict = Verdict.allow()
    for hook in validating:
        verdict = admit(hook.path, _request(obj, kind), view, rules)
        if not verdict.allowed:
            return verdict
    return verdict


def _objects(path: Path) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for doc in yaml.safe_load_all(path.read_text()):
        if not isinstance(doc, dict):
            continue
        kind = doc.get("kind")
        if kind in ("Deployment", "ReplicaSet"):
            out.extend(("Pod", pod) for pod in _pods_of(doc))
        elif kind in RESOURCES:
            out.append((kind, doc))
    return out


@pytest.mark.parametrize("path", _files(), ids=lambda p: _key(p))
def test_example(path: Path) -> None:
    key = _key(path)
    objects = _objects(path)
    if key in UNSERVED_LEGACY:
        assert objects and all(not is_known_resource(_request(o, k)) for k, o in objects)
        return
    verdicts = [(k, o, _admit_through(o, k)) for k, o in objects if k != "PriorityClass"]
    if key in BROKEN:
        refused = [v for _, _, v in verdicts if not v.allowed]
        assert refused, f"{key} should be refused"
        assert any(BROKEN[key] in v.message for v in refused), [v.message for v in refused]
        return
    for kind, obj, verdict in verdicts:
        name = (obj.get("metadata") or {}).get("name")
        assert verdict.allowed, f"{kind} {name}: {verdict.message}"


def test_the_readme_came_along() -> None:
    assert (EXAMPLES / "README.md").is_file()
    assert len(_files()) >= 41
