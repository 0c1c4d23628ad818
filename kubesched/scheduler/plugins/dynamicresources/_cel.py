"""A small CEL evaluator for DRA device selectors (``k8s.io/dynamic-resource-allocation/cel``).

Why not ``cel-python``: checked against the selector subset DRA needs, it lacks ``cel.bind``,
fails a lookup of an unknown attribute domain (upstream yields an empty map there), has no
Kubernetes ``quantity``/``semver`` libraries, rejects ``1 == 1.0`` and words its errors
differently from cel-go (upstream's messages reach users through the Filter status). This module
evaluates the subset below with cel-go's semantics and error texts, and compiles each expression
once into Python closures.

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
  RE2 syntax in practice), ``lowerAscii``, ``upperAscii``, ``trim``, ``indexOf``,
  ``lastIndexOf``, ``replace``, ``split``, ``substring``, ``charAt``, ``join``, ``int``,
  ``uint``, ``double``, ``string``, ``bool``, ``dyn``, ``type``;
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
from fractions import Fraction
from functools import total_ordering
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


_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$")


@total_ordering
class Semver:
    """A semantic version 2.0.0 (blang/semver), compared by precedence."""

    __slots__ = ("build", "major", "minor", "patch", "pre")

    def __init__(self, major: int, minor: int, patch: int, pre: tuple[str, ...] = (), build: tuple[str, ...] = ()) -> None:
        self.major, self.minor, self.patch, self.pre, self.build = major, minor, patch, pre, build

    @classmethod
    def parse(cls, text: str) -> Semver:
        m = _SEMVER.match(text)
        if not m:
            raise ValueError(f"invalid semver: {text}")
        pre = tuple(m.group(4).split(".")) if m.group(4) else ()
        for part in pre:
            if part.isdigit() and len(part) > 1 and part[0] == "0":
                raise ValueError(f"invalid semver: {text}")
        build = tuple(m.group(5).split(".")) if m.group(5) else ()
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre, build)

    def _key(self) -> tuple:
        pre: tuple = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
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


class DefaultMap(dict):
    """A map whose unknown keys read as an empty map, as DRA's ``device.attributes`` and
    ``device.capacity`` do (upstream ``newStringInterfaceMapWithDefault``)."""

    __slots__ = ()


_EMPTY: dict = {}


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


class CelType:
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


def _lookup_key(m: Mapping, key: Any) -> Any:
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
    for kind in (bool, str, bytes):
        if isinstance(a, kind) and isinstance(b, kind):
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


def _str_fn(name: str, fn: Callable[..., Any], arity: int) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        if len(args) != arity or not isinstance(args[0], str):
            raise _no_overload(name, *args)
        return fn(*args)

    return call


def _matches(s: Any, pattern: Any) -> bool:
    if not isinstance(s, str) or not isinstance(pattern, str):
        raise _no_overload("matches", s, pattern)
    try:
        return re.search(pattern, s) is not None
    except re.error as e:
        raise CelError(f"invalid regular expression: {e}") from e


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
        try:
            return _check_int(int(v, 10))
        except ValueError as e:
            raise CelError(f"cannot convert string '{v}' to int") from e
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
        try:
            return _check_uint(int(v, 10))
        except ValueError as e:
            raise CelError(f"cannot convert string '{v}' to uint") from e
    raise _no_overload("uint", v)


def _to_double(v: Any) -> float:
    if _is_num(v):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError as e:
            raise CelError(f"cannot convert string '{v}' to double") from e
    raise _no_overload("double", v)


def format_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if not v.is_integer() else f"{v:.0f}"
    if isinstance(v, (int, str)):
        return str(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    raise _no_overload("string", v)


def _to_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        if v in ("1", "t", "true", "TRUE", "True"):
            return True
        if v in ("0", "f", "false", "FALSE", "False"):
            return False
        raise CelError("type conversion error from 'string' to 'bool'")
    raise _no_overload("bool", v)


def _quantity(s: Any) -> Quantity:
    if not isinstance(s, str):
        raise _no_overload("quantity", s)
    try:
        return Quantity(parse_quantity(s))
    except InvalidQuantity as e:
        raise CelError(str(e)) from e


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
        raise CelError(f"error parsing semver: {s}") from e


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


def _join(lst: Any, sep: Any = "") -> str:
    if not isinstance(lst, (list, tuple)) or not isinstance(sep, str) or not all(isinstance(x, str) for x in lst):
        raise _no_overload("join", lst, sep)
    return sep.join(lst)


def _substring(s: Any, start: Any, end: Any = None) -> str:
    if not isinstance(s, str):
        raise _no_overload("substring", s)
    stop = len(s) if end is None else end
    if start < 0 or stop > len(s) or start > stop:
        raise CelError(f"index out of range: {start if start < 0 or start > len(s) else stop}")
    return s[start:stop]


def _index_of(s: Any, sub: Any, start: Any = 0) -> int:
    if not isinstance(s, str) or not isinstance(sub, str):
        raise _no_overload("indexOf", s, sub)
    return s.find(sub, start)


def _split(s: Any, sep: Any, limit: Any = -1) -> list[str]:
    if not isinstance(s, str) or not isinstance(sep, str):
        raise _no_overload("split", s, sep)
    if limit == 0:
        return []
    return s.split(sep, limit - 1 if limit > 0 else -1) if sep else list(s)


#: name -> (callable, whether it may be called as a method, whether as a global function).
FUNCTIONS: dict[str, tuple[Callable[..., Any], bool, bool]] = {
    "size": (_size, True, True),
    "contains": (_str_fn("contains", lambda s, x: x in s, 2), True, False),
    "startsWith": (_str_fn("startsWith", lambda s, x: s.startswith(x), 2), True, False),
    "endsWith": (_str_fn("endsWith", lambda s, x: s.endswith(x), 2), True, False),
    "matches": (_matches, True, True),
    "lowerAscii": (_str_fn("lowerAscii", lambda s: s.lower(), 1), True, False),
    "upperAscii": (_str_fn("upperAscii", lambda s: s.upper(), 1), True, False),
    "trim": (_str_fn("trim", lambda s: s.strip(), 1), True, False),
    "indexOf": (_index_of, True, False),
    "lastIndexOf": (_str_fn("lastIndexOf", lambda s, x: s.rfind(x), 2), True, False),
    "replace": (_str_fn("replace", lambda s, a, b: s.replace(a, b), 3), True, False),
    "split": (_split, True, False),
    "substring": (_substring, True, False),
    "charAt": (lambda s, i: s[i] if isinstance(s, str) and 0 <= i < len(s) else "", True, False),
    "join": (_join, True, False),
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
    if "r" in prefix:
        text = body
    else:
        text = _unescape(body)
    return text.encode("utf-8") if "b" in prefix else text


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

    def parse(self) -> tuple:
        node = self.expr()
        kind, text, pos = self.tokens[self.i]
        if kind != "eof":
            raise CelCompileError(f"Syntax error: extraneous input '{text}' (1:{pos + 1})")
        return node

    def expr(self) -> tuple:
        cond = self.binary(0)
        if self.peek("?"):
            self.take()
            then = self.binary(0)
            self.expect(":")
            return ("cond", cond, then, self.expr())
        return cond

    _LEVELS = (("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> tuple:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        ops = self._LEVELS[level]
        while self.tokens[self.i][1] in ops and self.tokens[self.i][0] in ("op", "ident"):
            op = self.take()[1]
            right = self.binary(level + 1)
            left = ("op", op, left, right)
        return left

    def unary(self) -> tuple:
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

    def member(self) -> tuple:
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

    def args(self, close: str) -> list[tuple]:
        out: list[tuple] = []
        while not self.peek(close):
            out.append(self.expr())
            if not self.peek(","):
                break
            self.take()
        self.expect(close)
        return out

    def call(self, name: str, target: tuple | None) -> tuple:
        self.expect("(")
        return ("call", name, target, self.args(")"))

    def primary(self) -> tuple:
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
Env = dict
Fn = Callable[[Env], Any]

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

    def compile(self, node: tuple, scope: frozenset[str]) -> Fn:
        kind = node[0]
        return getattr(self, f"_c_{kind}")(node, scope)

    def _c_lit(self, node: tuple, scope: frozenset[str]) -> Fn:
        value = node[1]
        return lambda env: value

    def _c_ident(self, node: tuple, scope: frozenset[str]) -> Fn:
        name = node[1]
        if name not in scope and name not in self.variables:
            raise CelCompileError(f"undeclared reference to '{name}' (in container '')")
        return lambda env: env[name]

    def _c_select(self, node: tuple, scope: frozenset[str]) -> Fn:
        target = self.compile(node[1], scope)
        field = node[2]
        return lambda env: _select(target(env), field)

    def _c_index(self, node: tuple, scope: frozenset[str]) -> Fn:
        target, key = self.compile(node[1], scope), self.compile(node[2], scope)
        return lambda env: index(target(env), key(env))

    def _c_list(self, node: tuple, scope: frozenset[str]) -> Fn:
        items = [self.compile(n, scope) for n in node[1]]
        return lambda env: [f(env) for f in items]

    def _c_map(self, node: tuple, scope: frozenset[str]) -> Fn:
        entries = [(self.compile(k, scope), self.compile(v, scope)) for k, v in node[1]]

        def build(env: Env) -> dict:
            out: dict = {}
            for k, v in entries:
                key = k(env)
                if not isinstance(key, (str, int, bool)):
                    raise CelError(f"unsupported key type: {type_name(key)}")
                if _lookup_key(out, key) is not _MISSING:
                    raise CelError(f"Failed with repeated key: {format_value(key)}")
                out[key] = v(env)
            return out

        return build

    def _c_not(self, node: tuple, scope: frozenset[str]) -> Fn:
        operand = self.compile(node[1], scope)

        def fn(env: Env) -> bool:
            v = operand(env)
            if not isinstance(v, bool):
                raise _no_overload("!_", v)
            return not v

        return fn

    def _c_neg(self, node: tuple, scope: frozenset[str]) -> Fn:
        operand = self.compile(node[1], scope)

        def fn(env: Env) -> Any:
            v = operand(env)
            if isinstance(v, (bool, UInt)) or not _is_num(v):
                raise _no_overload("-_", v)
            return -v if isinstance(v, float) else _check_int(-v)

        return fn

    def _c_cond(self, node: tuple, scope: frozenset[str]) -> Fn:
        cond, then, other = (self.compile(n, scope) for n in node[1:])

        def fn(env: Env) -> Any:
            c = cond(env)
            if not isinstance(c, bool):
                raise _no_overload("_?_:_", c)
            return then(env) if c else other(env)

        return fn

    def _c_op(self, node: tuple, scope: frozenset[str]) -> Fn:
        op = node[1]
        left, right = self.compile(node[2], scope), self.compile(node[3], scope)
        if op in ("&&", "||"):
            return _logical(op, left, right)
        fn = _BINARY[op]
        return lambda env: fn(left(env), right(env))

    def _c_call(self, node: tuple, scope: frozenset[str]) -> Fn:
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

    def _has(self, args: list, scope: frozenset[str]) -> Fn:
        if len(args) != 1 or args[0][0] != "select":
            raise CelCompileError("invalid argument to has() macro")
        target = self.compile(args[0][1], scope)
        field = args[0][2]
        return lambda env: _has(target(env), field)

    def _bind(self, args: list, scope: frozenset[str]) -> Fn:
        if len(args) != 3 or args[0][0] != "ident":
            raise CelCompileError("cel.bind() variable name must be a simple identifier")
        name = args[0][1]
        init = self.compile(args[1], scope)
        body = self.compile(args[2], scope | {name})
        return lambda env: body({**env, name: init(env)})

    def _macro(self, name: str, target: tuple, args: list, scope: frozenset[str]) -> Fn:
        if not args or args[0][0] != "ident" or len(args) not in (2, 3) or (len(args) == 3 and name != "map"):
            raise CelCompileError(f"invalid argument to {name}() macro")
        var = args[0][1]
        inner = scope | {var}
        source = self.compile(target, scope)
        parts = [self.compile(a, inner) for a in args[1:]]

        def items(env: Env) -> list:
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


def _m_all(var: str, items: Callable, parts: list[Fn]) -> Fn:
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


def _m_exists(var: str, items: Callable, parts: list[Fn]) -> Fn:
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


def _m_exists_one(var: str, items: Callable, parts: list[Fn]) -> Fn:
    pred = parts[0]
    return lambda env: sum(1 for x in items(env) if _bool_of("exists_one", pred({**env, var: x}))) == 1


def _m_map(var: str, items: Callable, parts: list[Fn]) -> Fn:
    if len(parts) == 1:
        transform = parts[0]
        return lambda env: [transform({**env, var: x}) for x in items(env)]
    pred, transform = parts
    return lambda env: [transform({**env, var: x}) for x in items(env) if _bool_of("map", pred({**env, var: x}))]


def _m_filter(var: str, items: Callable, parts: list[Fn]) -> Fn:
    pred = parts[0]
    return lambda env: [x for x in items(env) if _bool_of("filter", pred({**env, var: x}))]


_MACRO_IMPLS: dict[str, Callable[[str, Callable, list[Fn]], Fn]] = {
    "all": _m_all, "exists": _m_exists, "exists_one": _m_exists_one, "map": _m_map, "filter": _m_filter,
}


def _static_type(node: tuple) -> str:
    """The expression's type when it is evident without a checker (literals, ``device.driver``)."""
    kind = node[0]
    if kind == "lit":
        return type_name(node[1])
    if kind in ("list", "map"):
        return kind
    if node == ("select", ("ident", "device"), "driver"):
        return "string"
    if kind == "op" and node[1] in ("==", "!=", "<", "<=", ">", ">=", "in", "&&", "||"):
        return "bool"
    if kind == "op" and node[1] in ("+", "-", "*", "/", "%"):
        left, right = _static_type(node[2]), _static_type(node[3])
        return left if left == right and left != "dyn" else "dyn"
    return "dyn"


