"""A small CEL interpreter (cel-go's semantics and error texts) for the places Kubernetes evaluates
CEL: DRA device selectors (``k8s.io/dynamic-resource-allocation/cel``) and the validation rules
of CustomResourceDefinitions (``x-kubernetes-validations``).

Why a hand-written interpreter rather than a CEL library: see the DynamicResources plugin's
module docstring (measured against cel-python and common-expression-language). This module
evaluates the subset below with cel-go's semantics and error texts (upstream's messages reach
users through the Filter status and API errors), and compiles each expression once into Python
closures. The function library is checked case by case against upstream's test tables
(``tests/plugins/test_dynamic_resources_cel_library.py``).
Supported:

* literals: int, uint (``1u``), double, string (single, double, triple quotes, ``r`` raw
  strings, escapes), bytes (``b"..."``), bool, null; lists ``[..]`` and maps ``{k: v}``;
* operators: ``! - * / % + - < <= > >= == != in && || ?:`` with CEL's error absorption in
  ``&&``/``||``, heterogeneous numeric equality and cross-type numeric ordering (as the
  Kubernetes CEL environment enables);
* field selection ``m.f`` and indexing ``m["f"]``/``l[i]`` (``no such key: f`` when absent),
  ``has(m.f)``, the macros ``all``, ``exists``, ``exists_one``, ``map``, ``filter`` and
  ``cel.bind(name, init, expr)``;
* functions: ``size``, ``contains``, ``startsWith``, ``endsWith``, ``matches`` (Python ``re``,
  RE2 syntax in practice), ``int``, ``uint``, ``double``, ``string``, ``bool``, ``dyn``,
  ``type`` (and the type identifiers ``int``, ``string``...);
* cel-go's string extensions, on code points as cel-go counts them: ``charAt``,
  ``indexOf``/``lastIndexOf`` (with an optional offset), ``lowerAscii``/``upperAscii`` (ASCII
  letters only), ``replace`` (with an optional count), ``split`` (with an optional limit, as Go's
  ``strings.SplitN``), ``substring`` (one or two indices), ``trim`` (Go's notion of space) and
  ``join`` on lists;
* Kubernetes' list library: ``isSorted``, ``sum``, ``min``, ``max``, ``indexOf`` and
  ``lastIndexOf`` on lists;
* Kubernetes libraries: ``quantity``/``isQuantity`` with ``isInteger``, ``asInteger``,
  ``asApproximateFloat``, ``sign``, ``add``, ``sub``, ``isGreaterThan``, ``isLessThan``,
  ``compareTo``; ``semver``/``isSemver`` with ``major``, ``minor``, ``patch``,
  ``isGreaterThan``, ``isLessThan``, ``compareTo``.

Anything else fails to compile (``undeclared reference to 'x'`` / ``found no matching overload
for 'f'``) or at run time with ``no such overload``. Not modelled: the static type checker
(only a top-level non-bool literal type is rejected at compile time), the runtime cost limit,
protobuf messages, timestamps/durations, optional types, and the exact wording of syntax errors.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from fractions import Fraction
from functools import total_ordering
from itertools import pairwise
from typing import Any

from kubesched.api.errors import InvalidQuantity
from kubesched.api.quantity import parse_quantity

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1


class CelError(Exception):
    """A CEL evaluation error (cel-go's ``types.Err``); ``str()`` is the text upstream reports."""


class CelCompileError(Exception):
    """The expression does not compile."""


class UInt(int):
    """A CEL ``uint`` (Python ints are CEL ``int``)."""

    __slots__ = ()


@total_ordering
class Quantity:
    """A Kubernetes ``resource.Quantity`` value in CEL (``apiservercel.Quantity``)."""

    __slots__ = ("value",)

    def __init__(self, value: Fraction) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Quantity({self.value})"


_DIGITS = frozenset("0123456789")
_ALPHANUMERIC = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-")


def _version_number(text: str, part: str) -> int:
    """One of major, minor, patch as blang/semver reads it (its error texts reach users)."""
    if not set(text) <= _DIGITS:
        raise ValueError(f"Invalid character(s) found in {part} number {_go_quote(text)}")
    if len(text) > 1 and text[0] == "0":
        raise ValueError(f"{part.capitalize()} number must not contain leading zeroes {_go_quote(text)}")
    if not text or int(text) > UINT64_MAX:
        reason = "invalid syntax" if not text else "value out of range"
        raise ValueError(f"strconv.ParseUint: parsing {_go_quote(text)}: {reason}")
    return int(text)


def _prerelease_part(text: str) -> str:
    if not text:
        raise ValueError("Prerelease is empty")
    if not set(text) <= _ALPHANUMERIC:
        raise ValueError(f"Invalid character(s) found in prerelease {_go_quote(text)}")
    if set(text) <= _DIGITS and len(text) > 1 and text[0] == "0":
        raise ValueError(f"Numeric PreRelease version must not contain leading zeroes {_go_quote(text)}")
    return text


def _build_part(text: str) -> str:
    if not text:
        raise ValueError("Build meta data is empty")
    if not set(text) <= _ALPHANUMERIC:
        raise ValueError(f"Invalid character(s) found in build meta data {_go_quote(text)}")
    return text


def _go_quote(text: str) -> str:
    """Go's ``%q`` for the plain strings version parts are."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@total_ordering
class Semver:
    """A semantic version 2.0.0 (blang/semver), compared by precedence."""

    __slots__ = ("build", "major", "minor", "patch", "pre")

    def __init__(self, major: int, minor: int, patch: int, pre: tuple[str, ...] = (), build: tuple[str, ...] = ()) -> None:
        self.major, self.minor, self.patch, self.pre, self.build = major, minor, patch, pre, build

    @classmethod
    def parse(cls, text: str) -> Semver:
        """blang/semver's ``Parse``; ValueError with its message for an invalid version."""
        if not text:
            raise ValueError("Version string empty")
        parts = text.split(".", 2)
        if len(parts) != 3:
            raise ValueError("No Major.Minor.Patch elements found")
        major, minor = _version_number(parts[0], "major"), _version_number(parts[1], "minor")
        patch, _, build = parts[2].partition("+")
        patch, dash, pre = patch.partition("-")
        return cls(major, minor, _version_number(patch, "patch"),
                   tuple(map(_prerelease_part, pre.split("."))) if dash else (),
                   tuple(map(_build_part, build.split("."))) if "+" in parts[2] else ())

    def _key(self) -> Node:
        pre: Node = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 1 if not self.pre else 0, pre)

    def compare(self, other: Semver) -> int:
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __lt__(self, other: Semver) -> bool:
        return self.compare(other) < 0

    def __hash__(self) -> int:
        return hash(self._key())


