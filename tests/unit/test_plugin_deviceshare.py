"""deviceshare: gpushare (memory, number) and vGPU fit, scores, card choice and its undo.

Expectations come from Volcano's tests at ed72c7c8 (each cites its test and case) and, where
Volcano has no test, from its code read by hand (the comment says which function).
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest

from builders import GROUP, _decode, binds, make_conf, node, open_session, pod, podgroup, queue, run, task
from lahar.api.codec import to_builtins
from lahar.api.objects import Node, Pod
from lahar.wire.messages import BindItem
from lahar_scheduler.core import load_conf
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.conf import ConfError
from lahar_scheduler.framework.devices import GPU_INDEX, VGPU_IDS, VGPU_PODGROUP_POLICY, VGPU_REGISTER
from lahar_scheduler.framework.types import TaskStatus

S = TaskStatus
SHARE = {"name": "deviceshare", "arguments": {"deviceshare.GPUSharingEnable": True}}
NUMBER = {"name": "deviceshare", "arguments": {"deviceshare.GPUNumberEnable": True}}


def vgpu_conf_plugin(policy: str = "binpack", weight: int = 10) -> dict[str, Any]:
    args = {"deviceshare.VGPUEnable": True, "deviceshare.SchedulePolicy": policy, "deviceshare.ScheduleWeight": weight}
    return {"name": "deviceshare", "arguments": args}


def conf(plugin: dict[str, Any], actions: str = "allocate") -> Any:
    return make_conf(actions, [{"name": "gang"}], [{"name": "predicates"}, plugin])


def with_limits(p: Pod, limits: dict[str, str]) -> Pod:
    """The pod with ``limits`` on its container (and the same requests, as the API server defaults)."""
    raw = to_builtins(p)
    ctr = raw["spec"]["containers"][0]
    ctr.setdefault("resources", {})["limits"] = dict(limits)
    ctr["resources"].setdefault("requests", {}).update(limits)
    return _decode(raw)  # type: ignore[no-any-return]


def gpu_node(name: str, cards: int, memory: int, annotations: dict[str, str] | None = None) -> Node:
    """A node as Volcano's device plugin publishes it: gpu-memory total and gpu-number."""
    n = node(
        name,
        cpu="16",
        memory="64Gi",
        extra={"volcano.sh/gpu-memory": str(cards * memory), "volcano.sh/gpu-number": str(cards)},
    )
    raw = to_builtins(n)
    raw["metadata"]["annotations"] = dict(annotations or {})
    return _decode(raw)  # type: ignore[no-any-return]


def vgpu_node(name: str, cards: list[tuple[str, int, int]]) -> Node:
    """HAMi's register annotation: ``uuid,count,memory,type,health,mode`` per card."""
    register = "".join(f"{uuid},{count},{mem},NVIDIA-A100,true,hami-core:" for uuid, count, mem in cards)
    extra = {
        "volcano.sh/vgpu-number": str(sum(c for _, c, _ in cards)),
        "volcano.sh/vgpu-memory": str(sum(m for *_, m in cards)),
        "volcano.sh/vgpu-cores": str(100 * len(cards)),
    }
    n = node(name, cpu="16", memory="64Gi", extra=extra)
    raw = to_builtins(n)
    raw["metadata"]["annotations"] = {VGPU_REGISTER: register}
    return _decode(raw)  # type: ignore[no-any-return]


def share_pod(
    name: str, mem: int, *, group: str = "pg", node_name: str = "", index: str = "", phase: str = "Pending"
) -> Pod:
    annotations = {GPU_INDEX: index} if index else {}
    p = pod(name, group=group, cpu="1", memory="1Gi", node_name=node_name, phase=phase, annotations=annotations)
    return with_limits(p, {"volcano.sh/gpu-memory": str(mem)})


def base(min_member: int = 1) -> list[Any]:
    return [queue("q"), podgroup("pg", queue="q", min_member=min_member)]


