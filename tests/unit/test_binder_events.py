"""The binder's Events: what it records for each decision, and client-go's correlation (rate
limit per object, similar events combined, repeats counted on one Event)."""

from __future__ import annotations

from typing import Any

import msgspec

from builders import node, pod, podgroup, queue, snapshot
from lahar.wire.messages import BindItem, Evict, PodGroupStatus, PodStatus, decode_decision, encode
from lahar_binder.events import (
    COMBINED,
    MAX_MESSAGE,
    Correlator,
    Note,
    Ref,
    bound,
    event_body,
    evicted,
    evicted_from_group,
    podgroup_notes,
    repeat_patch,
    timestamp,
    unschedulable_pod,
)
from lahar_scheduler.core import load_conf, run_session
from lahar_scheduler.decisions import Sent, decisions

T0 = 1_790_000_000.0
POD = Ref("v1", "Pod", "ns", "p", "uid-p")


def with_uid(obj: Any, uid: str) -> Any:
    return msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, uid=uid))


def note(message: str = "0/3 nodes are available", ref: Ref = POD, reason: str = "FailedScheduling") -> Note:
    return Note(ref, "Warning", reason, message)


# -- what is recorded -------------------------------------------------------------------------------


def test_bound_pod_says_where_as_volcano() -> None:
    n = bound(BindItem(namespace="ns", name="p", uid="u1", node="n7"))
    assert (n.type, n.reason, n.message) == ("Normal", "Scheduled", "Successfully assigned ns/p to n7")
    assert n.ref == Ref("v1", "Pod", "ns", "p", "u1")


def test_evicted_pod_names_the_reason() -> None:
    n = evicted(Evict(id="e", namespace="ns", name="v", uid="u2", node="n1", reason="preempt"))
    assert (n.type, n.reason, n.message) == ("Warning", "Evict", "Pod is evicted, because of preempt")
    assert n.ref.uid == "u2"
    d = Evict(id="e", namespace="ns", name="v", node="n1", reason="reclaim", for_job="ns/big")
    assert evicted(d).message == "Pod is evicted, because of reclaim for PodGroup ns/big"


def test_pod_status_is_failed_scheduling_with_its_message() -> None:
    d = PodStatus(id="s", namespace="ns", name="p", reason="Unschedulable", message="why", uid="u3")
    n = unschedulable_pod(d)
    assert (n.type, n.reason, n.message, n.ref.uid) == ("Warning", "FailedScheduling", "why", "u3")


def _pg(phase: str, *conds: dict[str, str]) -> PodGroupStatus:
    status = {"phase": phase, "conditions": list(conds)}
    return PodGroupStatus(id="g", namespace="ns", name="pg", status=status, uid="ug")


