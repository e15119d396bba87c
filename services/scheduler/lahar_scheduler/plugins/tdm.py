"""tdm (time-division multiplexing): revocable nodes lent to preemptable work in time windows.

Nodes labelled ``volcano.sh/revocable-zone: <zone>`` belong to a revocable zone; the plugin's
arguments give each zone a daily window (``tdm.revocable-zone.<zone>: "HH:MM-HH:MM"``).  While the
window is open, only tasks that may use revocable nodes (annotation ``volcano.sh/revocable-zone:
"*"``, or preemptable) are placed there, and they prefer them; once it closes nothing is placed
there and the shuffle action evicts the preemptable tasks still running there, per job within its
disruption budget (``volcano.sh/jdb-max-unavailable`` / ``jdb-min-available``), at most once per
``tdm.evict.period``.  Preemptable or revocable tasks never preempt; other tasks preempt only
preemptable Running tasks on ordinary nodes, again within each job's budget.

Time is ``session.now`` (UTC; Volcano reads the scheduler's local clock), never a clock read here.
A window is anchored at the day of ``now``: it opens at start today and closes at end today, or
tomorrow when end ≤ start (so ``0:00-0:00`` is always open).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
from lahar_scheduler.framework.predicate import Failure
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.types import REVOCABLE_ZONE_KEY, Code, TaskStatus, Vote
from lahar_scheduler.plugins.base import Plugin
from lahar_scheduler.plugins.sla import parse_go_duration

if TYPE_CHECKING:
    from lahar_scheduler.framework.nodes import FloatArray, IntArray

ZONE_PREFIX = "tdm.revocable-zone."
EVICT_PERIOD = "tdm.evict.period"
MAX_NODE_SCORE = 100.0
DEFAULT_POD_EVICT_NUM = 1
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})")


class WindowError(ValueError):
    pass


def _clock(text: str, raw: str) -> tuple[int, int]:
    """Go's time.Parse("15:04"): hour in one or two digits up to 23, minute in two up to 59."""
    m = _CLOCK.fullmatch(text)
    if m is None or int(m.group(1)) > 23 or int(m.group(2)) > 59:
        raise WindowError(f"revocable zone {raw} format error: {text!r} is not HH:MM")
    return int(m.group(1)), int(m.group(2))


def parse_window(raw: str, now: float) -> tuple[float, float]:
    """(start, end) in epoch seconds of the window ``raw`` on the (UTC) day of ``now``."""
    parts = raw.strip().split("-")
    if len(parts) != 2:
        raise WindowError(f"revocable zone {raw} format error")
    (h1, m1), (h2, m2) = _clock(parts[0], raw), _clock(parts[1], raw)
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = day + timedelta(hours=h1, minutes=m1)
    end = day + timedelta(hours=h2, minutes=m2)
    if (h1, m1) >= (h2, m2):
        end += timedelta(days=1)
    return start.timestamp(), end.timestamp()


class TdmArgs(msgspec.Struct):
    zones: dict[str, str] = {}  # zone → its window, "HH:MM-HH:MM"
    evict_period: float = 60.0  # seconds between two evictions of closed zones (Volcano: 1m)


def parse_tdm_args(raw: dict[str, Any], path: str, errors: list[str]) -> TdmArgs:
    """``tdm.revocable-zone.<zone>`` keys are open-ended, so the arguments are parsed by hand.
    Volcano only finds a malformed window when a node of its zone is filtered; here it is a
    configuration error, reported with the others."""
    out = TdmArgs()
    for key, val in raw.items():
        key = str(key)
        where = f"{path}.{key}"
        if key.startswith(ZONE_PREFIX) and len(key) > len(ZONE_PREFIX):
            if not isinstance(val, str):
                errors.append(f'{where}: expected a window such as "10:00-21:00", got {val!r}')
                continue
            try:
                parse_window(val, 0.0)
            except WindowError as exc:
                errors.append(f"{where}: {exc}")
                continue
            out.zones[key[len(ZONE_PREFIX) :]] = val
        elif key == EVICT_PERIOD:
            period = parse_go_duration(val) if isinstance(val, str) else None
            if period is None:
                errors.append(f"{where}: expected a duration such as 1m, got {val!r}")
                continue
            out.evict_period = period
        else:
            errors.append(f"{where}: unknown argument (known: {ZONE_PREFIX}<zone>, {EVICT_PERIOD})")
    return out