# -- arguments ------------------------------------------------------------------------------------
def test_arguments_take_volcanos_names() -> None:
    # volcano pkg/scheduler/plugins/deviceshare/deviceshare_test.go TestArguments
    c = load_conf(
        "actions: allocate\ntiers:\n- plugins:\n  - name: deviceshare\n    arguments:\n"
        "      deviceshare.VGPUEnable: true\n      deviceshare.SchedulePolicy: binpack\n"
        "      deviceshare.ScheduleWeight: 10\n"
    )
    args = c.tiers[0].plugins[0].arguments
    assert (args.weight, args.policy, args.vgpu) == (10, "binpack", True)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        # volcano deviceshare.go enablePredicate: klog.Fatal on both, and on gpu-share with vgpu
        ({"deviceshare.GPUSharingEnable": True, "deviceshare.GPUNumberEnable": True}, "GPUNumberEnable"),
        ({"deviceshare.GPUSharingEnable": True, "deviceshare.VGPUEnable": True}, "VGPUEnable"),
        ({"deviceshare.ScheduleWeight": "x"}, "ScheduleWeight"),
        ({"deviceshare.Nope": 1}, "Nope"),
    ],
)
def test_bad_arguments_name_the_field(arguments: dict[str, Any], field: str) -> None:
    text = (
        "actions: allocate\ntiers:\n- plugins:\n  - name: deviceshare\n    arguments: "
        + msgspec.json.encode(arguments).decode()
    )
    with pytest.raises(ConfError) as err:
        load_conf(text)
    assert f"deviceshare.{field}" in str(err.value)


# -- gpushare by memory -----------------------------------------------------------------------------
def test_over_subscribed_card_offers_no_memory() -> None:
    # volcano api/devices/nvidia/gpushare/share_test.go TestPredicateGPUbyMemory_OverSubscribedCardNotOffered:
    # one 1000 card held by a 3000 pod (its own gpu-index) offers nothing to a 500 pod.
    objs = [
        *base(),
        gpu_node("n1", 1, 1000),
        share_pod("held", 3000, node_name="n1", index="0", phase="Running"),
        share_pod("new", 500),
    ]
    ssn = open_session(objs, conf(SHARE))
    t = task(ssn, "default/new")
    got = ssn.call(P.PREDICATE, t, np.arange(1))
    assert list(got.passed) == []
    assert "GpuShare no enough gpu memory (asks 500 on one card, the freest card has 0)" in got.errors.reasons
    # getDevicesIdleGPUMemory clamps at zero instead of wrapping
    # (share_test.go TestGetDevicesIdleGPUMemory_OverSubscribedCardReportsZero)
    assert ssn.nodes.devices.share_idle(np.array([0]))[0, 0] == 0


def test_two_pods_share_the_lowest_card_with_room() -> None:
    # gpushare Allocate: predicateGPUbyMemory lists cards with room in id order, ids[0] is taken.
    objs = [*base(2), gpu_node("n1", 2, 8000), share_pod("a-0", 4000), share_pod("a-1", 4000)]
    result = run(objs, conf(SHARE))
    placed = {t.key: (n, t.card_annotations) for t, n in result.binds}
    assert {k: (n, a[GPU_INDEX]) for k, (n, a) in placed.items() if a} == {
        "default/a-0": ("n1", "0"),
        "default/a-1": ("n1", "0"),
    }
    assert all("volcano.sh/predicate-time" in a for _, a in placed.values() if a)


def test_card_with_room_is_found_past_a_full_one() -> None:
    objs = [
        *base(),
        gpu_node("n1", 2, 8000),
        share_pod("held", 6000, group="other", node_name="n1", index="0", phase="Running"),
        share_pod("new", 4000),
    ]
    result = run([*objs, podgroup("other", queue="q", min_member=1, phase="Running")], conf(SHARE))
    ((t, n),) = result.binds
    assert (n, t.card_annotations and t.card_annotations[GPU_INDEX]) == ("n1", "1")


def test_node_without_cards_passes_the_filter() -> None:
    # deviceshare.go PredicateFn: a node whose Others holds no such device is skipped ("assertion
    # conversion failed"), so the plugin passes it; the resource fit then refuses gpu-memory.
    objs = [*base(), node("plain"), share_pod("p", 1000)]
    ssn = open_session(objs, conf(SHARE))
    assert list(ssn.call(P.PREDICATE, task(ssn, "default/p"), np.arange(1)).passed) == [0]
    assert binds(run(objs, conf(SHARE))) == {}


