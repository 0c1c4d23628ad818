"""Strict decoding of configuration documents, with the errors kube-scheduler's codec reports.

kube-scheduler reads its file through apimachinery's strict YAML serializer: YAML is converted
to JSON (duplicate keys are reported then), and the JSON is decoded into Go structs with
case-sensitive field names. A value of the wrong type stops decoding with ``encoding/json``'s
message; unknown fields are collected and reported together as a "strict decoding error".
``Struct``/``Field`` describe a Go type just enough to reproduce both.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubesched.api.golang import DurationError, format_duration, go_quote, ns_to_seconds, parse_duration, seconds_to_ns

# --- YAML ---------------------------------------------------------------------------------------


class YAMLError(ValueError):
    """The document is not YAML; the message reads like sigs.k8s.io/yaml's."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that remembers duplicate keys (yaml.v2's strict mode) and keeps dates as text."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[str] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        self.flatten_mapping(node)
        mapping: dict = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            key = _json_key(key)
            if key in mapping:
                # yaml.v2 reports the line of the value node, and any override of a merged key too.
                self.duplicates.append(f"line {value_node.start_mark.line + 1}: key {go_quote(key)} already set in map")
            mapping[key] = self.construct_object(value_node, deep=True)
        return mapping


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_constructor("tag:yaml.org,2002:map", _StrictLoader.construct_mapping)


def _json_key(key: Any) -> str:
    """YAML keys become JSON strings, as sigs.k8s.io/yaml converts them."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)


def load_yaml(text: str) -> tuple[Any, list[str]]:
    """The first document of ``text`` and yaml.v2's duplicate-key messages."""
    try:
        loader = _StrictLoader(text)  # the reader rejects unprintable characters right away
    except yaml.YAMLError as e:
        raise YAMLError(_yaml_message(e)) from e
    try:
        doc = _first_document(loader)
    except yaml.YAMLError as e:
        raise YAMLError(_yaml_message(e)) from e
    except RecursionError:
        raise YAMLError("error converting YAML to JSON: yaml: the document is nested too deeply") from None
    finally:
        loader.dispose()
    dups = loader.duplicates
    if dups:
        return doc, ["error converting YAML to JSON: yaml: unmarshal errors:\n  " + "\n  ".join(dups)]
    return doc, []


def _first_document(loader: _StrictLoader) -> Any:
    if loader.check_node():
        node = loader.get_node()
        return loader.construct_document(node) if node is not None else None
    return None