class DefaultMap(dict[Any, Any]):
    """A map whose unknown keys read as an empty map, as DRA's ``device.attributes`` and
    ``device.capacity`` do (upstream ``newStringInterfaceMapWithDefault``)."""

    __slots__ = ()


_EMPTY: dict[Any, Any] = {}


# --- types and conversions ----------------------------------------------------------------
def type_name(value: Any) -> str:
    if value is None:
        return "null_type"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, UInt):
        return "uint"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, Quantity):
        return "kubernetes.Quantity"
    if isinstance(value, Semver):
        return "kubernetes.Semver"
    if isinstance(value, CelType):
        return "type"
    return type(value).__name__


#: The type identifiers CEL predeclares.
_TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"})


class CelType:
    """A CEL type value, what ``type(x)`` returns and a type identifier denotes."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CelType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


def _no_overload(op: str, *args: Any) -> CelError:
    return CelError(f"no such overload: {op}({', '.join(type_name(a) for a in args)})")


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def cel_equal(a: Any, b: Any) -> bool:
    """CEL heterogeneous equality: numbers compare by value, other types must match."""
    if _is_num(a) and _is_num(b):
        if isinstance(a, float) or isinstance(b, float):
            return float(a) == float(b)
        return int(a) == int(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(cel_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        if len(a) != len(b):
            return False
        for key, value in a.items():
            match = _lookup_key(b, key)
            if match is _MISSING or not cel_equal(value, match):
                return False
        return True
    if type_name(a) != type_name(b):
        return False
    return bool(a == b)


_MISSING = object()


def _lookup_key(m: Mapping[Any, Any], key: Any) -> Any:
    if isinstance(key, str):
        return m.get(key, _MISSING)
    for k, v in m.items():
        if cel_equal(k, key):
            return v
    return _MISSING


def _compare(op: str, a: Any, b: Any) -> int:
    if _is_num(a) and _is_num(b):
        if isinstance(a, float) or isinstance(b, float):
            fa, fb = float(a), float(b)
            if math.isnan(fa) or math.isnan(fb):
                raise _Nan
            return (fa > fb) - (fa < fb)
        return (int(a) > int(b)) - (int(a) < int(b))
    if isinstance(a, bool) and isinstance(b, bool):
        return (a > b) - (a < b)
    if isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    if isinstance(a, bytes) and isinstance(b, bytes):
        return (a > b) - (a < b)
    raise _no_overload(op, a, b)


class _NanType(Exception):
    pass


_Nan = _NanType()


def _ordering(op: str, test: Callable[[int], bool]) -> Callable[[Any, Any], bool]:
    def fn(a: Any, b: Any) -> bool:
        try:
            return test(_compare(op, a, b))
        except _NanType:
            return False

    return fn


def _check_int(v: int) -> int:
    if v < INT64_MIN or v > INT64_MAX:
        raise CelError("integer overflow")
    return v


def _check_uint(v: int) -> UInt:
    if v < 0 or v > UINT64_MAX:
        raise CelError("unsigned integer overflow")
    return UInt(v)


def _arith(name: str) -> Callable[[Any, Any], Any]:
    op = name.strip("_")

    def fn(a: Any, b: Any) -> Any:
        if isinstance(a, bool) or isinstance(b, bool):
            raise _no_overload(name, a, b)
        if isinstance(a, UInt) and isinstance(b, UInt):
            return _check_uint(_int_op(op, int(a), int(b)))
        if isinstance(a, int) and isinstance(b, int) and not isinstance(a, UInt) and not isinstance(b, UInt):
            return _check_int(_int_op(op, a, b))
        if isinstance(a, float) and isinstance(b, float):
            return _float_op(op, a, b)
        if op == "+":
            if isinstance(a, str) and isinstance(b, str):
                return a + b
            if isinstance(a, bytes) and isinstance(b, bytes):
                return a + b
            if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
                return list(a) + list(b)
        raise _no_overload(name, a, b)

    return fn


def _int_op(op: str, a: int, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b == 0:
            raise CelError("division by zero")
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    if b == 0:
        raise CelError("modulus by zero")
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def _float_op(op: str, a: float, b: float) -> float:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b == 0:
            return math.copysign(math.inf, a) * math.copysign(1, b) if a != 0 else math.nan
        return a / b
    raise _no_overload(op, a, b)


def _in(a: Any, b: Any) -> bool:
    if isinstance(b, (list, tuple)):
        return any(cel_equal(a, x) for x in b)
    if isinstance(b, dict):
        return _lookup_key(b, a) is not _MISSING
    raise _no_overload("@in", a, b)


def index(container: Any, key: Any) -> Any:
    """``container[key]`` with cel-go's errors."""
    if isinstance(container, dict):
        if isinstance(key, str) and key in container:
            return container[key]
        found = _lookup_key(container, key)
        if found is _MISSING:
            if isinstance(container, DefaultMap):
                return _EMPTY
            raise CelError(f"no such key: {key}")
        return found
    if isinstance(container, (list, tuple)):
        if not _is_num(key) or (isinstance(key, float) and not key.is_integer()):
            raise _no_overload("_[_]", container, key)
        i = int(key)
        if i < 0 or i >= len(container):
            raise CelError(f"index out of bounds: {i}")
        return container[i]
    raise _no_overload("_[_]", container, key)


