"""Decoding an object against its kind's OpenAPI definition, as kube-apiserver's JSON decoder does.

kube-apiserver decodes every body into Go structs before anything reads it: a value of the
wrong JSON type stops the request (``json: cannot unmarshal string into Go struct field
PodSpec.spec.tolerations of type []v1.Toleration``), and fields the struct does not have, or
keys given twice, are the strict decoding errors that ``fieldValidation`` decides about
(rejected, warned about, or silently dropped). kubesched has no Go structs, so this module walks
the object against Kubernetes 1.35's own definitions (:mod:`kubesched.api.openapi_spec`) instead,
and leaves it shaped the way decoding leaves a Go struct: unknown fields dropped, ``null`` fields
unset, YAML timestamps and non-string keys turned into the strings JSON would carry. Everything
that reads objects afterwards (defaulting, validation, the scheduler) can then trust the types.

A checker is compiled once per definition and cached: the walk runs on every write.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json
import math
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import yaml

from kubesched.api import openapi_spec
from kubesched.api.errors import InvalidQuantity, KubeschedError
from kubesched.api.quantity import QUANTITY_FORMAT_MESSAGE, parse_quantity

#: Nesting deeper than this inside free-form fields (``managedFields``' field sets, raw
#: extensions) is refused, as Go's decoder refuses documents nested beyond its own limit.
MAX_FREE_FORM_DEPTH = 256

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_FREE_FORM = frozenset({
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
})
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_TIMES = frozenset({"io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"})
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_INDEX = re.compile(r"\[\d+\]")


class DuplicateKeyDict(dict[Any, Any]):
    """A mapping in which a duplicate-detecting parser found keys given twice, listed in
    ``duplicates`` (the value kept is the last, as JSON and YAML decoders keep it). Parsers make
    one only when there are duplicates; decoding turns it back into a plain dict."""

    __slots__ = ("duplicates",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.duplicates: list[Any] = []


yaml.SafeDumper.add_representer(DuplicateKeyDict, yaml.SafeDumper.represent_dict)


def with_duplicates(data: dict[Any, Any], duplicates: list[Any]) -> dict[Any, Any]:
    """``data`` itself, or a :class:`DuplicateKeyDict` copy of it when keys were given twice."""
    if not duplicates:
        return data
    out = DuplicateKeyDict(data)
    out.duplicates = duplicates
    return out


def pairs_with_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for :func:`json.loads` that remembers duplicate keys."""
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    seen: set[str] = set()
    duplicates = [key for key, _ in pairs if key in seen or seen.add(key)]  # type: ignore[func-returns-value]
    return with_duplicates(out, duplicates)


def duplicate_paths(value: Any, path: str = "") -> list[str]:
    """Paths of the keys given twice anywhere in a parsed document (a patch, which is not decoded
    against a schema itself)."""
    found: list[str] = []
    if isinstance(value, dict):
        prefix = f"{path}." if path else ""
        found += [prefix + str(k) for k in dict.fromkeys(getattr(value, "duplicates", None) or ())]
        for key, item in value.items():
            found += duplicate_paths(item, prefix + str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += duplicate_paths(item, f"{path}[{i}]")
    return found


class DecodeError(KubeschedError, ValueError):
    """A value of the wrong type (or an unparsable quantity, time, base64 string): the object cannot
    be decoded at all. ``str()`` is kube-apiserver's 400 message; ``path`` the field's path."""

    def __init__(self, kind: str, api_version: str, detail: str, path: str) -> None:
        version = api_version.rpartition("/")[2]  # transformDecodeError names the version alone
        super().__init__(f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}')
        self.kind = kind
        self.api_version = api_version
        self.detail = detail
        self.path = path


@dataclass
class StrictProblems:
    """What strict decoding reports and ``fieldValidation`` decides about: unknown and duplicate fields."""

    unknown: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)

    def messages(self) -> list[str]:
        """apimachinery's wording: the duplicate fields, then the unknown ones, each in document order."""
        return [f"duplicate field {go_quote(p)}" for p in self.duplicates] + [f"unknown field {go_quote(p)}" for p in self.unknown]

    def __bool__(self) -> bool:
        return bool(self.unknown or self.duplicates)


def go_quote(text: str) -> str:
    """Go's ``%q`` for the texts messages quote: double quotes, control characters escaped."""
    return json.dumps(text, ensure_ascii=False)


def strict_error_message(kind: str, api_version: str, problems: StrictProblems) -> str:
    """The 400 message of a strict-decoding rejection (``fieldValidation=Strict``)."""
    version = api_version.rpartition("/")[2]
    return f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: ' + ", ".join(problems.messages())


