"""Kubernetes resource quantities, parsed with the API server's rules.

A quantity is ``<sign><digits>[.<digits>][<suffix>]`` where the suffix is a binary SI
suffix (``Ki`` .. ``Ei``), a decimal SI suffix (``m``, ``k``, ``M`` .. ``E``; ``u`` and ``n``
too) or a decimal exponent (``e3``, ``E-2``).  Values are kept exact as ``Fraction`` so that
``MilliValue`` and ``Value`` round up exactly as ``resource.Quantity`` does.

No Python library parses quantities with exactly these rules (``kubernetes.utils.parse_quantity``
accepts a looser grammar and returns ``Decimal`` without the API server's rounding), so this is
written here.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_GRAMMAR = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)


# Bounds: every consumer turns quantities into int64 milli-units (Go's MilliValue) or floats, so
# a larger value cannot be held; and a long text is never a real quantity, only work to parse.
MAX_TEXT = 64
MAX_MILLI = 2**63 - 1


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity, or one too large to hold; ``why`` is the
    reason alone (empty when the text does not match the grammar)."""

    def __init__(self, message: str, why: str = "") -> None:
        super().__init__(message)
        self.why = why


def _refuse(value: object, why: str = "") -> QuantityError:
    return QuantityError(f"{_shown(value)} is not a quantity" + (f": {why}" if why else ""), why)


def _shown(value: object) -> str:
    """The value for a message, cut short (and a huge int never printed: repr could refuse it)."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:32]}...({len(text)} characters)"


def _bounded(amount: Fraction, original: object) -> Fraction:
    if abs(math.ceil(amount * 1000)) > MAX_MILLI:
        raise _refuse(original, "too large (more than 2^63-1 milli-units)")
    return amount


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    match = _GRAMMAR.match(text)
    if match is None:
        raise _refuse(text)
    number = Fraction(match.group("num"))
    suffix = match.group("suffix") or ""
    if suffix in _BINARY:
        number *= _BINARY[suffix]
    elif suffix in _DECIMAL:
        number *= _DECIMAL[suffix]
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > 64:
            raise _refuse(text, "exponent out of range")
        number *= Fraction(10) ** exponent
    return _bounded(-number if match.group("sign") == "-" else number, text)


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity as YAML or JSON may carry it: a string, or a bare number."""
    if isinstance(value, bool):
        raise _refuse(value)
    if isinstance(value, int):
        return _bounded(Fraction(value), value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _refuse(value)
        return _bounded(Fraction(str(value)), value)
    if not isinstance(value, str):
        raise _refuse(value)
    text = value.strip()
    if len(text) > MAX_TEXT:
        raise _refuse(value, f"longer than {MAX_TEXT} characters")
    return _parse_text(text)


def milli_value(q: Fraction) -> int:
    """``Quantity.MilliValue()``: thousandths, rounded up (away from zero for positives)."""
    return math.ceil(q * 1000)


def value(q: Fraction) -> int:
    """``Quantity.Value()``: units, rounded up."""
    return math.ceil(q)


class Quantity:
    """A parsed quantity that remembers the text it came from (so it round-trips)."""

    # A quantity is never changed once made, and one object stands for every equal text a
    # decode meets (lahar_scheduler.deltas): its milli and unit values are kept once computed,
    # as the Fraction arithmetic behind them is most of what building resource lists costs.
    __slots__ = ("_milli", "_units", "amount", "text")

    def __init__(self, text: str | int | float) -> None:
        self.amount: Fraction = parse_quantity(text)
        self.text: str | int | float = text
        self._milli: int | None = None
        self._units: int | None = None

    def __repr__(self) -> str:
        return f"Quantity({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and other.amount == self.amount

    def __hash__(self) -> int:
        return hash(self.amount)

    @property
    def milli(self) -> int:
        """``milli_value(self.amount)``."""
        if self._milli is None:
            self._milli = milli_value(self.amount)
        return self._milli

    @property
    def units(self) -> int:
        """``value(self.amount)``."""
        if self._units is None:
            self._units = value(self.amount)
        return self._units


def format_quantity(amount: float, milli: bool) -> str:
    """A readable quantity for messages: ``1500m`` → ``1.5``, bytes → ``2Gi`` where exact."""
    if milli:
        cores = amount / 1000
        return f"{cores:g}" if cores == int(cores) or (amount % 1 == 0 and amount >= 1000) else f"{amount:g}m"
    for suffix, factor in (
        ("Ei", 2**60),
        ("Pi", 2**50),
        ("Ti", 2**40),
        ("Gi", 2**30),
        ("Mi", 2**20),
        ("Ki", 2**10),
    ):
        if amount >= factor and amount % factor == 0:
            return f"{int(amount // factor)}{suffix}"
    return f"{amount:g}"


# --- the canonical form: Go's resource.Quantity String() ---------------------------------------------------

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


def canonical_text(text: str | int | float) -> str:
    """``text`` as the API server stores it (``1000m`` → ``1``, ``0.5Gi`` → ``512Mi``)."""
    return canonical(parse_quantity(text), format_of(str(text)))