def test_podgroup_unschedulable_condition_is_a_warning_with_its_message() -> None:
    cond = {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": "1/3 tasks..."}
    (n,) = podgroup_notes(_pg("Inqueue", cond))
    assert (n.type, n.reason, n.message) == ("Warning", "Unschedulable", "1/3 tasks...")
    assert n.ref == Ref("scheduling.volcano.sh/v1beta1", "PodGroup", "ns", "pg", "ug")


def test_podgroup_running_is_scheduled_and_pending_without_condition_records_nothing() -> None:
    earlier = {"type": "Unschedulable", "status": "True", "message": "20/12 tasks in gang unschedulable"}
    (n,) = podgroup_notes(_pg("Running", earlier, {"type": "Scheduled", "status": "True"}))
    assert (n.type, n.reason, n.message) == ("Normal", "Scheduled", "pod group is ready")
    assert podgroup_notes(_pg("Pending")) == []
    assert podgroup_notes(_pg("Inqueue", {"type": "Unschedulable", "status": "False"})) == []


# -- correlation ------------------------------------------------------------------------------------


def test_repeat_counts_on_the_same_event() -> None:
    c = Correlator()
    first = c.correlate(note(), T0)
    again = c.correlate(note(), T0 + 5)
    assert first is not None and again is not None
    assert first.create and (first.count, first.first, first.last) == (1, T0, T0)
    assert not again.create and again.name == first.name
    assert (again.count, again.first, again.last) == (2, T0, T0 + 5)
    assert repeat_patch(again) == {"count": 2, "lastTimestamp": timestamp(T0 + 5), "message": note().message}


def test_another_message_or_object_is_another_event() -> None:
    c = Correlator()
    a = c.correlate(note("a"), T0)
    b = c.correlate(note("b"), T0 + 1)
    other = c.correlate(note("a", ref=Ref("v1", "Pod", "ns", "q", "uid-q")), T0 + 2)
    assert a is not None and b is not None and other is not None
    assert b.create and other.create
    assert len({a.name, b.name, other.name}) == 3
    assert other.name.startswith("q.")


def test_rate_limit_per_object_burst_then_one_per_refill() -> None:
    c = Correlator(burst=3, refill_seconds=10.0)
    got = [c.correlate(note(f"m{i}"), T0) for i in range(5)]
    assert [w is not None for w in got] == [True, True, True, False, False]
    # another object has its own bucket
    assert c.correlate(note(ref=Ref("v1", "Pod", "ns", "q")), T0) is not None
    assert c.correlate(note("late"), T0 + 5) is None  # half a token
    assert c.correlate(note("later"), T0 + 10) is not None
    assert c.correlate(note("again"), T0 + 10) is None


def test_similar_messages_are_combined_after_the_tenth() -> None:
    c = Correlator(similar_max=3, similar_interval=60.0)
    writes = [c.correlate(note(f"{i}/3 tasks"), T0 + i) for i in range(5)]
    messages = [w.note.message for w in writes if w is not None]
    assert messages[:2] == ["0/3 tasks", "1/3 tasks"]
    assert messages[2:] == [COMBINED + "2/3 tasks", COMBINED + "3/3 tasks", COMBINED + "4/3 tasks"]
    # past the interval the group starts again
    late = c.correlate(note("5/3 tasks"), T0 + 200)
    assert late is not None and late.note.message == "5/3 tasks"


def test_forget_after_a_failed_write_creates_again() -> None:
    c = Correlator()
    w = c.correlate(note(), T0)
    assert w is not None
    c.forget(w)
    again = c.correlate(note(), T0 + 1)
    assert again is not None and again.create and again.count == 1


def test_cache_is_bounded() -> None:
    c = Correlator(capacity=2)
    for name in ("a", "b", "c"):
        c.correlate(note(ref=Ref("v1", "Pod", "ns", name)), T0)
    assert len(c.seen) == 2 and len(c.buckets) == 2


# -- the Event itself -------------------------------------------------------------------------------


def test_event_body_is_a_core_v1_event_kubectl_describe_finds() -> None:
    w = Correlator().correlate(note("x" * (MAX_MESSAGE + 10)), T0)
    assert w is not None
    body = event_body(w)
    assert body["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "p", "uid": "uid-p"}
    assert body["metadata"] == {"name": w.name, "namespace": "ns"}
    assert body["source"] == {"component": "volcano"} and body["reportingComponent"] == "volcano"
    assert (body["type"], body["reason"], body["count"]) == ("Warning", "FailedScheduling", 1)
    assert body["firstTimestamp"] == body["lastTimestamp"] == "2026-09-21T14:13:20Z"
    assert len(body["message"]) == MAX_MESSAGE and body["message"].endswith("...")


# -- the wire and the scheduler's side --------------------------------------------------------------


def test_old_status_messages_without_uid_still_decode() -> None:
    old = b'{"type":"podstatus","v":1,"id":"s","namespace":"ns","name":"p","reason":"r","message":"m","fence":2}'
    d = decode_decision(old)
    assert isinstance(d, PodStatus) and d.uid == "" and d.fence == 2
    new = decode_decision(encode(PodStatus(id="s", namespace="ns", name="p", reason="r", message="m", uid="u")))
    assert isinstance(new, PodStatus) and new.uid == "u"
    assert b'"uid"' not in encode(PodGroupStatus(id="g", namespace="ns", name="pg", status={}))


def test_decisions_carry_the_uids_of_pods_and_podgroups() -> None:
    group = with_uid(podgroup("big", min_member=2, queue="q"), "pg-uid")
    objs = [node("n1", cpu="2"), queue("q"), group, *(pod(f"big-{i}", group="big", cpu="2") for i in range(2))]
    snap = snapshot(objs)
    result = run_session(snap, load_conf(None))
    out = decisions(result, "s1", 1, Sent(), "2026-01-01T00:00:00Z", snapshot=snap)
    assert out.pods and all(p.uid == f"default-{p.name}" for p in out.pods)
    (status,) = out.podgroups
    assert status.uid == "pg-uid"
    assert any(n.reason == "Unschedulable" for n in podgroup_notes(status))


def test_record_never_waits_and_counts_what_a_full_queue_drops() -> None:
    from prometheus_client import CollectorRegistry

    from lahar.adapters.kube import KubeClient, KubeConfig
    from lahar_binder.events import EventWriter

    kube = KubeClient(KubeConfig(host="http://127.0.0.1:9", verify=False, cert=None, headers={}))
    writer = EventWriter(kube, CollectorRegistry(), workers=1, queue_size=2)
    for i in range(5):
        writer.record(note(f"m{i}"))  # no worker runs: the queue fills
    assert writer.metrics.dropped.labels("queue_full")._value.get() == 3
    assert writer.queues[0].qsize() == 2


def test_unreachable_api_drops_events_and_the_workers_go_on() -> None:
    import asyncio

    from prometheus_client import CollectorRegistry

    from lahar.adapters.kube import KubeClient, KubeConfig
    from lahar_binder.events import EventWriter

    async def scenario() -> tuple[float, float]:
        kube = KubeClient(KubeConfig(host="http://127.0.0.1:9", verify=False, cert=None, headers={}), timeout=2.0)
        writer = EventWriter(kube, CollectorRegistry(), workers=1, correlator=Correlator(burst=2))
        task = asyncio.create_task(writer.run())
        for i in range(3):
            writer.record(note(f"m{i}"))
        failed, limited = writer.metrics.dropped.labels("api_error"), writer.metrics.dropped.labels("rate_limited")
        deadline = asyncio.get_running_loop().time() + 10
        while failed._value.get() + limited._value.get() < 3 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)  # polling the counters, bounded by the deadline
        alive = not task.done()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()
        assert alive
        return failed._value.get(), limited._value.get()

    assert asyncio.run(scenario()) == (2, 1)


def test_an_eviction_names_the_job_it_makes_room_for() -> None:
    from evict_builders import conf, node, plugin, pod, podgroup, priority_class, queue, res

    objs = [
        priority_class("high-priority", 100000),
        priority_class("low-priority", 10),
        queue("q1"),
        node("n1", "2", "2G"),
        with_uid(podgroup("low", "q1", 0, priority_class="low-priority"), "low-uid"),
        podgroup("high", "q1", 1, priority_class="high-priority"),
        pod("victim", "low", res("2", "2G"), "n1", labels={"volcano.sh/preemptable": "true"}),
        pod("preemptor", "high", res("2", "2G")),
    ]
    tier = [
        plugin("gang", "enablePreemptable", "enableJobPipelined", "enableJobStarving"),
        plugin("priority", "enableTaskOrder", "enableJobOrder", "enablePreemptable", "enableJobStarving"),
        plugin("proportion", "enabledOverused", "enabledAllocatable", "enableQueueOrder"),
    ]
    snap = snapshot(objs)
    result = run_session(snap, conf("preempt", tier))
    (evict,) = decisions(result, "s1", 1, Sent(), "2026-01-01T00:00:00Z", snapshot=snap).evictions
    assert (evict.name, evict.reason, evict.for_job) == ("victim", "preempt", "c1/high")
    assert evicted(evict).message == "Pod is evicted, because of preempt for PodGroup c1/high"
    group = evicted_from_group(evict)
    assert group is not None and (group.type, group.reason, group.message) == ("Normal", "Evict", "preempt")
    assert (group.ref.namespace, group.ref.name, group.ref.uid) == ("c1", "low", "low-uid")
