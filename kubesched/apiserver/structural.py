"""Decode-time checks of a request's object against Kubernetes 1.35's schema, giving the errors
kube-apiserver's JSON decoder gives when it unmarshals into the Go types.

kube-apiserver decodes a body into the kind's Go struct before anything else; a value of the wrong
JSON type, an integer out of its field's range, or an unparsable quantity fails there with 400
BadRequest (``Pod in version "v1" cannot be handled as a Pod: <the decoder's error>``), before
defaulting, admission or validation ever see the object. kubesched keeps objects as JSON, so the
same checks run here, walking the object beside its OpenAPI schema (``api.openapi_spec``):

* a wrong type: ``json: cannot unmarshal string into Go struct field PodSpec.spec.containers of
  type []v1.Container`` (the innermost struct's name, the JSON path without indices, the Go type);
* an integer out of range or with a fraction: ``json: cannot unmarshal number 1.5 into Go struct
  field ...``;
* a quantity ``ParseQuantity`` refuses: its error alone (``quantities must match the regular
  expression '...'``, ``unable to parse quantity's suffix``), as ``Quantity.UnmarshalJSON`` returns it.

Fields the schema does not declare are left alone (unknown fields are a field-validation
concern), as are free-form ones (``fieldsV1``, ``RawExtension``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from kubesched.api import openapi_spec
from kubesched.api.errors import InvalidQuantity
from kubesched.api.quantity import QUANTITY_FORMAT_MESSAGE, parse_quantity

QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_INTEGER_TYPES = frozenset({"int", "int32", "int64"})
_JSON_KINDS = {str: "string", bool: "bool", list: "array", dict: "object", int: "number", float: "number"}


class DecodeError(ValueError):
    """The decoder's message for the first value that does not fit the Go type."""


def decode_object(obj: dict[str, Any], group: str, version: str, kind: str) -> None:
    """Raise ``DecodeError`` when ``obj`` would not unmarshal into ``group/version, kind``'s Go type
    (a kind 1.35 does not define is not checked), and make its nulls what unmarshalling makes of
    them, in place: a null field is left unset, a null list item or map value is its type's zero
    value (``{}`` for a struct, ``""`` for a string)."""
    name = openapi_spec.definition_name(group, version, kind)
    if name is None:
        return
    stack: list[tuple[Any, Mapping[str, Any], tuple[str, ...], str]] = [(obj, _ref(name), (), kind)]
    while stack:
        value, schema, path, struct = stack.pop()
        if value is not None:
            _check(value, _shape(schema), path, struct, stack)


@dataclass(frozen=True, slots=True)
class _Shape:
    """What checking a value against one schema needs, worked out once per schema."""

    field: Mapping[str, Any]  # the schema as the field declares it (its Go type names errors)
    special: str = ""  # "quantity" or "intstr": types with their own unmarshalling
    json_type: str = ""  # "" when the schema does not constrain the value (free-form)
    struct: str | None = None  # the Go struct the value is, when it is one
    properties: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] | None = None
    items: Mapping[str, Any] | None = None
    integers: tuple[int, int] = _INT_RANGES["int64"]


_SHAPES: dict[int, tuple[Mapping[str, Any], _Shape]] = {}


def _shape(schema: Mapping[str, Any]) -> _Shape:
    cached = _SHAPES.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = _SHAPES[id(schema)] = (schema, _compile(schema))
    return cached[1]


def _compile(field: Mapping[str, Any]) -> _Shape:
    ref = openapi_spec.ref_name(field)
    if ref == QUANTITY:
        return _Shape(field, special="quantity")
    if ref == INT_OR_STRING:
        return _Shape(field, special="intstr")
    schema = openapi_spec.definition(ref) if ref is not None else field
    types = openapi_spec.schema_types(schema)
    properties, extra, items = schema.get("properties"), schema.get("additionalProperties"), schema.get("items")
    return _Shape(field, json_type=types[0] if types else "",
                  struct=ref.rsplit(".", 1)[-1] if ref is not None and isinstance(properties, Mapping) else None,
                  properties=properties if isinstance(properties, Mapping) else None,
                  extra=extra if isinstance(extra, Mapping) else None,
                  items=items if isinstance(items, Mapping) else None,
                  integers=_INT_RANGES.get(schema.get("format", ""), _INT_RANGES["int64"]))


