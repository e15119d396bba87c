"""ttlSecondsAfterFinished beyond the Volcano corpus: the verdict over time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lahar_controller import ttl

FINISH = datetime(2026, 1, 1, tzinfo=UTC)


def job(
    phase: str = "Completed", ttl_s: int | None = 30, finished: str | None = "2026-01-01T00:00:00Z"
) -> dict[str, Any]:
    spec = {} if ttl_s is None else {"ttlSecondsAfterFinished": ttl_s}
    state: dict[str, Any] = {"phase": phase}
    if finished:
        state["lastTransitionTime"] = finished
    return {"metadata": {"namespace": "ns", "name": "j"}, "spec": spec, "status": {"state": state}}


def test_waits_until_the_ttl_runs_out_then_deletes() -> None:
    early = ttl.check(job(), FINISH + timedelta(seconds=10))
    assert early == ttl.TTLVerdict(False, timedelta(seconds=20))
    assert ttl.check(job(), FINISH + timedelta(seconds=30)) == ttl.TTLVerdict(True, None)
    assert ttl.check(job(), FINISH + timedelta(hours=1)).delete


@pytest.mark.parametrize("phase", ["Failed", "Terminated"])
def test_every_finished_phase_counts(phase: str) -> None:
    assert ttl.check(job(phase), FINISH + timedelta(seconds=31)).delete


@pytest.mark.parametrize(
    "obj",
    [job("Running"), job("Aborted"), job(ttl_s=None)],
    ids=["running", "aborted-is-not-finished", "no-ttl"],
)
def test_not_eligible_is_never_rechecked(obj: dict[str, Any]) -> None:
    assert ttl.check(obj, FINISH + timedelta(days=1)) == ttl.TTLVerdict(False, None)


def test_job_being_deleted_is_left_alone() -> None:
    obj = job()
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    assert ttl.check(obj, FINISH + timedelta(days=1)) == ttl.TTLVerdict(False, None)


def test_finished_without_time_is_an_error() -> None:
    with pytest.raises(ttl.TTLError, match="unable to find the time when the Job ns/j finished"):
        ttl.check(job(finished=None), FINISH)


def test_finished_in_the_future_waits_the_whole_ttl() -> None:
    verdict = ttl.check(job(finished="2026-01-01T00:01:00Z"), FINISH)
    assert verdict == ttl.TTLVerdict(False, timedelta(seconds=90))
