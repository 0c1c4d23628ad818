"""Small pieces of Go behaviour the configuration code must reproduce byte for byte.

kube-scheduler's messages are produced by Go's ``time.Duration``, ``fmt``'s ``%#v``/``%q`` and
apimachinery's ``field.Error``/``validation`` helpers. Keeping those rules here lets the rest of
``kubesched.config`` read like upstream's code while printing upstream's exact text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from kubesched.api.errors import FieldError, invalid

# --- time.Duration ------------------------------------------------------------------------------

NANOSECOND = 1
MICROSECOND = 1_000
MILLISECOND = 1_000_000
SECOND = 1_000_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE

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
        match = re.match(r"(\d*)(?:\.(\d*))?", s)
        whole, frac = match.group(1), match.group(2)
        if not whole and not frac:
            raise invalid_error
        s = s[match.end():]
        unit = re.match(r"[^\d.]*", s).group(0)
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


def string_slice(values: Sequence[str] | None) -> GoRepr:
    """``%#v`` of a ``[]string``: ``[]string{"a", "b"}``, ``[]string{}`` or ``[]string(nil)``."""
    if values is None:
        return GoRepr("[]string(nil)")
    return GoRepr("[]string{" + ", ".join(go_quote(v) for v in values) + "}")


def child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# --- k8s.io/apimachinery/pkg/util/validation ------------------------------------------------------

_QNAME_CHAR = "[A-Za-z0-9]"
_QNAME_EXT = "[-A-Za-z0-9_.]"
QUALIFIED_NAME_FMT = f"({_QNAME_CHAR}{_QNAME_EXT}*)?{_QNAME_CHAR}"
LABEL_VALUE_FMT = f"({QUALIFIED_NAME_FMT})?"
DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + r"(\." + DNS1123_LABEL_FMT + ")*"
_QUALIFIED_NAME = re.compile(f"^{QUALIFIED_NAME_FMT}$")
_LABEL_VALUE = re.compile(f"^{LABEL_VALUE_FMT}$")
_DNS1123_SUBDOMAIN = re.compile(f"^{DNS1123_SUBDOMAIN_FMT}$")
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
                       "an alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                          "and must start and end with an alphanumeric character")


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``validation.RegexError``: the message, the examples, then the regex."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


def dns1123_subdomain_errors(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def qualified_name_errors(value: str) -> list[str]:
    """``validation.IsQualifiedName``, every message it would return."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in dns1123_subdomain_errors(prefix)]
    else:
        return ["a qualified name " + regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _QUALIFIED_NAME.match(name):
        errs.append("name part " + regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value_errors(value: str) -> list[str]:
    """``validation.IsValidLabelValue``."""
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _LABEL_VALUE.match(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def validate_label_name(name: str, path: str) -> list[FieldError]:
    """``metav1validation.ValidateLabelName``: one Invalid error per problem."""
    return [invalid(path, name, msg) for msg in qualified_name_errors(name)]