def _select(container: Any, field: str) -> Any:
    if isinstance(container, dict):
        return index(container, field)
    raise CelError(f"no such key: {field}") if container is None else _no_overload(f".{field}", container)


def _has(container: Any, field: str) -> bool:
    if isinstance(container, dict):
        return field in container
    raise _no_overload("has", container)


# --- functions --------------------------------------------------------------------------------
def _size(v: Any) -> int:
    if isinstance(v, (str, bytes, list, tuple, dict)):
        return len(v)
    raise _no_overload("size", v)


def _matches(s: Any, pattern: Any) -> bool:
    if not isinstance(s, str) or not isinstance(pattern, str):
        raise _no_overload("matches", s, pattern)
    try:
        return re.search(pattern, s) is not None
    except re.error as e:
        raise CelError(f"invalid regular expression: {e}") from e


#: What Go's strconv.ParseInt / ParseUint (base 10) and ParseFloat accept: no blanks and no
#: digit separators, which Python's int() and float() would allow.
_GO_INT = re.compile(r"[+-]?[0-9]+\Z")
_GO_UINT = re.compile(r"\+?[0-9]+\Z")
_GO_FLOAT = re.compile(r"[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|inf|infinity|nan)\Z", re.IGNORECASE)


def _conversion_error(target: str) -> CelError:
    """cel-go's text for a string that does not parse as ``target``."""
    return CelError(f"type conversion error from 'string' to '{target}'")


def _to_int(v: Any) -> int:
    if isinstance(v, bool):
        raise _no_overload("int", v)
    if isinstance(v, int):
        return _check_int(int(v))
    if isinstance(v, float):
        if math.isnan(v) or v <= -9.223372036854776e18 or v >= 9.223372036854776e18:
            raise CelError("range error converting double to int")
        return int(v)
    if isinstance(v, str):
        if not _GO_INT.match(v):
            raise _conversion_error("int")
        return _check_int(int(v, 10))
    raise _no_overload("int", v)


def _to_uint(v: Any) -> UInt:
    if isinstance(v, bool):
        raise _no_overload("uint", v)
    if isinstance(v, int):
        return _check_uint(int(v))
    if isinstance(v, float):
        if math.isnan(v) or v < 0 or v >= 1.8446744073709552e19:
            raise CelError("range error converting double to uint")
        return UInt(int(v))
    if isinstance(v, str):
        if not _GO_UINT.match(v):
            raise _conversion_error("uint")
        return _check_uint(int(v, 10))
    raise _no_overload("uint", v)


def _to_double(v: Any) -> float:
    if _is_num(v):
        return float(v)
    if isinstance(v, str):
        if not _GO_FLOAT.match(v):
            raise _conversion_error("double")
        return float(v)
    raise _no_overload("double", v)


def format_value(v: Any) -> str:
    """``string(v)``: doubles as Go's ``%g`` prints them, bytes only when valid UTF-8."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _go_g(v)
    if isinstance(v, (int, str)):
        return str(v)
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CelError("invalid UTF-8 in bytes, cannot convert to string") from e
    raise _no_overload("string", v)


def _go_g(v: float) -> str:
    """Go's ``fmt.Sprintf("%g", v)``: the shortest digits that round-trip, in exponent form when
    the exponent is below -4 or at least 6 (``1e+06``, ``1e-05``), else plain (``100``, ``0.5``)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == 0:
        return "-0" if math.copysign(1.0, v) < 0 else "0"
    sign, digit_tuple, exponent = Decimal(repr(v)).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + int(exponent)  # digits before the decimal point
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        text = f"{mantissa}e{'-' if point - 1 < 0 else '+'}{abs(point - 1):02d}"
    elif point <= 0:
        text = "0." + "0" * -point + digits
    elif point >= len(digits):
        text = digits + "0" * (point - len(digits))
    else:
        text = digits[:point] + "." + digits[point:]
    return "-" + text if sign else text


def _to_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        # strconv.ParseBool's spellings.
        if v in ("1", "t", "T", "true", "TRUE", "True"):
            return True
        if v in ("0", "f", "F", "false", "FALSE", "False"):
            return False
        raise _conversion_error("bool")
    raise _no_overload("bool", v)


def _quantity(s: Any) -> Quantity:
    if not isinstance(s, str):
        raise _no_overload("quantity", s)
    try:
        return Quantity(parse_quantity(s))
    except InvalidQuantity as e:
        raise CelError(e.detail) from e  # resource.ParseQuantity's error, without the text


def _is_quantity(s: Any) -> bool:
    if not isinstance(s, str):
        raise _no_overload("isQuantity", s)
    try:
        parse_quantity(s)
    except InvalidQuantity:
        return False
    return True


def _q(name: str, v: Any) -> Fraction:
    if not isinstance(v, Quantity):
        raise _no_overload(name, v)
    return v.value


def _q_operand(name: str, v: Any) -> Fraction:
    if isinstance(v, Quantity):
        return v.value
    if isinstance(v, int) and not isinstance(v, bool):
        return Fraction(v)
    raise _no_overload(name, v)