def test_unhealthy_cards_are_left_out() -> None:
    # gpushare NewGPUDevices: ids in volcano.sh/gpu-unhealthy-ids are deleted from the device map
    objs = [*base(), gpu_node("n1", 2, 8000, {"volcano.sh/gpu-unhealthy-ids": "0"}), share_pod("p", 1000)]
    ((t, _),) = run(objs, conf(SHARE)).binds
    assert t.card_annotations == {"volcano.sh/predicate-time": "0", GPU_INDEX: "1"}


def test_discarded_gang_gives_its_cards_back() -> None:
    # Statement.Discard un-allocates: the card ledger must be as before (gang of 3, room for 2).
    objs = [*base(3), gpu_node("n1", 1, 8000), *(share_pod(f"g-{i}", 4000) for i in range(3))]
    ssn = open_session(objs, conf(SHARE))
    from lahar_scheduler.actions import ACTIONS

    ACTIONS["allocate"]().execute(ssn)
    assert not ssn.result.binds
    assert ssn.nodes.devices.share_used[0, 0] == 0 and ssn.nodes.devices.share_pods[0, 0] == 0
    assert all(task(ssn, f"default/g-{i}").card_annotations is None for i in range(3))


def test_eviction_frees_the_card_and_discard_restores_it() -> None:
    # NodeInfo.AddTask: a Releasing task holds no devices; Statement.Discard puts it back Running.
    objs = [
        *base(),
        podgroup("run", queue="q", min_member=1, phase="Running"),
        gpu_node("n1", 1, 8000),
        share_pod("victim", 6000, group="run", node_name="n1", index="0", phase="Running"),
    ]
    ssn = open_session(objs, conf(SHARE))
    dev = ssn.nodes.devices
    assert dev.share_used[0, 0] == 6000
    stmt = ssn.statement()
    stmt.evict(task(ssn, "default/victim"), "test")
    assert dev.share_used[0, 0] == 0 and dev.share_pods[0, 0] == 0
    stmt.discard()
    assert dev.share_used[0, 0] == 6000 and dev.share_pods[0, 0] == 1


# -- gpushare by number ---------------------------------------------------------------------------------
def test_gpu_number_takes_idle_cards() -> None:
    # gpushare predicateGPUbyNumber: cards no pod holds; fewer than asked = no fit.
    held = with_limits(
        pod("held", group="other", cpu="1", node_name="n1", phase="Running", annotations={GPU_INDEX: "0,1"}),
        {"volcano.sh/gpu-number": "2"},
    )
    three = with_limits(pod("three", group="pg", cpu="1"), {"volcano.sh/gpu-number": "3"})
    objs = [*base(), podgroup("other", queue="q", min_member=1, phase="Running"), gpu_node("n1", 4, 8000), held, three]
    ssn = open_session(objs, conf(NUMBER))
    got = ssn.call(P.PREDICATE, task(ssn, "default/three"), np.arange(1))
    assert dict(got.errors.reasons) == {"GpuNumber no enough gpu number (asks 3 whole card(s), 2 free)": 1}
    two = with_limits(pod("two", group="pg", cpu="1"), {"volcano.sh/gpu-number": "2"})
    objs[-1] = two
    ((t, _n),) = run(objs, conf(NUMBER)).binds
    assert t.card_annotations is not None and t.card_annotations[GPU_INDEX] == "2,3"


# -- vGPU --------------------------------------------------------------------------------------------------
def vgpu_pod(
    name: str,
    *,
    number: str = "1",
    memory: str | None = None,
    cores: str | None = None,
    group: str = "pg",
    annotations: dict[str, str] | None = None,
    node_name: str = "",
    phase: str = "Pending",
) -> Pod:
    limits = {"volcano.sh/vgpu-number": number}
    if memory is not None:
        limits["volcano.sh/vgpu-memory"] = memory
    if cores is not None:
        limits["volcano.sh/vgpu-cores"] = cores
    p = pod(name, group=group, cpu="1", memory="1Gi", annotations=annotations, node_name=node_name, phase=phase)
    return with_limits(p, limits)


