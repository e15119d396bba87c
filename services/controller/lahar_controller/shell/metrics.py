"""The controller's metrics (one set per registry)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from lahar.service.metrics import ServiceMetrics


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
