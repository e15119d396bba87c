"""The binder's claim writes (lahar_binder.claims) against the emulator, case by case as
kube-scheduler's DynamicResources PreBind (bindClaim) behaves: the finalizer by an ordinary
update, then allocation and reservation by one status update; a repeat is a no-op; a claim
allocated to other devices meanwhile, deleted, missing or never allocated is refused; a stale
read is read again."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from lahar.adapters.kube import KubeClient
from lahar.sim import Emulator
from lahar.wire.messages import ClaimAllocation
from lahar_binder.claims import FINALIZER, ClaimRefused, reserve_claims, unreserve_claims

from .services import kube_for

pytestmark = pytest.mark.asyncio

DRIVER = "gpu.example.com"


def allocation(device: str) -> dict[str, Any]:
    return {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": device}]}}


def ours(device: str) -> ClaimAllocation:
    return ClaimAllocation(name="c", allocation=msgspec.Raw(json.dumps(allocation(device)).encode()))


async def new_claim(kube: KubeClient, ns: str) -> dict[str, str]:
    """Claim ``c``, and pods p1..p3 to reserve it for (their uids): the resourceclaim controller
    drops a reservation for a pod that does not exist."""
    await kube.create("namespaces", "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    request = {"name": "gpu", "exactly": {"deviceClassName": DRIVER}}
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}}
    await kube.create("resourceclaims", ns, {**body, "spec": {"devices": {"requests": [request]}}})
    uids = {}
    for name in ("p1", "p2", "p3"):
        pod = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
        uids[name] = json.loads(await kube.create("pods", ns, pod))["metadata"]["uid"]
    return uids


async def read(kube: KubeClient, ns: str) -> dict[str, Any]:
    return json.loads(await kube.get("resourceclaims", ns, "c"))  # type: ignore[no-any-return]


async def test_allocation_and_reservation_are_written_once(sim: Emulator) -> None:
    kube, ns = kube_for(sim.url), "claims-a"
    try:
        u = await new_claim(kube, ns)
        await reserve_claims(kube, ns, "p1", u["p1"], [ours("g0")])
        got = await read(kube, ns)
        assert got["metadata"]["finalizers"] == [FINALIZER]
        assert got["status"] == {
            "allocation": allocation("g0"),
            "reservedFor": [{"resource": "pods", "name": "p1", "uid": u["p1"]}],
        }
        rv = got["metadata"]["resourceVersion"]
        # A redelivered decision: the pod is already reserved, nothing is written.
        await reserve_claims(kube, ns, "p1", u["p1"], [ours("g0")])
        assert (await read(kube, ns))["metadata"]["resourceVersion"] == rv
        # Another pod sharing the allocated claim joins reservedFor only.
        await reserve_claims(kube, ns, "p2", u["p2"], [ClaimAllocation(name="c")])
        assert [r["name"] for r in (await read(kube, ns))["status"]["reservedFor"]] == ["p1", "p2"]
        # Someone else's allocation of other devices is not overwritten.
        with pytest.raises(ClaimRefused, match="got allocated elsewhere in the meantime"):
            await reserve_claims(kube, ns, "p3", u["p3"], [ours("g1")])
    finally:
        await kube.close()


async def test_refusals(sim: Emulator) -> None:
    kube, ns = kube_for(sim.url), "claims-b"
    try:
        u = await new_claim(kube, ns)
        with pytest.raises(ClaimRefused, match="is not allocated"):
            await reserve_claims(kube, ns, "p1", u["p1"], [ClaimAllocation(name="c")])
        with pytest.raises(ClaimRefused, match='resourceclaim "nope" not found'):
            await reserve_claims(kube, ns, "p1", u["p1"], [ClaimAllocation(name="nope")])
        # Being deleted (held by its finalizer): kube-scheduler's "got deleted in the meantime".
        await kube.patch("resourceclaims", ns, "c", {"metadata": {"finalizers": ["example.com/hold"]}})
        await kube.delete("resourceclaims", ns, "c")
        with pytest.raises(ClaimRefused, match="got deleted in the meantime"):
            await reserve_claims(kube, ns, "p1", u["p1"], [ours("g0")])
    finally:
        await kube.close()


async def test_a_stale_read_is_read_again(sim: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    kube, ns = kube_for(sim.url), "claims-c"
    try:
        u = await new_claim(kube, ns)
        real_get = kube.get
        calls = 0

        async def get_then_touch(kind: str, namespace: str, name: str) -> bytes:
            # Another writer changes the claim right after each of our first two reads.
            nonlocal calls
            raw = await real_get(kind, namespace, name)
            calls += 1
            if calls <= 2:
                await kube.patch("resourceclaims", ns, "c", {"metadata": {"labels": {"touched": str(calls)}}})
            return raw

        monkeypatch.setattr(kube, "get", get_then_touch)
        await reserve_claims(kube, ns, "p1", u["p1"], [ours("g0")])
        got = await read(kube, ns)
        assert calls == 4  # 2 conflicts, the write, and our read above
        assert got["status"]["allocation"] == allocation("g0")
        assert got["metadata"]["labels"] == {"touched": "2"}
    finally:
        await kube.close()


async def test_a_failed_bind_takes_the_pod_out_of_reserved_for(sim: Emulator) -> None:
    # kube-scheduler's Unreserve: the pod's entry goes, the allocation stays (the controller
    # deallocates only claims whose consumers it removed itself).
    kube, ns = kube_for(sim.url), "claims-d"
    try:
        u = await new_claim(kube, ns)
        await reserve_claims(kube, ns, "p1", u["p1"], [ours("g0")])
        await reserve_claims(kube, ns, "p2", u["p2"], [ClaimAllocation(name="c")])
        await unreserve_claims(kube, ns, u["p1"], ["c", "missing"])
        assert [r["uid"] for r in (await read(kube, ns))["status"]["reservedFor"]] == [u["p2"]]
        await unreserve_claims(kube, ns, u["p2"], ["c"])
        assert (await read(kube, ns))["status"] == {"allocation": allocation("g0")}
    finally:
        await kube.close()


async def test_the_binder_reserves_before_binding_and_unreserves_when_the_bind_conflicts(sim: Emulator) -> None:
    """BinderService._bind with claims: reserve, then bind; a pod already bound elsewhere is a
    conflict, and the pod leaves the claim's reservedFor again (kube-scheduler's Unreserve, which
    Volcano runs as the predicates plugin's PreBindRollBack after a failed bind: volcano
    pkg/scheduler/plugins/predicates/predicates_test.go TestReserveRollbackOrderStable)."""
    from typing import cast

    from nats.js.client import JetStreamContext
    from prometheus_client import CollectorRegistry

    from lahar.wire.messages import BindItem, Binds
    from lahar.wire.names import Names
    from lahar_binder.service import BinderService

    kube, ns = kube_for(sim.url), "claims-e"
    # No NATS: _bind makes API calls only (the events it records wait in their queue).
    binder = BinderService(kube, cast(JetStreamContext, None), Names("t"), CollectorRegistry())
    try:
        await new_claim(kube, ns)
        spec = {
            "containers": [{"name": "c", "image": "x"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
        }
        free = json.loads(await kube.create("pods", ns, {"metadata": {"name": "free"}, "spec": spec}))
        taken = {"metadata": {"name": "taken"}, "spec": {**spec, "nodeName": "elsewhere"}}
        taken = json.loads(await kube.create("pods", ns, taken))
        item = BindItem(namespace=ns, name="taken", uid=taken["metadata"]["uid"], node="n-1", claims=[ours("g0")])
        got = await binder._bind(Binds(id="b1", items=[item]), item, None)
        assert got is not None and got.outcome == "conflict"
        assert (await read(kube, ns))["status"] == {"allocation": allocation("g0")}  # reserved, then not

        item = BindItem(namespace=ns, name="free", uid=free["metadata"]["uid"], node="n-1", claims=[ours("g0")])
        got = await binder._bind(Binds(id="b2", items=[item]), item, None)
        assert got is not None and got.outcome == "done"
        status = (await read(kube, ns))["status"]
        assert status["reservedFor"] == [{"resource": "pods", "name": "free", "uid": free["metadata"]["uid"]}]
        assert json.loads(await kube.get("pods", ns, "free"))["spec"]["nodeName"] == "n-1"
    finally:
        await kube.close()


async def test_a_refused_claim_rolls_back_the_ones_written_before_it(sim: Emulator) -> None:
    # Volcano's executePreBind rolls back what PreBind did when it fails (volcano
    # pkg/scheduler/cache/cache_test.go TestExecutePreBinds "multiple pre-binders with one
    # failure": the pod is not bound): the first claim was reserved for the pod, the second is
    # missing, so the pod leaves the first again.
    from typing import cast

    from nats.js.client import JetStreamContext
    from prometheus_client import CollectorRegistry

    from lahar.wire.messages import BindItem, Binds
    from lahar.wire.names import Names
    from lahar_binder.service import BinderService

    kube, ns = kube_for(sim.url), "claims-f"
    binder = BinderService(kube, cast(JetStreamContext, None), Names("t"), CollectorRegistry())
    try:
        await new_claim(kube, ns)
        claims = [{"name": "a", "resourceClaimName": "c"}, {"name": "b", "resourceClaimName": "gone"}]
        spec = {"containers": [{"name": "c", "image": "x"}], "resourceClaims": claims}
        p = json.loads(await kube.create("pods", ns, {"metadata": {"name": "p"}, "spec": spec}))
        wanted = [ours("g0"), ClaimAllocation(name="gone", allocation=ours("g1").allocation)]
        item = BindItem(namespace=ns, name="p", uid=p["metadata"]["uid"], node="n-1", claims=wanted)
        got = await binder._bind(Binds(id="b", items=[item]), item, None)
        assert got is not None and got.outcome == "failed" and 'resourceclaim "gone" not found' in got.message
        assert (await read(kube, ns))["status"] == {"allocation": allocation("g0")}
        assert not json.loads(await kube.get("pods", ns, "p"))["spec"].get("nodeName")
    finally:
        await kube.close()
