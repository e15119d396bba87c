"""Volcano CronJobs (``batch.volcano.sh/v1alpha1``), as Volcano's cronjob controller runs them (pure).

One :func:`sync` of a CronJob at ``now``, given the Jobs of its namespace, says what to do:

- finished Jobs leave ``status.active``; the newest Completed one sets ``lastSuccessfulTime``;
  beyond ``successfulJobsHistoryLimit``/``failedJobsHistoryLimit`` the oldest are deleted;
- active references to Jobs that are gone are dropped (``StaleReference``); Jobs it owns that are
  not active are reported (``OrphanedJob``);
- unless suspended: the most recent due time in the window (from ``lastScheduleTime`` or creation,
  no earlier than ``now − startingDeadlineSeconds``) is started, once, as Job
  ``<cronjob>-<Unix minutes>``, subject to ``concurrencyPolicy`` (Allow; Forbid: skip while one is
  active; Replace: delete the active ones first); more than 100 missed times also warn
  (``TooManyMissedTimes``);
- and when to look again: the next due time + 100 ms.

The shell performs the deletions and the creation, fills the new Job's UID into its active
reference, then writes ``status`` when ``status_updated``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from lahar_controller.cronschedule import NEVER, Schedule, ScheduleError, load_zone, parse
from lahar_controller.kubetime import format_time, format_zoned, parse_time

API_VERSION = "batch.volcano.sh/v1alpha1"
SCHEDULED_TIMESTAMP = "volcano.sh/cronjob-scheduled-timestamp"
REQUEUE_PADDING = timedelta(milliseconds=100)
MANY_MISSED = 100
FINISHED = frozenset({"Completed", "Failed", "Terminated"})
Event = tuple[str, str, str]  # (type, reason, message)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


def _key(obj: Mapping[str, Any]) -> str:
    return f"{_meta(obj).get('namespace') or ''}/{_meta(obj).get('name') or ''}"


# -- the schedule --------------------------------------------------------------------------------


def schedule_text(cronjob: Mapping[str, Any], events: list[Event] | None = None) -> str:
    """The schedule with the CronJob's ``timeZone`` as a ``TZ=`` prefix; a schedule that names a
    zone itself keeps it (with a warning: the field is then ignored)."""
    text = str(_spec(cronjob).get("schedule") or "")
    zone = _spec(cronjob).get("timeZone")
    if "TZ" in text:
        if events is not None:
            events.append(
                (
                    "Warning",
                    "UnsupportedSchedule",
                    f'CRON_TZ or TZ in the schedule "{text}" is not officially supported. '
                    "If set, the TimeZone field will be ignored during execution.",
                )
            )
        return text
    if zone is None:
        return text
    try:
        load_zone(str(zone))
    except ScheduleError:
        return text
    return f"TZ={zone} {text}"


def schedule_of(cronjob: Mapping[str, Any], events: list[Event] | None = None) -> Schedule:
    """The CronJob's schedule; raises :class:`ScheduleError` for a bad zone or expression."""
    zone = _spec(cronjob).get("timeZone")
    if zone is not None:
        try:
            load_zone(str(zone))
        except ScheduleError as exc:
            if events is not None:
                events.append(("Warning", "InvalidTimeZone", f'Invalid time zone "{zone}": {exc}'))
            raise
    return parse(schedule_text(cronjob, events))


@dataclass(frozen=True)
class Window:
    earliest: datetime  # where counting started
    most_recent: datetime | None  # the latest due time <= now, if any
    missed: int  # due times between the first one and now (approximate, as Kubernetes counts)

    @property
    def missed_class(self) -> str:
        return "none" if self.missed <= 0 else "few" if self.missed <= MANY_MISSED else "many"


def window(cronjob: Mapping[str, Any], now: datetime, schedule: Schedule, with_deadline: bool) -> Window:
    """Kubernetes' mostRecentScheduleTime; raises :class:`ScheduleError` for a schedule whose
    consecutive times are less than a second apart (one that never fires)."""
    stamp = _status(cronjob).get("lastScheduleTime") or _meta(cronjob).get("creationTimestamp")
    earliest = parse_time(str(stamp)) if stamp else now
    deadline = _spec(cronjob).get("startingDeadlineSeconds")
    if with_deadline and deadline is not None:
        earliest = max(earliest, now - timedelta(seconds=int(deadline)))
    t1 = schedule.next(earliest)
    t2 = schedule.next(t1)
    if now < t1:
        return Window(earliest, None, 0)
    if now < t2:
        return Window(earliest, t1, 0)
    between = round((t2 - t1).total_seconds())
    if between < 1:
        raise ScheduleError(NEVER)
    missed = int((now - t1).total_seconds()) // between + 1
    # start one period early so that irregular schedules (weekdays only, ...) land on a real time
    most_recent = None
    for t in schedule.times_after(t1 + timedelta(seconds=(missed - 2) * between)):
        if t > now:
            break
        most_recent = t
    return Window(earliest, most_recent, missed)


