"""Quantities as Go's ``resource.Quantity`` prints and checks them.

``lahar.api.quantity`` parses; this module adds what admission messages need: the canonical
``String()`` form (``1000m`` prints as ``1``, ``1024Mi`` as ``1Gi``) and the resource-name
classes that decide whether a value must be a whole number.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from lahar.api.quantity import Quantity, QuantityError, parse_quantity

__all__ = ["Quantity", "QuantityError", "canonical", "canonical_of", "parse_quantity"]

_DECIMAL_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIX = {10: "Ki", 20: "Mi", 30: "Gi", 40: "Ti", 50: "Pi", 60: "Ei"}
_EXP_RE = re.compile(r"[eE][+-]?\d+$")


def format_of(text: str) -> str:
    t = text.strip()
    if t[-2:] in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"):
        return "binary"
    if _EXP_RE.search(t):
        return "exponent"
    return "decimal"


def _decimal(amount: Fraction, exponent_style: bool) -> str:
    # Round up to nano units as Go does, then pull out the largest power of 1000.
    nanos = math.ceil(amount * 10**9)
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    mantissa, exp = abs(nanos), -9
    while mantissa % 1000 == 0 and exp < 18:
        mantissa //= 1000
        exp += 3
    if exponent_style:
        return f"{sign}{mantissa}" + (f"e{exp}" if exp else "")
    return f"{sign}{mantissa}{_DECIMAL_SUFFIX[exp]}"


def canonical(amount: Fraction, fmt: str = "decimal") -> str:
    if fmt == "binary":
        if -1024 < amount < 1024 or amount.denominator != 1:
            return _decimal(amount, False)
        value, exp = abs(int(amount)), 0
        while value % 1024 == 0 and exp < 60:
            value //= 1024
            exp += 10
        sign = "-" if amount < 0 else ""
        return f"{sign}{value}{_BINARY_SUFFIX.get(exp, '')}"
    return _decimal(amount, fmt == "exponent")


def canonical_of(q: Quantity) -> str:
    """``q.String()`` for a quantity parsed from ``q.text``."""
    text = q.text if isinstance(q.text, str) else str(q.text)
    return canonical(q.amount, format_of(text))


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