def _check(value: Any, shape: _Shape, path: tuple[str, ...], struct: str,
           pending: list[tuple[Any, Mapping[str, Any], tuple[str, ...], str]]) -> None:
    """Check ``value`` against ``shape``; push the nested values still to check onto ``pending``."""
    if shape.special == "quantity":
        _check_quantity(value)
        return
    if shape.special == "intstr":
        _check_int_or_string(value)
        return
    if not shape.json_type:
        return
    if not _fits(value, shape):
        raise _type_error(value, path, struct, go_type(shape.field))
    struct = shape.struct or struct
    if isinstance(value, dict):
        if shape.properties is not None:
            properties = shape.properties
            for key in [key for key, child in value.items() if child is None and key in properties]:
                del value[key]
            pending.extend((child, properties[key], (*path, key), struct) for key, child in value.items() if key in properties)
        elif shape.extra is not None:
            for key in [key for key, child in value.items() if child is None]:
                value[key] = _zero(shape.extra)
            pending.extend((child, shape.extra, path, struct) for child in value.values())
    elif isinstance(value, list) and shape.items is not None:
        for index in [index for index, item in enumerate(value) if item is None]:
            value[index] = _zero(shape.items)
        pending.extend((item, shape.items, path, struct) for item in value)


_ZEROS: Mapping[str, Any] = {"string": "", "integer": 0, "number": 0, "boolean": False}


def _zero(schema: Mapping[str, Any]) -> Any:
    """The JSON of a Go type's zero value, for a null where a value must be (a list item, a map value)."""
    shape = _shape(schema)
    if shape.special:
        return "0" if shape.special == "quantity" else 0
    if shape.json_type == "object":
        return {}
    if shape.json_type == "array":
        return []
    return _ZEROS.get(shape.json_type)


def _fits(value: Any, shape: _Shape) -> bool:
    json_type = shape.json_type
    if json_type == "string":
        return isinstance(value, str)
    if json_type == "object":
        return isinstance(value, dict)
    if json_type == "array":
        return isinstance(value, list)
    if json_type == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if json_type == "integer":
        low, high = shape.integers
        return isinstance(value, int) and low <= value <= high
    return True


def _check_quantity(value: Any) -> None:
    """``Quantity.UnmarshalJSON`` parses any JSON value's text, so a boolean, list or object fails
    the quantity's own format rule rather than a type check."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DecodeError(QUANTITY_FORMAT_MESSAGE)
    try:
        parse_quantity(value)
    except InvalidQuantity as e:
        raise DecodeError(e.detail) from None


def _check_int_or_string(value: Any) -> None:
    """``IntOrString.UnmarshalJSON``: a JSON string, or else whatever unmarshals into an int32."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31):
        return
    shown = _JSON_KINDS.get(type(value), "value")
    if shown == "number":
        shown = f"number {value!r}"
    raise DecodeError(f"json: cannot unmarshal {shown} into Go value of type int32")


def _type_error(value: Any, path: tuple[str, ...], struct: str, go: str) -> DecodeError:
    """encoding/json's ``UnmarshalTypeError`` text: a number that is a number but not the field's
    integer shows its literal (``number 1.5``), anything else only its JSON kind."""
    shown = _JSON_KINDS.get(type(value), "value")
    if shown == "number" and go in _INTEGER_TYPES:
        shown = f"number {value!r}"
    where = f"Go struct field {struct}.{'.'.join(path)}" if path else "Go value"
    return DecodeError(f"json: cannot unmarshal {shown} into {where} of type {go}")


@cache
def _ref(name: str) -> Mapping[str, Any]:
    return {"$ref": f"#/$defs/{name}"}


def go_type(schema: Mapping[str, Any]) -> str:
    """The Go type a schema stands for, as the decoder names it (``int32``, ``[]v1.Container``,
    ``map[string]string``, ``v1.PodSpec``)."""
    ref = openapi_spec.ref_name(schema)
    if ref is not None:
        package, _, name = ref.rpartition(".")
        return f"{package.rsplit('.', 1)[-1]}.{name}" if ref not in (QUANTITY, INT_OR_STRING) else (
            "resource.Quantity" if ref == QUANTITY else "intstr.IntOrString")
    types = openapi_spec.schema_types(schema)
    json_type = types[0] if types else ""
    if json_type == "integer":
        return schema.get("format") or "int"
    if json_type == "array":
        items = schema.get("items")
        return "[]" + go_type(items) if isinstance(items, Mapping) else "[]interface {}"
    if json_type == "object":
        extra = schema.get("additionalProperties")
        return "map[string]" + go_type(extra) if isinstance(extra, Mapping) else "map[string]interface {}"
    return {"string": "string", "boolean": "bool", "number": "float64"}.get(json_type, "interface {}")
