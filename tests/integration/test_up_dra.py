"""DRA end to end on ``lahar up``'s own stack (LocalStack: the emulator, cache, scheduler and
binder as processes, the scheduler with ``predicate.DynamicResourceAllocationEnable``): a pod
whose ResourceClaim asks for an a100 lands on the node whose ResourceSlice publishes one (not on
the node with a t4), and the claim carries the allocation and the pod in ``reservedFor``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.e2e.workload import ensure_queues
from lahar.up.stack import LocalStack, StackConfig

from .services import poll
from .test_distributed import podgroup
from .test_dra_live import CONF, DRIVER, claim, claiming_pod, device_class, resource_slice

pytestmark = pytest.mark.asyncio


async def test_a_claim_is_allocated_and_written_on_lahar_up(tmp_path: Path, lahar_infra: Any) -> None:
    conf = tmp_path / "scheduler.conf"
    conf.write_text(CONF)
    cfg = StackConfig(
        state_dir=tmp_path / "s",
        nats_url=lahar_infra.nats_url,
        nats_ca=lahar_infra.nats_ca,
        redis_url=lahar_infra.redis_url,
        prefix="updra",
        nodes=("2:cpu=8,memory=16Gi,name=g",),
        binders=1,
        max_binders=1,
        period=0.3,
        admission=False,
        scheduler_conf=str(conf),
    )
    stack = LocalStack(cfg).start(timeout=120)
    kube = KubeClient(KubeConfig.load(stack.kubeconfig))
    ns = "default"
    try:
        await ensure_queues(kube, {"default": 1})
        await kube.create("deviceclasses", "", device_class(DRIVER))
        await kube.create("resourceslices", "", resource_slice("g-0001", "t4"))
        await kube.create("resourceslices", "", resource_slice("g-0002", "a100"))
        await kube.create("resourceclaims", ns, claim(ns, "big", DRIVER, "a100"))
        await kube.create("podgroups", ns, podgroup(ns, "one", 1))
        await kube.create("pods", ns, claiming_pod(ns, "trainer", "one", "big"))

        async def bound() -> dict[str, Any] | None:
            got = json.loads(await kube.get("pods", ns, "trainer"))
            return got if got["spec"].get("nodeName") else None

        pod = await poll(bound, 90, interval=0.2)
        claimed = json.loads(await kube.get("resourceclaims", ns, "big"))
    finally:
        await kube.close()
        stack.stop()
    assert pod["spec"]["nodeName"] == "g-0002"
    results = claimed["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"], r["device"]) for r in results] == [(DRIVER, "g-0002", "gpu-0")]
    assert claimed["status"]["reservedFor"] == [{"resource": "pods", "name": "trainer", "uid": pod["metadata"]["uid"]}]
