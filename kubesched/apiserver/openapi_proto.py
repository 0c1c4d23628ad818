"""``/openapi/v2`` in protobuf: the JSON document encoded as gnostic's ``openapi.v2.Document``.

kubectl asks for ``application/com.github.proto-openapi.spec.v2@v1.0+protobuf`` and reads it with
gnostic's generated Go types (``github.com/google/gnostic-models/openapiv2``). kube-apiserver
turns its JSON document into that message with gnostic's ``NewDocument``; this module does the same
for the parts of Swagger 2.0 that kubesched's document uses, writing the wire format directly (no
generated code): each message below is a table from the JSON key to the field number and how the
value is written. Vendor extensions (``x-...``) become ``NamedAny`` entries whose ``Any.yaml``
holds the value as JSON text, which is YAML too: that is how kubectl reads
``x-kubernetes-group-version-kind`` back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from kubesched.apiserver import protowire as wire

#: What the client sends in ``Accept`` (kubectl) and the newer spelling kube-apiserver also serves.
MEDIA_TYPES = ("application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
               "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")

Writer = Callable[[int, Any], bytes]


class EncodeError(ValueError):
    """The document holds something gnostic's OpenAPI v2 messages cannot carry."""


def _string(number: int, value: Any) -> bytes:
    return wire.length_delimited(number, str(value).encode()) if value != "" else b""


def _bool(number: int, value: Any) -> bytes:
    return wire.varint_field(number, 1) if value else b""


def _int(number: int, value: Any) -> bytes:
    return wire.varint_field(number, int(value)) if value else b""


def _double(number: int, value: Any) -> bytes:
    return wire.double_field(number, float(value)) if value else b""


def _strings(number: int, values: Any) -> bytes:
    return b"".join(wire.length_delimited(number, str(v).encode()) for v in values)


def _any_payload(value: Any) -> bytes:
    """``openapi.v2.Any``: field 2 is the value's YAML (JSON text is valid YAML)."""
    return wire.length_delimited(2, orjson.dumps(value))


def _any(number: int, value: Any) -> bytes:
    return wire.length_delimited(number, _any_payload(value))


def _anys(number: int, values: Any) -> bytes:
    return b"".join(_any(number, v) for v in values)


def _message(name: str) -> Writer:
    return lambda number, value: wire.length_delimited(number, encode(name, value))


def _messages(name: str) -> Writer:
    return lambda number, values: b"".join(wire.length_delimited(number, encode(name, v)) for v in values)


def _named(value_writer: Writer) -> Writer:
    """A JSON object as repeated ``Named<T>{name = 1, value = 2}`` at ``number``."""
    def write(number: int, mapping: Any) -> bytes:
        return b"".join(wire.length_delimited(number, _string(1, k) + value_writer(2, v)) for k, v in mapping.items())
    return write


def _wrapped(field: int, inner: Writer) -> Writer:
    """A message whose only field ``field`` holds the value (``Definitions``, ``Properties``...)."""
    return lambda number, value: wire.length_delimited(number, inner(field, value))


def _type_item(number: int, value: Any) -> bytes:
    return wire.length_delimited(number, _strings(1, [value] if isinstance(value, str) else value))


def _items_item(number: int, value: Any) -> bytes:
    return wire.length_delimited(number, _messages("Schema")(1, value if isinstance(value, list) else [value]))


def _additional_properties(number: int, value: Any) -> bytes:
    """``AdditionalPropertiesItem``: oneof a schema (1) or a boolean (2)."""
    inner = wire.varint_field(2, int(value)) if isinstance(value, bool) else _message("Schema")(1, value)
    return wire.length_delimited(number, inner)


