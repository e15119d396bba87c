"""Resource vectors with Volcano's units, tolerance and missing-dimension rules."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lahar.api.resource import (
    Dim,
    Resource,
    exceeded_part,
    intersection,
    is_scalar_resource_name,
    max_share,
    resource_max,
    same,
    share,
    total,
)

GPU = "nvidia.com/gpu"
FOO = "example.com/foo"


def R(cpu: float = 0, mem: float = 0, **scalars: float) -> Resource:
    """Resource in internal units; ``gpu=``/``foo=``/``pods=`` name the usual scalars."""
    names = {"gpu": GPU, "foo": FOO, "pods": "pods"}
    return Resource(cpu, mem, {names[k]: v for k, v in scalars.items()})


# -- construction --------------------------------------------------------------------------


def test_from_list_units() -> None:
    r = Resource.from_list(
        {
            "cpu": "1.5",
            "memory": "1Gi",
            "pods": "10",
            GPU: "2",
            "ephemeral-storage": "1Ki",
            "hugepages-2Mi": "4Mi",
            "count/pods": "5",
            "foo": "3",
            "requests.nvidia.com/gpu": "1",
        }
    )
    assert r.milli_cpu == 1500
    assert r.memory == 2**30
    assert r.scalars["pods"] == 10  # pods is a plain count
    assert r.scalars[GPU] == 2000  # other scalars are milli-units
    assert r.scalars["ephemeral-storage"] == 1024 * 1000
    assert r.scalars["hugepages-2Mi"] == 4 * 2**20 * 1000
    # Quota names and names that are not scalar resources are dropped.
    assert set(r.scalars) == {"pods", GPU, "ephemeral-storage", "hugepages-2Mi"}


def test_from_list_rounds_like_the_api_server() -> None:
    r = Resource.from_list({"cpu": "0.1m", "memory": "0.5"})
    assert r.milli_cpu == 1 and r.memory == 1


@pytest.mark.parametrize(
    ("name", "scalar"),
    [
        (GPU, True),
        ("hugepages-1Gi", True),
        ("attachable-volumes-csi-x", True),
        ("kubernetes.io/something", True),
        ("cpu", False),
        ("foo", False),
        ("requests.nvidia.com/gpu", False),
    ],
)
def test_is_scalar_resource_name(name: str, scalar: bool) -> None:
    assert is_scalar_resource_name(name) is scalar


def test_from_list_empty_and_clone_are_independent() -> None:
    assert same(Resource.from_list(None), Resource())
    a = R(1000, 5, gpu=1000)
    b = a.clone()
    b.add(R(1, 1, gpu=1))
    assert a.scalars[GPU] == 1000 and a.milli_cpu == 1000


# -- tolerance -----------------------------------------------------------------------------


def test_less_equal_tolerance_is_point_one() -> None:
    assert R(1000.05).less_equal(R(1000))  # within 0.1
    assert not R(1000.2).less_equal(R(1000))
    assert R(5, 1000.09).less_equal(R(5, 1000))
    assert not R(5, 1000.11).less_equal(R(5, 1000))
    assert R(gpu=1000.05).less_equal(R(gpu=1000))
    assert not R(gpu=1000.5).less_equal(R(gpu=1000))


def test_equal_uses_tolerance_and_same_is_exact() -> None:
    assert R(1000, 10).equal(R(1000.05, 10))
    assert not R(1000, 10).equal(R(1001, 10))
    assert not same(R(1000, 10), R(1000.05, 10))
    # same() tells a zero scalar from a missing one (Go's DeepEqual on the map).
    assert not same(R(1, 1, gpu=0), R(1, 1))
    assert same(R(1, 1, gpu=0), R(1, 1, gpu=0))


# -- missing scalars: Zero versus Infinity ---------------------------------------------------


def test_scalar_missing_on_the_right() -> None:
    need = R(1000, 1, gpu=1000)
    have = R(4000, 10)
    assert not need.less_equal(have, Dim.ZERO)  # missing = 0
    assert need.less_equal(have, Dim.INFINITY)  # missing = unbounded


def test_scalar_missing_on_the_left() -> None:
    need = R(1000, 1)
    have = R(4000, 10, gpu=1000)
    assert need.less_equal(have, Dim.ZERO)
    # Volcano's quirk: with Infinity, a scalar the right side has and the left lacks is
    # "infinite" on the left, so the left is not ≤.
    assert not need.less_equal(have, Dim.INFINITY)


def test_less_is_strict_in_every_dimension() -> None:
    assert R(1, 1).less(R(2, 2))
    assert not R(1, 2).less(R(2, 2))
    assert not R(1, 1, gpu=5).less(R(2, 2, gpu=5))
    assert R(1, 1, gpu=5).less(R(2, 2), Dim.INFINITY)
    assert not R(1, 1, gpu=5).less(R(2, 2), Dim.ZERO)


def test_insufficient_names_every_short_dimension() -> None:
    assert R(2000, 10, gpu=2000).insufficient(R(1000, 20, gpu=1000)) == ["cpu", GPU]
    assert R(2000, 10, gpu=2000).insufficient(R(1000, 20), Dim.INFINITY) == ["cpu"]
    assert R(1, 1).insufficient(R(1, 1)) == []


# -- dimension-filtered comparisons ----------------------------------------------------------


def test_less_equal_in_compares_only_requested_dimensions() -> None:
    used = R(3000, 100, gpu=500)
    limit = R(2000, 50, gpu=1000)
    assert used.less_equal_in(limit, R(0, 0, gpu=1)) == (True, [])
    assert used.less_equal_in(limit, R(1, 0)) == (False, ["cpu"])
    assert used.less_equal_in(limit, R(1, 1, gpu=1)) == (False, ["cpu", "memory"])


def test_less_equal_in_ignores_pods_and_has_no_tolerance() -> None:
    used = R(1000, 10, pods=20)
    limit = R(1000, 10, pods=5)
    assert used.less_equal_in(limit, R(1, 1, pods=1)) == (True, [])
    # No tolerance here (LessEqualWithDimensionAndResourcesName compares with >).
    assert R(1000.05).less_equal_in(R(1000), R(1)) == (False, ["cpu"])


def test_less_equal_in_without_req_or_limit() -> None:
    assert R(2000, 1).less_equal_in(R(1000, 1), None) == (False, ["cpu"])
    assert R(0, 0).less_equal_in(None, R(1)) == (True, [])
    assert R(1, 0).less_equal_in(None, R(1)) == (False, ["cpu"])


def test_less_equal_in_with_no_scalars_on_the_left_ignores_scalars() -> None:
    # Volcano: "if r.scalar is nil, whatever rr.scalar is, r is less or equal to rr".
    assert R(1, 1).less_equal_in(R(1, 1, gpu=0), R(0, 0, gpu=1000)) == (True, [])


def test_less_equal_partly() -> None:
    assert R(3000, 1).less_equal_partly(R(1000, 2))  # memory fits
    assert not R(3000, 3).less_equal_partly(R(1000, 2))
    assert R(3000, 3, gpu=1).less_equal_partly(R(1000, 2, gpu=5))
    assert R(3000, 3, gpu=9).less_equal_partly(R(1000, 2), Dim.INFINITY)
    assert not R(3000, 3, gpu=9).less_equal_partly(R(1000, 2), Dim.ZERO)


def test_less_equal_partly_in() -> None:
    alloc = R(3000, 1, gpu=1000)
    deserved = R(2000, 2, gpu=500)
    assert alloc.less_equal_partly_in(deserved, R(1, 1)) == (True, ["memory"])
    assert alloc.less_equal_partly_in(deserved, R(1, 0, gpu=1)) == (False, [])
    assert alloc.less_equal_partly_in(deserved, None) == (False, [])


def test_less_equal_partly_in_nonzero_skips_dimensions_zero_on_both_sides() -> None:
    # Memory is 0 in both: the plain check would say "memory fits"; the filtered one ignores it.
    alloc = R(3000, 0)
    deserved = R(2000, 0)
    assert alloc.less_equal_partly_in(deserved, R(1, 1)) == (True, ["memory"])
    assert alloc.less_equal_partly_in_nonzero(deserved, R(1, 1)) == (False, [])


def test_greater_partly_in_and_relevant() -> None:
    alloc = R(3000, 5, gpu=2000)
    deserved = R(2000, 0)
    assert alloc.greater_partly_in(deserved, R(1, 1, gpu=1)) == (True, ["cpu", "memory", GPU])
    # Relevant: only dimensions the right side defines (non-zero cpu/memory, present scalars).
    assert alloc.greater_partly_in_relevant(deserved, R(1, 1, gpu=1)) == (True, ["cpu"])
    assert alloc.greater_partly_in_relevant(R(4000, 0), R(1, 1, gpu=1)) == (False, [])
    assert alloc.greater_partly_in(None, R(1)) == (True, ["cpu"])
    assert alloc.greater_partly_in(deserved, None) == (False, [])


# -- emptiness -------------------------------------------------------------------------------


def test_is_empty_ignores_pods() -> None:
    assert R(pods=1).is_empty()
    assert R(0.05, 0.05, pods=3).is_empty()
    assert not R(0.1).is_empty()
    assert not R(0, 1).is_empty()
    assert not R(gpu=1).is_empty()
    assert R(gpu=0.01).is_empty()


def test_names_and_is_zero() -> None:
    r = R(1000, 0.05, gpu=1000, pods=1, foo=0)
    assert r.names() == ["cpu", GPU, "pods"]
    assert r.all_names() == ["cpu", "memory", GPU, "pods", FOO]
    assert r.is_zero("memory") and r.is_zero(FOO) and r.is_zero("absent")
    assert not r.is_zero("cpu")


# -- arithmetic ------------------------------------------------------------------------------


def test_add_sub_multi() -> None:
    a = R(1000, 10, gpu=1000)
    a.add(R(500, 5, pods=1))
    assert (a.milli_cpu, a.memory, a.scalars) == (1500, 15, {GPU: 1000, "pods": 1})
    a.sub(R(500, 5, gpu=500))
    assert (a.milli_cpu, a.memory, a.scalars) == (1000, 10, {GPU: 500, "pods": 1})
    a.multi(2)
    assert (a.milli_cpu, a.memory, a.scalars) == (2000, 20, {GPU: 1000, "pods": 2})


def test_sub_keeps_absent_scalars_absent() -> None:
    a = R(1000, 10)
    a.sub(R(1, 1, gpu=5))
    assert a.scalars == {}


def test_set_max_and_resource_max() -> None:
    a = R(1000, 20, gpu=1)
    a.set_max(R(2000, 10, gpu=5, foo=3))
    assert (a.milli_cpu, a.memory, a.scalars) == (2000, 20, {GPU: 5, FOO: 3})
    m = resource_max(R(1, 5, gpu=-1, foo=2), R(3, 1, foo=1, pods=4))
    # helpers.Max drops negative scalars.
    assert (m.milli_cpu, m.memory, m.scalars) == (3, 5, {FOO: 2, "pods": 4})


def test_min_dimension() -> None:
    inf = R(1000, 1000, gpu=8, foo=8).min_dimension(R(500, 2000, gpu=4), Dim.INFINITY)
    assert (inf.milli_cpu, inf.memory, inf.scalars) == (500, 1000, {GPU: 4, FOO: 8})
    zero = R(1000, 1000, gpu=8, foo=8).min_dimension(R(500, 2000, gpu=4), Dim.ZERO)
    assert zero.scalars == {GPU: 4, FOO: 0}


def test_diff_zero_default() -> None:
    inc, dec = R(3000, 10, gpu=2000).diff(R(1000, 20, foo=5), Dim.ZERO)
    assert (inc.milli_cpu, inc.memory, inc.scalars) == (2000, 0, {GPU: 2000})
    assert (dec.milli_cpu, dec.memory, dec.scalars) == (0, 10, {FOO: 5})


def test_diff_infinity_default() -> None:
    # A scalar missing on one side is "infinite" (Volcano's -1 marker) on that side.
    inc, dec = R(1000, 0, gpu=2000).diff(R(1000, 0, foo=5), Dim.INFINITY)
    assert inc.scalars == {FOO: -1.0}
    assert dec.scalars == {GPU: -1.0}


def test_exceeded_part() -> None:
    e = exceeded_part(R(3000, 10, gpu=2000, pods=4), R(1000, 20, gpu=3000))
    assert (e.milli_cpu, e.memory, e.scalars) == (2000, 0, {"pods": 4})
    assert same(exceeded_part(R(1, 2), None), R(1, 2))
    assert same(exceeded_part(None, R(1, 2)), Resource())


def test_share_intersection_total() -> None:
    assert share(1, 4) == 0.25
    assert share(0, 0) == 0.0
    assert share(3, 0) == 1.0
    assert intersection(R(1, 1, pods=1, gpu=1), R(1, 0, pods=1, gpu=1)) == ["cpu", GPU]
    assert intersection(R(1, 1, pods=1), R(1, 0, pods=1), ignore_pods=False) == ["cpu", "pods"]
    t = total([R(1, 2, gpu=3), R(4, 5, pods=1)])
    assert (t.milli_cpu, t.memory, t.scalars) == (5, 7, {GPU: 3, "pods": 1})


def test_infinite_and_presentation() -> None:
    inf = Resource.infinite()
    assert math.isinf(inf.milli_cpu) and math.isinf(inf.memory)
    assert R(1000, 10).less_equal(inf)
    r = Resource.from_list({"cpu": "1500m", "memory": "2Gi", "pods": "3", GPU: "1"})
    assert str(r) == "cpu 1.5, memory 2Gi, nvidia.com/gpu 1, pods 3"
    assert r.to_list() == {"cpu": "1500m", "memory": "2Gi", GPU: "1", "pods": "3"}
    assert same(Resource.from_list(r.to_list()), r)
    odd = Resource.from_list({"cpu": "4", "memory": str(2**30 + 1)})
    assert odd.to_list() == {"cpu": "4", "memory": str(2**30 + 1)}
    assert same(Resource.from_list(odd.to_list()), odd)


_AMOUNTS = st.one_of(
    st.integers(-(2**20), 2**40).map(float),
    st.sampled_from([0.0, -0.0, 0.5, 1e-3, 2.0**52, 2.0**53, 2.0**60, math.inf, 1e300]),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
)


@st.composite
def _resources(draw: st.DrawFn) -> Resource:
    names = draw(st.lists(st.sampled_from(["pods", "nvidia.com/gpu", "ephemeral-storage"]), unique=True))
    return Resource(draw(_AMOUNTS), draw(_AMOUNTS), {n: draw(_AMOUNTS) for n in names})


@settings(max_examples=400, deadline=None)
@given(_resources(), _resources(), st.integers(1, 40))
def test_add_times_is_so_many_adds_bit_for_bit(held: Resource, rr: Resource, n: int) -> None:
    import struct

    def bits(r: Resource) -> list[tuple[str, bytes]]:
        return [(k, struct.pack("<d", v)) for k, v in [("cpu", r.milli_cpu), ("mem", r.memory), *r.scalars.items()]]

    one_by_one = held.clone()
    for _ in range(n):
        one_by_one.add(rr)
    assert bits(held.clone().add_times(rr, n)) == bits(one_by_one)


@settings(max_examples=400, deadline=None)
@given(_resources(), _resources(), st.booleans())
def test_max_share_is_the_largest_share_bit_for_bit(held: Resource, total_: Resource, every: bool) -> None:
    """``max_share`` reads dimensions in place; it must give what the plain loop of ``share``
    over ``get`` gives, including 0/0, x/0 and signed zeros."""
    import struct

    names = total_.all_names() if every else total_.names()
    best = 0.0
    for name in names:
        s = share(held.get(name), total_.get(name))
        if s > best:
            best = s
    assert struct.pack("<d", max_share(held, total_, names)) == struct.pack("<d", best)


@settings(max_examples=400, deadline=None)
@given(_resources(), _resources(), _resources())
def test_fits_after_is_less_equal_in_of_the_sum(held: Resource, req: Resource, limit: Resource) -> None:
    assert held.fits_after(req, limit) == held.clone().add(req).less_equal_in(limit, req)[0]
