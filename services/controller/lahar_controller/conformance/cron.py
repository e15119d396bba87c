"""Runner for the cronjob-schedule cases: Volcano's CronJob controller."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from lahar_controller import cron
from lahar_controller.conformance.ctl_expect import compare, find
from lahar_controller.cronschedule import ScheduleError
from lahar_controller.kubetime import format_go_duration, format_time, parse_time

PENDING: dict[str, str] = {}

# Cases whose Go test leaves the clock at the real time, where the outcome does not depend on it.
_ANY_TIME = "2025-03-11T10:00:00Z"


def _time(value: datetime | None) -> str | None:
    return None if value is None else format_time(value)


def _window(cronjob: Mapping[str, Any], step: Mapping[str, Any]) -> dict[str, Any]:
    try:
        found = cron.window(
            cronjob, parse_time(step["now"]), cron.schedule_of(cronjob), bool(step["includeStartingDeadline"])
        )
    except ScheduleError as exc:
        return {"error": True, "errorMessage": str(exc)}
    return {
        "earliestTime": _time(found.earliest),
        "mostRecentTime": _time(found.most_recent),
        "missed": found.missed_class,
        "error": False,
    }


def _next(cronjob: Mapping[str, Any], step: Mapping[str, Any]) -> dict[str, Any]:
    events: list[cron.Event] = []
    try:
        due = cron.due_time(cronjob, parse_time(step["now"]), cron.schedule_of(cronjob), events)
    except ScheduleError as exc:
        return {"error": str(exc)}
    return {"scheduleTime": _time(due), "error": None, "events": [" ".join(e) for e in events]}


def _sync(case: Mapping[str, Any], cronjob: Mapping[str, Any]) -> dict[str, Any]:
    objects = case["given"]["objects"]
    jobs = [o for o in objects if o.get("kind") == "Job"]
    out = cron.sync(cronjob, jobs, parse_time(case["given"].get("clock") or _ANY_TIME))
    owner = (out.create or {}).get("metadata", {}).get("ownerReferences", [None])[0]
    return {
        "requeueAfter": None if out.requeue_after is None else format_go_duration(out.requeue_after),
        "statusUpdated": out.status_updated,
        "error": bool(out.error),
        "lastScheduleTime": out.status.get("lastScheduleTime"),
        "lastSuccessfulTime": out.status.get("lastSuccessfulTime"),
        "activeCount": len(out.status.get("active") or []),
        "eventCount": len(out.events),
        "createdJobs": 0 if out.create is None else 1,
        "deletedJobs": len(out.delete),
        "createdJobOwner": owner,
    }


def check(case: dict[str, Any]) -> list[str]:
    step = case["step"]
    expect = {k: v for k, v in case["expect"].items() if k != "derived"}
    cronjob = find(case["given"]["objects"], "CronJob", step["cronJob"])
    kind = step["kind"]
    if kind == "cronScheduleWindow":
        return compare(expect, _window(cronjob, step))
    if kind == "cronNextSchedule":
        return compare(expect, _next(cronjob, step))
    if kind == "cronRequeueAfter":
        after = cron.requeue_after(cronjob, parse_time(step["now"]), cron.schedule_of(cronjob))
        return compare(expect, {"requeueAfter": None if after is None else format_go_duration(after)})
    if kind == "cronJobFromTemplate":
        return compare(expect, {"job": cron.job_from_template(cronjob, parse_time(step["scheduledTime"]))})
    if kind == "cronOwnedJobs":
        jobs = [o for o in case["given"]["objects"] if o.get("kind") == "Job"]
        return compare(expect, {"ownedJobCount": len(cron.owned_jobs(cronjob, jobs))})
    if kind == "cronSync":
        return compare(expect, _sync(case, cronjob))
    return [f"unknown step kind {kind!r}"]
