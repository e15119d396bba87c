"""Resource vectors with Volcano's arithmetic and comparison rules.

A ``Resource`` holds milli-cpu, memory bytes and scalar resources.  Scalars are milli-units
(``nvidia.com/gpu: 1`` → 1000) except ``pods``, which is a plain count.  Which scalar names are
*present* matters (Go maps tell a missing key from a zero): the ``Infinity`` default treats a
missing scalar as unbounded, and several checks only look at present names.  Comparisons use
Volcano's tolerance of 0.1 in internal units.

This module is the only place where resource arithmetic is written.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping

from lahar.api.quantity import Quantity, format_quantity

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
GPU = "nvidia.com/gpu"
MIN_RESOURCE = 0.1

# "pods" is requested by every pod, so dimension-filtered comparisons skip it.
IGNORED_SCALARS = frozenset({PODS})


class Dim(enum.Enum):
    """How a missing scalar dimension is read: as zero, or as unbounded."""

    ZERO = 0
    INFINITY = -1


def is_scalar_resource_name(name: str) -> bool:
    """Kubernetes' IsScalarResourceName: extended, hugepages, prefixed-native, attachable volumes."""
    if name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    if "kubernetes.io/" in name:
        return True
    return "/" in name and not name.startswith("requests.")


def _le(left: float, right: float) -> bool:
    return left < right or abs(left - right) < MIN_RESOURCE


