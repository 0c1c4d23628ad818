"""Kubernetes resource quantities, parsed exactly as apimachinery's ``resource.Quantity`` does.

Values are kept as exact fractions so that ``0.1``, ``100m`` and ``1e-1`` compare equal and
rounding happens once, the way ``Quantity.Value()`` and ``Quantity.MilliValue()`` round: up,
towards positive infinity. Like apimachinery, a parsed quantity is rounded away from zero to a
whole nano (``1e-12`` is ``1n``), and the integer readings saturate at int64's bounds instead of
overflowing, so ``cpu: 1e17`` reads as 9223372036854775807 millicores and fits no node. That is
apimachinery's behaviour since its accessors were made to saturate (``AsScaledInt64``/
``AsMilliInt64``, after 1.35); 1.35's wrapped silently, reading ``100E`` as 0 and scheduling a pod
that asks for it as if it asked for nothing, which kubesched does not reproduce.

Parsing costs no more than the text's length: an exponent only scales the exact value while the
result can still differ from a saturated reading (``|value| < 10**EXACT_DIGITS``); beyond that the
value is kept as ``±10**EXACT_DIGITS``, which every integer reading saturates identically, and a
mantissa's digits past nano precision only decide the round-up.
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
_NANO = Fraction(1, 10**9)
#: int64's bounds, where ``Quantity.Value()`` and ``MilliValue()`` saturate.
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
#: Decimal digits kept exactly before a magnitude is clamped (far above any int64 reading in nano).
EXACT_DIGITS = 40
_CLAMP = Fraction(10**EXACT_DIGITS)
#: Mantissa digits read exactly; the rest only decide the round-up (far past nano precision).
_MAX_DIGITS = 1000
#: apimachinery's ``ErrSuffix``, for an exponent that does not fit an int64.
SUFFIX_MESSAGE = "unable to parse quantity's suffix"

QUANTITY_FORMAT_MESSAGE = f"quantities must match the regular expression '{_PATTERN}'"


def parse_quantity(raw: str | int | float) -> Fraction:
    """Parse a quantity (``"250m"``, ``"1.5Gi"``, ``"1e3"``, ``2``) into an exact Fraction."""
    if type(raw) is str:  # the common case first: the text's parse is cached
        return _parse_string(raw)
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
    if suffix in _BINARY:
        return _scaled(number, 0, _BINARY[suffix])
    if suffix in _DECIMAL:
        factor = _DECIMAL[suffix]
        return _scaled(number, _log10(factor), 1)
    exponent = _EXPONENT.match(suffix)
    if exponent:
        power = int(exponent.group(1))
        if not INT64_MIN <= power <= INT64_MAX:
            raise InvalidQuantity(text, SUFFIX_MESSAGE)
        return _scaled(number, power, 1)
    raise InvalidQuantity(text, SUFFIX_MESSAGE)


def _log10(factor: Fraction) -> int:
    """The power of ten of a decimal suffix's factor (``m`` is -3, ``G`` is 9)."""
    return len(str(factor.numerator)) - 1 if factor >= 1 else -(len(str(factor.denominator)) - 1)


def _scaled(number: str, power: int, multiplier: int) -> Fraction:
    """``number * 10**power * multiplier``, rounded away from zero to a nano, its magnitude
    clamped at ``10**EXACT_DIGITS``; never builds an integer longer than ``_MAX_DIGITS``."""
    sign = -1 if number.startswith("-") else 1
    whole, _, fraction = number.lstrip("+-").partition(".")
    whole, fraction = whole.lstrip("0"), fraction.rstrip("0")
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return Fraction(0)
    magnitude = len(whole) if whole else -(len(fraction) - len(fraction.lstrip("0")))
    if magnitude + power + len(str(multiplier)) > EXACT_DIGITS + 1:
        return sign * _CLAMP
    if magnitude + power < -EXACT_DIGITS:
        return sign * _NANO
    exponent = power - len(fraction)
    bump = 0
    if len(digits) > _MAX_DIGITS:
        dropped, digits = digits[_MAX_DIGITS:], digits[:_MAX_DIGITS]
        exponent += len(dropped)
        bump = 1 if dropped.strip("0") else 0
    amount = (int(digits) + bump) * multiplier * Fraction(10) ** exponent
    return sign * min(math.ceil(amount / _NANO) * _NANO, _CLAMP)


def saturate(amount: int) -> int:
    """``amount`` held to int64's range, as apimachinery's integer readings saturate."""
    return max(INT64_MIN, min(INT64_MAX, amount))


def value(raw: str | int | float) -> int:
    """``Quantity.Value()``: the quantity rounded up to an integer (memory in bytes, counts),
    saturated at int64's bounds."""
    return saturate(math.ceil(parse_quantity(raw)))


def milli_value(raw: str | int | float) -> int:
    """``Quantity.MilliValue()``: thousandths, rounded up (cpu in millicores), saturated at
    int64's bounds."""
    return saturate(math.ceil(parse_quantity(raw) * 1000))


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
