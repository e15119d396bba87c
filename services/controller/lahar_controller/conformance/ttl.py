"""Runner for the job-ttl cases: Volcano's garbage collector (ttlSecondsAfterFinished)."""

from __future__ import annotations

from typing import Any

from lahar_controller import ttl
from lahar_controller.conformance.ctl_expect import compare, find
from lahar_controller.kubetime import format_go_duration, format_time, parse_time

PENDING: dict[str, str] = {}


def _facts(job: dict[str, Any], clock: str | None) -> dict[str, Any]:
    facts: dict[str, Any] = {"finished": ttl.is_finished(job), "eligible": ttl.needs_cleanup(job), "error": None}
    try:
        if facts["eligible"]:
            facts["finishTime"] = format_time(ttl.finish_time(job))
            facts["expireTime"] = format_time(ttl.expire_time(job))
        if clock is not None:
            now = parse_time(clock)
            verdict = ttl.check(job, now)
            facts["expired"] = verdict.delete
            if facts["eligible"]:
                facts["remaining"] = format_go_duration(ttl.expire_time(job) - now)
    except ttl.TTLError as exc:
        facts["error"] = str(exc)
    return facts


def check(case: dict[str, Any]) -> list[str]:
    given, step = case["given"], case["step"]
    expect = {k: v for k, v in case["expect"].items() if k != "derived"}
    job = find(given["objects"], "Job", step["job"])
    if step["kind"] == "jobFinishTime":
        try:
            got: dict[str, Any] = {"finishTime": format_time(ttl.finish_time(job)), "error": None}
        except ttl.TTLError as exc:
            got = {"error": str(exc)}
        return compare(expect, got)
    if step["kind"] != "ttlCheck":
        return [f"unknown step kind {step['kind']!r}"]
    return compare(expect, _facts(job, given.get("clock")))
