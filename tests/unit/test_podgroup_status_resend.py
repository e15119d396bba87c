"""A PodGroup status (or a Queue's allocated) the cluster does not show some seconds after it was
sent is sent again: a write lost at the binder (dropped after its retries) or undone by another
writer's stale update must not leave the PodGroup in its old phase for good."""

from __future__ import annotations

from lahar.api.objects import ObjectMeta, Queue, QueueStatus
from lahar.api.quantity import Quantity
from lahar.api.resource import Resource
from lahar_scheduler.decisions import STATUS_RESEND_SECONDS, Sent, decisions
from lahar_scheduler.framework.session import Condition, PodGroupUpdate, SessionResult
from lahar_scheduler.framework.snapshot import Snapshot

STAMP = "2026-01-01T00:00:00Z"


def _result(phase: str, *, changed: bool = True, message: str = "") -> SessionResult:
    conds = [Condition("Scheduled", "True", "tasks in gang are ready to be scheduled", message, "s")]
    return SessionResult(podgroups={"ns/pg": PodGroupUpdate(phase, conds, 0, 0, 0, changed)})


def _sent_phases(result: SessionResult, sent: Sent, clock: float) -> list[str]:
    out = decisions(result, "s", 1, sent, STAMP, clock)
    return [pg.status["phase"] for pg in out.podgroups]


def test_a_status_still_not_shown_is_sent_again_after_the_resend_interval() -> None:
    sent = Sent()
    assert _sent_phases(_result("Running"), sent, 100.0) == ["Running"]
    # The API has not echoed it yet: no second write while the first may still be on its way.
    assert _sent_phases(_result("Running"), sent, 100.0 + STATUS_RESEND_SECONDS - 0.5) == []
    # Still not shown well after: it was lost, so it is written again, then waits again.
    again = 100.0 + STATUS_RESEND_SECONDS + 0.5
    assert _sent_phases(_result("Running"), sent, again) == ["Running"]
    assert _sent_phases(_result("Running"), sent, again + 1.0) == []


def test_a_status_the_cluster_shows_is_not_sent_again() -> None:
    sent = Sent()
    assert _sent_phases(_result("Running"), sent, 100.0) == ["Running"]
    # The session found the cluster's status equal to its own: nothing to write, however late.
    assert _sent_phases(_result("Running", changed=False), sent, 100.0 + 10 * STATUS_RESEND_SECONDS) == []


def test_a_new_phase_is_sent_at_once() -> None:
    sent = Sent()
    assert _sent_phases(_result("Inqueue"), sent, 100.0) == ["Inqueue"]
    assert _sent_phases(_result("Running"), sent, 100.1) == ["Running"]


def _queue_writes(allocated: Resource, sent: Sent, clock: float, shown: dict[str, str]) -> list[dict[str, str]]:
    queue = Queue(metadata=ObjectMeta(name="q"), status=QueueStatus(state="Open", allocated=_quantities(shown)))
    snapshot = Snapshot([], [], [], [queue], [])
    out = decisions(SessionResult(queues={"q": allocated}), "s", 1, sent, STAMP, clock, snapshot=snapshot)
    return [q.allocated for q in out.queues]


def _quantities(listed: dict[str, str]) -> dict[str, Quantity]:
    return {k: Quantity(v) for k, v in listed.items()}


def test_a_queue_allocation_still_not_shown_is_sent_again() -> None:
    sent = Sent()
    held = Resource.from_list({"cpu": "4", "memory": "8Gi"})
    assert _queue_writes(held, sent, 100.0, {}) == [{"cpu": "4", "memory": "8Gi"}]
    assert _queue_writes(held, sent, 100.0 + STATUS_RESEND_SECONDS - 0.5, {}) == []
    # Lost (or undone by a stale update of the Queue): written again, then waits again.
    again = 100.0 + STATUS_RESEND_SECONDS + 0.5
    assert _queue_writes(held, sent, again, {}) == [{"cpu": "4", "memory": "8Gi"}]
    assert _queue_writes(held, sent, again + 1.0, {}) == []
    # Shown, in another spelling of the same quantities: nothing more to write.
    assert _queue_writes(held, sent, again + 10 * STATUS_RESEND_SECONDS, {"cpu": "4000m", "memory": "8192Mi"}) == []