def task_revocable_zone(task: TaskInfo) -> str:
    """Volcano's GetPodRevocableZone: "*" when the pod may run on revocable nodes, else ""."""
    annotations = task.pod.metadata.annotations
    value = annotations.get(REVOCABLE_ZONE_KEY)
    if value is not None:
        return "*" if value == "*" else ""
    raw = annotations.get("volcano.sh/preemptable")
    return "*" if raw in ("1", "t", "T", "TRUE", "true", "True") else ""


def int_or_percent(raw: str, total: int) -> int:
    """intstr.Parse then GetValueFromIntOrPercent rounding up; unparsable counts 0."""
    text = raw
    try:
        return int(text)
    except ValueError:
        pass
    if text.endswith("%"):
        try:
            return math.ceil(int(text[:-1]) * total / 100)
        except ValueError:
            return 0
    return 0


def max_pod_evict_num(job: JobInfo) -> int:
    """How many more of the job's tasks its disruption budget lets go (getMaxPodEvictNum)."""
    annotations = job.podgroup.metadata.annotations if job.podgroup is not None else {}
    running = job.count(TaskStatus.RUNNING)
    total = len(job.tasks)
    # Volcano reads jdb-min-available first and ignores jdb-max-unavailable when both are set.
    if JDB_MIN_AVAILABLE not in annotations and JDB_MAX_UNAVAILABLE in annotations:
        max_unavailable = int_or_percent(annotations[JDB_MAX_UNAVAILABLE], total)
        finished = job.count(TaskStatus.SUCCEEDED, TaskStatus.FAILED)
        unavailable = total - finished - running
        return 0 if unavailable >= max_unavailable else max_unavailable - unavailable
    if JDB_MIN_AVAILABLE in annotations:
        min_available = int_or_percent(annotations[JDB_MIN_AVAILABLE], total)
        if running >= min_available:
            return running - min_available
    return DEFAULT_POD_EVICT_NUM