def _parameter(number: int, value: Any) -> bytes:
    """``ParametersItem{parameter: Parameter{body (1) | non-body (2) by where it goes}}``."""
    if "$ref" in value:
        return wire.length_delimited(number, wire.length_delimited(2, encode("JsonReference", value)))
    if value.get("in") == "body":
        parameter = _message("BodyParameter")(1, value)
    else:
        sub = {"header": (1, "HeaderParameterSubSchema"), "formData": (2, "FormDataParameterSubSchema"),
               "query": (3, "QueryParameterSubSchema"), "path": (4, "PathParameterSubSchema")}.get(value.get("in"))
        if sub is None:
            raise EncodeError(f"parameter {value.get('name')!r}: unknown location {value.get('in')!r}")
        parameter = wire.length_delimited(2, _message(sub[1])(sub[0], value))
    return wire.length_delimited(number, wire.length_delimited(1, parameter))


def _parameters(number: int, values: Any) -> bytes:
    return b"".join(_parameter(number, v) for v in values)


def _response_value(number: int, value: Any) -> bytes:
    """``ResponseValue``: oneof a response (1) or a reference (2)."""
    inner = _message("JsonReference")(2, value) if "$ref" in value else _message("Response")(1, value)
    return wire.length_delimited(number, inner)


def _schema_item(number: int, value: Any) -> bytes:
    return wire.length_delimited(number, _message("Schema")(1, value))


def _responses(number: int, value: Any) -> bytes:
    codes = {k: v for k, v in value.items() if not k.startswith("x-")}
    return wire.length_delimited(number, _named(_response_value)(1, codes) + _extensions(2, value))


def _extensions(number: int, value: Mapping[str, Any]) -> bytes:
    return _named(_any)(number, {k: v for k, v in value.items() if k.startswith("x-")})


_PRIMITIVE_PARAMETER: dict[str, Writer] = {"type": _string, "format": _string, "collectionFormat": _string, "default": _any,
                        "maximum": _double, "exclusiveMaximum": _bool, "minimum": _double, "exclusiveMinimum": _bool,
                        "maxLength": _int, "minLength": _int, "pattern": _string, "maxItems": _int, "minItems": _int,
                        "uniqueItems": _bool, "enum": _anys, "multipleOf": _double}
_PRIMITIVE_ORDER = ("type", "format", "items", "collectionFormat", "default", "maximum", "exclusiveMaximum", "minimum",
                    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems",
                    "enum", "multipleOf")


def _sub_schema(head: tuple[str, ...], first: int) -> dict[str, tuple[int, Writer]]:
    """A parameter sub-schema: its own leading fields, then the primitive fields from ``first`` on."""
    heads: dict[str, Writer] = {"required": _bool, "in": _string, "description": _string, "name": _string,
                                "allowEmptyValue": _bool}
    table: dict[str, tuple[int, Writer]] = {name: (i + 1, heads[name]) for i, name in enumerate(head)}
    for i, name in enumerate(_PRIMITIVE_ORDER):
        table[name] = (first + i, _message("PrimitivesItems") if name == "items" else _PRIMITIVE_PARAMETER[name])
    table["x-"] = (first + len(_PRIMITIVE_ORDER), _extensions)
    return table


def _primitives_items() -> dict[str, tuple[int, Writer]]:
    table: dict[str, tuple[int, Writer]] = {name: (i + 1, _PRIMITIVE_PARAMETER[name])
                                            for i, name in enumerate(_PRIMITIVE_ORDER) if name != "items"}
    table["items"] = (3, _message("PrimitivesItems"))
    table["x-"] = (18, _extensions)
    return table


def _operation_writer(number: int, value: Any) -> bytes:
    return _message("Operation")(number, value)


