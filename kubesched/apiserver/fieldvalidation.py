"""``fieldValidation``: what a write does about fields its kind does not have, or keys given twice.

As kube-apiserver: ``Strict`` rejects the request (400, every problem listed), ``Warn`` (the
server's default when a client does not say; kubectl says ``Strict``) accepts it with one
``Warning`` header per problem, ``Ignore`` drops them silently. Values of the wrong type are
rejected whatever the directive: the object cannot be decoded at all.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubesched.api.apierrors import BadRequest, Invalid
from kubesched.api.crd import prune
from kubesched.api.errors import unsupported
from kubesched.api.kinds import CustomKind, Kind
from kubesched.api.schema_validation import (
    DecodeError,
    SpecDecodes,
    StrictProblems,
    decode,
    duplicate_paths,
    strict_error_message,
)

STRICT, WARN, IGNORE = "Strict", "Warn", "Ignore"
DIRECTIVES = ["", IGNORE, STRICT, WARN]


def directive(query: Mapping[str, str], options_kind: str) -> str:
    """The request's directive; an unknown one is refused as ``ValidateFieldValidation`` refuses it."""
    value = query.get("fieldValidation", "")
    if value not in DIRECTIVES:
        raise Invalid.of(options_kind, "", [unsupported("fieldValidation", value, DIRECTIVES)], "meta.k8s.io")
    return value or WARN


def check(kind: Kind, obj: dict, mode: str, patch_body: object = None, specs: SpecDecodes | None = None) -> list[str]:
    """Decode ``obj`` as ``kind`` in place (with ``specs``, the specs decoded before, for a
    built-in kind); the warnings to send back (``Warn``), or a 400."""
    try:
        if specs is not None and not isinstance(kind, CustomKind):
            problems = specs.decode(obj, kind.api_version, kind.kind)
        else:
            problems = decode(obj, kind.api_version, kind.kind)
    except DecodeError as e:
        raise BadRequest(str(e)) from None
    if isinstance(kind, CustomKind):
        problems.unknown += prune(kind.schema, obj)  # structural pruning: what the schema does not specify
    if patch_body is not None and mode != IGNORE:
        problems.duplicates += duplicate_paths(patch_body)
    return _judge(kind, problems, mode)


def _judge(kind: Kind, problems: StrictProblems, mode: str) -> list[str]:
    if not problems or mode == IGNORE:
        return []
    if mode == STRICT:
        raise BadRequest(strict_error_message(kind.kind, kind.api_version, problems))
    return problems.messages()


def warning_header(warnings: list[str]) -> str:
    """RFC 7234 warn-values, comma-separated in one header (client-go reads each one)."""
    return ", ".join('299 - "' + w.replace("\\", "\\\\").replace('"', '\\"') + '"' for w in warnings)