def _as_integer(q: Any) -> int:
    value = _q("asInteger", q)
    if value.denominator != 1 or value < INT64_MIN or value > INT64_MAX:
        raise CelError("cannot convert value to integer")
    return int(value)


def _semver(s: Any, normalize: Any = False) -> Semver:
    if not isinstance(s, str):
        raise _no_overload("semver", s)
    text = _normalize_semver(s) if normalize is True else s
    try:
        return Semver.parse(text)
    except ValueError as e:
        raise CelError(str(e)) from e


def _normalize_semver(s: str) -> str:
    s = s[1:] if s.startswith("v") else s
    core, sep, rest = s.partition("-") if "-" in s else (s.partition("+")[0], "+" if "+" in s else "", s.partition("+")[2])
    parts = core.split(".")
    while len(parts) < 3:
        parts.append("0")
    parts = [str(int(p)) if p.isdigit() else p for p in parts]
    return ".".join(parts) + (sep + rest if sep else "")


def _is_semver(s: Any, normalize: Any = False) -> bool:
    if not isinstance(s, str):
        raise _no_overload("isSemver", s)
    try:
        Semver.parse(_normalize_semver(s) if normalize is True else s)
    except (ValueError, IndexError):
        return False
    return True


def _v(name: str, v: Any) -> Semver:
    if not isinstance(v, Semver):
        raise _no_overload(name, v)
    return v


