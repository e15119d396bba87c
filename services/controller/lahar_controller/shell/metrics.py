"""The controller's metrics (one set per registry)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from lahar.service.metrics import ServiceMetrics

# Volcano's queue controller gauges: status counter -> series
PHASES = ("inqueue", "pending", "running", "unknown", "completed")
PODGROUP_COUNTS = {phase: f"volcano_queue_pod_group_{phase}_count" for phase in PHASES}
QueueCounts = Mapping[str, Mapping[str, int]]  # queue -> status counter -> PodGroups


class PodGroupCounts(Collector):
    """Each queue's PodGroups by phase, read from the leader's world at scrape time: a deleted
    queue has no series, and a standby (``source`` None) exports none."""

    def __init__(self) -> None:
        self.source: Callable[[], QueueCounts] | None = None

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return [GaugeMetricFamily(name, _help(phase)) for phase, name in PODGROUP_COUNTS.items()]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = self.source() if self.source is not None else {}
        for phase, name in PODGROUP_COUNTS.items():
            family = GaugeMetricFamily(name, _help(phase), labels=["queue_name"])
            for queue, by_phase in sorted(counts.items()):
                family.add_metric([queue], float(by_phase.get(phase, 0)))
            yield family


def _help(phase: str) -> str:
    return f"The number of {phase.capitalize()} PodGroup in this queue"


# Volcano Job phase -> Volcano's counter of the times a job reached it (labels job_name, queue_name)
JOB_PHASES = {"Completed": "volcano_job_completed_phase_count", "Failed": "volcano_job_failed_phase_count"}
JobPhases = Iterable[tuple[str, str, str]]  # (namespace/name, queue, phase) of each Volcano Job


class JobPhaseCounts(Collector):
    """Volcano's job_completed_phase_count and job_failed_phase_count.  Both phases are final, so a
    job reaches one at most once: the counter is 1 for a job in it, and the series goes with the
    job (Volcano deletes it then).  Read from the leader's world at scrape time; exported under
    Volcano's exact names (prometheus_client would append ``_total`` to a counter), typed
    ``unknown``."""

    def __init__(self) -> None:
        self.source: Callable[[], JobPhases] | None = None

    def describe(self) -> Iterable[Metric]:
        return [Metric(name, _job_help(phase), "unknown") for phase, name in JOB_PHASES.items()]

    def collect(self) -> Iterator[Metric]:
        families = {phase: Metric(name, _job_help(phase), "unknown") for phase, name in JOB_PHASES.items()}
        for job, queue, phase in self.source() if self.source is not None else ():
            family = families.get(phase)
            if family is not None:
                family.add_sample(family.name, {"job_name": job, "queue_name": queue}, 1.0)
        yield from families.values()


def _job_help(phase: str) -> str:
    return f"Number of job {phase.lower()} phase (a counter)"


class Metrics(ServiceMetrics):
    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.writes = Counter(
            "lahar_controller_writes_total", "API writes done", ["resource", "verb"], registry=registry
        )
        self.write_errors = Counter(
            "lahar_controller_write_errors_total", "API writes refused or failed", ["resource", "verb", "reason"],
            registry=registry,
        )  # fmt: skip
        self.bad = Counter(
            "lahar_controller_bad_deltas_total", "Deltas or objects skipped, by why", ["why"], registry=registry
        )
        self.handled = Counter(
            "lahar_controller_requests_total", "Work items handled, by controller and outcome",
            ["controller", "outcome"], registry=registry,
        )  # fmt: skip
        self.seconds = Histogram(
            "lahar_controller_request_seconds", "Time to handle one work item", ["controller"], registry=registry
        )
        self.world_seq = Gauge(
            "lahar_controller_world_seq",
            "The CLUSTER stream sequence this replica's world reflects (standbys follow too)",
            registry=registry,
        )
        self.waiting = Gauge(
            "lahar_controller_pending_keys", "Keys with work waiting", ["controller"], registry=registry
        )
        self.podgroup_counts = PodGroupCounts()
        registry.register(self.podgroup_counts)
        self.job_phases = JobPhaseCounts()
        registry.register(self.job_phases)
        # Volcano's ExponentialBucketsRange(50, 60000, 30)
        self.job_to_pod = Histogram(
            "volcano_controller_job_to_pod_creation_latency_milliseconds",
            "Latency from VCJob creation to pod created in milliseconds",
            buckets=[50 * 1200 ** (i / 29) for i in range(30)],
            registry=registry,
        )