#: message -> JSON key -> (field number, writer); ``x-`` is where vendor extensions go.
MESSAGES: dict[str, dict[str, tuple[int, Writer]]] = {
    "Document": {"swagger": (1, _string), "info": (2, _message("Info")), "host": (3, _string), "basePath": (4, _string),
                 "schemes": (5, _strings), "consumes": (6, _strings), "produces": (7, _strings),
                 "paths": (8, _message("Paths")), "definitions": (9, _wrapped(1, _named(_message("Schema")))),
                 "x-": (16, _extensions)},
    "Info": {"title": (1, _string), "version": (2, _string), "description": (3, _string), "termsOfService": (4, _string),
             "x-": (7, _extensions)},
    "Paths": {"x-": (1, _extensions), "/": (2, _named(_message("PathItem")))},
    "PathItem": {"$ref": (1, _string), "get": (2, _operation_writer), "put": (3, _operation_writer),
                 "post": (4, _operation_writer), "delete": (5, _operation_writer), "options": (6, _operation_writer),
                 "head": (7, _operation_writer), "patch": (8, _operation_writer), "parameters": (9, _parameters),
                 "x-": (10, _extensions)},
    "Operation": {"tags": (1, _strings), "summary": (2, _string), "description": (3, _string),
                  "operationId": (5, _string), "produces": (6, _strings), "consumes": (7, _strings),
                  "parameters": (8, _parameters), "responses": (9, _responses), "schemes": (10, _strings),
                  "deprecated": (11, _bool), "x-": (13, _extensions)},
    "BodyParameter": {"description": (1, _string), "name": (2, _string), "in": (3, _string), "required": (4, _bool),
                      "schema": (5, _message("Schema")), "x-": (6, _extensions)},
    "QueryParameterSubSchema": _sub_schema(("required", "in", "description", "name", "allowEmptyValue"), 6),
    "FormDataParameterSubSchema": _sub_schema(("required", "in", "description", "name", "allowEmptyValue"), 6),
    "HeaderParameterSubSchema": _sub_schema(("required", "in", "description", "name"), 5),
    "PathParameterSubSchema": _sub_schema(("required", "in", "description", "name"), 5),
    "PrimitivesItems": _primitives_items(),
    "JsonReference": {"$ref": (1, _string), "description": (2, _string)},
    "Response": {"description": (1, _string), "schema": (2, _schema_item), "x-": (5, _extensions)},
    "Schema": {"$ref": (1, _string), "format": (2, _string), "title": (3, _string), "description": (4, _string),
               "default": (5, _any), "multipleOf": (6, _double), "maximum": (7, _double), "exclusiveMaximum": (8, _bool),
               "minimum": (9, _double), "exclusiveMinimum": (10, _bool), "maxLength": (11, _int), "minLength": (12, _int),
               "pattern": (13, _string), "maxItems": (14, _int), "minItems": (15, _int), "uniqueItems": (16, _bool),
               "maxProperties": (17, _int), "minProperties": (18, _int), "required": (19, _strings), "enum": (20, _anys),
               "additionalProperties": (21, _additional_properties), "type": (22, _type_item), "items": (23, _items_item),
               "allOf": (24, _messages("Schema")), "properties": (25, _wrapped(1, _named(_message("Schema")))),
               "discriminator": (26, _string), "readOnly": (27, _bool), "example": (30, _any), "x-": (31, _extensions)},
}


def encode(message: str, value: Mapping[str, Any]) -> bytes:
    """``value`` (a JSON object of the Swagger 2.0 shape of ``message``) as that gnostic message.

    ``Paths`` is the one message whose ordinary keys are data (the paths themselves): they go to
    the table's ``/`` entry."""
    table = MESSAGES[message]
    out: list[tuple[int, bytes]] = []
    if "x-" in table and any(k.startswith("x-") for k in value):
        number, writer = table["x-"]
        out.append((number, writer(number, value)))
    if message == "Paths":
        number, writer = table["/"]
        out.append((number, writer(number, {k: v for k, v in value.items() if not k.startswith("x-")})))
        return b"".join(chunk for _, chunk in out)
    for name, item in value.items():
        if name.startswith("x-"):
            continue
        field = table.get(name)
        if field is None:
            raise EncodeError(f"{message}: the field {name!r} has no place in gnostic's OpenAPI v2 message")
        number, writer = field
        out.append((number, writer(number, item)))
    out.sort(key=lambda pair: pair[0])
    return b"".join(chunk for _, chunk in out)


def document(doc: Mapping[str, Any]) -> bytes:
    """The whole ``openapi.v2.Document``."""
    return encode("Document", doc)
