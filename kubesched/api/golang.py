"""Small pieces of Go behaviour the configuration code must reproduce byte for byte.

kube-scheduler's messages are produced by Go's ``time.Duration``, ``fmt``'s ``%#v``/``%q`` and
apimachinery's ``field.Error``/``validation`` helpers. Keeping those rules here lets the rest of
``kubesched.scheduler.config`` read like upstream's code while printing upstream's exact text. The name and
label validators themselves are shared with the manifest code, in ``kubesched.api.names``.
"""

from __future__ import annotations

import json
import re

from kubesched.api.errors import FieldError, invalid
from kubesched.api.names import qualified_name_errors

# --- time.Duration ------------------------------------------------------------------------------

NANOSECOND = 1
MICROSECOND = 1_000
MILLISECOND = 1_000_000
SECOND = 1_000_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE

_NUMBER = re.compile(r"(\d*)(?:\.(\d*))?")
_UNIT = re.compile(r"[^\d.]*")
_UNITS = {"ns": NANOSECOND, "us": MICROSECOND, "µs": MICROSECOND, "μs": MICROSECOND,
          "ms": MILLISECOND, "s": SECOND, "m": MINUTE, "h": HOUR}


class DurationError(ValueError):
    """``time.ParseDuration``'s error, with its message."""


def go_quote(text: str) -> str:
    """Go's ``%q`` for the strings configuration files contain (JSON escaping is the same there)."""
    return json.dumps(text, ensure_ascii=False)


def parse_duration(text: str) -> int:
    """``time.ParseDuration``: ``"1h2m3.5s"`` -> nanoseconds, with Go's error messages."""
    orig, s = text, text
    negative = False
    if s[:1] in ("-", "+"):
        negative, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    invalid_error = DurationError(f"time: invalid duration {go_quote(orig)}")
    if not s:
        raise invalid_error
    total = 0
    while s:
        match = _NUMBER.match(s)
        assert match is not None  # every part of the pattern is optional: it matches any string
        whole, frac = match.group(1), match.group(2)
        if not whole and not frac:
            raise invalid_error
        s = s[match.end():]
        unit_match = _UNIT.match(s)
        assert unit_match is not None  # a run of zero characters matches any string
        unit = unit_match.group(0)
        if not unit:
            raise DurationError(f"time: missing unit in duration {go_quote(orig)}")
        if unit not in _UNITS:
            raise DurationError(f"time: unknown unit {go_quote(unit)} in duration {go_quote(orig)}")
        s = s[len(unit):]
        scale = _UNITS[unit]
        total += int(whole or "0") * scale
        if frac:
            total += int(frac) * scale // 10 ** len(frac)
        if total > 2**63 - 1:
            raise invalid_error
    return -total if negative else total


def format_duration(ns: int) -> str:
    """``time.Duration.String()``: 15s, 1m30s, 1h0m0s, 500ms, 1.5µs."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < SECOND:
        for unit, scale in (("ms", MILLISECOND), ("µs", MICROSECOND), ("ns", NANOSECOND)):
            if u >= scale:
                return sign + _fraction(u, scale) + unit
    out = _fraction(u % MINUTE, SECOND) + "s"
    u //= MINUTE
    if u:
        out = f"{u % 60}m" + out
        u //= 60
        if u:
            out = f"{u}h" + out
    return sign + out


def _fraction(value: int, scale: int) -> str:
    whole, rest = divmod(value, scale)
    if not rest:
        return str(whole)
    digits = str(rest).rjust(len(str(scale)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def seconds_to_ns(seconds: float) -> int:
    return round(seconds * SECOND)


def ns_to_seconds(ns: int) -> float:
    return ns / SECOND


# --- field.Error, the way apimachinery prints it ------------------------------------------------

def go_value(value: object) -> str:
    """How ``field.Error`` prints a bad value: plain for numbers/bools, ``%q`` for strings."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return go_quote(value)
    return str(value)


class GoRepr:
    """A value printed verbatim (Go's ``%#v`` of a struct or slice), never quoted again."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GoRepr) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, "Forbidden", detail)


def duplicate(path: str, value: object) -> FieldError:
    """``field.Duplicate``: ``path: Duplicate value: "name"``."""
    return FieldError(path, "Duplicate value", go_value(value))


def child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def validate_label_name(name: str, path: str) -> list[FieldError]:
    """``metav1validation.ValidateLabelName``: one Invalid error per problem."""
    return [invalid(path, name, msg) for msg in qualified_name_errors(name)]

