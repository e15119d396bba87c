"""``lahar up --control-plane kube``: the whole stack on kube-apiserver + KWOK, every service with
its deploy/ ServiceAccount, schedules a Volcano PodGroup gang; its pods reach Running."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.e2e.workload import JobSpec, Tracker, ensure_namespace, ensure_queues, submit
from lahar.kube.build import Binaries
from lahar.up.kube import SERVICE_ACCOUNTS
from lahar.up.stack import LocalStack, StackConfig

pytestmark = [pytest.mark.slow]
NS = "gangs"
DEADLINE = 90.0


@pytest.fixture(scope="module")
def stack(kube_binaries: Binaries, tmp_path_factory: pytest.TempPathFactory, lahar_infra: Any) -> Iterator[LocalStack]:
    cfg = StackConfig(
        state_dir=tmp_path_factory.mktemp("upkube"),
        nats_url=lahar_infra.nats_url,
        nats_ca=lahar_infra.nats_ca,
        redis_url=lahar_infra.redis_url,
        prefix="upkube",
        nodes=("2:cpu=4,memory=16Gi,pods=110",),
        binders=1,
        max_binders=1,
        period=0.5,
        control_plane="kube",
        kube_audit=True,
    )
    running = LocalStack(cfg).start(timeout=120)
    try:
        yield running
    finally:
        running.stop()


def test_each_service_runs_as_its_own_service_account(stack: LocalStack) -> None:
    for child in stack.children:
        if child.name in SERVICE_ACCOUNTS:
            config = yaml.safe_load(Path(child.env["KUBECONFIG"]).read_text())
            token = config["users"][0]["user"]["token"]
            # A bound ServiceAccount token is a JWT naming the account; the admin token is not.
            claims = json.loads(_b64(token.split(".")[1]))
            assert claims["sub"] == f"system:serviceaccount:lahar-system:{SERVICE_ACCOUNTS[child.name]}"
    assert (stack.dir / "kubeconfig").exists()


def test_a_volcano_gang_is_bound_and_runs(stack: LocalStack) -> None:
    nodes, phases, group = asyncio.run(_run_gang(stack))
    assert len(nodes) == 4 and all(nodes.values()), nodes
    assert set(phases.values()) == {"Running"}, phases  # KWOK's simulated kubelet started them
    assert group["status"]["phase"] == "Running", group["status"]
    assert stack.kube is not None and stack.kube.refusals() == []  # no request of a service got a 403


async def _run_gang(stack: LocalStack) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    kube = KubeClient(KubeConfig.load(stack.kubeconfig))
    try:
        await ensure_namespace(kube, NS, account_timeout=60.0)
        await ensure_queues(kube, {"default": 1})
        # 4 pods of 1.5 cpu on two 4-cpu nodes: they fit only two per node.
        job = JobSpec("gang", "default", 4, cpu="1500m", memory="1Gi")
        await submit(kube, NS, [job], Tracker())
        deadline = time.monotonic() + DEADLINE
        while True:
            pods = [json.loads(await kube.get("pods", NS, f"gang-worker-{i}")) for i in range(4)]
            group = json.loads(await kube.get("podgroups", NS, "gang"))
            phases = {p["metadata"]["name"]: p.get("status", {}).get("phase", "") for p in pods}
            if set(phases.values()) == {"Running"} and group.get("status", {}).get("phase") == "Running":
                break
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)  # polling interval of a deadline-bounded wait
        return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}, phases, group
    finally:
        await kube.close()


def _b64(part: str) -> str:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)).decode()


def test_control_plane_kube_refuses_a_kubeconfig(tmp_path: Path) -> None:
    cfg = tmp_path / "k"
    cfg.write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "lahar", "up", "--control-plane", "kube", "--kubeconfig", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--control-plane kube" in done.stderr and "--kubeconfig" in done.stderr


def test_a_request_outside_a_services_role_is_seen_in_the_audit(stack: LocalStack) -> None:
    """The check above can fail: a binder's token listing nodes (not in its ClusterRole) is refused
    and shows up.  Last in the module: it leaves a refusal behind."""
    config = yaml.safe_load(Path(stack.kube.kubeconfigs["binder"]).read_text())  # type: ignore[union-attr]
    cluster = config["clusters"][0]["cluster"]
    ca = stack.dir / "kube" / "binder-ca.crt"
    ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    request = urllib.request.Request(cluster["server"] + "/api/v1/nodes")
    request.add_header("Authorization", f"Bearer {config['users'][0]['user']['token']}")
    try:
        urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(ca)), timeout=10)
        status = 200
    except urllib.error.HTTPError as exc:
        status = exc.code
    assert status == 403

    def seen() -> bool:
        return any("lahar-binder list /api/v1/nodes" in r for r in stack.kube.refusals())  # type: ignore[union-attr]

    deadline = time.monotonic() + 10  # the API server writes its audit log in batches
    while not seen() and time.monotonic() < deadline:
        time.sleep(0.1)  # polling interval of a deadline-bounded wait
    assert seen(), stack.kube.refusals()  # type: ignore[union-attr]