def due_time(cronjob: Mapping[str, Any], now: datetime, schedule: Schedule, events: list[Event]) -> datetime | None:
    """The scheduled time of the run to start now (the window honours the starting deadline)."""
    found = window(cronjob, now, schedule, with_deadline=True)
    if found.most_recent is None or found.most_recent > now:
        return None
    if found.missed_class == "many":
        events.append(
            (
                "Warning",
                "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew",
            )
        )
    return found.most_recent


def requeue_after(cronjob: Mapping[str, Any], now: datetime, schedule: Schedule) -> timedelta | None:
    """When to look at the CronJob again: the next due time + 100 ms, counted from ``now``
    (None when the schedule never fires)."""
    try:
        found = window(cronjob, now, schedule, with_deadline=False)
        base = found.most_recent or (found.earliest if found.missed == 0 else now)
    except ScheduleError:
        base = now
    try:
        return schedule.next(base) + REQUEUE_PADDING - now
    except ScheduleError:
        return None


# -- Jobs ----------------------------------------------------------------------------------------


def job_name(cronjob: Mapping[str, Any], scheduled: datetime) -> str:
    """Deterministic per run, so a run is never created twice."""
    return f"{_meta(cronjob).get('name') or ''}-{int(scheduled.timestamp()) // 60}"


