"""Kubernetes quantity parsing: suffixes, exponents, decimals and the API server's rounding."""

from __future__ import annotations

from fractions import Fraction

import pytest

from lahar.api.quantity import Quantity, QuantityError, format_quantity, milli_value, parse_quantity, value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", Fraction(0)),
        ("1", Fraction(1)),
        ("100m", Fraction(1, 10)),
        ("1500m", Fraction(3, 2)),
        ("3k", Fraction(3000)),
        ("1M", Fraction(10**6)),
        ("1G", Fraction(10**9)),
        ("2T", Fraction(2 * 10**12)),
        ("1P", Fraction(10**15)),
        ("9P", Fraction(9 * 10**15)),
        ("1Ki", Fraction(1024)),
        ("1Mi", Fraction(2**20)),
        ("1Gi", Fraction(2**30)),
        ("1Ti", Fraction(2**40)),
        ("1Pi", Fraction(2**50)),
        ("8191Ti", Fraction(8191 * 2**40)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("500u", Fraction(1, 2000)),
        ("7n", Fraction(7, 10**9)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("2e-3", Fraction(2, 1000)),
        ("1.5e+2", Fraction(150)),
        ("1.5", Fraction(3, 2)),
        (".5", Fraction(1, 2)),
        ("0.001", Fraction(1, 1000)),
        ("+2", Fraction(2)),
        ("-2", Fraction(-2)),
        ("-1.5Gi", Fraction(-3 * 2**29)),
        (" 2Gi ", Fraction(2 * 2**30)),
    ],
)
def test_parse(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


def test_e_alone_is_exa_but_e_with_digits_is_an_exponent() -> None:
    assert parse_quantity("0.002E") == 2 * 10**15  # exa (2E itself is beyond int64 milli-units)
    assert parse_quantity("2E2") == 200


def test_bare_numbers_from_yaml() -> None:
    assert parse_quantity(4) == 4
    assert parse_quantity(0.5) == Fraction(1, 2)
    # A float goes through its decimal text, so 0.1 is exactly one tenth (not the binary float).
    assert parse_quantity(0.1) == Fraction(1, 10)


@pytest.mark.parametrize(
    "bad",
    ["1x", "", "abc", "1.2.3", "--1", "1Kii", "1 Gi", "Gi", "1e", "1e3.5", "0x10", "1m5", "1e99", "ki"],
)
def test_bad_text_is_an_error_naming_the_input(bad: str) -> None:
    with pytest.raises(QuantityError, match="is not a quantity"):
        parse_quantity(bad)


@pytest.mark.parametrize("bad", [True, False, None, float("nan"), float("inf"), [1], {"a": 1}])
def test_bad_types_are_errors(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]


def test_quantity_error_is_a_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize(
    ("text", "milli", "units"),
    [
        ("1", 1000, 1),
        ("1.5", 1500, 2),  # Value() rounds up
        ("100m", 100, 1),  # a fraction of a unit is one unit
        ("0.1m", 1, 1),  # MilliValue() rounds up too
        ("1.0001", 1001, 2),
        ("1Gi", 2**30 * 1000, 2**30),
        ("1k", 10**6, 1000),
        ("0", 0, 0),
        ("1n", 1, 1),
    ],
)
def test_milli_value_and_value_round_up(text: str, milli: int, units: int) -> None:
    q = Quantity(text)
    assert q.milli == milli == milli_value(parse_quantity(text))
    assert q.units == units == value(parse_quantity(text))


def test_quantity_keeps_its_text_and_compares_by_amount() -> None:
    a, b = Quantity("1024Mi"), Quantity("1Gi")
    assert a == b and hash(a) == hash(b)
    assert a.text == "1024Mi"
    assert a != Quantity("1G")
    assert repr(a) == "Quantity('1024Mi')"


@pytest.mark.parametrize(
    ("amount", "milli", "shown"),
    [
        (1500, True, "1.5"),
        (2000, True, "2"),
        (250, True, "250m"),
        (2**31, False, "2Gi"),
        (1000, False, "1000"),
    ],
)
def test_format_for_messages(amount: float, milli: bool, shown: str) -> None:
    assert format_quantity(amount, milli) == shown


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("9" * 400, "longer than 64 characters"),
        ("1" * 5000, "longer than 64 characters"),  # never reaches int(): no 4300-digit ValueError
        ("9223372036854776", "too large (more than 2^63-1 milli-units)"),
        ("-9223372036854776", "too large (more than 2^63-1 milli-units)"),
        ("1E", "too large (more than 2^63-1 milli-units)"),  # exa: 10^21 milli-units
        ("1Ei", "too large (more than 2^63-1 milli-units)"),
        ("1e64", "too large (more than 2^63-1 milli-units)"),
        (2**80, "too large (more than 2^63-1 milli-units)"),
        (1e300, "too large (more than 2^63-1 milli-units)"),
    ],
)
def test_out_of_bounds_values_are_quantity_errors_saying_why(value: object, why: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(value)  # type: ignore[arg-type]
    assert info.value.why == why
    assert str(info.value).endswith(f"is not a quantity: {why}")
    assert len(str(info.value)) < 120  # the value is named, cut short


def test_the_largest_values_that_fit_int64_milli_units_parse() -> None:
    assert Quantity("9223372036854775").milli == 9223372036854775000
    assert Quantity("-9223372036854775").milli == -9223372036854775000
    assert Quantity("8Pi").milli == 8 * 2**50 * 1000
    assert parse_quantity(" " + "1" * 15 + " ") == 111111111111111


def test_a_huge_integer_is_named_by_its_size() -> None:
    with pytest.raises(QuantityError, match=r"^an integer of 33220 bits is not a quantity: too large"):
        parse_quantity(10**10000)