def _compare_to(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    raise _no_overload("compareTo", a, b)


def _greater(a: Any, b: Any) -> bool:
    return _compare_to(a, b) > 0


def _less(a: Any, b: Any) -> bool:
    return _compare_to(a, b) < 0


# --- string extensions (cel-go ``ext.Strings``, as the Kubernetes environment declares them) ---------
Param = type | tuple[type, ...]


def _overloads(name: str, *impls: tuple[tuple[Param, ...], Callable[..., Any]]) -> Callable[..., Any]:
    """A function with typed overloads: the first whose parameter types match the arguments runs;
    none matching is ``no such overload`` (a CEL int is a Python int, not a bool or a UInt)."""
    def matches(value: Any, wanted: Param) -> bool:
        return type(value) is int if wanted is int else isinstance(value, wanted)

    def call(*args: Any) -> Any:
        for params, impl in impls:
            if len(params) == len(args) and all(matches(a, t) for a, t in zip(args, params)):
                return impl(*args)
        raise _no_overload(name, *args)

    return call


def _index_error(index: int) -> CelError:
    return CelError(f"index out of range: {index}")


#: Go's unicode.IsSpace, what ``strings.TrimSpace`` strips (Python's str.strip also strips \x1c-\x1f).
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
_ASCII_UPPER = {c: c - 32 for c in range(ord("a"), ord("z") + 1)}


def _char_at(s: str, i: int) -> str:
    """The code point at ``i``; ``i == size`` gives "", beyond it is an error."""
    if i < 0 or i > len(s):
        raise _index_error(i)
    return s[i] if i < len(s) else ""


def _index_of(s: str, sub: str, offset: int = 0) -> int:
    """First occurrence at or after ``offset`` (code points); an empty ``sub`` is found at ``offset``."""
    if sub == "":
        return offset
    if offset < 0 or offset >= len(s):
        raise _index_error(offset)
    return s.find(sub, offset)


def _last_index_of(s: str, sub: str, offset: int | None = None) -> int:
    """Last occurrence starting at or before ``offset`` (default: the end)."""
    if sub == "":
        return len(s) if offset is None else offset
    offset = len(s) - 1 if offset is None else offset
    if offset < 0 or offset >= len(s):
        raise _index_error(offset)
    return s.rfind(sub, 0, offset + len(sub))


def _replace(s: str, old: str, new: str, n: int = -1) -> str:
    """Go's strings.Replace: at most ``n`` replacements, all when ``n`` is negative."""
    return s.replace(old, new, n if n >= 0 else -1)


def _split(s: str, sep: str, n: int = -1) -> list[str]:
    """Go's strings.SplitN: at most ``n`` parts (all when negative, none when 0); an empty
    separator splits into code points, the last part keeping the rest."""
    if n == 0:
        return []
    if sep == "":
        chars = list(s)
        return [*chars[:n - 1], "".join(chars[n - 1:])] if 0 < n < len(chars) else chars
    return s.split(sep, n - 1 if n > 0 else -1)


def _substring(s: str, start: int, end: int | None = None) -> str:
    """Code points ``[start, end)``, with cel-go's range errors."""
    if end is not None and start > end:
        raise CelError(f"invalid substring range. start: {start}, end: {end}")
    if start < 0 or start > len(s):
        raise _index_error(start)
    if end is not None and (end < 0 or end > len(s)):
        raise _index_error(end)
    return s[start:end]


def _join(items: list[Any] | tuple[Any, ...], sep: str = "") -> str:
    if not all(isinstance(x, str) for x in items):
        raise _no_overload("join", items, sep)
    return sep.join(items)


_LIST = (list, tuple)


# --- Kubernetes list library (``library.Lists``) ------------------------------------------------
def _order(a: Any, b: Any) -> int:
    """-1, 0 or 1 as cel-go's Compare; NaN compares as neither smaller nor larger."""
    try:
        return _compare("compare", a, b)
    except _NanType:
        return 0


def _is_sorted(items: list[Any] | tuple[Any, ...]) -> bool:
    return all(_order(a, b) != 1 for a, b in pairwise(items))


def _sum(items: list[Any] | tuple[Any, ...]) -> Any:
    """The elements added up; an empty list sums to int 0 (upstream picks the zero of the
    list's static element type, which an untyped interpreter cannot know)."""
    if not items:
        return 0
    total = items[0]
    for item in items[1:]:
        total = _arith("_+_")(total, item)
    return total


def _extreme(name: str, prefer: int) -> Callable[[list[Any] | tuple[Any, ...]], Any]:
    """``min`` (prefer a later element when the current one compares 1) or ``max`` (-1)."""
    def pick(items: list[Any] | tuple[Any, ...]) -> Any:
        if not items:
            raise CelError(f"{name} called on empty list")
        best = items[0]
        for item in items[1:]:
            if _order(best, item) == prefer:
                best = item
        return best

    return pick


def _list_index_of(items: list[Any] | tuple[Any, ...], item: Any) -> int:
    return next((i for i, x in enumerate(items) if cel_equal(x, item)), -1)


def _list_last_index_of(items: list[Any] | tuple[Any, ...], item: Any) -> int:
    return next((i for i in range(len(items) - 1, -1, -1) if cel_equal(items[i], item)), -1)


#: name -> (callable, whether it may be called as a method, whether as a global function).
FUNCTIONS: dict[str, tuple[Callable[..., Any], bool, bool]] = {
    "size": (_size, True, True),
    "contains": (_overloads("contains", ((str, str), lambda s, x: x in s)), True, False),
    "startsWith": (_overloads("startsWith", ((str, str), lambda s, x: s.startswith(x))), True, False),
    "endsWith": (_overloads("endsWith", ((str, str), lambda s, x: s.endswith(x))), True, False),
    "matches": (_matches, True, True),
    "lowerAscii": (_overloads("lowerAscii", ((str,), lambda s: s.translate(_ASCII_LOWER))), True, False),
    "upperAscii": (_overloads("upperAscii", ((str,), lambda s: s.translate(_ASCII_UPPER))), True, False),
    "trim": (_overloads("trim", ((str,), lambda s: s.strip(_GO_SPACE))), True, False),
    "indexOf": (_overloads("indexOf", ((str, str), _index_of), ((str, str, int), _index_of),
                           ((_LIST, object), _list_index_of)), True, False),
    "lastIndexOf": (_overloads("lastIndexOf", ((str, str), _last_index_of), ((str, str, int), _last_index_of),
                               ((_LIST, object), _list_last_index_of)), True, False),
    "isSorted": (_overloads("isSorted", ((_LIST,), _is_sorted)), True, False),
    "sum": (_overloads("sum", ((_LIST,), _sum)), True, False),
    "min": (_overloads("min", ((_LIST,), _extreme("min", 1))), True, False),
    "max": (_overloads("max", ((_LIST,), _extreme("max", -1))), True, False),
    "replace": (_overloads("replace", ((str, str, str), _replace), ((str, str, str, int), _replace)), True, False),
    "split": (_overloads("split", ((str, str), _split), ((str, str, int), _split)), True, False),
    "substring": (_overloads("substring", ((str, int), _substring), ((str, int, int), _substring)), True, False),
    "charAt": (_overloads("charAt", ((str, int), _char_at)), True, False),
    "join": (_overloads("join", ((_LIST,), _join), ((_LIST, str), _join)), True, False),
    "int": (_to_int, False, True),
    "uint": (_to_uint, False, True),
    "double": (_to_double, False, True),
    "string": (format_value, False, True),
    "bool": (_to_bool, False, True),
    "dyn": (lambda v: v, False, True),
    "type": (lambda v: CelType(type_name(v)), False, True),
    "quantity": (_quantity, False, True),
    "isQuantity": (_is_quantity, False, True),
    "isInteger": (lambda q: _q("isInteger", q).denominator == 1 and INT64_MIN <= _q("isInteger", q) <= INT64_MAX, True, False),
    "asInteger": (_as_integer, True, False),
    "asApproximateFloat": (lambda q: float(_q("asApproximateFloat", q)), True, False),
    "sign": (lambda q: (_q("sign", q) > 0) - (_q("sign", q) < 0), True, False),
    "add": (lambda q, o: Quantity(_q("add", q) + _q_operand("add", o)), True, False),
    "sub": (lambda q, o: Quantity(_q("sub", q) - _q_operand("sub", o)), True, False),
    "isGreaterThan": (_greater, True, False),
    "isLessThan": (_less, True, False),
    "compareTo": (_compare_to, True, False),
    "semver": (_semver, False, True),
    "isSemver": (_is_semver, False, True),
    "major": (lambda v: _v("major", v).major, True, False),
    "minor": (lambda v: _v("minor", v).minor, True, False),
    "patch": (lambda v: _v("patch", v).patch, True, False),
}


# --- lexer ----------------------------------------------------------------------------------------
_TOKEN = re.compile(r"""
    (?P<ws>\s+|//[^\n]*)
  | (?P<float>(?:\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?))
  | (?P<hex>0[xX][0-9a-fA-F]+[uU]?)
  | (?P<int>\d+[uU]?)
  | (?P<string>[rR]?[bB]?[rR]?(?:\"\"\"(?:.|\n)*?\"\"\"|'''(?:.|\n)*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||[-+*/%!<>?:.,\[\]{}()])
""", re.VERBOSE)

_RESERVED = {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop",
             "package", "namespace", "return", "var", "void", "while"}


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    tokens = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise CelCompileError(f"Syntax error: token recognition error at: '{text[pos]}' (1:{pos + 1})")
        kind = m.lastgroup or ""
        if kind != "ws":
            tokens.append((kind, m.group(), pos))
        pos = m.end()
    tokens.append(("eof", "", len(text)))
    return tokens


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
            "'": "'", '"': '"', "`": "`", "?": "?"}