def test_vgpu_binpack_score() -> None:
    # volcano deviceshare_test.go TestVgpuScore, binpack: a 30000 card with 3000 used; after the
    # 1000 ask, 4000/30000 × 100 = 13.33 → floor(13.33 + 0.5) = 13, × ScheduleWeight 10.
    held = vgpu_pod(
        "held",
        memory="3000",
        group="other",
        node_name="n1",
        phase="Running",
        annotations={VGPU_IDS: "GPU-0,NVIDIA,3000,0:"},
    )
    objs = [
        *base(),
        podgroup("other", queue="q", min_member=1, phase="Running"),
        vgpu_node("n1", [("GPU-0", 10, 30000)]),
        vgpu_node("n2", [("GPU-1", 10, 30000)]),
        held,
        vgpu_pod("p3", memory="1000"),
    ]
    ssn = open_session(objs, make_conf("allocate", [{"name": "predicates"}, vgpu_conf_plugin("binpack", 10)]))
    got = ssn.call(P.NODE_ORDER, task(ssn, "default/p3"), np.arange(2))
    assert list(got) == [130.0, 30.0]  # n2: 1000/30000 × 100 = 3.33 → 3


def test_vgpu_spread_score_is_taken_after_the_add() -> None:
    # TestVgpuScore, spread: GPUScore reads UsedNum after TryAddPod, so an idle card scores 0 (the
    # test bounds it only from above by 100).
    objs = [*base(), vgpu_node("n2", [("GPU-0", 10, 30000)]), vgpu_pod("p4", memory="1000")]
    ssn = open_session(objs, make_conf("allocate", [{"name": "predicates"}, vgpu_conf_plugin("spread", 10)]))
    assert list(ssn.call(P.NODE_ORDER, task(ssn, "default/p4"), np.arange(1))) == [0.0]


def test_vgpu_three_cards_of_different_memory_fit() -> None:
    # volcano deviceshare_test.go Test_FilterNode "case0, should allocated 3 card with diff memory for pod"
    objs = [
        *base(),
        vgpu_node("n1", [("A", 10, 30000), ("B", 10, 20000), ("C", 10, 30000)]),
        vgpu_pod("p1", number="3", cores="100"),
    ]
    ssn = open_session(objs, make_conf("allocate", [{"name": "predicates"}, vgpu_conf_plugin()]))
    assert list(ssn.call(P.PREDICATE, task(ssn, "default/p1"), np.arange(1)).passed) == [0]
    four = [*objs[:-1], vgpu_pod("p1", number="4", cores="100")]
    ssn = open_session(four, make_conf("allocate", [{"name": "predicates"}, vgpu_conf_plugin()]))
    assert dict(ssn.call(P.PREDICATE, task(ssn, "default/p1"), np.arange(1)).errors.reasons) == {
        "hami-vgpuDeviceSharing error": 1
    }


def test_vgpu_podgroup_spread_keeps_a_gang_apart() -> None:
    # volcano api/devices/nvidia/vgpu/spread_integration_test.go TestSpreadPreventsCoLocation and
    # TestBinpackAllowsCoLocation: 2 cards of 16384, 4 shares each, two 4096 pods of one PodGroup.
    cards = [("GPU-0000A", 4, 16384), ("GPU-0000B", 4, 16384)]
    for spread, expected in ((True, {"GPU-0000A", "GPU-0000B"}), (False, {"GPU-0000A"})):
        ann = {VGPU_PODGROUP_POLICY: "spread"} if spread else {}
        objs = [
            *base(2),
            vgpu_node("n1", cards),
            *(vgpu_pod(f"w-{i}", memory="4096", cores="25", annotations=ann) for i in range(2)),
        ]
        result = run(
            objs, make_conf("allocate", [{"name": "gang"}], [{"name": "predicates"}, vgpu_conf_plugin("binpack")])
        )
        used = {t.card_annotations[VGPU_IDS].split(",")[0] for t, _ in result.binds if t.card_annotations}
        assert len(result.binds) == 2 and used == expected, spread


