"""The emulator's OpenAPI documents, as kubectl reads them to decide that the server validates
fields itself; and kubectl apply / get against the emulator (skipped without kubectl)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest


def _get(sim: Any, path: str) -> Any:
    with httpx.Client(base_url=sim.url, trust_env=False) as http:
        reply = http.get(path)
    assert reply.status_code == 200, (path, reply.status_code, reply.text[:200])
    return reply.json()


def test_v3_root_names_each_group_version_and_its_document_resolves(sim: Any) -> None:
    root = _get(sim, "/openapi/v3")["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/scheduling.volcano.sh/v1beta1"} <= set(root)
    doc = _get(sim, root["apis/scheduling.volcano.sh/v1beta1"]["serverRelativeURL"])
    patch = doc["paths"]["/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "scheduling.volcano.sh",
        "version": "v1beta1",
        "kind": "PodGroup",
    }
    assert {"name": "fieldValidation", "in": "query"}.items() <= patch["parameters"][0].items()
    queues = doc["paths"]["/apis/scheduling.volcano.sh/v1beta1/queues/{name}"]  # cluster-scoped
    assert queues["patch"]["x-kubernetes-group-version-kind"]["kind"] == "Queue"


def test_unknown_group_versions_are_404(sim: Any) -> None:
    with httpx.Client(base_url=sim.url, trust_env=False) as http:
        assert http.get("/openapi/v3/apis/nowhere.example.com/v1").status_code == 404
        assert http.get("/openapi/v2").json()["swagger"] == "2.0"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_apply_validates_and_get_shows_status(sim: Any, ns: str, tmp_path: Path) -> None:
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: {ns}}}\n"
        "spec: {containers: [{name: c, image: busybox}]}\n"
    )

    def kubectl(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", *argv], capture_output=True, text=True, env=env, timeout=60)

    applied = kubectl("apply", "-f", str(manifest))  # no --validate=false
    assert applied.returncode == 0 and "pod/p created" in applied.stdout, applied.stderr
    assert "unchanged" in kubectl("apply", "-f", str(manifest)).stdout
    listed = kubectl("get", "pods", "-n", ns)
    assert listed.stdout.split("\n")[0].split()[:3] == ["NAME", "READY", "STATUS"], listed.stdout