class _Mismatch(Exception):
    """Raised inside the walk; the walk's entry point turns it into a :class:`DecodeError`."""

    def __init__(self, detail: str | None, json_type: str, go_type: str, path: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.json_type = json_type
        self.go_type = go_type
        self.path = path
        #: ``path`` as encoding/json reports it (without map keys), once a map has dropped its key.
        self.go_path: str | None = None
        self.struct = ""


Checker = Callable[[Any, str, StrictProblems], Any]
"""Checks one value at a path, records strict problems, returns the value as decoding leaves it."""


def decode(obj: dict[str, Any], api_version: str, kind: str) -> StrictProblems:
    """Type-check ``obj`` against its kind's definition and normalise it in place.

    Raises :class:`DecodeError` on the first value of the wrong type; returns the unknown and
    duplicate fields (already dropped from ``obj``) for the caller's ``fieldValidation``. Of a
    kind with no 1.35 definition (a custom resource) only ``metadata`` is decoded, as
    kube-apiserver decodes every object's ``metadata`` as ``ObjectMeta``."""
    group, _, version = api_version.rpartition("/")
    name = openapi_spec.definition_name(group, version, kind)
    problems = StrictProblems()
    if isinstance(obj, DuplicateKeyDict) and obj.duplicates:
        problems.duplicates += [_key_text(k) for k in dict.fromkeys(obj.duplicates)]
        obj.duplicates = []  # reported: the walk below must change ``obj`` itself, not a copy
    try:
        if name is not None:
            _struct(name)(obj, "", problems)
        elif obj.get("metadata") is not None:
            obj["metadata"] = _struct(_OBJECT_META)(obj["metadata"], "metadata", problems)
    except _Mismatch as e:
        if not e.struct and e.path == "metadata":
            e.struct = kind
        raise DecodeError(kind, api_version, _go_message(e), e.path) from None
    return problems


class SpecDecodes:
    """:func:`decode` for a writer of many objects that share their spec (the replicas of one
    template, a benchmark's pods): a spec that decoded cleanly before, byte for byte the same
    JSON, is not walked again but taken as it decoded then (a fresh copy: the writer defaults and
    admits it in place). The rest of the object is decoded as always. Specs are told apart by
    their JSON text, so only JSON values are kept (a writer's other types decode as before); the
    ``capacity`` specs used last are remembered."""

    _OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS

    def __init__(self, capacity: int = 256) -> None:
        self._kept: OrderedDict[tuple[str, str, bytes], bytes] = OrderedDict()
        self.capacity = capacity

    def __len__(self) -> int:
        return len(self._kept)

    def decode(self, obj: dict[str, Any], api_version: str, kind: str) -> StrictProblems:
        spec = obj.get("spec")
        raw = self._text(spec) if type(spec) is dict and type(obj) is dict else None
        if raw is None:
            return decode(obj, api_version, kind)
        key = (api_version, kind, raw)
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            obj["spec"] = {}  # in its place, so the object's fields keep their order
            try:
                return decode(obj, api_version, kind)
            finally:
                obj["spec"] = orjson.loads(kept)  # also when the rest fails: the writer's spec is not lost
        problems = decode(obj, api_version, kind)
        decoded = self._text(obj.get("spec"))
        if not problems and decoded is not None:
            self._kept[key] = decoded
            if len(self._kept) > self.capacity:
                self._kept.popitem(last=False)
        return problems

    @classmethod
    def _text(cls, value: Any) -> bytes | None:
        try:
            return orjson.dumps(value, option=cls._OPTIONS)
        except (TypeError, orjson.JSONEncodeError):
            return None


def decode_field(obj: dict[str, Any], api_version: str, kind: str, field_name: str) -> StrictProblems:
    """:func:`decode` of one top-level field of ``obj`` alone (the same errors, the same
    normalisation of that field), for a writer whose other fields come from a stored object that
    was decoded when it was written: a status write replaces only the status."""
    group, _, version = api_version.rpartition("/")
    name = openapi_spec.definition_name(group, version, kind)
    problems = StrictProblems()
    value = obj.get(field_name)
    if name is None or value is None or (isinstance(obj, DuplicateKeyDict) and obj.duplicates):
        return decode(obj, api_version, kind)
    check = _struct_fields(name).get(field_name)
    if check is None:
        return decode(obj, api_version, kind)
    try:
        new = check(value, field_name, problems)
    except _Mismatch as e:
        if not e.struct:
            e.struct = name.rpartition(".")[2]
        raise DecodeError(kind, api_version, _go_message(e), e.path) from None
    if new is not value:
        obj[field_name] = new
    return problems


def _struct_fields(name: str) -> dict[str, Checker]:
    """The checkers of a definition's fields, by field name (compiled once, as :func:`_struct`)."""
    fields = _FIELDS.get(name)
    if fields is None:
        properties = openapi_spec.definition(name).get("properties") or {}
        fields = _FIELDS[name] = {key: _compile(sub) for key, sub in properties.items()}
    return fields


def _go_message(e: _Mismatch) -> str:
    if e.detail is not None:
        return e.detail
    go_path = _INDEX.sub("", e.go_path if e.go_path is not None else e.path)
    where = f"Go struct field {e.struct}.{go_path}" if e.struct else "Go value"
    return f"json: cannot unmarshal {e.json_type} into {where} of type {e.go_type}"


# --- compiling --------------------------------------------------------------------------------

_STRUCTS: dict[str, Checker] = {}
_FIELDS: dict[str, dict[str, Checker]] = {}


def _struct(name: str) -> Checker:
    """The checker of a named definition, compiled on first use (definitions refer to each other,
    some recursively, so references resolve through this cache at call time)."""
    checker = _STRUCTS.get(name)
    if checker is None:
        checker = _compile_definition(name)
        _STRUCTS[name] = checker
    return checker


def go_type_name(schema: Mapping[str, Any]) -> str:
    """The Go type a schema decodes into, as encoding/json names it in errors (``[]v1.Toleration``)."""
    ref = openapi_spec.ref_name(schema)
    if ref is not None:
        package, _, short = ref.rpartition(".")
        return f"{package.rpartition('.')[2]}.{short}"
    types = openapi_spec.schema_types(schema)
    kind = types[0] if types else ""
    if kind == "array":
        return "[]" + go_type_name(schema.get("items") or {})
    if kind == "object":
        extra = schema.get("additionalProperties")
        return "map[string]" + (go_type_name(extra) if isinstance(extra, Mapping) else "interface {}")
    if kind == "string":
        return "[]uint8" if schema.get("format") == "byte" else "string"
    if kind == "integer":
        return str(schema.get("format") or "int")
    return {"boolean": "bool", "number": "float64"}.get(kind, "interface {}")


def _compile_definition(name: str) -> Checker:
    if name == _QUANTITY:
        return _check_quantity
    if name == _INT_OR_STRING:
        return _check_int_or_string
    schema = openapi_spec.definition(name)
    if name in _FREE_FORM or schema.get("x-kubernetes-preserve-unknown-fields"):
        return _check_free_form
    if "properties" not in schema and openapi_spec.schema_types(schema) != ("object",):
        return _compile(schema)
    return _compile_struct(name, schema)


def _compile(schema: Mapping[str, Any]) -> Checker:
    ref = openapi_spec.ref_name(schema)
    if ref is not None:
        cell: list[Checker] = []

        def check_ref(value: Any, path: str, problems: StrictProblems) -> Any:
            if not cell:
                cell.append(_struct(ref))
            return cell[0](value, path, problems)

        return check_ref
    types = openapi_spec.schema_types(schema)
    kind = types[0] if types else ""
    go_type = go_type_name(schema)
    if kind == "array":
        return _compile_array(_compile(schema.get("items") or {}), _zero_of(schema.get("items") or {}), go_type)
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            return _compile_map(_compile(extra), _zero_of(extra), go_type)
        return _check_free_form
    if kind == "string":
        fmt = schema.get("format")
        return _compile_string(fmt, go_type) if fmt in _STRING_FORMATS else _PLAIN_STRING
    if kind == "integer":
        return _compile_integer(go_type)
    if kind == "boolean":
        return _check_bool
    if kind == "number":
        return _check_number
    return _check_free_form


def _zero_of(schema: Mapping[str, Any]) -> Any:
    """What Go decodes a ``null`` list item or map value into: the item type's zero value."""
    if openapi_spec.ref_name(schema) == _QUANTITY:
        return "0"
    if openapi_spec.ref_name(schema) == _INT_OR_STRING:
        return 0
    if openapi_spec.ref_name(schema) is not None:
        return {}
    kind = (openapi_spec.schema_types(schema) or ("",))[0]
    return {"string": "", "integer": 0, "number": 0, "boolean": False}.get(kind)


def _json_type(value: Any) -> str:
    """encoding/json's name for the JSON type of a value, as its errors print it."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, (Mapping, set, frozenset)):
        return "object"  # a YAML !!set is a mapping to nulls
    return "string"  # YAML timestamps and !!binary reach Go as strings


def _compile_struct(name: str, schema: Mapping[str, Any]) -> Checker:
    properties = schema.get("properties") or {}
    fields = {key: _compile(sub) for key, sub in properties.items()}
    # metav1.Time is a struct, not a pointer: Go writes a zero time back as null, so a null stays.
    keep_null = {key for key, sub in properties.items() if openapi_spec.ref_name(sub) in _TIMES}
    struct = name.rpartition(".")[2]
    go_type = go_type_name({"$ref": "#/$defs/" + name})
    plain = frozenset(key for key, check in fields.items() if check is _PLAIN_STRING)

    def check_struct(value: Any, path: str, problems: StrictProblems) -> Any:
        if not isinstance(value, dict):
            raise _Mismatch(None, _json_type(value), go_type, path)
        prefix = f"{path}." if path else ""
        duplicates = getattr(value, "duplicates", None)
        if duplicates:
            problems.duplicates += [prefix + _key_text(k) for k in dict.fromkeys(duplicates)]
            value = dict(value)
        drop: list[Any] = []
        replace: dict[str, Any] = {}
        for key, item in value.items():
            if type(item) is str and key in plain:
                continue  # what the plain string check would leave as it is
            text = key if type(key) is str else _key_text(key)
            check = fields.get(text)
            if check is None:
                problems.unknown.append(prefix + text)
                drop.append(key)
                continue
            if item is None:
                if text is not key or text not in keep_null:
                    drop.append(key)
                if text in keep_null:
                    replace[text] = None
                continue
            try:
                new = check(item, prefix + text, problems)
            except _Mismatch as e:
                if not e.struct:
                    e.struct = struct
                raise
            if new is not item or text is not key:
                replace[text] = new
                if text is not key:
                    drop.append(key)
        for key in drop:
            del value[key]
        value.update(replace)
        return value

    return check_struct


def _key_text(key: Any) -> str:
    """A YAML key as JSON conversion spells it (``true``, ``1``), so it is matched and reported as text."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return key if isinstance(key, str) else str(key)


def _compile_array(item: Checker, zero: Any, go_type: str) -> Checker:
    plain = item is _PLAIN_STRING

    def check_array(value: Any, path: str, problems: StrictProblems) -> Any:
        if not isinstance(value, list):
            raise _Mismatch(None, _json_type(value), go_type, path)
        for i, element in enumerate(value):
            if plain and type(element) is str:
                continue
            if element is None:
                value[i] = zero if not isinstance(zero, dict) else {}
                continue
            new = item(element, f"{path}[{i}]", problems)
            if new is not element:
                value[i] = new
        return value

    return check_array


def _compile_map(item: Checker, zero: Any, go_type: str) -> Checker:
    plain = item is _PLAIN_STRING

    def check_map(value: Any, path: str, problems: StrictProblems) -> Any:
        if not isinstance(value, dict):
            raise _Mismatch(None, _json_type(value), go_type, path)
        duplicates = getattr(value, "duplicates", None)
        if duplicates:
            problems.duplicates += [f"{path}.{_key_text(k)}" for k in dict.fromkeys(duplicates)]
            value = dict(value)
        if any(type(k) is not str for k in value):
            converted = {_key_text(k): v for k, v in value.items()}
            value.clear()
            value.update(converted)
        for key, element in value.items():
            if plain and type(element) is str:
                continue
            if element is None:
                value[key] = zero if not isinstance(zero, dict) else {}
                continue
            try:
                new = item(element, f"{path}.{key}", problems)
            except _Mismatch as e:  # encoding/json's error path names struct fields, never map keys
                e.go_path = path + (e.go_path if e.go_path is not None else e.path)[len(f"{path}.{key}"):]
                raise
            if new is not element:
                value[key] = new
        return value

    return check_map


def _compile_string(fmt: str | None, go_type: str) -> Checker:
    def check_string(value: Any, path: str, problems: StrictProblems) -> Any:
        if type(value) is not str:
            text = _yaml_scalar_text(value)
            if text is None:
                raise _Mismatch(None, _json_type(value), go_type, path)
            value = text
        if fmt == "date-time" and not _RFC3339.match(value):
            raise _Mismatch(f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": not an RFC 3339 time', "string", go_type, path)
        if fmt == "byte":
            _check_base64(value, path, go_type)
        return value

    return check_string


#: The string formats whose values are checked beyond their type (``_compile_string``).
_STRING_FORMATS = frozenset(("date-time", "byte"))
#: The check of every string without such a format: one function, so that the walks of structs,
#: lists and maps pass a ``str`` by it without a call (it would return the value as it is).
_PLAIN_STRING = _compile_string(None, "string")


def _yaml_scalar_text(value: Any) -> str | None:
    """The JSON string a YAML-only scalar becomes (timestamp, ``!!binary``), or None for other types."""
    if isinstance(value, (datetime.datetime, datetime.date)):
        return _rfc3339(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return None


def _rfc3339(value: datetime.date) -> str:
    """An unquoted YAML timestamp as the JSON string it stands for."""
    if not isinstance(value, datetime.datetime):
        return value.isoformat()
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return value.isoformat().replace("+00:00", "Z")


def _check_base64(value: str, path: str, go_type: str) -> None:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
        index = next((i for i, ch in enumerate(value) if ch not in alphabet), len(value))
        raise _Mismatch(f"illegal base64 data at input byte {index}", "string", go_type, path) from None


def _compile_integer(go_type: str) -> Checker:
    low, high = _INT_RANGES.get(go_type, _INT_RANGES["int64"])

    def check_integer(value: Any, path: str, problems: StrictProblems) -> Any:
        if type(value) is int:
            if low <= value <= high:
                return value
            raise _Mismatch(None, f"number {value}", go_type, path)
        if type(value) is float:
            raise _Mismatch(None, f"number {_go_float(value)}", go_type, path)
        raise _Mismatch(None, _json_type(value), go_type, path)

    return check_integer


def _go_float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def _check_bool(value: Any, path: str, problems: StrictProblems) -> Any:
    if type(value) is not bool:
        raise _Mismatch(None, _json_type(value), "bool", path)
    return value


def _check_number(value: Any, path: str, problems: StrictProblems) -> Any:
    if type(value) not in (int, float):
        raise _Mismatch(None, _json_type(value), "float64", path)
    if isinstance(value, float) and not math.isfinite(value):
        raise _Mismatch(f"json: unsupported value: {_go_float(value)}", "number", "float64", path)
    return value


def _check_quantity(value: Any, path: str, problems: StrictProblems) -> Any:
    """``resource.Quantity`` decodes itself: any JSON value's text is handed to the quantity parser,
    so a boolean, list or object fails its format rule, as ``Quantity.UnmarshalJSON`` makes it."""
    if type(value) not in (str, int, float):
        raise _Mismatch(QUANTITY_FORMAT_MESSAGE, "string", "resource.Quantity", path)
    try:
        parse_quantity(value)
    except InvalidQuantity as e:
        raise _Mismatch(e.detail, "string", "resource.Quantity", path) from None
    return value


def _check_int_or_string(value: Any, path: str, problems: StrictProblems) -> Any:
    """``intstr.IntOrString``: a string, or a number that fits an int32."""
    if type(value) is str:
        return value
    if type(value) is int and _INT_RANGES["int32"][0] <= value <= _INT_RANGES["int32"][1]:
        return value
    shown = f"number {_go_float(value) if isinstance(value, float) else value}" if type(value) in (int, float) else _json_type(value)
    raise _Mismatch(f"json: cannot unmarshal {shown} into Go value of type int32", shown, "intstr.IntOrString", path)


def _check_free_form(value: Any, path: str, problems: StrictProblems) -> Any:
    """Free-form JSON (field sets, raw extensions): any JSON value, nested no deeper than the limit.
    YAML-only values become what JSON conversion makes of them."""
    return _free_form(value, path, 0)


def _free_form(value: Any, path: str, depth: int) -> Any:
    if depth > MAX_FREE_FORM_DEPTH:
        raise _Mismatch(f"{path}: exceeded max depth of {MAX_FREE_FORM_DEPTH}", "object", "interface {}", path)
    if isinstance(value, dict):
        items = [(_key_text(k), _free_form(v, path, depth + 1)) for k, v in value.items()]
        if any(k is not o or v is not value[o] for (k, v), o in zip(items, value, strict=True)):
            value.clear()
            value.update(items)
        return value
    if isinstance(value, list):
        for i, item in enumerate(value):
            value[i] = _free_form(item, path, depth + 1)
        return value
    if type(value) is int and not _INT_RANGES["int64"][0] <= value <= _INT_RANGES["int64"][1]:
        return float(value)  # Go decodes free-form numbers as float64
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        if not math.isfinite(value):
            raise _Mismatch(f"json: unsupported value: {_go_float(value)}", "number", "interface {}", path)
        return value
    text = _yaml_scalar_text(value)
    if text is None:
        raise _Mismatch(None, _json_type(value), "interface {}", path)
    return text
