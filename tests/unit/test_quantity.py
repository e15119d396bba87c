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
        ("1E", Fraction(10**18)),
        ("1Ki", Fraction(1024)),
        ("1Mi", Fraction(2**20)),
        ("1Gi", Fraction(2**30)),
        ("1Ti", Fraction(2**40)),
        ("1Pi", Fraction(2**50)),
        ("1Ei", Fraction(2**60)),
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
    assert parse_quantity("2E") == 2 * 10**18
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