def _yaml_message(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or getattr(e, "reason", None) or " ".join(str(e).split())
    line = f"line {mark.line + 1}: " if mark is not None else ""
    return f"error converting YAML to JSON: yaml: {line}{problem}"


# --- Go types -----------------------------------------------------------------------------------


class DecodeError(ValueError):
    """A non-strict decoding error: decoding stops here and this is the only error reported."""


@dataclass
class Ctx:
    """Where decoding is: the JSON path with indexes (for unknown fields) and the Go field stack."""

    unknown: list[str] = field(default_factory=list)

    def type_error(self, value: Any, go: str, struct: str, stack: list[str]) -> DecodeError:
        kind = json_kind(value)
        if kind == "number" and go.startswith(("int", "uint")):
            kind = f"number {_number_text(value)}"
        if not stack:
            return DecodeError(f"json: cannot unmarshal {kind} into Go value of type {go}")
        return DecodeError(f"json: cannot unmarshal {kind} into Go struct field {struct}.{'.'.join(stack)} of type {go}")


def json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _number_text(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


class GoType(ABC):
    go: str = ""

    def zero(self) -> Any:
        """The Go zero value, which a JSON ``null`` list element decodes to."""
        return None

    @abstractmethod
    def decode(self, value: Any, ctx: Ctx, path: str, struct: str, stack: list[str]) -> Any: ...


class Int(GoType):
    def __init__(self, bits: int = 32, unsigned: bool = False) -> None:
        self.bits, self.unsigned = bits, unsigned
        self.go = f"{'u' if unsigned else ''}int{bits}"

    def zero(self) -> int:
        return 0

    def decode(self, value: Any, ctx: Ctx, path: str, struct: str, stack: list[str]) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ctx.type_error(value, self.go, struct, stack)
        if isinstance(value, float):
            if not value.is_integer():
                raise ctx.type_error(value, self.go, struct, stack)
            value = int(value)
        low, high = (0, 2**self.bits - 1) if self.unsigned else (-(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1)
        if not low <= value <= high:
            raise ctx.type_error(value, self.go, struct, stack)
        return value


class Float(GoType):
    def __init__(self, bits: int = 32) -> None:
        self.go = f"float{bits}"

    def decode(self, value: Any, ctx: Ctx, path: str, struct: str, stack: list[str]) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ctx.type_error(value, self.go, struct, stack)
        return float(value)


class Str(GoType):
    def __init__(self, go: str = "string") -> None:
        self.go = go

    def zero(self) -> str:
        return ""

    def decode(self, value: Any, ctx: Ctx, path: str, struct: str, stack: list[str]) -> str:
        if not isinstance(value, str):
            raise ctx.type_error(value, self.go, struct, stack)
        return value


class Bool(GoType):
    go = "bool"

    def decode(self, value: Any, ctx: Ctx, path: str, struct: str, stack: list[str]) -> bool:
        if not isinstance(value, bool):
            raise ctx.type_error(value, self.go, struct, stack)
        return value


class Duration(GoType):
    """``metav1.Duration``: a JSON string parsed by ``time.ParseDuration``; seconds as a float."""

    go = "v1.Duration"

    def zero(self) -> float:
        return 0.0

    def decode(self, value: Any, ctx: Ctx, path: str, struct: str, stack: list[str]) -> float:
        if not isinstance(value, str):
            raise DecodeError(f"json: cannot unmarshal {json_kind(value)} into Go value of type string")
        try:
            return ns_to_seconds(parse_duration(value))
        except DurationError as e:
            raise DecodeError(str(e)) from e


class Raw(GoType):
    """``runtime.RawExtension``: any JSON, kept as it is."""

    go = "runtime.RawExtension"

    def decode(self, value: Any, ctx: Ctx, path: str, struct: str, stack: list[str]) -> Any:
        return copy.deepcopy(value)


class List(GoType):
    def __init__(self, elem: GoType, go: str | None = None) -> None:
        self.elem = elem
        self.go = go or f"[]{elem.go}"

    def decode(self, value: Any, ctx: Ctx, path: str, struct: str, stack: list[str]) -> list:
        if not isinstance(value, list):
            raise ctx.type_error(value, self.go, struct, stack)
        out = []
        for i, item in enumerate(value):
            if item is None:
                out.append(self.elem.zero())
                continue
            out.append(self.elem.decode(item, ctx, f"{path}[{i}]", struct, stack))
        return out


class Map(GoType):
    def __init__(self, elem: GoType, go: str | None = None) -> None:
        self.elem = elem
        self.go = go or f"map[string]{elem.go}"

    def decode(self, value: Any, ctx: Ctx, path: str, struct: str, stack: list[str]) -> dict:
        if not isinstance(value, dict):
            raise ctx.type_error(value, self.go, struct, stack)
        return {k: (None if v is None else self.elem.decode(v, ctx, f"{path}.{k}", struct, stack))
                for k, v in sorted(value.items())}


@dataclass
class Field:
    """One JSON field of a Go struct. ``emit`` says when encoding writes it (Go's tags)."""

    json: str
    type: GoType
    attr: str = ""
    #: ``always`` (no omitempty, or a pointer converted from a non-pointer), ``omitempty`` (zero is
    #: dropped) or ``omitnil`` (a pointer that stays nil when unset).
    emit: str = "omitempty"


class Struct(GoType):
    """A Go struct: decodes a JSON object into a dict keyed by JSON name, absent and null dropped."""

    def __init__(self, go: str, fields: list[Field], inline_type_meta: bool = False) -> None:
        self.go = go
        self.name = go.rsplit(".", 1)[-1]
        self.fields = {f.json: f for f in fields}
        self.inline_type_meta = inline_type_meta

    def zero(self) -> dict:
        return {}

    def decode(self, value: Any, ctx: Ctx, path: str, struct: str, stack: list[str]) -> dict:
        if not isinstance(value, dict):
            raise ctx.type_error(value, self.go, struct, stack)
        out: dict[str, Any] = {}
        for key in sorted(value):
            item = value[key]
            spec = self.fields.get(key)
            if spec is None:
                if self.inline_type_meta and key in ("apiVersion", "kind"):
                    continue
                ctx.unknown.append(f"unknown field {go_quote(f'{path}.{key}' if path else key)}")
                continue
            if item is None:
                continue
            out[key] = spec.type.decode(item, ctx, f"{path}.{key}" if path else key, self.name, [*stack, key])
        return out


def decode_root(struct: Struct, doc: Any) -> tuple[dict, list[str]]:
    """Decode a whole document: the value, then the unknown-field messages. Raises DecodeError."""
    ctx = Ctx()
    if not isinstance(doc, dict):
        raise DecodeError(f"json: cannot unmarshal {json_kind(doc)} into Go value of type {struct.go}")
    value = struct.decode(doc, ctx, "", struct.name, [])
    return value, ctx.unknown


# --- encoding -----------------------------------------------------------------------------------


def to_json(gotype: GoType, value: Any) -> Any:
    """The JSON form of a decoded value (durations as Go strings, whole floats as integers)."""
    if value is None:
        return None
    if hasattr(value, "to_v1"):
        return value.to_v1()
    if isinstance(gotype, Duration):
        return format_duration(seconds_to_ns(value))
    if isinstance(gotype, Float):
        return int(value) if float(value).is_integer() else value
    if isinstance(gotype, List):
        return [to_json(gotype.elem, v) for v in value]
    if isinstance(gotype, Map):
        return {k: to_json(gotype.elem, v) for k, v in value.items()}
    if isinstance(gotype, Struct):
        return encode_fields(gotype.fields, lambda f: value.get(f.json) if f.emit == "omitnil" else value.get(f.json, f.type.zero()),
                             to_json_field)
    return copy.deepcopy(value)


def to_json_field(spec: Field, value: Any) -> Any:
    return to_json(spec.type, value)


def is_empty(value: Any) -> bool:
    """Go's ``omitempty`` test for the values these documents hold."""
    return value is None or value is False or value == 0 or value == "" or value == [] or value == {}


def encode_fields(fields: Mapping[str, Field], get: Callable[[Field], Any], convert: Callable[[Field, Any], Any]) -> dict:
    """Build a JSON object the way ``encoding/json`` would, given each field's value."""
    out: dict[str, Any] = {}
    for spec in fields.values():
        value = get(spec)
        if spec.emit == "omitnil" and value is None:
            continue
        if spec.emit == "omitempty" and is_empty(value) and not isinstance(spec.type, Struct):
            continue
        out[spec.json] = None if value is None else convert(spec, value)
    return out
