"""Cron schedules as Volcano's (and Kubernetes') CronJob controller reads them (pure).

The grammar is robfig/cron's "standard" one: five fields (minute hour day-of-month month
day-of-week; ``?`` as ``*``; month and weekday names), the descriptors ``@yearly``/``@annually``,
``@monthly``, ``@weekly``, ``@daily``/``@midnight``, ``@hourly`` and ``@every <Go duration>``, and
an optional ``TZ=<zone>`` or ``CRON_TZ=<zone>`` prefix.  The field arithmetic is croniter's; this
module only checks that an expression is one robfig accepts (croniter accepts more: seconds and
year columns, ``L``, ``W``, ``#``, ``H``) and gives ``next`` robfig's meaning: the first time
strictly after ``t``, computed in the schedule's zone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter

from lahar_controller.kubetime import parse_go_duration

_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# field -> (low, high, names)
_FIELDS: tuple[tuple[int, int, tuple[str, ...]], ...] = (
    (0, 59, ()),
    (0, 23, ()),
    (1, 31, ()),
    (1, 12, _MONTHS),
    (0, 6, _DAYS),
)
_ATOM = re.compile(r"^(?:\*|\?|[0-9]+|[A-Za-z]+)$")
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
NEVER = "time difference between two schedules is less than 1 second"


class ScheduleError(ValueError):
    """A schedule robfig/cron would refuse, or one that never fires."""


def load_zone(name: str) -> tzinfo:
    """Go's ``time.LoadLocation``: "" and "UTC" are UTC; "Local" is the controller's zone (UTC)."""
    if name in ("", "UTC", "Local"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(f"unknown time zone {name}") from exc


def _value(atom: str, low: int, names: tuple[str, ...]) -> int:
    if atom.isdigit():
        return int(atom)
    upper = atom.upper()
    if upper not in names:
        raise ScheduleError(f"failed to parse int from {atom}")
    return names.index(upper) + (1 if low == 1 else 0)


def _check_field(text: str, low: int, high: int, names: tuple[str, ...]) -> None:
    for part in text.split(","):
        span, _, step = part.partition("/")
        if step and (not step.isdigit() or int(step) == 0):
            raise ScheduleError(f"bad step in {part}")
        bounds = span.split("-")
        if len(bounds) > 2 or not all(_ATOM.match(b) for b in bounds):
            raise ScheduleError(f"failed to parse {part}")
        if bounds[0] in ("*", "?"):
            if len(bounds) > 1:
                raise ScheduleError(f"failed to parse {part}")
            continue
        values = [_value(b, low, names) for b in bounds]
        if values[0] < low or values[-1] > high or values[0] > values[-1]:
            raise ScheduleError(f"range {span} out of bounds [{low}, {high}]")


def _check_fields(expr: str) -> str:
    fields = expr.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: {expr}")
    for text, (low, high, names) in zip(fields, _FIELDS, strict=True):
        _check_field(text, low, high, names)
    return " ".join(f.replace("?", "*") for f in fields)


@dataclass(frozen=True)
class Schedule:
    zone: tzinfo
    expr: str = ""  # five fields, checked (empty for @every)
    every: timedelta | None = None  # the constant delay of ``@every``

    def next(self, t: datetime) -> datetime:
        """The first time strictly after ``t`` (raises :class:`ScheduleError` if it never comes)."""
        if self.every is not None:
            return t.replace(microsecond=0) + self.every
        return next(self.times_after(t))

    def times_after(self, t: datetime) -> Iterator[datetime]:
        """Every time strictly after ``t``, in order."""
        if self.every is not None:
            current = t
            while True:
                current = self.next(current)
                yield current
        # croniter returns the start itself when it matches; robfig starts a whole second later
        start = t.astimezone(self.zone).replace(microsecond=0) + timedelta(seconds=1)
        it = croniter(self.expr, start - timedelta(microseconds=1), max_years_between_matches=5)
        while True:
            try:
                found = it.get_next(datetime)
            except CroniterBadDateError as exc:
                raise ScheduleError(NEVER) from exc
            yield found.astimezone(UTC)


def parse(spec: str, default_zone: str = "") -> Schedule:
    """A schedule with its zone: a ``TZ=``/``CRON_TZ=`` prefix, else ``default_zone``."""
    text = spec.strip()
    zone_name = default_zone
    if text.startswith(("TZ=", "CRON_TZ=")):
        head, _, text = text.partition(" ")
        zone_name = head.split("=", 1)[1]
        text = text.strip()
    zone = load_zone(zone_name)
    if text.startswith("@every "):
        try:
            delay = parse_go_duration(text[len("@every ") :])
        except ValueError as exc:
            raise ScheduleError(f"failed to parse duration {text}: {exc}") from exc
        whole = max(timedelta(seconds=1), timedelta(seconds=int(delay.total_seconds())))
        return Schedule(zone=zone, every=whole)
    if text.startswith("@"):
        if text not in _DESCRIPTORS:
            raise ScheduleError(f"unrecognized descriptor: {text}")
        text = _DESCRIPTORS[text]
    expr = _check_fields(text)
    try:
        croniter(expr, _EPOCH)  # a fixed start: croniter would otherwise read the clock
    except (CroniterBadCronError, CroniterError) as exc:
        raise ScheduleError(str(exc)) from exc
    return Schedule(zone=zone, expr=expr)