def controller_ref(cronjob: Mapping[str, Any]) -> dict[str, Any]:
    meta = _meta(cronjob)
    return {
        "apiVersion": API_VERSION,
        "kind": "CronJob",
        "name": meta.get("name") or "",
        "uid": meta.get("uid") or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def job_from_template(cronjob: Mapping[str, Any], scheduled: datetime) -> dict[str, Any]:
    """The Job of the run scheduled at ``scheduled``; raises :class:`ScheduleError` for a bad
    ``timeZone``."""
    template = _spec(cronjob).get("jobTemplate") or {}
    tmeta = template.get("metadata") or {}
    zone = load_zone(str(_spec(cronjob).get("timeZone") or ""))
    annotations = {str(k): str(v) for k, v in (tmeta.get("annotations") or {}).items()}
    annotations[SCHEDULED_TIMESTAMP] = format_zoned(scheduled.astimezone(zone))
    return {
        "apiVersion": API_VERSION,
        "kind": "Job",
        "metadata": {
            "name": job_name(cronjob, scheduled),
            "namespace": _meta(cronjob).get("namespace") or "",
            "labels": {str(k): str(v) for k, v in (tmeta.get("labels") or {}).items()},
            "annotations": annotations,
            "ownerReferences": [controller_ref(cronjob)],
        },
        "spec": copy.deepcopy(dict(template.get("spec") or {})),
    }


def _controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in _meta(obj).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def owns(cronjob: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """The Job is in the CronJob's namespace and its controller is this CronJob (kind, name, uid)."""
    ref = _controller_of(job)
    meta = _meta(cronjob)
    return (
        ref is not None
        and (_meta(job).get("namespace") or "") == (meta.get("namespace") or "")
        and ref.get("kind") == "CronJob"
        and ref.get("name") == meta.get("name")
        and ref.get("uid") == meta.get("uid")
    )


def owned_jobs(cronjob: Mapping[str, Any], jobs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [j for j in jobs if owns(cronjob, j)]


def job_phase(job: Mapping[str, Any]) -> str:
    return str((_status(job).get("state") or {}).get("phase") or "")


def is_finished(job: Mapping[str, Any]) -> bool:
    return job_phase(job) in FINISHED


def job_ref(job: Mapping[str, Any]) -> dict[str, Any]:
    """The ``status.active`` entry for a Job (an ObjectReference)."""
    meta = _meta(job)
    return {
        "apiVersion": API_VERSION,
        "kind": "Job",
        "namespace": meta.get("namespace") or "",
        "name": meta.get("name") or "",
        "uid": meta.get("uid") or "",
    }


def _creation_order(job: Mapping[str, Any]) -> tuple[int, str, str]:
    """Oldest first; Jobs without a creation time last; ties by name."""
    stamp = str(_meta(job).get("creationTimestamp") or "")
    return (0 if stamp else 1, format_time(parse_time(stamp)) if stamp else "", str(_meta(job).get("name") or ""))


# -- one sync ------------------------------------------------------------------------------------


@dataclass
class CronSync:
    """What one sync of a CronJob asks for."""

    status: dict[str, Any]  # the CronJob's new status
    status_updated: bool = False  # write ``status``
    create: dict[str, Any] | None = None  # a Job to create (its active entry has uid "": fill it in)
    delete: list[str] = field(default_factory=list)  # names of Jobs to delete (foreground)
    events: list[Event] = field(default_factory=list)
    requeue_after: timedelta | None = None  # look again after this long (None: not on a timer)
    error: str = ""  # the sync failed (retry with backoff)


class _Sync:
    def __init__(self, cronjob: Mapping[str, Any], jobs: Iterable[Mapping[str, Any]], now: datetime) -> None:
        self.cronjob, self.now = cronjob, now
        self.jobs = [j for j in jobs if (_meta(j).get("namespace") or "") == (_meta(cronjob).get("namespace") or "")]
        self.owned = owned_jobs(cronjob, self.jobs)
        status = copy.deepcopy(dict(_status(cronjob)))
        status["active"] = list(status.get("active") or [])
        self.out = CronSync(status=status)

    @property
    def active(self) -> list[dict[str, Any]]:
        active: list[dict[str, Any]] = self.out.status["active"]
        return active

    def _in_active(self, uid: str) -> bool:
        return bool(uid) and any(ref.get("uid") == uid for ref in self.active)

    def _drop_active(self, uid: str) -> None:
        self.out.status["active"] = [ref for ref in self.active if ref.get("uid") != uid]

    def _event(self, kind: str, reason: str, message: str) -> None:
        self.out.events.append((kind, reason, message))

    def _delete(self, job: Mapping[str, Any]) -> None:
        name = str(_meta(job).get("name") or "")
        self.out.delete.append(name)
        self._drop_active(str(_meta(job).get("uid") or ""))
        self._event("Normal", "SuccessfulDelete", f'Deleted job "{name}"')
        self.out.status_updated = True

    def finished(self) -> None:
        successful: list[Mapping[str, Any]] = []
        failed: list[Mapping[str, Any]] = []
        for job in self.owned:
            if not is_finished(job):
                continue
            uid = str(_meta(job).get("uid") or "")
            if self._in_active(uid):
                self._drop_active(uid)
                self._event(
                    "Normal", "SawCompletedJob", f"Saw completed job: {_meta(job).get('name')} in active, remove"
                )
                self.out.status_updated = True
            if job_phase(job) == "Completed":
                self._saw_success(job)
                successful.append(job)
            elif job_phase(job) == "Failed":
                failed.append(job)
        for jobs, limit in (
            (successful, _spec(self.cronjob).get("successfulJobsHistoryLimit")),
            (failed, _spec(self.cronjob).get("failedJobsHistoryLimit")),
        ):
            if limit is not None and len(jobs) > int(limit):
                for job in sorted(jobs, key=_creation_order)[: len(jobs) - int(limit)]:
                    self._delete(job)

    def _saw_success(self, job: Mapping[str, Any]) -> None:
        stamp = (_status(job).get("state") or {}).get("lastTransitionTime")
        last = self.out.status.get("lastSuccessfulTime")
        if stamp and (not last or parse_time(str(stamp)) > parse_time(str(last))):
            self.out.status["lastSuccessfulTime"] = format_time(parse_time(str(stamp)))
            self.out.status_updated = True
        elif not stamp and not last:
            self.out.status["lastSuccessfulTime"] = None  # Volcano records the (zero) time it has
            self.out.status_updated = True

    def references(self) -> None:
        for job in self.owned:
            if not self._in_active(str(_meta(job).get("uid") or "")) and not is_finished(job):
                self._event(
                    "Warning",
                    "OrphanedJob",
                    f"Detected orphaned job forgotten or not managed by controller: {_meta(job).get('name')} "
                    f"(UID: {_meta(job).get('uid')})",
                )
        owned_uids = {str(_meta(j).get("uid") or "") for j in self.owned}
        by_name = {str(_meta(j).get("name") or ""): j for j in self.jobs}
        for ref in list(self.active):
            if ref.get("uid") in owned_uids:
                continue
            found = by_name.get(str(ref.get("name") or ""))
            if found is None:
                self._event(
                    "Warning",
                    "StaleReference",
                    f'Active job "{ref.get("name")}" no longer exists (UID: {ref.get("uid")})',
                )
            elif _meta(found).get("uid") != ref.get("uid"):
                self._event(
                    "Warning",
                    "StaleReference",
                    f'Active job reference "{ref.get("name")}" points to a different UID '
                    f"(expected: {ref.get('uid')}, actual: {_meta(found).get('uid')})",
                )
            else:
                continue
            self._drop_active(str(ref.get("uid") or ""))
            self.out.status_updated = True

    def concurrency(self) -> bool:
        """Whether the run may start (Replace deletes the active Jobs first)."""
        policy = _spec(self.cronjob).get("concurrencyPolicy") or "Allow"
        if not self.active or policy == "Allow":
            return True
        if policy == "Forbid":
            self._event("Warning", "ForbidConcurrent", "Skipping job creation because another job is already running")
            return False
        if policy == "Replace":
            self._event("Warning", "ReplaceConcurrent", "Replacing active job for CronJob")
            by_name = {str(_meta(j).get("name") or ""): j for j in self.jobs}
            for ref in list(self.active):
                job = by_name.get(str(ref.get("name") or ""))
                if job is None:
                    self._event("Warning", "FailedGet", f'Get job: jobs.batch.volcano.sh "{ref.get("name")}" not found')
                    self.out.error = f"could not replace job {ref.get('namespace')}/{ref.get('name')}"
                    return False
                self._delete(job)
        return True

    def start(self, scheduled: datetime) -> None:
        """Create the run's Job, unless a Job of that name exists already."""
        job = job_from_template(self.cronjob, scheduled)
        name = job["metadata"]["name"]
        existing = next((j for j in self.jobs if _meta(j).get("name") == name), None)
        if existing is not None and name not in self.out.delete:
            if not owns(self.cronjob, existing):
                owner = (_controller_of(existing) or {}).get("name") or "none"
                self._event(
                    "Warning",
                    "ForeignJob",
                    f"Job {name} exists but is not owned by this CronJob (current owner: {owner})",
                )
                return
            if is_finished(existing) or self._in_active(str(_meta(existing).get("uid") or "")):
                return
            ref = job_ref(existing)
        else:
            self.out.create = job
            self._event("Normal", "SuccessfulCreate", f"Created job {name} for CronJob {_key(self.cronjob)}")
            ref = job_ref(job)
        self.active.append(ref)
        self.out.status["lastScheduleTime"] = format_time(scheduled)
        self.out.status_updated = True


def sync(cronjob: Mapping[str, Any], jobs: Iterable[Mapping[str, Any]], now: datetime) -> CronSync:
    """One sync of ``cronjob`` at ``now``; ``jobs``: the Jobs of its namespace (as cached)."""
    work = _Sync(cronjob, jobs, now)
    out = work.out
    if _meta(cronjob).get("deletionTimestamp"):
        return out
    work.finished()
    work.references()
    if _spec(cronjob).get("suspend"):
        return out
    try:
        schedule = schedule_of(cronjob, out.events)
    except ScheduleError as exc:
        out.error = str(exc)
        return out
    try:
        scheduled = due_time(cronjob, now, schedule, out.events)
    except ScheduleError as exc:
        out.events.append(("Warning", "InvalidSchedule", f"Error getting schedule time: {exc}"))
        out.error = str(exc)
        return out
    if scheduled is not None and not _already_started(cronjob, work, scheduled) and work.concurrency():
        work.start(scheduled)
    if not out.error:
        current = {**cronjob, "status": out.status}
        out.requeue_after = requeue_after(current, now, schedule)
    return out


def _already_started(cronjob: Mapping[str, Any], work: _Sync, scheduled: datetime) -> bool:
    name = job_name(cronjob, scheduled)
    last = _status(cronjob).get("lastScheduleTime")
    return any(ref.get("name") == name for ref in work.active) or (bool(last) and parse_time(str(last)) == scheduled)