class Resource:
    """A mutable resource vector; mutating methods return ``self`` so calls chain."""

    __slots__ = ("memory", "milli_cpu", "scalars")

    def __init__(self, milli_cpu: float = 0.0, memory: float = 0.0, scalars: dict[str, float] | None = None):
        self.milli_cpu = float(milli_cpu)
        self.memory = float(memory)
        self.scalars: dict[str, float] = dict(scalars) if scalars else {}

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_list(cls, rl: Mapping[str, Quantity | str | int | float] | None) -> Resource:
        """Volcano's NewResource: cpu in millis, memory in bytes, pods as a count, scalars in millis."""
        r = cls()
        if not rl:
            return r
        for name, raw in rl.items():
            q = raw if isinstance(raw, Quantity) else Quantity(raw)  # its values are kept: see Quantity
            if name == CPU:
                r.milli_cpu += q.milli
            elif name == MEMORY:
                r.memory += q.units
            elif name == PODS:
                r.add_scalar(PODS, q.units)
            elif name == EPHEMERAL_STORAGE:
                r.add_scalar(name, q.milli)
            elif name.startswith("count/"):
                continue
            elif is_scalar_resource_name(name):
                r.add_scalar(name, q.milli)
        return r

    @classmethod
    def infinite(cls) -> Resource:
        return cls(math.inf, math.inf)

    def clone(self) -> Resource:
        return Resource(self.milli_cpu, self.memory, self.scalars)

    # -- access -------------------------------------------------------------------------
    def get(self, name: str) -> float:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        return self.scalars.get(name, 0.0)

    def set(self, name: str, amount: float) -> None:
        if name == CPU:
            self.milli_cpu = amount
        elif name == MEMORY:
            self.memory = amount
        else:
            self.scalars[name] = amount

    def add_scalar(self, name: str, amount: float) -> None:
        self.scalars[name] = self.scalars.get(name, 0.0) + amount

    def names(self) -> list[str]:
        """Dimensions holding at least the tolerance (ResourceNames)."""
        out = []
        if self.milli_cpu >= MIN_RESOURCE:
            out.append(CPU)
        if self.memory >= MIN_RESOURCE:
            out.append(MEMORY)
        out.extend(n for n, v in self.scalars.items() if v >= MIN_RESOURCE)
        return out

    def all_names(self) -> list[str]:
        """cpu, memory and every present scalar, zero or not."""
        return [CPU, MEMORY, *self.scalars]

    def is_empty(self) -> bool:
        """BestEffort test: nothing requested apart from ``pods``."""
        if self.milli_cpu >= MIN_RESOURCE or self.memory >= MIN_RESOURCE:
            return False
        return all(v < MIN_RESOURCE for n, v in self.scalars.items() if n not in IGNORED_SCALARS)

    def is_zero(self, name: str) -> bool:
        return self.get(name) < MIN_RESOURCE

    # -- arithmetic ---------------------------------------------------------------------
    def add(self, rr: Resource) -> Resource:
        self.milli_cpu += rr.milli_cpu
        self.memory += rr.memory
        for name, amount in rr.scalars.items():
            self.scalars[name] = self.scalars.get(name, 0.0) + amount
        return self

    def add_times(self, rr: Resource, n: int) -> Resource:
        """``add(rr)`` ``n`` times, the same floats bit for bit: one multiplied add where that is
        exact (every amount here and in ``rr`` a whole number, every sum within 2**53: such
        integers are exact floats, so nothing rounds either way), else ``n`` adds."""
        if n > 1 and _exact_times(self, rr, n):
            self.milli_cpu += rr.milli_cpu * n
            self.memory += rr.memory * n
            for name, amount in rr.scalars.items():
                self.scalars[name] = self.scalars.get(name, 0.0) + amount * n
            return self
        for _ in range(n):
            self.add(rr)
        return self

    def sub(self, rr: Resource) -> Resource:
        """Subtract; scalars absent on the left stay absent (as Volcano's ``sub``)."""
        self.milli_cpu -= rr.milli_cpu
        self.memory -= rr.memory
        if self.scalars:
            for name, amount in rr.scalars.items():
                self.scalars[name] = self.scalars.get(name, 0.0) - amount
        return self

    def multi(self, ratio: float) -> Resource:
        self.milli_cpu *= ratio
        self.memory *= ratio
        for name in self.scalars:
            self.scalars[name] *= ratio
        return self

    def set_max(self, rr: Resource) -> Resource:
        self.milli_cpu = max(self.milli_cpu, rr.milli_cpu)
        self.memory = max(self.memory, rr.memory)
        if not self.scalars:
            self.scalars = dict(rr.scalars)
            return self
        for name, amount in rr.scalars.items():
            if name not in self.scalars or amount > self.scalars[name]:
                self.scalars[name] = amount
        return self

    def min_dimension(self, rr: Resource, default: Dim) -> Resource:
        """Per-dimension minimum; a scalar missing in ``rr`` is unbounded or zero by ``default``."""
        self.milli_cpu = min(self.milli_cpu, rr.milli_cpu)
        self.memory = min(self.memory, rr.memory)
        for name, amount in self.scalars.items():
            if name in rr.scalars:
                self.scalars[name] = min(amount, rr.scalars[name])
            elif default is Dim.ZERO:
                self.scalars[name] = 0.0
        return self

    def diff(self, rr: Resource, default: Dim) -> tuple[Resource, Resource]:
        """(increase, decrease) from ``rr`` to ``self``, missing scalars filled by ``default``."""
        fill = float(default.value)
        left = dict(self.scalars)
        right = dict(rr.scalars)
        for name in left:
            right.setdefault(name, fill)
        for name in right:
            left.setdefault(name, fill)
        inc, dec = Resource(), Resource()
        for lv, rv, name in ((self.milli_cpu, rr.milli_cpu, CPU), (self.memory, rr.memory, MEMORY)):
            if lv > rv:
                inc.set(name, lv - rv)
            else:
                dec.set(name, rv - lv)
        for name, lv in left.items():
            rv = right[name]
            if lv == fill and default is Dim.INFINITY:
                inc.scalars[name] = lv
            elif rv == fill and default is Dim.INFINITY:
                dec.scalars[name] = rv
            elif lv > rv:
                inc.scalars[name] = lv - rv
            else:
                dec.scalars[name] = rv - lv
        return inc, dec

    # -- comparisons --------------------------------------------------------------------
    def less_equal(self, rr: Resource, default: Dim = Dim.ZERO) -> bool:
        """Every dimension of ``self`` ≤ ``rr`` (with tolerance)."""
        if not _le(self.milli_cpu, rr.milli_cpu) or not _le(self.memory, rr.memory):
            return False
        if default is Dim.INFINITY and any(n not in self.scalars for n in rr.scalars):
            return False
        for name, lv in self.scalars.items():
            if name not in rr.scalars:
                if default is Dim.INFINITY:
                    continue
                rv = 0.0
            else:
                rv = rr.scalars[name]
            if not _le(lv, rv):
                return False
        return True

    def less(self, rr: Resource, default: Dim = Dim.ZERO) -> bool:
        if not (self.milli_cpu < rr.milli_cpu and self.memory < rr.memory):
            return False
        if default is Dim.INFINITY and any(n not in self.scalars for n in rr.scalars):
            return False
        for name, lv in self.scalars.items():
            if name not in rr.scalars and default is Dim.INFINITY:
                continue
            if not lv < rr.scalars.get(name, 0.0):
                return False
        return True

    def insufficient(self, rr: Resource, default: Dim = Dim.ZERO) -> list[str]:
        """Names where ``self`` > ``rr`` (LessEqualWithResourcesName)."""
        out = []
        if not _le(self.milli_cpu, rr.milli_cpu):
            out.append(CPU)
        if not _le(self.memory, rr.memory):
            out.append(MEMORY)
        for name, lv in self.scalars.items():
            if name not in rr.scalars and default is Dim.INFINITY:
                continue
            if not _le(lv, rr.scalars.get(name, 0.0)):
                out.append(name)
        return out

    def less_equal_in(self, rr: Resource | None, req: Resource | None) -> tuple[bool, list[str]]:
        """Compare only the dimensions ``req`` asks for, ignoring ``pods`` (no tolerance)."""
        if rr is None:
            names = self.names()
            return (not names), names
        if req is None:
            bad = self.insufficient(rr)
            return (not bad), bad
        bad = []
        if req.milli_cpu > 0 and self.milli_cpu > rr.milli_cpu:
            bad.append(CPU)
        if req.memory > 0 and self.memory > rr.memory:
            bad.append(MEMORY)
        if self.scalars:
            for name, amount in req.scalars.items():
                if name in IGNORED_SCALARS:
                    continue
                if amount > 0 and self.scalars.get(name, 0.0) > rr.scalars.get(name, 0.0):
                    bad.append(name)
        return (not bad), bad

    def fits_after(self, req: Resource, limit: Resource) -> bool:
        """``self.clone().add(req).less_equal_in(limit, req)[0]`` without the copy: whether
        holding ``req`` as well stays within ``limit`` on the dimensions ``req`` asks for (pods
        aside).  Queue plugins ask it for every task they admit."""
        if req.milli_cpu > 0 and self.milli_cpu + req.milli_cpu > limit.milli_cpu:
            return False
        if req.memory > 0 and self.memory + req.memory > limit.memory:
            return False
        for name, amount in req.scalars.items():
            if name in IGNORED_SCALARS:
                continue
            if amount > 0 and self.scalars.get(name, 0.0) + amount > limit.scalars.get(name, 0.0):
                return False
        return True

    def less_equal_partly(self, rr: Resource, default: Dim = Dim.ZERO) -> bool:
        """At least one dimension of ``self`` ≤ ``rr``."""
        if _le(self.milli_cpu, rr.milli_cpu) or _le(self.memory, rr.memory):
            return True
        if default is Dim.ZERO and any(n not in self.scalars for n in rr.scalars):
            return True
        for name, lv in self.scalars.items():
            if name not in rr.scalars:
                if default is Dim.INFINITY:
                    return True
                continue
            if _le(lv, rr.scalars[name]):
                return True
        return False

    def less_equal_partly_in(self, rr: Resource, req: Resource | None) -> tuple[bool, list[str]]:
        """At least one of the dimensions ``req`` asks for is ≤ (LessEqualPartlyWithDimension)."""
        if req is None:
            return False, []
        found = []
        if req.milli_cpu > 0 and _le(self.milli_cpu, rr.milli_cpu):
            found.append(CPU)
        if req.memory > 0 and _le(self.memory, rr.memory):
            found.append(MEMORY)
        for name, amount in req.scalars.items():
            if name in IGNORED_SCALARS:
                continue
            if amount > 0 and _le(self.get(name), rr.get(name)):
                found.append(name)
        return bool(found), found

    def less_equal_partly_in_nonzero(self, rr: Resource, req: Resource | None) -> tuple[bool, list[str]]:
        """As ``less_equal_partly_in`` but skipping dimensions that are zero on both sides."""
        if req is None:
            return False, []
        filtered = Resource()
        if req.milli_cpu > 0 and not (self.milli_cpu < MIN_RESOURCE and rr.milli_cpu < MIN_RESOURCE):
            filtered.milli_cpu = req.milli_cpu
        if req.memory > 0 and not (self.memory < MIN_RESOURCE and rr.memory < MIN_RESOURCE):
            filtered.memory = req.memory
        for name, amount in req.scalars.items():
            if amount > 0 and not (self.get(name) < MIN_RESOURCE and rr.get(name) < MIN_RESOURCE):
                filtered.scalars[name] = amount
        return self.less_equal_partly_in(rr, filtered)

    def greater_partly_in(self, rr: Resource | None, req: Resource | None) -> tuple[bool, list[str]]:
        """Some dimension ``req`` asks for is strictly greater in ``self`` (no tolerance)."""
        if req is None:
            return False, []
        rr = rr if rr is not None else Resource()
        found = []
        if req.milli_cpu > 0 and self.milli_cpu > rr.milli_cpu:
            found.append(CPU)
        if req.memory > 0 and self.memory > rr.memory:
            found.append(MEMORY)
        for name, amount in req.scalars.items():
            if name in IGNORED_SCALARS:
                continue
            if amount > 0 and self.get(name) > rr.get(name):
                found.append(name)
        return bool(found), found

    def greater_partly_in_relevant(self, rr: Resource | None, req: Resource | None) -> tuple[bool, list[str]]:
        """As ``greater_partly_in`` but only dimensions ``rr`` defines (non-zero cpu/memory, present scalars)."""
        if req is None:
            return False, []
        rr = rr if rr is not None else Resource()
        filtered = Resource()
        if req.milli_cpu > 0 and rr.milli_cpu >= MIN_RESOURCE:
            filtered.milli_cpu = req.milli_cpu
        if req.memory > 0 and rr.memory >= MIN_RESOURCE:
            filtered.memory = req.memory
        for name, amount in req.scalars.items():
            if amount > 0 and name in rr.scalars:
                filtered.scalars[name] = amount
        return self.greater_partly_in(rr, filtered)

    def equal(self, rr: Resource) -> bool:
        def eq(a: float, b: float) -> bool:
            return a == b or abs(a - b) < MIN_RESOURCE

        if not eq(self.milli_cpu, rr.milli_cpu) or not eq(self.memory, rr.memory):
            return False
        return all(eq(v, rr.scalars.get(n, 0.0)) for n, v in self.scalars.items())

    # -- presentation -------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"Resource({self})"

    def __str__(self) -> str:
        parts = [
            f"cpu {format_quantity(self.milli_cpu, True)}",
            f"memory {format_quantity(self.memory, False)}",
        ]
        for name in sorted(self.scalars):
            amount = self.scalars[name]
            shown = amount if name == PODS else amount / 1000
            parts.append(f"{name} {shown:g}")
        return ", ".join(parts)

    def to_list(self) -> dict[str, str]:
        """Back to a Kubernetes resource list (for status writes)."""
        # Canonical forms, as Kubernetes prints a Quantity: "4" not "4000m", "16Gi" not bytes.
        out = {CPU: _milli_text(self.milli_cpu), MEMORY: _bytes_text(self.memory)}
        for name, amount in self.scalars.items():
            out[name] = str(int(amount)) if name == PODS else _milli_text(amount)
        return out


