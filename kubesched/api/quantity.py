"""Kubernetes resource quantities, parsed exactly as apimachinery's ``resource.Quantity`` does.

Values are kept as exact fractions so that ``0.1``, ``100m`` and ``1e-1`` compare equal and
rounding happens once, the way ``Quantity.Value()`` and ``Quantity.MilliValue()`` round: up,
towards positive infinity.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from kubesched.api.errors import InvalidQuantity

_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_QUANTITY = re.compile(_PATTERN)
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)$")

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_EXPONENT = re.compile(r"^[eE]([+-]?\d+)$")

QUANTITY_FORMAT_MESSAGE = f"quantities must match the regular expression '{_PATTERN}'"


def parse_quantity(raw: str | int | float) -> Fraction:
    """Parse a quantity (``"250m"``, ``"1.5Gi"``, ``"1e3"``, ``2``) into an exact Fraction."""
    if isinstance(raw, bool):
        raise InvalidQuantity(str(raw), QUANTITY_FORMAT_MESSAGE)
    if isinstance(raw, int):
        return Fraction(raw)
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise InvalidQuantity(str(raw), QUANTITY_FORMAT_MESSAGE)
        return Fraction(repr(raw))
    if not isinstance(raw, str):
        raise InvalidQuantity(repr(raw), QUANTITY_FORMAT_MESSAGE)
    return _parse_string(raw)


@lru_cache(maxsize=4096)
def _parse_string(text: str) -> Fraction:
    match = _QUANTITY.match(text.strip()) if text.strip() == text else None
    if not match:
        raise InvalidQuantity(text, QUANTITY_FORMAT_MESSAGE)
    number, suffix = match.groups()
    if not _NUMBER.match(number):
        raise InvalidQuantity(text, QUANTITY_FORMAT_MESSAGE)
    value = Fraction(number)
    if suffix in _BINARY:
        return value * _BINARY[suffix]
    if suffix in _DECIMAL:
        return value * _DECIMAL[suffix]
    exponent = _EXPONENT.match(suffix)
    if exponent:
        return value * Fraction(10) ** int(exponent.group(1))
    raise InvalidQuantity(text, "unable to parse quantity's suffix")


def value(raw: str | int | float) -> int:
    """``Quantity.Value()``: the quantity rounded up to an integer (memory in bytes, counts)."""
    return math.ceil(parse_quantity(raw))


def milli_value(raw: str | int | float) -> int:
    """``Quantity.MilliValue()``: thousandths, rounded up (cpu in millicores)."""
    return math.ceil(parse_quantity(raw) * 1000)


def format_quantity(amount: int, milli: bool = False) -> str:
    """A short canonical rendering for output: ``1500m``, ``2``, ``512Mi``."""
    if milli:
        if amount % 1000 == 0:
            return str(amount // 1000)
        return f"{amount}m"
    if amount == 0:
        return "0"
    for suffix, factor in reversed(_BINARY.items()):
        if amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)
