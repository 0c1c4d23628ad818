"""Quantity parsing must agree with apimachinery's resource.Quantity."""

from fractions import Fraction

import pytest

from kubesched.api.errors import InvalidQuantity
from kubesched.api.quantity import format_quantity, milli_value, parse_quantity, value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", Fraction(1)),
        ("100m", Fraction(1, 10)),
        ("0.1", Fraction(1, 10)),
        ("1e-1", Fraction(1, 10)),
        ("1E3", Fraction(1000)),
        ("1k", Fraction(1000)),
        ("1Ki", Fraction(1024)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("500Mi", Fraction(500 * 2**20)),
        ("2M", Fraction(2_000_000)),
        ("1n", Fraction(1, 10**9)),
        ("1u", Fraction(1, 10**6)),
        ("-1", Fraction(-1)),
        ("+2", Fraction(2)),
        (".5", Fraction(1, 2)),
        ("1Ei", Fraction(2**60)),
        (2, Fraction(2)),
        (0.5, Fraction(1, 2)),
    ],
)
def test_parse_quantity_is_exact(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "1Kb", "1 Gi", " 1", "Gi", "1ii", True, None, "--1"])
def test_malformed_quantities_are_rejected_with_upstreams_message(bad):
    with pytest.raises(InvalidQuantity) as info:
        parse_quantity(bad)
    assert "quantities must match the regular expression" in str(info.value) or "suffix" in str(info.value)


@pytest.mark.parametrize(
    ("text", "milli", "whole"),
    [
        ("100m", 100, 1),  # Value() rounds up
        ("1", 1000, 1),
        ("0.0001", 1, 1),  # MilliValue() rounds up too
        ("1.5", 1500, 2),
        ("1Gi", 1024**3 * 1000, 1024**3),
        ("250m", 250, 1),
    ],
)
def test_value_and_milli_value_round_up(text, milli, whole):
    assert milli_value(text) == milli
    assert value(text) == whole


def test_format_quantity_uses_the_largest_binary_suffix():
    assert format_quantity(2 * 2**30) == "2Gi"
    assert format_quantity(1500, milli=True) == "1500m"
    assert format_quantity(2000, milli=True) == "2"
    assert format_quantity(1000) == "1000"


INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1e-12", Fraction(1, 10**9), id="below-a-nano-rounds-up-to-one"),
        pytest.param("-1e-12", Fraction(-1, 10**9), id="negative-rounds-away-from-zero"),
        pytest.param("1.5n", Fraction(2, 10**9), id="fractional-nanos-round-up"),
        pytest.param("1e-400", Fraction(1, 10**9), id="vanishing-exponent-is-a-nano"),
        pytest.param("0." + "0" * 5000 + "1", Fraction(1, 10**9), id="5000-zero-decimals-are-a-nano"),
        pytest.param("1." + "0" * 3000 + "1", Fraction(1_000_000_001, 10**9), id="digits-past-nano-round-up"),
        pytest.param("1e400", Fraction(10**40), id="huge-exponent-is-held-at-the-clamp"),
        pytest.param("1" + "0" * 5000, Fraction(10**40), id="5000-digit-integer-is-held-at-the-clamp"),
    ],
)
def test_parsing_rounds_to_a_nano_and_costs_no_more_than_the_text(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "milli", "whole"),
    [
        pytest.param("1e17", INT64_MAX, 10**17, id="1e17-cpu-saturates-in-millis-only"),
        pytest.param("9223372036854775807", INT64_MAX, INT64_MAX, id="int64-max"),
        pytest.param("16Ei", INT64_MAX, INT64_MAX, id="16Ei-past-int64"),
        pytest.param("1e400", INT64_MAX, INT64_MAX, id="1e400"),
        pytest.param("-1e400", INT64_MIN, INT64_MIN, id="minus-1e400"),
    ],
)
def test_integer_readings_saturate_at_int64(text, milli, whole):
    assert milli_value(text) == milli
    assert value(text) == whole


def test_an_exponent_past_int64_is_a_suffix_error():
    with pytest.raises(InvalidQuantity, match="unable to parse quantity's suffix"):
        parse_quantity("1e99999999999999999999")