def _milli_text(milli: float) -> str:
    whole = int(milli)
    return str(whole // 1000) if whole % 1000 == 0 else f"{whole}m"


def _bytes_text(amount: float) -> str:
    whole = int(amount)
    for suffix, size in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if whole >= size and whole % size == 0:
            return f"{whole // size}{suffix}"
    return str(whole)


_EXACT = float(2**53)


def _exact_times(acc: Resource, rr: Resource, n: int) -> bool:
    return (
        _whole_within(acc.milli_cpu, rr.milli_cpu, n)
        and _whole_within(acc.memory, rr.memory, n)
        and (not rr.scalars or all(_whole_within(acc.scalars.get(k, 0.0), v, n) for k, v in rr.scalars.items()))
    )


def _whole_within(held: float, amount: float, n: int) -> bool:
    """``held + amount * n`` and every sum on the way are integers a float holds exactly."""
    return (
        isinstance(held, float)
        and isinstance(amount, float)
        and held.is_integer()
        and amount.is_integer()
        and abs(held) + n * abs(amount) < _EXACT
    )


def exceeded_part(left: Resource | None, right: Resource | None) -> Resource:
    """Per-dimension ``max(0, left − right)``."""
    if right is None:
        return left.clone() if left is not None else Resource()
    if left is None:
        return Resource()
    return left.diff(right, Dim.ZERO)[0]


def intersection(a: Resource, b: Resource, ignore_pods: bool = True) -> list[str]:
    names_b = set(b.names())
    return [n for n in a.names() if n in names_b and not (ignore_pods and n in IGNORED_SCALARS)]


def share(allocated: float, total: float) -> float:
    """Volcano's helpers.Share: a ratio, with 0/0 = 0 and x/0 = 1."""
    if total == 0:
        return 0.0 if allocated == 0 else 1.0
    return allocated / total


def max_share(allocated: Resource, total: Resource, names: Iterable[str]) -> float:
    """The largest ``share`` of ``allocated`` in ``total`` over ``names`` (0 for none): the
    dominant-share loop of drf and proportion, which run it on every task a session moves,
    with the dimensions read in place."""
    best = 0.0
    for name in names:
        if name == CPU:
            a, t = allocated.milli_cpu, total.milli_cpu
        elif name == MEMORY:
            a, t = allocated.memory, total.memory
        else:
            a, t = allocated.scalars.get(name, 0.0), total.scalars.get(name, 0.0)
        s = (0.0 if a == 0 else 1.0) if t == 0 else a / t
        if s > best:
            best = s
    return best


def total(resources: Iterable[Resource]) -> Resource:
    out = Resource()
    for r in resources:
        out.add(r)
    return out


def resource_max(left: Resource, right: Resource) -> Resource:
    """Per-dimension maximum; scalars from either side, negatives dropped (helpers.Max)."""
    out = Resource(max(left.milli_cpu, right.milli_cpu), max(left.memory, right.memory))
    for name, amount in left.scalars.items():
        if amount >= 0:
            out.scalars[name] = amount
    for name, amount in right.scalars.items():
        if amount >= 0:
            out.scalars[name] = max(amount, out.scalars.get(name, 0.0))
    return out


def same(left: Resource, right: Resource) -> bool:
    """Exact equality, scalar key presence included (Go's DeepEqual on a Resource)."""
    return left.milli_cpu == right.milli_cpu and left.memory == right.memory and left.scalars == right.scalars
