"""Pod deltas on a live snapshot: a bind reuses derived requests, a resize recomputes them."""

from __future__ import annotations

import msgspec

from builders import node, pod, podgroup, queue, snapshot
from lahar.api.codec import decode_json_as, to_json
from lahar.api.objects import Pod
from lahar.wire.messages import Delta
from lahar_scheduler.deltas import apply_delta
from lahar_scheduler.framework.types import TaskStatus


def _delta(p: Pod, op: str = "MODIFIED") -> Delta:
    raw = to_json(p)
    return Delta(kind="pods", op=op, key=f"{p.metadata.namespace}/{p.metadata.name}", rv="1", obj=msgspec.Raw(raw))


def _wire(p: Pod) -> Pod:
    """The pod as the scheduler receives it: decoded afresh from the delta's JSON."""
    return decode_json_as(to_json(p), Pod)  # type: ignore[no-any-return]


def test_bind_delta_reuses_requests_and_moves_the_task_onto_the_node() -> None:
    pending = pod("p0", group="pg", cpu="2", memory="1Gi")
    snap = snapshot([node("n1", cpu="8", memory="8Gi"), queue("default"), podgroup("pg", min_member=1), pending])
    before = snap.tasks["default/p0"]
    bound = msgspec.structs.replace(pending, spec=msgspec.structs.replace(pending.spec, node_name="n1"))
    change = apply_delta(snap, _delta(bound), _wire(bound))
    after = snap.tasks["default/p0"]
    assert after is not before
    assert after.status == TaskStatus.BOUND and after.node_name == "n1"
    assert after.resreq is before.resreq  # reused, not re-parsed
    assert after.template_key == before.template_key
    assert snap.nodes.by_name["n1"].used.milli_cpu == 2000
    assert not change.freed


def test_resized_pod_gets_its_requests_recomputed() -> None:
    small = pod("p0", group="pg", cpu="1", memory="1Gi", node_name="n1", phase="Running")
    snap = snapshot([node("n1", cpu="8", memory="8Gi"), queue("default"), podgroup("pg", min_member=1), small])
    big = pod("p0", group="pg", cpu="3", memory="1Gi", node_name="n1", phase="Running")
    apply_delta(snap, _delta(big), _wire(big))
    task = snap.tasks["default/p0"]
    assert task.resreq.milli_cpu == 3000
    assert snap.nodes.by_name["n1"].used.milli_cpu == 3000


def test_relabelled_pod_gets_a_new_template_key() -> None:
    plain = pod("p0", group="pg", cpu="1")
    snap = snapshot([node("n1", cpu="8", memory="8Gi"), queue("default"), podgroup("pg", min_member=1), plain])
    marked = pod("p0", group="pg", cpu="1", annotations={"volcano.sh/task-spec": "worker"})
    key = snap.tasks["default/p0"].template_key
    apply_delta(snap, _delta(marked), _wire(marked))
    assert snap.tasks["default/p0"].template_key != key
