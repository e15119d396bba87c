"""sla: jobs that have waited past their waiting time go first and are admitted regardless."""

from __future__ import annotations

import re

import msgspec

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import JobInfo
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.snapshot import parse_time
from lahar_scheduler.framework.types import TaskStatus, Vote
from lahar_scheduler.plugins.base import Plugin

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float | None:
    """Go's time.ParseDuration, in seconds; None when malformed."""
    s = text.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    if s == "0":
        return 0.0
    if not s:
        return None
    total, pos = 0.0, 0
    for m in _PART.finditer(s):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total if pos == len(s) else None


class SlaArgs(msgspec.Struct, forbid_unknown_fields=True):
    sla_waiting_time: str | None = msgspec.field(default=None, name="sla-waiting-time")

    def __post_init__(self) -> None:
        if self.sla_waiting_time is not None and parse_go_duration(self.sla_waiting_time) is None:
            raise ValueError(f"{self.sla_waiting_time!r} is not a duration such as 1h30m")


class SlaPlugin(Plugin):
    name = "sla"
    Args = SlaArgs

    def on_session_open(self, ssn: Session) -> None:
        args: SlaArgs = self.args or SlaArgs()
        default = parse_go_duration(args.sla_waiting_time) if args.sla_waiting_time else None
        self.ssn = ssn
        self.default = default if default is not None and default > 0 else None
        ssn.add(P.JOB_ORDER, self.job_order)
        ssn.add(P.JOB_ENQUEUEABLE, self.enqueueable)
        ssn.add(P.JOB_PIPELINED, self.pipelined)

    def waiting(self, job: JobInfo) -> float | None:
        """The job's own sla-waiting-time annotation, else the plugin's argument, else none."""
        if job.waiting_time:
            own = parse_go_duration(job.waiting_time)
            if own is not None:
                return own
        return self.default

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        """Earlier deadline first; jobs without a waiting time after those with one."""
        lw, rw = self.waiting(left), self.waiting(right)
        if lw is None:
            return 0 if rw is None else 1
        if rw is None:
            return -1
        ld, rd = parse_time(left.creation) + lw, parse_time(right.creation) + rw
        return -1 if ld < rd else (1 if ld > rd else 0)

    def _permit(self, job: JobInfo) -> Vote:
        w = self.waiting(job)
        if w is None or self.ssn.now - parse_time(job.creation) < w:
            return Vote.ABSTAIN
        return Vote.PERMIT

    def enqueueable(self, job: JobInfo) -> Vote:
        vote = self._permit(job)
        w = self.waiting(job)
        if w is not None:
            self.ssn.note(job, _enqueue_note(self.ssn.now - parse_time(job.creation), w, vote))
        return vote

    def pipelined(self, job: JobInfo) -> Vote:
        vote = self._permit(job)
        w = self.waiting(job)
        if vote == Vote.PERMIT and w is not None:
            self.ssn.note(job, _reserve_note(job, self.ssn.now - parse_time(job.creation), w))
        return vote


def duration(seconds: float) -> str:
    """A wait as a person reads it: 1h30m, 10m, 45s."""
    total = max(0, int(seconds))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{s}s" if s or not total else ""]
    return "".join(parts)


def _enqueue_note(waited: float, limit: float, vote: Vote) -> str:
    head = f"sla: waited {duration(waited)} of its sla-waiting-time {duration(limit)}"
    if vote == Vote.PERMIT:
        return f"{head}: past it, so sla votes to admit it whatever its queue's quota"
    return f"{head}: in {duration(limit - waited)} sla votes to admit it whatever its queue's quota"


def _reserve_note(job: JobInfo, waited: float, limit: float) -> str:
    """Past its waiting time a gang that is not whole keeps the places it got this session
    (Volcano's reservation: allocated and pipelined tasks hold their nodes, nothing binds)."""
    held = job.ready_num() + job.count(TaskStatus.PIPELINED)
    return (
        f"sla: waited {duration(waited)}, past its sla-waiting-time {duration(limit)}: "
        f"its {held} placed task(s) keep their nodes this session (reserved, not bound) "
        f"while it waits for {max(0, job.min_available - held)} more of minMember {job.min_available}"
    )
