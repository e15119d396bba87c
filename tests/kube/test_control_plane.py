"""The control plane that ``lahar kube up`` starts: KWOK nodes turn Ready, pods bound to them run."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec

from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.kube.control_plane import ControlPlane
from lahar.kube.pytest_plugin import SESSION_NODES
from lahar.sim.nodes import build_nodes, parse_spec

DEADLINE = 60.0


async def test_kwok_nodes_are_ready_and_untainted(kube_control_plane: ControlPlane) -> None:
    client = KubeClient(KubeConfig.load(str(kube_control_plane.kubeconfig)))
    try:
        items, _ = await client.list("nodes")
        nodes = [msgspec.json.decode(i.raw) for i in items]
    finally:
        await client.close()
    expected = build_nodes(parse_spec(s) for s in SESSION_NODES)
    assert sorted(n["metadata"]["name"] for n in nodes) == sorted(n["metadata"]["name"] for n in expected)
    for node, want in zip(sorted(nodes, key=_name), sorted(expected, key=_name), strict=True):
        conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conditions["Ready"] == "True"
        assert not [t for t in node["spec"].get("taints", []) if t["key"] == "node.kubernetes.io/not-ready"]
        assert node["status"]["allocatable"]["cpu"] == want["status"]["allocatable"]["cpu"]
        assert node["spec"].get("taints", []) == want["spec"].get("taints", [])


def _name(node: dict[str, Any]) -> str:
    return str(node["metadata"]["name"])


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
