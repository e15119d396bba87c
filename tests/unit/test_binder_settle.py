"""The binder's settle policy: ack, redeliver with backoff, or give up and dead-letter."""

from __future__ import annotations

import pytest

from lahar_binder.settle import Plan, admit, backoff, settle


def test_everything_settled_and_reported_is_acknowledged() -> None:
    assert settle([True, True], attempts=1, max_attempts=5) == Plan("ack")
    assert settle([], attempts=1, max_attempts=5) == Plan("ack")


def test_an_unsettled_call_brings_the_message_back_with_a_growing_delay() -> None:
    delays = [settle([True, False], attempts=n, max_attempts=5).delay for n in range(1, 5)]
    assert [settle([False], attempts=n, max_attempts=5).action for n in range(1, 5)] == ["nak"] * 4
    assert delays == sorted(delays) and delays[0] > 0
    assert backoff(30) == 10.0


def test_outcomes_that_could_not_be_reported_bring_the_message_back() -> None:
    assert settle([True, True], attempts=1, max_attempts=5, reported=False).action == "nak"


def test_at_the_last_attempt_the_unsettled_calls_are_given_up_and_dead_lettered() -> None:
    plan = settle([True, False, True, False], attempts=5, max_attempts=5)
    assert plan == Plan("dead", gave_up=(1, 3))
    assert settle([True], attempts=5, max_attempts=5, reported=False) == Plan("dead", gave_up=())


@pytest.mark.parametrize(("attempts", "run"), [(1, True), (5, True), (6, False), (100, False)])
def test_a_message_delivered_too_often_is_not_run_again(attempts: int, run: bool) -> None:
    assert admit(attempts, max_attempts=5) is run