class TdmPlugin(Plugin):
    name = "tdm"
    Args = TdmArgs
    parse_args = staticmethod(parse_tdm_args)

    def on_session_open(self, ssn: Session) -> None:
        args: TdmArgs = self.args or TdmArgs()
        self.ssn = ssn
        self.args_ = args
        # Why each zone is closed now (None: open), decided once per session.
        self.closed: dict[str, str | None] = {}
        for zone, raw in args.zones.items():
            start, end = parse_window(raw, ssn.now)
            self.closed[zone] = None if start <= ssn.now <= end else f"current time beyond revocable zone {zone}:{raw}"
        zones = [info.labels.get(REVOCABLE_ZONE_KEY, "") for info in ssn.node_list]
        self.zone_of = np.array(zones, dtype=object)
        self.revocable = np.array([z != "" for z in zones], dtype=bool)
        self.open_zone = np.array([z != "" and self._why_closed(z) is None for z in zones], dtype=bool)
        ssn.add(P.PREDICATE, self.predicate)
        ssn.add(P.NODE_ORDER, self.node_order)
        ssn.add(P.PREEMPTABLE, self.preemptable)
        ssn.add(P.VICTIM_TASKS, self.victim_tasks)
        ssn.add(P.JOB_ORDER, self.job_order)
        ssn.add(P.JOB_PIPELINED, self.job_pipelined)
        ssn.add(P.JOB_STARVING, self.job_starving)

    def _why_closed(self, zone: str) -> str | None:
        if zone not in self.closed:
            return f"revocable zone {zone} not support"
        return self.closed[zone]

    # -- placement ----------------------------------------------------------------------------
    def predicate(self, task: TaskInfo, idx: IntArray) -> list[Failure]:
        rev = self.revocable[idx]
        if not rev.any():
            return []
        failures: list[Failure] = []
        shut = rev & ~self.open_zone[idx]
        for zone in sorted(set(self.zone_of[idx][shut])):
            mask = shut & (self.zone_of[idx] == zone)
            failures.append(Failure(mask, str(self._why_closed(zone)), Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        if not task_revocable_zone(task):
            lent = rev & self.open_zone[idx]
            if lent.any():
                failures.append(
                    Failure(lent, "not allow to dispatch to revocable node", Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
                )
        return failures

    predicate.is_local = lambda task: True  # type: ignore[attr-defined]

    def node_order(self, task: TaskInfo, idx: IntArray) -> FloatArray:
        if not task_revocable_zone(task):
            return np.zeros(len(idx))
        return np.where(self.open_zone[idx], MAX_NODE_SCORE, 0.0)

    # -- eviction -----------------------------------------------------------------------------
    def preemptable(self, preemptor: TaskInfo, preemptees: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        """Preemptable or revocable tasks never preempt; others take preemptable Running tasks on
        ordinary nodes, per job within its budget."""
        if preemptor.preemptable or task_revocable_zone(preemptor):
            return [], Vote.REJECT
        by_job: dict[str, list[TaskInfo]] = {}
        table = self.ssn.nodes
        for t in preemptees:
            if not t.preemptable or t.status != TaskStatus.RUNNING:
                continue
            node = table.by_name.get(t.node_name)
            if node is None or self.revocable[node.index]:
                continue
            by_job.setdefault(t.job, []).append(t)
        return self._within_budgets(by_job), Vote.PERMIT

    def victim_tasks(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        """Preemptable Running tasks on nodes of closed zones, per job within its budget; at most
        once per evict period (the last time is kept on the snapshot, across sessions)."""
        memory = self.ssn.snapshot.plugin_memory.setdefault(self.name, {})
        last = memory.get("last_evict_at")
        if isinstance(last, float) and last + self.args_.evict_period > self.ssn.now:
            return []
        victims: list[TaskInfo] = []
        for zone in self.args_.zones:
            if self.closed[zone] is None:
                continue
            by_job: dict[str, list[TaskInfo]] = {}
            for info in self.ssn.node_list:
                if info.labels.get(REVOCABLE_ZONE_KEY, "") != zone:
                    continue
                for t in info.tasks.values():
                    if t.preemptable and t.status == TaskStatus.RUNNING:
                        by_job.setdefault(t.job, []).append(t)
            victims += self._within_budgets(by_job)
        memory["last_evict_at"] = float(self.ssn.now)
        return victims

    def _within_budgets(self, by_job: dict[str, list[TaskInfo]]) -> list[TaskInfo]:
        out: list[TaskInfo] = []
        for job_id, tasks in by_job.items():
            job = self.ssn.jobs.get(job_id)
            if job is not None:
                out += tasks[: min(max_pod_evict_num(job), len(tasks))]
        return out

    # -- jobs ---------------------------------------------------------------------------------
    @staticmethod
    def job_order(left: JobInfo, right: JobInfo) -> int:
        """Jobs that may not be preempted go first."""
        if left.preemptable == right.preemptable:
            return 0
        return 1 if left.preemptable else -1

    @staticmethod
    def job_pipelined(job: JobInfo) -> Vote:
        return Vote.PERMIT if job.is_pipelined() else Vote.REJECT

    @staticmethod
    def job_starving(job: JobInfo) -> bool:
        """A preemptable (elastic) job never preempts for more; others do while tasks pend."""
        return not job.preemptable and job.count(TaskStatus.PENDING) > 0
