"""The protobuf wire format: varints, tags and length-delimited fields, read and written.

Used to decode Kubernetes protobuf request bodies (``kubesched.apiserver.protobuf``) and, by the
schema generator (``kubesched.apiserver.protogen``), protobuf ``FileDescriptorProto``s; written
for the protobuf form of ``/openapi/v2`` (``kubesched.apiserver.openapi_proto``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


class WireError(ValueError):
    pass


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if pos >= len(data):
            raise WireError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise WireError("varint too long")


def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)``: ints for varints and fixed, bytes for length-delimited."""
    pos, end = 0, len(data)
    while pos < end:
        tag, pos = read_varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == VARINT:
            value, pos = read_varint(data, pos)
            yield number, wire, value
        elif wire == LENGTH:
            size, pos = read_varint(data, pos)
            if pos + size > end:
                raise WireError("truncated length-delimited field")
            yield number, wire, data[pos:pos + size]
            pos += size
        elif wire == FIXED64:
            yield number, wire, struct.unpack_from("<Q", data, pos)[0]
            pos += 8
        elif wire == FIXED32:
            yield number, wire, struct.unpack_from("<I", data, pos)[0]
            pos += 4
        else:
            raise WireError(f"unsupported wire type {wire}")


def number_value(value: int | bytes) -> int:
    """A varint or fixed field's value. A length-delimited value where the schema says number is
    a malformed body, reported as a ``WireError`` rather than a TypeError deep in the decoder."""
    if isinstance(value, bytes):
        raise WireError("expected a number, got a length-delimited field")
    return value


def bytes_value(value: int | bytes) -> bytes:
    """A length-delimited field's bytes (string, bytes, embedded message); ``WireError`` for a number."""
    if not isinstance(value, bytes):
        raise WireError("expected a length-delimited field, got a number")
    return value


def signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def signed32(value: int) -> int:
    value &= 0xFFFFFFFFFFFFFFFF
    value = value - (1 << 64) if value >= 1 << 63 else value
    return value


def zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


# --- writing ------------------------------------------------------------------------------------
def varint(value: int) -> bytes:
    """A varint; negative numbers take ten bytes, as two's complement int64 (proto3 ``int64``)."""
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def length_delimited(number: int, payload: bytes) -> bytes:
    """A string, bytes or embedded message field."""
    return key(number, LENGTH) + varint(len(payload)) + payload


def varint_field(number: int, value: int) -> bytes:
    """An int64 or bool field (proto3 leaves zero values out: the caller decides)."""
    return key(number, VARINT) + varint(value)


def double_field(number: int, value: float) -> bytes:
    return key(number, FIXED64) + struct.pack("<d", value)
