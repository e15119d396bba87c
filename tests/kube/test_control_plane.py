"""The control plane that ``lahar kube up`` starts: KWOK nodes turn Ready, pods bound to them run."""

from __future__ import annotations

import asyncio
import time

import msgspec

from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.kube.control_plane import ControlPlane

DEADLINE = 60.0


async def test_kwok_nodes_are_ready_and_untainted(kube_control_plane: ControlPlane) -> None:
    client = KubeClient(KubeConfig.load(str(kube_control_plane.kubeconfig)))
    try:
        items, _ = await client.list("nodes")
        nodes = [msgspec.json.decode(i.raw) for i in items]
    finally:
        await client.close()
    assert sorted(n["metadata"]["name"] for n in nodes) == ["node-0001", "node-0002", "node-0003"]
    for node in nodes:
        conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conditions["Ready"] == "True"
        assert not [t for t in node["spec"].get("taints", []) if t["key"] == "node.kubernetes.io/not-ready"]
        assert node["status"]["allocatable"]["cpu"] == "8"


async def test_pod_bound_to_a_kwok_node_runs(kube_control_plane: ControlPlane) -> None:
    client = KubeClient(KubeConfig.load(str(kube_control_plane.kubeconfig)))
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bound", "namespace": "default"},
        "spec": {"nodeName": "node-0002", "containers": [{"name": "c", "image": "busybox"}]},
    }
    try:
        await client.create("pods", "default", pod)
        phase = ""
        deadline = time.monotonic() + DEADLINE
        while phase != "Running" and time.monotonic() < deadline:
            got = msgspec.json.decode(await client.get("pods", "default", "bound"))
            phase = got.get("status", {}).get("phase", "")
            await asyncio.sleep(0.2)
    finally:
        await client.close()
    assert phase == "Running"
    assert got["spec"]["nodeName"] == "node-0002"
