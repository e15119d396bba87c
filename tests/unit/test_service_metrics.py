"""ServiceMetrics.of: one metric set per registry and class, surviving service re-creation."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from lahar.service.metrics import ServiceMetrics


class _A(ServiceMetrics):
    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.n = Counter("lahar_test_a_total", "a", registry=registry)


class _B(ServiceMetrics):
    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.n = Counter("lahar_test_b_total", "b", registry=registry)


def test_one_set_per_registry_and_class() -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    a = _A.of(first)
    assert _A.of(first) is a  # a second Counter of the same name would raise
    assert _A.of(second) is not a
    b = _B.of(first)
    assert b is not a and isinstance(b, _B)
    a.n.inc()
    assert first.get_sample_value("lahar_test_a_total") == 1.0
    assert second.get_sample_value("lahar_test_a_total") == 0.0
