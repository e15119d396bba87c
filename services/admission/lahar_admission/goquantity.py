"""Quantities as Go's ``resource.Quantity`` prints and checks them.

``lahar.api.quantity`` parses and gives the canonical ``String()`` form (``1000m`` prints as
``1``, ``1024Mi`` as ``1Gi``); this module adds what admission messages need on top: the
resource-name classes that decide whether a value must be a whole number.
"""

from __future__ import annotations

from functools import lru_cache

from lahar.api.quantity import Quantity, QuantityError, canonical, canonical_of, format_of, parse_quantity

__all__ = ["Quantity", "QuantityError", "canonical", "canonical_of", "format_of", "parse_quantity"]

# --- resource names (k8s.io/kubernetes/pkg/apis/core/helper) --------------------------------

STANDARD_INTEGER_RESOURCES = frozenset(
    {
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)


@lru_cache(maxsize=1024)
def is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


@lru_cache(maxsize=1024)
def is_extended_resource(name: str) -> bool:
    from lahar_admission.names import is_qualified_name

    if is_native_resource(name) or name.startswith("requests."):
        return False
    return not is_qualified_name("requests." + name)


@lru_cache(maxsize=1024)
def is_integer_resource(name: str) -> bool:
    return name in STANDARD_INTEGER_RESOURCES or is_extended_resource(name)


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


@lru_cache(maxsize=1024)
def overcommit_allowed(name: str) -> bool:
    return is_native_resource(name) and not is_hugepages(name)


def go_float2(value: float) -> str:
    """Go's ``%.2f``."""
    return f"{value:.2f}"
