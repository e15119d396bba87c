"""DRA in the running scheduler: resource.k8s.io deltas into the live snapshot, claim allocations
in the bind decision (the wire fields, old messages still decoding), and allocations the
scheduler decided held as assumed until the claim shows them or the bind is rolled back.

Expectations follow kube-scheduler's DynamicResources plugin (Reserve assumes the allocated claim
in its assume cache until the informer shows it; Unreserve drops it; PreBind writes it), which
Volcano's predicates plugin runs when predicate.DynamicResourceAllocationEnable is set.
"""

from __future__ import annotations

from typing import Any

import msgspec
from test_dra import DRA_TIER, GPU_CLASS, base, claim, claim_pod, resource_slice

from builders import binds, make_conf
from lahar.api.codec import to_json
from lahar.wire.messages import BindItem, Binds, ClaimAllocation, Delta, Result, decode_decision, encode
from lahar_scheduler.core import run_session
from lahar_scheduler.decisions import Sent, decisions
from lahar_scheduler.live import LiveView

KINDS = {
    "Node": "nodes",
    "Pod": "pods",
    "PodGroup": "podgroups",
    "Queue": "queues",
    "ResourceClaim": "resourceclaims",
    "ResourceSlice": "resourceslices",
    "DeviceClass": "deviceclasses",
}
CONF = make_conf("allocate", DRA_TIER)


def delta(obj: Any, op: str = "ADDED") -> Delta:
    kind = KINDS[obj.kind]
    ns = obj.metadata.namespace
    key = f"{ns}/{obj.metadata.name}" if ns else obj.metadata.name
    raw = msgspec.Raw(b"null") if op == "DELETED" else msgspec.Raw(to_json(obj))
    return Delta(kind=kind, op=op, key=key, rv="1", obj=raw)  # type: ignore[arg-type]


def live(*objs: Any) -> LiveView:
    view = LiveView()
    for obj in objs:
        view.apply(delta(obj))
    return view


def one_gpu_cluster(*pods: Any) -> LiveView:
    """Node n1 with one device; claims claim1 and claim2 each want one."""
    return live(
        *base(GPU_CLASS, claim("claim1", "gpu.example.com"), claim("claim2", "gpu.example.com")),
        resource_slice("n1-slice", "n1", "gpu-1"),
        *pods,
    )


def test_dra_deltas_fill_the_snapshot_and_wake_waiting_pods() -> None:
    view = one_gpu_cluster()
    dra = view.snapshot.dra
    assert set(dra.claims) == {"c1/claim1", "c1/claim2"}
    assert [s.metadata.name for s in dra.slices] == ["n1-slice"]
    assert set(dra.classes) == {"gpu.example.com"}
    # A slice replaced in place keeps its position (the allocator picks devices in slice order).
    view.apply(delta(resource_slice("n0-slice", "n1", "gpu-0")))
    change = view.apply(delta(resource_slice("n1-slice", "n1", "gpu-1", "gpu-2"), "MODIFIED"))
    assert change.pending  # new devices may let a waiting pod fit
    assert [(s.metadata.name, len(s.spec.devices)) for s in dra.slices] == [("n1-slice", 2), ("n0-slice", 1)]
    view.apply(delta(resource_slice("n0-slice", "n1", "gpu-0"), "DELETED"))
    view.apply(delta(claim("claim2", "gpu.example.com"), "DELETED"))
    view.apply(delta(GPU_CLASS, "DELETED"))
    assert [s.metadata.name for s in dra.slices] == ["n1-slice"]
    assert set(dra.claims) == {"c1/claim1"} and not dra.classes


def _session(view: LiveView) -> Any:
    result = run_session(view.snapshot, CONF)
    out = decisions(result, "s1", 1, Sent(), "now", snapshot=view.snapshot)
    return result, out


def test_the_bind_carries_the_allocation_and_the_next_session_holds_the_device() -> None:
    # TestAllocateWithDRA "Allocate normal resourceClaim successfully", then a second pod for a
    # second claim: the only device is held by the first claim's assumed allocation, as
    # kube-scheduler's assume cache holds it until the informer sees the PreBind write.
    view = one_gpu_cluster(claim_pod("p1", "pg1", "claim1"))
    result, out = _session(view)
    assert binds(result) == {"c1/p1": "n1"}
    [item] = out.binds[0].items
    [written] = item.claims
    assert written.name == "claim1"
    allocation = msgspec.json.decode(written.allocation)
    assert allocation["devices"]["results"] == [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "n1-pool", "device": "gpu-1"}
    ]
    assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n1"]
    view.assume(out.binds)
    assert set(view.snapshot.dra.assumed) == {"c1/claim1"}

    view.apply(delta(claim_pod("p2", "pg2", "claim2")))
    view.apply(delta(_podgroup("pg2")))
    result, _ = _session(view)
    assert binds(result) == {}  # gpu-1 is taken by claim1's assumed allocation