def _unquote(raw: str) -> str | bytes:
    prefix = ""
    while raw[0] in "rRbB":
        prefix += raw[0].lower()
        raw = raw[1:]
    quote = raw[:3] if raw[:3] in ('"""', "'''") else raw[0]
    body = raw[len(quote):-len(quote)]
    if "b" in prefix:
        return body.encode("utf-8") if "r" in prefix else _unescape_bytes(body)
    return body if "r" in prefix else _unescape(body)


def _unescape_bytes(body: str) -> bytes:
    """A bytes literal's body: ``\\x`` and octal escapes are byte values (in strings they are code
    points), other characters their UTF-8 encoding; unicode escapes are not allowed."""
    out = bytearray()
    i = 0
    while i < len(body):
        nxt = body[i + 1] if body[i] == "\\" and i + 1 < len(body) else ""
        if nxt in ("x", "X"):
            out.append(int(body[i + 2:i + 4], 16))
            i += 4
        elif nxt and nxt in "01234567":
            out.append(int(body[i + 1:i + 4], 8))
            i += 4
        elif nxt in ("u", "U"):
            raise CelCompileError(f"Syntax error: unicode escape '\\{nxt}' in a bytes literal")
        else:
            step = 2 if nxt else 1
            out += _unescape(body[i:i + step]).encode("utf-8")
            i += step
    return bytes(out)


def _unescape(body: str) -> str:
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1] if i + 1 < len(body) else ""
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in "xX":
            out.append(chr(int(body[i + 2:i + 4], 16)))
            i += 4
        elif nxt == "u":
            out.append(chr(int(body[i + 2:i + 6], 16)))
            i += 6
        elif nxt == "U":
            out.append(chr(int(body[i + 2:i + 10], 16)))
            i += 10
        elif nxt in "01234567":
            out.append(chr(int(body[i + 1:i + 4], 8)))
            i += 4
        else:
            raise CelCompileError(f"Syntax error: invalid escape sequence '\\{nxt}'")
    return "".join(out)


