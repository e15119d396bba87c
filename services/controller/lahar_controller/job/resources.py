"""A pod template's quota usage, as Kubernetes' ResourceQuota evaluator counts it.

Volcano sizes a Job's PodGroup ``minResources`` with that evaluator, so the PodGroup carries the
same resource names a quota would (``cpu`` and ``requests.cpu``, ``limits.cpu``, ``pods``,
``count/pods``, extended resources with and without the ``requests.`` prefix).  Values are exact
``Fraction``s; ``quantity_text`` writes them back as quantities.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from lahar.api import quota

Usage = dict[str, Fraction]


def pod_quota_usage(spec: Mapping[str, Any]) -> Usage:
    """The quota usage of one pod built from ``spec`` (a pod that has not finished): the same
    evaluator the PodGroup controller uses for plain pods (``lahar.api.quota``)."""
    return quota.pod_quota_usage({"spec": spec})


def scaled(usage: Mapping[str, Fraction], count: int) -> Usage:
    return {name: value * count for name, value in usage.items()} if count > 0 else {}


def total(parts: Iterable[Mapping[str, Fraction]]) -> Usage:
    return quota.total(parts)


def quantity_text(amount: Fraction) -> str:
    """A quantity string of exactly ``amount`` (to the nano unit, rounded up as Go does)."""
    if amount.denominator == 1:
        return str(amount.numerator)
    milli = amount * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return f"{math.ceil(amount * 10**9)}n"


def as_resource_list(usage: Mapping[str, Fraction]) -> dict[str, str]:
    return {name: quantity_text(value) for name, value in sorted(usage.items())}


def parse_resource_list(raw: Any) -> Usage:
    return quota.resource_list(raw)