def test_the_claim_showing_its_allocation_ends_the_assumption() -> None:
    view = one_gpu_cluster(claim_pod("p1", "pg1", "claim1"))
    _, out = _session(view)
    view.assume(out.binds)
    allocated = claim("claim1", "gpu.example.com")
    [written] = out.binds[0].items[0].claims
    status = msgspec.json.decode(to_json(allocated))
    status["status"] = {"allocation": msgspec.json.decode(written.allocation)}
    allocated = msgspec.json.decode(msgspec.json.encode(status), type=type(allocated))
    view.apply(delta(allocated, "MODIFIED"))
    assert not view.snapshot.dra.assumed
    assert view.snapshot.dra.allocation("c1/claim1") is not None  # on the claim itself now


def test_a_failed_bind_gives_the_device_back() -> None:
    # kube-scheduler's Unreserve: the claim's pending allocation is dropped.
    view = one_gpu_cluster(claim_pod("p1", "pg1", "claim1"))
    _, out = _session(view)
    view.assume(out.binds)
    rolled_back = view.result(Result(id="b", kind="bind", namespace="c1", name="p1", outcome="failed", node="n1"))
    assert rolled_back
    assert not view.snapshot.dra.assumed
    assert view.snapshot.dra.allocation("c1/claim1") is None


def test_the_assumption_survives_a_reload_from_the_mirror() -> None:
    from lahar.adapters.mirror import MirrorState

    objs = [*base(GPU_CLASS, claim("claim1", "gpu.example.com")), resource_slice("n1-slice", "n1", "gpu-1")]
    objs.append(claim_pod("p1", "pg1", "claim1"))
    view = live(*objs)
    _, out = _session(view)
    view.assume(out.binds)
    state = MirrorState(seq=0, stream="s", objects={})
    for obj in objs:
        d = delta(obj)
        state.objects.setdefault(d.kind, {})[d.key] = bytes(d.obj)
    view.load(state, now=0.0)
    assert set(view.snapshot.dra.assumed) == {"c1/claim1"}


def test_an_already_allocated_claim_only_reserves_the_pod() -> None:
    # A claim allocated earlier (shared by pods): PreBind adds the pod to reservedFor only.
    view = one_gpu_cluster()
    held = msgspec.json.decode(to_json(claim("claim1", "gpu.example.com")))
    results = [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1-pool", "device": "gpu-1"}]
    held["status"] = {"allocation": {"devices": {"results": results}}}
    view.apply(
        Delta(kind="resourceclaims", op="MODIFIED", key="c1/claim1", rv="2", obj=msgspec.Raw(msgspec.json.encode(held)))
    )
    view.apply(delta(claim_pod("p1", "pg1", "claim1")))
    result, out = _session(view)
    assert binds(result) == {"c1/p1": "n1"}
    [written] = out.binds[0].items[0].claims
    assert written == ClaimAllocation(name="claim1")


def test_bind_messages_without_claims_decode_as_before() -> None:
    old = b'{"type":"binds","v":1,"id":"x","items":[{"namespace":"a","name":"p","node":"n1"}]}'
    got = decode_decision(old)
    assert isinstance(got, Binds) and got.items[0].claims == []
    allocation = msgspec.Raw(b'{"devices":{"results":[]}}')
    item = BindItem(namespace="a", name="p", node="n1", claims=[ClaimAllocation(name="c", allocation=allocation)])
    again = decode_decision(encode(Binds(id="x", items=[item])))
    assert isinstance(again, Binds)
    assert bytes(again.items[0].claims[0].allocation) == bytes(allocation)
    assert b"claims" not in encode(Binds(id="x", items=[BindItem(namespace="a", name="p", node="n1")]))


def _podgroup(name: str) -> Any:
    from builders import podgroup

    return podgroup(name, "c1", queue="c1", min_member=1)


def test_a_deallocated_claim_wakes_the_scheduler() -> None:
    # The resourceclaim controller deallocates a claim whose pods are gone: its devices are free,
    # so the delta counts as freed room (a session starts early), as a pod leaving its node does.
    view = one_gpu_cluster()
    held = msgspec.json.decode(to_json(claim("claim1", "gpu.example.com")))
    results = [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1-pool", "device": "gpu-1"}]
    held["status"] = {"allocation": {"devices": {"results": results}}}
    raw = msgspec.Raw(msgspec.json.encode(held))
    allocated = view.apply(Delta(kind="resourceclaims", op="MODIFIED", key="c1/claim1", rv="2", obj=raw))
    assert allocated.relevant and not allocated.freed and not allocated.pending
    released = view.apply(delta(claim("claim1", "gpu.example.com"), "MODIFIED"))
    assert released.freed and view.snapshot.dra.allocation("c1/claim1") is None