# --- parser (to an AST of tuples) ---------------------------------------------------------------
class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.i = 0

    def peek(self, value: str | None = None) -> bool:
        kind, text, _ = self.tokens[self.i]
        return text == value if value is not None else kind != "eof"

    def take(self) -> tuple[str, str, int]:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def expect(self, value: str) -> None:
        _kind, text, pos = self.take()
        if text != value:
            found = text or "<EOF>"
            raise CelCompileError(f"Syntax error: mismatched input '{found}' expecting '{value}' (1:{pos + 1})")

    def parse(self) -> Node:
        node = self.expr()
        kind, text, pos = self.tokens[self.i]
        if kind != "eof":
            raise CelCompileError(f"Syntax error: extraneous input '{text}' (1:{pos + 1})")
        return node

    def expr(self) -> Node:
        cond = self.binary(0)
        if self.peek("?"):
            self.take()
            then = self.binary(0)
            self.expect(":")
            return ("cond", cond, then, self.expr())
        return cond

    _LEVELS = (("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        ops = self._LEVELS[level]
        while self.tokens[self.i][1] in ops and self.tokens[self.i][0] in ("op", "ident"):
            op = self.take()[1]
            right = self.binary(level + 1)
            left = ("op", op, left, right)
        return left

    def unary(self) -> Node:
        if self.peek("!"):
            self.take()
            return ("not", self.unary())
        if self.peek("-"):
            self.take()
            kind, text, _ = self.tokens[self.i]
            if kind in ("int", "hex") and not text.lower().endswith("u"):
                self.take()
                value = -int(text, 0) if kind == "hex" else -int(text)
                return ("lit", _check_literal_int(value))
            return ("neg", self.unary())
        return self.member()

    def member(self) -> Node:
        node = self.primary()
        while True:
            if self.peek("."):
                self.take()
                kind, name, pos = self.take()
                if kind != "ident":
                    raise CelCompileError(f"Syntax error: mismatched input '{name}' expecting IDENTIFIER (1:{pos + 1})")
                if self.peek("("):
                    node = self.call(name, node)
                else:
                    node = ("select", node, name)
            elif self.peek("["):
                self.take()
                key = self.expr()
                self.expect("]")
                node = ("index", node, key)
            else:
                return node

    def args(self, close: str) -> list[Node]:
        out: list[Node] = []
        while not self.peek(close):
            out.append(self.expr())
            if not self.peek(","):
                break
            self.take()
        self.expect(close)
        return out

    def call(self, name: str, target: Node | None) -> Node:
        self.expect("(")
        return ("call", name, target, self.args(")"))

    def primary(self) -> Node:
        kind, text, pos = self.take()
        if kind == "int":
            if text.lower().endswith("u"):
                return ("lit", _check_literal_uint(int(text[:-1])))
            return ("lit", _check_literal_int(int(text)))
        if kind == "hex":
            if text.lower().endswith("u"):
                return ("lit", _check_literal_uint(int(text[:-1], 16)))
            return ("lit", _check_literal_int(int(text, 16)))
        if kind == "float":
            return ("lit", float(text))
        if kind == "string":
            return ("lit", _unquote(text))
        if kind == "ident":
            if text in ("true", "false"):
                return ("lit", text == "true")
            if text == "null":
                return ("lit", None)
            if text in _RESERVED:
                raise CelCompileError(f"Syntax error: reserved identifier: {text} (1:{pos + 1})")
            if self.peek("("):
                return self.call(text, None)
            return ("ident", text)
        if text == "(":
            node = self.expr()
            self.expect(")")
            return node
        if text == "[":
            return ("list", self.args("]"))
        if text == "{":
            entries = []
            while not self.peek("}"):
                key = self.expr()
                self.expect(":")
                entries.append((key, self.expr()))
                if not self.peek(","):
                    break
                self.take()
            self.expect("}")
            return ("map", entries)
        found = text or "<EOF>"
        raise CelCompileError(f"Syntax error: mismatched input '{found}' (1:{pos + 1})")


def _check_literal_int(v: int) -> int:
    if v < INT64_MIN or v > INT64_MAX:
        raise CelCompileError("Syntax error: integer literal out of range")
    return v


def _check_literal_uint(v: int) -> UInt:
    if v > UINT64_MAX:
        raise CelCompileError("Syntax error: unsigned integer literal out of range")
    return UInt(v)


# --- compiler: AST -> closures ------------------------------------------------------------------
Env = dict[str, Any]
Fn = Callable[[Env], Any]
#: A syntax tree node: its kind first (``("lit", 1)``, ``("select", target, "f")``...).
Node = tuple[Any, ...]

_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "==": cel_equal,
    "!=": lambda a, b: not cel_equal(a, b),
    "<": _ordering("_<_", lambda c: c < 0),
    "<=": _ordering("_<=_", lambda c: c <= 0),
    ">": _ordering("_>_", lambda c: c > 0),
    ">=": _ordering("_>=_", lambda c: c >= 0),
    "in": _in,
    "+": _arith("_+_"),
    "-": _arith("_-_"),
    "*": _arith("_*_"),
    "/": _arith("_/_"),
    "%": _arith("_%_"),
}

_MACROS = {"all", "exists", "exists_one", "map", "filter"}


class _Compiler:
    def __init__(self, variables: frozenset[str]) -> None:
        self.variables = variables

    def compile(self, node: Node, scope: frozenset[str]) -> Fn:
        kind = node[0]
        compiled: Fn = getattr(self, f"_c_{kind}")(node, scope)
        return compiled

    def _c_lit(self, node: Node, scope: frozenset[str]) -> Fn:
        value = node[1]
        return lambda env: value

    def _c_ident(self, node: Node, scope: frozenset[str]) -> Fn:
        name = node[1]
        if name not in scope and name not in self.variables:
            if name in _TYPE_NAMES:  # type denotations: ``type(x) == int``
                denoted = CelType(name)
                return lambda env: denoted
            raise CelCompileError(f"undeclared reference to '{name}' (in container '')")
        return lambda env: env[name]

    def _c_select(self, node: Node, scope: frozenset[str]) -> Fn:
        target = self.compile(node[1], scope)
        field = node[2]
        return lambda env: _select(target(env), field)

    def _c_index(self, node: Node, scope: frozenset[str]) -> Fn:
        target, key = self.compile(node[1], scope), self.compile(node[2], scope)
        return lambda env: index(target(env), key(env))

    def _c_list(self, node: Node, scope: frozenset[str]) -> Fn:
        items = [self.compile(n, scope) for n in node[1]]
        return lambda env: [f(env) for f in items]

    def _c_map(self, node: Node, scope: frozenset[str]) -> Fn:
        entries = [(self.compile(k, scope), self.compile(v, scope)) for k, v in node[1]]

        def build(env: Env) -> dict[Any, Any]:
            out: dict[Any, Any] = {}
            for k, v in entries:
                key = k(env)
                if not isinstance(key, (str, int, bool)):
                    raise CelError(f"unsupported key type: {type_name(key)}")
                if _lookup_key(out, key) is not _MISSING:
                    raise CelError(f"Failed with repeated key: {format_value(key)}")
                out[key] = v(env)
            return out

        return build

    def _c_not(self, node: Node, scope: frozenset[str]) -> Fn:
        operand = self.compile(node[1], scope)

        def fn(env: Env) -> bool:
            v = operand(env)
            if not isinstance(v, bool):
                raise _no_overload("!_", v)
            return not v

        return fn

    def _c_neg(self, node: Node, scope: frozenset[str]) -> Fn:
        operand = self.compile(node[1], scope)

        def fn(env: Env) -> Any:
            v = operand(env)
            if isinstance(v, (bool, UInt)) or not _is_num(v):
                raise _no_overload("-_", v)
            return -v if isinstance(v, float) else _check_int(-v)

        return fn

    def _c_cond(self, node: Node, scope: frozenset[str]) -> Fn:
        cond, then, other = (self.compile(n, scope) for n in node[1:])

        def fn(env: Env) -> Any:
            c = cond(env)
            if not isinstance(c, bool):
                raise _no_overload("_?_:_", c)
            return then(env) if c else other(env)

        return fn

    def _c_op(self, node: Node, scope: frozenset[str]) -> Fn:
        op = node[1]
        left, right = self.compile(node[2], scope), self.compile(node[3], scope)
        if op in ("&&", "||"):
            return _logical(op, left, right)
        fn = _BINARY[op]
        return lambda env: fn(left(env), right(env))

    def _c_call(self, node: Node, scope: frozenset[str]) -> Fn:
        _, name, target, args = node
        if name == "has" and target is None:
            return self._has(args, scope)
        if name == "bind" and target == ("ident", "cel") and "cel" not in scope:
            return self._bind(args, scope)
        if name in _MACROS and target is not None:
            return self._macro(name, target, args, scope)
        entry = FUNCTIONS.get(name)
        if entry is None or (target is not None and not entry[1]) or (target is None and not entry[2]):
            raise CelCompileError(f"undeclared reference to '{name}' (in container '')")
        fn = entry[0]
        compiled = [self.compile(a, scope) for a in ([target] if target is not None else []) + list(args)]

        def call(env: Env) -> Any:
            values = [c(env) for c in compiled]
            try:
                return fn(*values)
            except CelError:
                raise
            except (TypeError, ValueError, AttributeError) as e:
                raise _no_overload(name, *values) from e

        return call

    def _has(self, args: list[Node], scope: frozenset[str]) -> Fn:
        if len(args) != 1 or args[0][0] != "select":
            raise CelCompileError("invalid argument to has() macro")
        target = self.compile(args[0][1], scope)
        field = args[0][2]
        return lambda env: _has(target(env), field)

    def _bind(self, args: list[Node], scope: frozenset[str]) -> Fn:
        if len(args) != 3 or args[0][0] != "ident":
            raise CelCompileError("cel.bind() variable name must be a simple identifier")
        name = args[0][1]
        init = self.compile(args[1], scope)
        body = self.compile(args[2], scope | {name})
        return lambda env: body({**env, name: init(env)})

    def _macro(self, name: str, target: Node, args: list[Node], scope: frozenset[str]) -> Fn:
        if not args or args[0][0] != "ident" or len(args) not in (2, 3) or (len(args) == 3 and name != "map"):
            raise CelCompileError(f"invalid argument to {name}() macro")
        var = args[0][1]
        inner = scope | {var}
        source = self.compile(target, scope)
        parts = [self.compile(a, inner) for a in args[1:]]

        def items(env: Env) -> list[Any]:
            value = source(env)
            if isinstance(value, (list, tuple)):
                return list(value)
            if isinstance(value, dict):
                return list(value.keys())
            raise _no_overload(name, value)

        return _MACRO_IMPLS[name](var, items, parts)


def _logical(op: str, left: Fn, right: Fn) -> Fn:
    """``&&``/``||`` where a decisive operand wins over an error on the other side."""
    decisive = op == "||"

    def fn(env: Env) -> bool:
        error: CelError | None = None
        for side in (left, right):
            try:
                v = side(env)
            except CelError as e:
                error = error or e
                continue
            if not isinstance(v, bool):
                error = error or _no_overload(f"_{op}_", v)
                continue
            if v is decisive:
                return decisive
        if error is not None:
            raise error
        return not decisive

    return fn


def _bool_of(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise _no_overload(name, v)
    return v


def _m_all(var: str, items: Callable[[Env], list[Any]], parts: list[Fn]) -> Fn:
    pred = parts[0]

    def fn(env: Env) -> bool:
        error = None
        for x in items(env):
            try:
                if not _bool_of("all", pred({**env, var: x})):
                    return False
            except CelError as e:
                error = error or e
        if error:
            raise error
        return True

    return fn


def _m_exists(var: str, items: Callable[[Env], list[Any]], parts: list[Fn]) -> Fn:
    pred = parts[0]

    def fn(env: Env) -> bool:
        error = None
        for x in items(env):
            try:
                if _bool_of("exists", pred({**env, var: x})):
                    return True
            except CelError as e:
                error = error or e
        if error:
            raise error
        return False

    return fn


def _m_exists_one(var: str, items: Callable[[Env], list[Any]], parts: list[Fn]) -> Fn:
    pred = parts[0]
    return lambda env: sum(1 for x in items(env) if _bool_of("exists_one", pred({**env, var: x}))) == 1


def _m_map(var: str, items: Callable[[Env], list[Any]], parts: list[Fn]) -> Fn:
    if len(parts) == 1:
        transform = parts[0]
        return lambda env: [transform({**env, var: x}) for x in items(env)]
    pred, transform = parts
    return lambda env: [transform({**env, var: x}) for x in items(env) if _bool_of("map", pred({**env, var: x}))]


def _m_filter(var: str, items: Callable[[Env], list[Any]], parts: list[Fn]) -> Fn:
    pred = parts[0]
    return lambda env: [x for x in items(env) if _bool_of("filter", pred({**env, var: x}))]


_MACRO_IMPLS: dict[str, Callable[[str, Callable[[Env], list[Any]], list[Fn]], Fn]] = {
    "all": _m_all, "exists": _m_exists, "exists_one": _m_exists_one, "map": _m_map, "filter": _m_filter,
}


def static_type(node: Node, known: Mapping[Node, str] | None = None) -> str:
    """The expression's type when it is evident without a checker: literals, operators, and the
    selections ``known`` types (``device.driver`` is a string)."""
    kind = node[0]
    if kind == "lit":
        return type_name(node[1])
    if kind in ("list", "map"):
        return str(kind)
    if known and kind == "select":
        typed = next((name for selected, name in known.items() if selected == node), None)
        if typed is not None:
            return typed
    if kind == "op" and node[1] in ("==", "!=", "<", "<=", ">", ">=", "in", "&&", "||"):
        return "bool"
    if kind == "op" and node[1] in ("+", "-", "*", "/", "%"):
        left, right = static_type(node[2], known), static_type(node[3], known)
        return left if left == right and left != "dyn" else "dyn"
    return "dyn"


def parse(expression: str) -> Node:
    """The syntax tree of ``expression`` (CelCompileError when it does not parse)."""
    return _Parser(expression).parse()


def compile_tree(tree: Node, variables: frozenset[str]) -> Fn:
    """A program over ``variables`` for a tree from :func:`parse` (CelCompileError for an
    undeclared reference or function)."""
    return _Compiler(variables).compile(tree, frozenset())


def references(tree: Any, name: str) -> bool:
    """Whether the tree refers to variable ``name`` (a transition rule refers to ``oldSelf``)."""
    if tree == ("ident", name):
        return True
    return isinstance(tree, (tuple, list)) and any(references(part, name) for part in tree)


def evaluate(expression: str, variables: Mapping[str, Any] | None = None) -> Any:
    """The value of ``expression`` over ``variables``, whatever its type: how the function
    library is checked against upstream's test tables, which evaluate without a device.
    CelCompileError or CelError as a selector would report them."""
    names = frozenset(variables or ())
    program = compile_tree(parse(expression), names)
    return program(dict(variables or {}))
