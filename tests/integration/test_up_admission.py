"""The stack `lahar up` starts registers the admission webhooks with the cluster it starts, the
emulator or a real control plane (`--control-plane kube`, every service with its deploy/
ServiceAccount): `lahar apply -f` of an invalid Volcano Job is rejected with Volcano's message, and
a valid Job is stored with Volcano's defaults."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lahar.adapters.kube import KubeClient, KubeConfig, NotFound
from lahar.up.stack import LocalStack, StackConfig

from .backends import BACKENDS
from .services import poll

pytestmark = [pytest.mark.slow]

TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}


def _job(name: str, tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"tasks": [{"template": TEMPLATE, **t} for t in tasks], **spec},
    }


@pytest.fixture(scope="module", params=BACKENDS)
def stack(
    tmp_path_factory: pytest.TempPathFactory, lahar_infra: Any, request: pytest.FixtureRequest
) -> Iterator[LocalStack]:
    """The cluster, admission and every service, as `lahar up` runs them (shared servers)."""
    if request.param == "kube":
        request.getfixturevalue("kube_binaries")  # skipped, with the whole tier, without Go
    cfg = StackConfig(
        state_dir=tmp_path_factory.mktemp("up"),
        control_plane=request.param,
        kube_audit=True,
        nats_url=lahar_infra.nats_url,
        nats_ca=lahar_infra.nats_ca,
        redis_url=lahar_infra.redis_url,
        prefix=f"upadm{request.param}",  # its own streams and mirror: another cluster
        nodes=("4:cpu=8,memory=16Gi,pods=110",),
        binders=1,
        max_binders=1,
        period=0.5,
    )
    running = LocalStack(cfg).start(timeout=120)
    try:
        yield running
    finally:
        running.stop()


def _apply(stack: LocalStack, tmp: Path, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    path = tmp / f"{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj))
    env = {**os.environ, "KUBECONFIG": stack.kubeconfig}
    return subprocess.run(
        [sys.executable, "-m", "lahar", "apply", "-f", str(path)], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize(
    ("job", "message"),
    [
        (
            _job("too-few", [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 2}], minAvailable=5),
            "job 'minAvailable' should not be greater than total replicas in tasks",
        ),
        (_job("twins", [{"name": "a", "replicas": 1}, {"name": "a", "replicas": 1}]), "duplicated task name a"),
        (_job("lost", [{"name": "a", "replicas": 1}], queue="nowhere"), "unable to find job queue"),
    ],
    ids=["minAvailable", "duplicate-task", "missing-queue"],
)
def test_invalid_job_is_rejected_with_volcanos_message(
    stack: LocalStack, tmp_path: Path, job: dict[str, Any], message: str
) -> None:
    done = _apply(stack, tmp_path, job)
    assert done.returncode != 0, done.stdout
    assert "denied the request" in done.stderr
    assert message in done.stderr


def test_valid_job_is_defaulted(stack: LocalStack, tmp_path: Path) -> None:
    job = _job("plain", [{"replicas": 2}, {"replicas": 1}])
    done = _apply(stack, tmp_path, job)
    assert done.returncode == 0, done.stderr

    async def stored() -> dict[str, Any]:
        kube = KubeClient(KubeConfig.load(stack.kubeconfig))
        try:
            got: dict[str, Any] = json.loads(await kube.get("jobs", "default", "plain"))
            return got
        finally:
            await kube.close()

    spec = asyncio.run(stored())["spec"]
    assert spec["queue"] == "default"
    assert spec["schedulerName"] == "volcano"
    assert [t["name"] for t in spec["tasks"]] == ["default0", "default1"]
    assert spec["minAvailable"] == 3
    assert spec["maxRetry"] == 3


def test_default_queue_exists_for_jobs_to_land_in(stack: LocalStack) -> None:
    """The controller creates the `default` queue the mutated Jobs point at."""

    async def queue() -> dict[str, Any] | None:
        kube = KubeClient(KubeConfig.load(stack.kubeconfig))
        try:
            got: dict[str, Any] = json.loads(await kube.get("queues", "", "default"))
            return got
        except NotFound:
            return None
        finally:
            await kube.close()

    async def check() -> None:
        await poll(queue, timeout=10)

    asyncio.run(check())


def test_a_queue_and_a_podgroup_naming_it_in_one_apply(stack: LocalStack, tmp_path: Path) -> None:
    """Read-your-writes: admission finds the queue created a moment before, though its snapshot
    of the mirror is refreshed only every half second."""
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "same-apply"},
        "spec": {"weight": 1},
    }
    podgroup = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "same-apply", "namespace": "default"},
        "spec": {"minMember": 1, "queue": "same-apply"},
    }
    path = tmp_path / "both.yaml"
    path.write_text(yaml.safe_dump_all([queue, podgroup]))
    env = {**os.environ, "KUBECONFIG": stack.kubeconfig}
    done = subprocess.run(
        [sys.executable, "-m", "lahar", "apply", "-f", str(path)], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "queue.scheduling.volcano.sh/same-apply created",
        "podgroup.scheduling.volcano.sh/same-apply created",
    ]


def test_no_service_was_refused_by_rbac(stack: LocalStack) -> None:
    """Last of the module: on the real control plane a service refused a request (403) may only
    log it and retry."""
    refused = [c.identity for c in stack.children if "forbidden" in c.log_path.read_text(errors="replace").lower()]
    assert not refused, f"refused by RBAC: see the logs of {refused}"
    # Also the refusals a service did not log: the API server's audit of every request.
    assert not (stack.kube.refusals() if stack.kube else []), stack.kube and stack.kube.refusals()