class CompiledExpression:
    """One compiled selector; ``matches(device)`` evaluates it (``CompilationResult.DeviceMatches``)."""

    __slots__ = ("error", "expression", "program")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.program: Fn | None = None
        self.error: str | None = None
        try:
            ast = _Parser(expression).parse()
            out = _static_type(ast)
            if out not in ("bool", "dyn"):
                raise CelCompileError(f"must evaluate to bool or the unknown type, not {out}")
            self.program = _Compiler(frozenset({"device"})).compile(ast, frozenset())
        except CelCompileError as e:
            self.error = f"compilation failed: {e}"
        except RecursionError:
            self.error = "compilation failed: expression nesting too deep"

    def matches(self, device: Mapping[str, Any]) -> bool:
        """True/False, or CelError for a runtime error (including a non-bool result)."""
        assert self.program is not None
        try:
            result = self.program({"device": device})
        except RecursionError as e:
            raise CelError("expression nesting too deep") from e
        if not isinstance(result, bool):
            raise CelError(f"CEL result of type {type_name(result)} could not be converted to bool")
        return result


class CelCache:
    """Compiled expressions by text (upstream keeps an LRU of 10; all are kept here, they are small)."""

    def __init__(self) -> None:
        self._compiled: dict[str, CompiledExpression] = {}

    def get_or_compile(self, expression: str) -> CompiledExpression:
        compiled = self._compiled.get(expression)
        if compiled is None:
            if len(self._compiled) > 4096:
                self._compiled.clear()
            compiled = self._compiled[expression] = CompiledExpression(expression)
        return compiled


