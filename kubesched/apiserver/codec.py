"""Wire encoding: JSON in and out (orjson), YAML accepted on input, the ``Accept`` header's
``as=Table`` / ``as=PartialObjectMetadata`` variants, and Status objects shaped as apiserver's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import orjson

from kubesched.api.apierrors import APIError, BadRequest
from kubesched.api.schema_validation import pairs_with_duplicates
from kubesched.apiserver.bounds import MAX_BODY, check_depth, load_yaml, too_large
from kubesched.apiserver.protowire import WireError

__all__ = ["MAX_BODY"]

JSON = "application/json"


class NotAcceptable(APIError):
    code = 406
    reason = "NotAcceptable"


def _go_json_error(data: bytes, error: orjson.JSONDecodeError) -> str:
    """An approximation of encoding/json's syntax error text, which clients show verbatim."""
    pos = getattr(error, "pos", 0) or 0
    reason = str(error)
    if reason.startswith("depth limit exceeded"):
        return "exceeded max depth"
    if "number" in reason:
        return f"invalid number at offset {pos}: {reason.split(':', 1)[0]}"
    if pos >= len(data.rstrip()):
        return "unexpected end of JSON input"
    ch = chr(data[pos]) if data[pos] < 128 else "\\ufffd"
    return f"invalid character '{ch}' looking for beginning of value"


def _no_constant(name: str) -> Any:
    raise ValueError(f"invalid character '{name[0]}' looking for beginning of value")


def _loads_keeping_duplicates(data: bytes) -> Any:
    """JSON with duplicate keys remembered (strict decoding reports them); slower than orjson, so
    only used when the request's ``fieldValidation`` cares."""
    try:
        return json.loads(data, object_pairs_hook=pairs_with_duplicates, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise orjson.JSONDecodeError(str(e), data.decode("utf-8", "replace"), getattr(e, "pos", 0)) from None


_LONG_NUMBER = re.compile(rb"[0-9]{19}")


def _loads_without_duplicates(data: bytes) -> tuple[Any] | None:
    """orjson's parse of ``data`` (in a 1-tuple, within the depth limit) when no key in it is given
    twice, else None: then the slower parser that names duplicates must run.

    Counting decides, without a second parse: when the body has no ``\\u`` escape,
    every colon in it separates a key from its value or sits inside a string. Re-encoding the
    parsed value gives one colon per key it kept plus the same colons inside its strings, so the
    two counts are equal exactly when no key was dropped, that is when none was given twice.
    A body with a number of 19 digits or more is left to the slower parser too: orjson reads an
    integer past 64 bits as a float, where the decoder must see the integer."""
    if b"\\u" in data or _LONG_NUMBER.search(data):
        return None
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None  # the slower parser words the error
    encoded = check_depth(decoded)
    if encoded is None or encoded.count(b":") != data.count(b":"):
        return None
    return (decoded,)


def decode_body(data: bytes, content_type: str, expected_kind: str | None = None, *, duplicates: bool = False) -> Any:
    """Parse a request body (JSON, protobuf, or YAML when the client says so) within the decoded
    limits of ``bounds``; 400 BadRequest (413 when it decodes too large) otherwise. With
    ``duplicates``, mappings remember keys given twice."""
    if len(data) > MAX_BODY:
        raise too_large()
    if "protobuf" in content_type:
        return _decode_protobuf(data, expected_kind)
    if "yaml" in content_type:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BadRequest(f"error converting YAML to JSON: yaml: invalid UTF-8: {e.reason}") from None
        return load_yaml(text, duplicates=duplicates) if text.strip() else None
    if duplicates:
        fast = _loads_without_duplicates(data)
        if fast is not None:
            return fast[0]
    try:
        decoded = _loads_keeping_duplicates(data) if duplicates else orjson.loads(data)
    except orjson.JSONDecodeError as e:
        detail = _go_json_error(data, e)
        if expected_kind:
            raise BadRequest(f"the object provided is unrecognized (must be of type {expected_kind}): "
                             f"couldn't get version/kind; json parse error: {detail}") from None
        raise BadRequest(f"couldn't get version/kind; json parse error: {detail}") from None
    check_depth(decoded)
    return decoded


def _decode_protobuf(data: bytes, expected_kind: str | None) -> Any:
    """A protobuf body; a truncated or malformed message is the decoder's 400, never a crash."""
    from kubesched.apiserver.protobuf import decode

    try:
        decoded = decode(data)
    except (WireError, ValueError, IndexError, KeyError, TypeError, UnicodeDecodeError, OverflowError) as e:
        what = f"must be of type {expected_kind}" if expected_kind else "protobuf"
        raise BadRequest(f"the object provided is unrecognized ({what}): {e or type(e).__name__}") from None
    check_depth(decoded)
    return decoded


def status_success(code: int = 200, details: dict | None = None) -> dict:
    out: dict = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
    if details:
        out["details"] = details
    return out


@dataclass(frozen=True, slots=True)
class Output:
    """What the response body should be: the object(s), a Table, or only their metadata."""

    form: str  # "object" | "table" | "partial"


OBJECT, TABLE, PARTIAL = Output("object"), Output("table"), Output("partial")


def negotiate(accept: str | None) -> Output:
    """The first acceptable media type of ``Accept`` (protobuf and CBOR are skipped: JSON is served)."""
    if not accept:
        return OBJECT
    for part in accept.split(","):
        pieces = [p.strip() for p in part.split(";")]
        media = pieces[0].lower()
        params = dict(p.split("=", 1) for p in pieces[1:] if "=" in p)
        if media not in ("application/json", "*/*", "application/*", "application/yaml", "application/json-seq"):
            continue
        as_kind = params.get("as")
        if as_kind is None:
            return OBJECT
        if params.get("g") != "meta.k8s.io" or params.get("v") not in ("v1", "v1beta1"):
            continue
        if as_kind == "Table":
            return TABLE
        if as_kind in ("PartialObjectMetadata", "PartialObjectMetadataList"):
            return PARTIAL
    raise NotAcceptable("only the following media types are accepted: application/json, application/yaml, "
                        "application/json;as=Table;v=v1;g=meta.k8s.io")


class UnsupportedMediaType(APIError):
    code = 415
    reason = "UnsupportedMediaType"


#: Request body media types the server decodes (``decode_body``), as apiserver lists them in a 415.
BODY_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")


def check_body_type(content_type: str | None) -> None:
    """Other bodies (CBOR, text) get 415; client-go then retries the request as JSON."""
    media = media_type(content_type)
    if media in (*BODY_TYPES, "*/*", "") or media.endswith("+json"):
        return
    raise UnsupportedMediaType("the body of the request was in an unknown format - accepted media types include: "
                               + ", ".join(BODY_TYPES))


def media_type(content_type: str | None) -> str:
    return (content_type or JSON).split(";", 1)[0].strip().lower()


def query_bool(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1", "t", "yes")