def test_vgpu_allocation_annotations_reach_the_bind_message() -> None:
    # vgpu Allocate: node, ids (and devices-to-allocate), bind phase "allocating", times.
    from lahar_scheduler.decisions import Sent, decisions

    objs = [*base(), vgpu_node("n1", [("GPU-0", 10, 30000)]), vgpu_pod("p", memory="1000", cores="30")]
    result = run(objs, make_conf("allocate", [{"name": "predicates"}, vgpu_conf_plugin()]))
    ((t, n),) = result.binds
    assert t.card_annotations is not None
    assert t.card_annotations["volcano.sh/vgpu-ids-new"] == "GPU-0,NVIDIA,1000,30:"
    assert t.card_annotations["volcano.sh/devices-to-allocate"] == "GPU-0,NVIDIA,1000,30:"
    assert (t.card_annotations["volcano.sh/vgpu-node"], t.card_annotations["volcano.sh/bind-phase"]) == (
        n,
        "allocating",
    )
    (item,) = decisions(result, "s", 1, Sent(), "2026-01-01T00:00:00Z").binds[0].items
    assert item.annotations == t.card_annotations


def test_bind_item_annotations_are_optional_on_the_wire() -> None:
    old = msgspec.json.encode({"namespace": "ns", "name": "p", "uid": "u", "node": "n"})
    assert msgspec.json.decode(old, type=BindItem).annotations == {}
    new = BindItem(namespace="ns", name="p", node="n", annotations={GPU_INDEX: "0"})
    assert b"annotations" in msgspec.json.encode(new)
    assert b"annotations" not in msgspec.json.encode(BindItem(namespace="ns", name="p", node="n"))


def test_group_annotation_constant() -> None:
    assert GROUP == "scheduling.k8s.io/group-name"


# -- across the live view: assumed binds keep their cards ---------------------------------------------------
def _pod_delta(p: Pod) -> Any:
    from lahar.api.codec import to_json
    from lahar.wire.messages import Delta

    key = f"{p.metadata.namespace}/{p.metadata.name}"
    return Delta(kind="pods", op="MODIFIED", key=key, rv="1", obj=msgspec.Raw(to_json(p)))


def test_an_assumed_bind_holds_its_card_until_the_pod_shows_it() -> None:
    """A pending pod's delta arrives after its bind was decided: the pod is placed again from the
    assumption, with the cards the decision chose; then the bound pod carries them itself."""
    from lahar.wire.messages import Binds
    from lahar_scheduler.live import LiveView

    view = LiveView()
    for obj in (queue("q"), podgroup("pg", queue="q", min_member=1), gpu_node("n1", 2, 8000), share_pod("p", 4000)):
        view.apply(_delta_of(obj))
    ann = {GPU_INDEX: "1", "volcano.sh/predicate-time": "0"}
    item = BindItem(namespace="default", name="p", node="n1", annotations=ann)
    view.assume([Binds(id="b", items=[item])])
    view.apply(_pod_delta(share_pod("p", 4000)))  # e.g. a status write, still pending
    dev = view.snapshot.nodes.devices
    assert view.snapshot.tasks["default/p"].status == S.BINDING
    assert (dev.share_used[0].tolist(), dev.share_pods[0].tolist()) == ([0.0, 4000.0], [0, 1])
    view.apply(_pod_delta(share_pod("p", 4000, node_name="n1", index="1", phase="Running")))
    assert (dev.share_used[0].tolist(), dev.share_pods[0].tolist()) == ([0.0, 4000.0], [0, 1])
    assert "default/p" not in view.cards


def _delta_of(obj: Any) -> Any:
    from lahar.api.codec import to_json
    from lahar.wire.messages import Delta

    kind = {"Node": "nodes", "Pod": "pods", "PodGroup": "podgroups", "Queue": "queues"}[obj.kind]
    ns = obj.metadata.namespace
    key = f"{ns}/{obj.metadata.name}" if ns or kind in ("pods", "podgroups") else obj.metadata.name
    return Delta(kind=kind, op="ADDED", key=key, rv="1", obj=msgspec.Raw(to_json(obj)))