def device_input(driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Any]) -> dict[str, Any]:
    """The ``device`` variable: attributes and capacity grouped by domain (bare names take the driver)."""
    attrs: DefaultMap = DefaultMap()
    for name, value in attributes.items():
        domain, ident = split_qualified(name, driver)
        attrs.setdefault(domain, {})[ident] = value
    caps: DefaultMap = DefaultMap()
    for name, value in capacity.items():
        domain, ident = split_qualified(name, driver)
        caps.setdefault(domain, {})[ident] = value
    return {"driver": driver, "attributes": attrs, "capacity": caps}


def split_qualified(name: str, default_domain: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (default_domain, name)


def attribute_value(raw: Mapping[str, Any]) -> Any:
    """A ResourceSlice ``DeviceAttribute`` (``{"int": 1}``, ``{"version": "1.2.3"}``...) as a CEL value."""
    if raw.get("int") is not None:
        return int(raw["int"])
    if raw.get("bool") is not None:
        return bool(raw["bool"])
    if raw.get("string") is not None:
        return str(raw["string"])
    if raw.get("version") is not None:
        try:
            return Semver.parse(str(raw["version"]))
        except ValueError as e:
            raise CelError(f"parse semantic version: {e}") from e
    raise CelError("unsupported attribute value")


def capacity_value(raw: Mapping[str, Any]) -> Quantity:
    return Quantity(parse_quantity(raw.get("value", "0")))
