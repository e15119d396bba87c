"""Volcano's scheduler metrics, under Volcano's names, types, units and labels (the service shell).

Latencies, counters and the per-task stages are ordinary Prometheus metrics fed after each
session.  The queue and job gauges are derived at scrape time from the last session's numbers
(``volcano_series``), so a deleted queue or job loses its series at the next session, and a
replica that stops leading exports none of them (``clear``): only the leader schedules.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from lahar_scheduler.framework.jobs import JobInfo, TaskInfo
from lahar_scheduler.framework.session import SessionResult
from lahar_scheduler.framework.snapshot import parse_time
from lahar_scheduler.framework.stats import SessionStats
from lahar_scheduler.volcano_series import GAUGES, JobTimes, Sample, job_time_samples, session_samples

# Task stages of volcano_task_scheduling_latency_milliseconds (Volcano's names)
WATCHED, ASSUMED, BOUND = "Watched", "Assumed", "Bound"
EVICTING_ACTIONS = ("preempt", "reclaim", "gangpreempt", "gangreclaim")
COUNTERS = {
    "volcano_total_preemption_attempts": "Total preemption attempts in the cluster till now (a counter)",
    "volcano_job_retry_counts": "Number of retry counts for one job (a counter)",
}


def exponential_range(low: float, high: float, count: int) -> list[float]:
    """Go client's ExponentialBucketsRange: ``count`` buckets from ``low`` to ``high``."""
    factor = (high / low) ** (1.0 / (count - 1))
    return [low * factor**i for i in range(count)]


class SessionGauges(Collector):
    """The queue and job gauges of the last session, each job's scheduling times, and the two
    counters whose Volcano names lack ``_total``.

    prometheus_client renames every counter to ``…_total``; Volcano's Go client keeps
    ``volcano_total_preemption_attempts`` and ``volcano_job_retry_counts`` as they are, so those
    are exported here under their exact names, typed ``unknown`` (PromQL's ``rate`` works alike)."""

    def __init__(self) -> None:
        self.last: SessionStats | None = None
        self.times: dict[str, JobTimes] = {}  # by job uid
        self.preemption_attempts = 0.0
        self.retries: dict[str, float] = {}  # by job_id (the PodGroup's name, as Volcano)

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(name, help_) for name, help_ in GAUGES.items()] + [
            Metric(name, help_, "unknown") for name, help_ in COUNTERS.items()
        ]

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for name, labels, value in self._samples():
            family = families.get(name)
            if family is None:
                kind = "gauge" if name in GAUGES else "unknown"
                family = families[name] = Metric(name, GAUGES.get(name) or COUNTERS[name], kind)
            family.add_sample(name, labels, value)
        yield from families.values()

    def _samples(self) -> Iterator[Sample]:
        if self.last is not None:
            yield from session_samples(self.last)
        for times in list(self.times.values()):
            yield from job_time_samples(times)
        yield "volcano_total_preemption_attempts", {}, self.preemption_attempts
        for job_id, count in list(self.retries.items()):
            yield "volcano_job_retry_counts", {"job_id": job_id}, count


class VolcanoMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        ms = "milliseconds"
        self.e2e = Histogram(
            "volcano_e2e_scheduling_latency_milliseconds",
            "Duration of a single scheduling session in milliseconds, from session open through the actions to close",
            buckets=exponential_range(1, 5000, 20),
            registry=registry,
        )
        self.open_session = Histogram(
            "volcano_open_session_duration_milliseconds",
            f"Duration of opening a scheduling session in {ms}, including plugin OnSessionOpen",
            buckets=exponential_range(1, 5000, 20),
            registry=registry,
        )
        self.e2e_job = Histogram(
            "volcano_e2e_job_scheduling_latency_milliseconds",
            "E2e job scheduling latency in milliseconds (from job creation to its last task assumed)",
            buckets=exponential_range(100, 120000, 30),
            registry=registry,
        )
        self.plugin = Histogram(
            "volcano_plugin_scheduling_latency_milliseconds",
            "Plugin scheduling latency in milliseconds",
            ["plugin", "OnSession"],
            buckets=exponential_range(0.1, 100, 15),
            registry=registry,
        )
        self.action = Histogram(
            "volcano_action_scheduling_latency_milliseconds",
            "Action scheduling latency in milliseconds",
            ["action"],
            buckets=exponential_range(1, 2000, 20),
            registry=registry,
        )
        # Volcano ≤ 1.10 timed plugins and actions in microseconds; dashboards built then query these.
        self.plugin_us = Histogram(
            "volcano_plugin_scheduling_latency_microseconds",
            "Plugin scheduling latency in microseconds (Volcano before 1.11)",
            ["plugin", "OnSession"],
            buckets=[5.0 * 2**i for i in range(10)],
            registry=registry,
        )
        self.action_us = Histogram(
            "volcano_action_scheduling_latency_microseconds",
            "Action scheduling latency in microseconds (Volcano before 1.11)",
            ["action"],
            buckets=[5.0 * 2**i for i in range(10)],
            registry=registry,
        )
        self.task = Histogram(
            "volcano_task_scheduling_latency_milliseconds",
            "Task scheduling latency from creation to various stages in milliseconds",
            ["stage"],
            buckets=exponential_range(50, 60000, 30),
            registry=registry,
        )
        self.attempts = Counter(
            "volcano_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ["result"],
            registry=registry,
        )
        for result in ("scheduled", "unschedulable", "error"):
            self.attempts.labels(result)
        self.evictions = Counter(
            "volcano_eviction_transactions",
            "Total number of committed eviction transactions, by action",
            ["action"],
            registry=registry,
        )
        for action in ("preempt", "reclaim"):  # the evicting actions Lahar has
            self.evictions.labels(action)
        self.preemption_victims = Gauge(
            "volcano_pod_preemption_victims", "Number of selected preemption victims", registry=registry
        )
        self.gauges = SessionGauges()
        registry.register(self.gauges)

    # -- after a session --------------------------------------------------------------------------
    def session(self, result: SessionResult, jobs: dict[str, JobInfo], seconds: float, now: float) -> None:
        """One session's metrics: ``seconds`` it took, ``now`` in epoch seconds, ``jobs`` the snapshot's."""
        stats = result.stats
        self.e2e.observe(seconds * 1000)
        if stats.open_seconds is not None:
            self.open_session.observe(stats.open_seconds * 1000)
        for (plugin, hook), took in stats.plugin_seconds.items():
            self.plugin.labels(plugin, hook).observe(took * 1000)
            self.plugin_us.labels(plugin, hook).observe(took * 1e6)
        for action, took in stats.action_seconds.items():
            self.action.labels(action).observe(took * 1000)
            self.action_us.labels(action).observe(took * 1e6)
        self.attempts.labels("scheduled").inc(len(result.binds))
        unschedulable = sum(1 for r in result.task_reasons.values() if r.reason == "Unschedulable")
        self.attempts.labels("unschedulable").inc(unschedulable)
        if stats.preemption_victims is not None:
            self.preemption_victims.set(stats.preemption_victims)
        self.gauges.preemption_attempts += stats.preemption_attempts
        for action, commits in stats.eviction_transactions.items():
            if action in EVICTING_ACTIONS:  # Volcano bounds the label to these
                self.evictions.labels(action).inc(commits)
        for task, _node in result.binds:
            self.task_stage(ASSUMED, task, now)
        self._job_times(result, jobs, now)
        self._retries(stats, jobs)
        self.gauges.last = stats

    def task_stage(self, stage: str, task: TaskInfo, now: float) -> None:
        if task.creation:
            self.task.labels(stage).observe(max(0.0, now - parse_time(task.creation)) * 1000)

    def _job_times(self, result: SessionResult, jobs: dict[str, JobInfo], now: float) -> None:
        times = self.gauges.times
        for uid in [uid for uid in times if uid not in jobs]:
            del times[uid]  # the job is gone: so are its series
        for uid, job in jobs.items():
            if uid not in times and job.creation:
                times[uid] = JobTimes(job.name, job.namespace, job.queue, parse_time(job.creation))
        placed = {task.job for task, _node in result.binds} | {
            job for job, d in result.decisions.items() if d.chosen and job in times
        }
        for uid in placed:
            t = times.get(uid)
            if t is None:
                continue
            t.duration_ms, t.last = max(0.0, now - t.created) * 1000, now
            self.e2e_job.observe(t.duration_ms)

    def _retries(self, stats: SessionStats, jobs: dict[str, JobInfo]) -> None:
        retries = self.gauges.retries
        for job in stats.jobs.values():
            if job.retried:
                retries[job.name] = retries.get(job.name, 0.0) + 1
        alive = {job.name for job in jobs.values()}
        for name in [name for name in retries if name not in alive]:
            del retries[name]  # the job is gone: so is its series

    def clear(self) -> None:
        """No longer leading: the queue and job gauges are the new leader's to export."""
        self.gauges.last = None
        self.gauges.times.clear()
        self.gauges.retries.clear()
