"""The scheduler's assumptions: assume, confirm, adopt, roll back and expire, with a fake clock."""

from __future__ import annotations

import pytest

from lahar_scheduler.assumptions import Assumptions

DEADLINE = 100.0


def test_a_bind_stays_assumed_until_the_cache_shows_it() -> None:
    a = Assumptions()
    a.assume("ns/p", "n1", DEADLINE)
    assert a.observe("ns/p", "") == ("place", "n1")  # a delta without the node: still ours
    assert "ns/p" in a
    assert a.observe("ns/p", "n1") is None  # bound: served
    assert "ns/p" not in a


def test_a_deleted_pod_ends_its_assumption() -> None:
    a = Assumptions()
    a.assume("ns/p", "n1", DEADLINE)
    assert a.observe("ns/p", None) is None and len(a) == 0


@pytest.mark.parametrize("outcome", ["stale", "expired", "conflict", "failed", "gone"])
def test_a_report_that_nothing_was_bound_rolls_back(outcome: str) -> None:
    a = Assumptions()
    a.assume("ns/p", "n1", DEADLINE)
    assert a.result("ns/p", outcome, "n1", "") == ("release",)
    assert "ns/p" not in a


def test_a_report_for_another_decision_of_the_same_pod_does_not_roll_back() -> None:
    a = Assumptions()
    a.assume("ns/p", "n2", DEADLINE)  # rescheduled since: an old decision's report comes late
    assert a.result("ns/p", "stale", "n1", "") is None
    assert a.node("ns/p") == "n2"


def test_nothing_expires_while_the_decision_can_still_run() -> None:
    a = Assumptions(margin=10.0)
    a.assume("ns/p", "n1", DEADLINE)
    assert a.expire(DEADLINE + 9.9) == []
    assert a.expire(DEADLINE + 10.1) == ["ns/p"]
    assert len(a) == 0


def test_a_done_report_is_kept_until_the_cache_shows_it_and_never_expires() -> None:
    a = Assumptions()
    a.assume("ns/p", "n1", DEADLINE)
    assert a.result("ns/p", "done", "n1", "") is None  # already placed there
    assert a.expire(DEADLINE * 1000) == []
    assert a.result("ns/p", "stale", "n1", "") is None  # a later duplicate report changes nothing
    assert a.observe("ns/p", "n1") is None and len(a) == 0


def test_a_done_report_of_an_older_epoch_is_adopted() -> None:
    a = Assumptions()
    assert a.result("ns/q", "done", "n3", "") == ("place", "n3")  # a standby learns the bind
    assert a.node("ns/q") == "n3"
    assert a.result("ns/r", "done", "n3", "n3") is None and "ns/r" not in a  # the cache was first
    assert a.result("ns/s", "done", "n3", None) is None and "ns/s" not in a  # already deleted


def test_items_lists_what_to_place_again_after_a_reload() -> None:
    a = Assumptions()
    a.assume("ns/p", "n1", DEADLINE)
    a.result("ns/q", "done", "n2", "")
    assert sorted(a.items()) == [("ns/p", "n1"), ("ns/q", "n2")]
