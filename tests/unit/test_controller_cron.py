"""CronJob syncs the Volcano corpus could not express (rows of Volcano's TestSyncCronJob with
existing Jobs), and schedule grammar checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lahar_controller import cron
from lahar_controller.cronschedule import ScheduleError, parse
from lahar_controller.kubetime import format_time

TEN = datetime(2025, 3, 11, 10, 0, tzinfo=UTC)


def cronjob(policy: str = "Allow", last: datetime | None = None, **spec: Any) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if last is not None:
        status["lastScheduleTime"] = format_time(last)
    return {
        "kind": "CronJob",
        "metadata": {"name": "cj", "namespace": "ns", "uid": "cj-uid", "creationTimestamp": format_time(TEN)},
        "spec": {"schedule": "*/5 * * * *", "concurrencyPolicy": policy, "jobTemplate": {"spec": {}}, **spec},
        "status": status,
    }


def job(cj: dict[str, Any], at: datetime, phase: str, owned: bool = True) -> dict[str, Any]:
    obj = cron.job_from_template(cj, at)
    obj["metadata"]["uid"] = f"uid-{at:%H%M}"
    obj["metadata"]["creationTimestamp"] = format_time(at)
    if not owned:
        obj["metadata"]["ownerReferences"] = []
    obj["status"] = {"state": {"phase": phase, "lastTransitionTime": format_time(at + timedelta(minutes=1))}}
    return obj


def active(cj: dict[str, Any], *jobs: dict[str, Any]) -> dict[str, Any]:
    cj["status"]["active"] = [cron.job_ref(j) for j in jobs]
    return cj


def reasons(out: cron.CronSync) -> list[str]:
    return [reason for _, reason, _ in out.events]


def test_pre_active_is_time_allow_runs_beside_it() -> None:
    cj = cronjob(last=TEN + timedelta(minutes=5))
    running = job(cj, TEN + timedelta(minutes=5), "Running")
    out = cron.sync(active(cj, running), [running], TEN + timedelta(minutes=10))
    assert out.create is not None and out.delete == []
    assert len(out.status["active"]) == 2 and out.status["lastScheduleTime"] == "2025-03-11T10:10:00Z"
    assert reasons(out) == ["SuccessfulCreate"] and out.requeue_after == timedelta(minutes=5, milliseconds=100)


def test_pre_active_is_time_forbid_skips() -> None:
    cj = cronjob("Forbid", last=TEN + timedelta(minutes=5))
    running = job(cj, TEN + timedelta(minutes=5), "Running")
    out = cron.sync(active(cj, running), [running], TEN + timedelta(minutes=10))
    assert out.create is None and not out.status_updated and reasons(out) == ["ForbidConcurrent"]
    assert out.requeue_after == timedelta(minutes=5, milliseconds=100)


def test_pre_active_is_time_replace_deletes_then_creates() -> None:
    cj = cronjob("Replace", last=TEN + timedelta(minutes=5))
    running = job(cj, TEN + timedelta(minutes=5), "Running")
    out = cron.sync(active(cj, running), [running], TEN + timedelta(minutes=10))
    assert out.delete == [running["metadata"]["name"]] and out.create is not None
    assert [r["name"] for r in out.status["active"]] == [out.create["metadata"]["name"]]
    assert reasons(out) == ["ReplaceConcurrent", "SuccessfulDelete", "SuccessfulCreate"]


def test_suspended_keeps_its_active_jobs_and_is_not_requeued() -> None:
    cj = cronjob(last=TEN + timedelta(minutes=5), suspend=True)
    running = job(cj, TEN + timedelta(minutes=5), "Running")
    out = cron.sync(active(cj, running), [running], TEN + timedelta(minutes=10))
    assert out.create is None and out.requeue_after is None and len(out.status["active"]) == 1 and out.events == []


def test_finished_active_job_is_removed_and_success_recorded() -> None:
    cj = cronjob("Forbid")
    done = job(cj, TEN, "Completed")
    out = cron.sync(active(cj, done), [done], TEN + timedelta(minutes=5))
    # the finished job no longer blocks Forbid
    assert reasons(out) == ["SawCompletedJob", "SuccessfulCreate"]
    assert out.status["lastSuccessfulTime"] == "2025-03-11T10:01:00Z" and len(out.status["active"]) == 1


def test_history_limit_zero_deletes_the_finished_job() -> None:
    cj = cronjob(last=TEN + timedelta(minutes=5), successfulJobsHistoryLimit=0)
    done = job(cj, TEN + timedelta(minutes=5), "Completed")
    out = cron.sync(cj, [done], TEN + timedelta(minutes=7))
    assert out.delete == [done["metadata"]["name"]] and reasons(out) == ["SuccessfulDelete"]
    assert out.status["lastSuccessfulTime"] == "2025-03-11T10:06:00Z" and out.status_updated
    assert out.requeue_after == timedelta(minutes=3, milliseconds=100)


def test_history_limits_keep_the_newest_of_each_kind() -> None:
    cj = cronjob(last=TEN + timedelta(minutes=30), successfulJobsHistoryLimit=1, failedJobsHistoryLimit=1)
    jobs = [
        job(cj, TEN + timedelta(minutes=m), phase)
        for m, phase in ((5, "Completed"), (10, "Completed"), (15, "Failed"), (20, "Failed"), (25, "Completed"))
    ]
    out = cron.sync(cj, jobs, TEN + timedelta(minutes=31))
    assert sorted(out.delete) == sorted(jobs[i]["metadata"]["name"] for i in (0, 1, 2))


def test_stale_reference_is_dropped() -> None:
    cj = cronjob(last=TEN)
    gone = job(cj, TEN, "Running")
    out = cron.sync(active(cj, gone), [], TEN + timedelta(minutes=2))
    assert out.status["active"] == [] and out.status_updated and reasons(out) == ["StaleReference"]


def test_orphaned_job_is_reported() -> None:
    cj = cronjob(last=TEN)
    orphan = job(cj, TEN, "Running")
    out = cron.sync(cj, [orphan], TEN + timedelta(minutes=2))
    assert reasons(out) == ["OrphanedJob"] and not out.status_updated


def test_existing_run_job_is_adopted_not_created_again() -> None:
    cj = cronjob()
    same_run = job(cj, TEN + timedelta(minutes=5), "Running")
    out = cron.sync(cj, [same_run], TEN + timedelta(minutes=5))
    assert out.create is None and [r["uid"] for r in out.status["active"]] == ["uid-1005"]


def test_foreign_job_with_the_run_name_blocks_the_run() -> None:
    cj = cronjob()
    foreign = job(cj, TEN + timedelta(minutes=5), "Running", owned=False)
    out = cron.sync(cj, [foreign], TEN + timedelta(minutes=5))
    assert out.create is None and reasons(out) == ["ForeignJob"] and not out.status_updated


def test_invalid_time_zone_is_an_error_with_an_event() -> None:
    out = cron.sync(cronjob(timeZone="Mars/Olympus"), [], TEN + timedelta(minutes=5))
    assert out.error and reasons(out) == ["InvalidTimeZone"] and out.create is None


def test_never_firing_schedule_is_an_error_with_an_event() -> None:
    out = cron.sync(cronjob(schedule="59 23 31 2 *"), [], TEN + timedelta(hours=1))
    assert out.error == "time difference between two schedules is less than 1 second"
    assert reasons(out) == ["InvalidSchedule"]


@pytest.mark.parametrize(
    "spec",
    [
        "* * * * * *",
        "0 0 * * 7",
        "0 0 L * *",
        "H * * * *",
        "0 0 * * MON#1",
        "61 * * * *",
        "*/0 * * * *",
        "@reboot",
        "@every nonsense",
        "TZ=Nowhere/Land * * * * *",
    ],
)
def test_schedules_robfig_refuses(spec: str) -> None:
    with pytest.raises(ScheduleError):
        parse(spec)


def test_names_question_marks_and_descriptors() -> None:
    assert parse("0 12 ? JAN-MAR mon-fri").next(TEN) == datetime(2025, 3, 11, 12, 0, tzinfo=UTC)
    assert parse("@hourly").next(TEN) == TEN + timedelta(hours=1)
    assert parse("@every 90s").next(TEN + timedelta(microseconds=500)) == TEN + timedelta(seconds=90)
    assert parse("@every 200ms").next(TEN) == TEN + timedelta(seconds=1)  # at least a second


def test_zone_prefix_and_daylight_saving() -> None:
    # Rome moves to summer time on 30 March 2025: 09:00 local is 08:00 UTC before, 07:00 UTC after
    rome = parse("CRON_TZ=Europe/Rome 0 9 * * *")
    assert rome.next(datetime(2025, 3, 29, 9, 0, tzinfo=UTC)) == datetime(2025, 3, 30, 7, 0, tzinfo=UTC)
    assert rome.next(datetime(2025, 3, 28, 7, 0, tzinfo=UTC)) == datetime(2025, 3, 28, 8, 0, tzinfo=UTC)


def test_job_for_a_run() -> None:
    made = cron.job_from_template(cronjob(), TEN)
    assert made["metadata"]["name"] == "cj-29028120"
    assert made["metadata"]["ownerReferences"][0]["controller"] is True
    assert made["metadata"]["annotations"][cron.SCHEDULED_TIMESTAMP] == "2025-03-11T10:00:00Z"
