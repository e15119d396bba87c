"""A service's set of Prometheus metrics, made once per registry."""

from __future__ import annotations

import weakref
from typing import Any, ClassVar, TypeVar

from prometheus_client import CollectorRegistry

M = TypeVar("M", bound="ServiceMetrics")


class ServiceMetrics:
    """Subclasses create their metrics in ``__init__(registry)``; ``of(registry)`` returns the one
    set for that registry.  A registry refuses a metric name twice, and a service object is
    re-created after each leadership change, so the set must outlive the service object."""

    _sets: ClassVar[weakref.WeakKeyDictionary[CollectorRegistry, dict[type, Any]]] = weakref.WeakKeyDictionary()

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    @classmethod
    def of(cls: type[M], registry: CollectorRegistry) -> M:
        per_class = ServiceMetrics._sets.setdefault(registry, {})
        got = per_class.get(cls)
        if got is None:
            got = per_class[cls] = cls(registry)
        assert isinstance(got, cls)
        return got
