"""A minimal OpenAPI v3: the root index (``/openapi/v3``) and one document per group-version.

kubectl reads these for two things: whether a kind's PATCH accepts the ``fieldValidation`` query
parameter (then ``apply``/``create`` validate on the server instead of downloading schemas), and
whether the PATCH consumes strategic merge patch (when it does not say, ``kubectl apply`` computes
patches from its compiled-in types, which is what we want). So every resource path carries its
verbs with ``x-kubernetes-group-version-kind`` and the standard query parameters, and component
schemas are open objects (no field-level schema: unknown fields are accepted).
"""

from __future__ import annotations

import hashlib
from functools import cache

import orjson

from kubesched.api.kinds import Kind
from kubesched.apiserver.discovery import group_versions

_QUERY = ("dryRun", "fieldManager", "fieldValidation", "pretty")


def _path_prefix(kind: Kind) -> str:
    base = "/api/v1" if not kind.group else f"/apis/{kind.group}/{kind.version}"
    return f"{base}/namespaces/{{namespace}}/{kind.resource}" if kind.namespaced else f"{base}/{kind.resource}"


def _gvk(kind: Kind) -> dict:
    return {"group": kind.group, "version": kind.version, "kind": kind.kind}


def _schema_name(kind: Kind) -> str:
    group = kind.group or "core"
    reversed_group = ".".join(reversed(group.split("."))) if "." in group else f"io.k8s.api.{group}"
    return f"{reversed_group}.{kind.version}.{kind.kind}"


def _operation(kind: Kind, action: str, op_id: str) -> dict:
    params = [{"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}} for name in _QUERY]
    ref = {"$ref": f"#/components/schemas/{_schema_name(kind)}"}
    return {
        "tags": [kind.api_version],
        "operationId": op_id,
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(kind),
    }


def _paths(kind: Kind) -> dict:
    prefix = _path_prefix(kind)
    name = f"{kind.kind}{'Namespaced' if kind.namespaced else ''}"
    if kind.verbs == ("create",):  # the review kinds: POST only, nothing stored to read back
        return {prefix: {"post": _operation(kind, "post", f"create{name}")}}
    item = {"get": _operation(kind, "get", f"read{name}"), "put": _operation(kind, "put", f"replace{name}"),
            "patch": _operation(kind, "patch", f"patch{name}"), "delete": _operation(kind, "delete", f"delete{name}")}
    collection = {"get": _operation(kind, "list", f"list{name}"), "post": _operation(kind, "post", f"create{name}"),
                  "delete": _operation(kind, "deletecollection", f"deleteCollection{name}")}
    return {prefix: collection, prefix + "/{name}": item}


@cache
def group_version_document(group_version: str) -> bytes | None:
    kinds = group_versions().get(group_version)
    if kinds is None:
        return None
    paths: dict = {}
    schemas: dict = {}
    for kind in kinds:
        paths.update(_paths(kind))
        schemas[_schema_name(kind)] = {
            "type": "object",
            "description": f"{kind.kind} ({kind.api_version}), served by kubesched without a field-level schema.",
            "x-kubernetes-group-version-kind": [_gvk(kind)],
            "x-kubernetes-preserve-unknown-fields": True,
        }
    doc = {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.35.0"}, "paths": paths,
           "components": {"schemas": schemas}}
    return orjson.dumps(doc)


def _url(group_version: str) -> str:
    return "api/v1" if group_version == "v1" else f"apis/{group_version}"


@cache
def root_document() -> bytes:
    paths = {}
    for gv in group_versions():
        body = group_version_document(gv) or b""
        digest = hashlib.sha512(body).hexdigest()[:64].upper()
        paths[_url(gv)] = {"serverRelativeURL": f"/openapi/v3/{_url(gv)}?hash={digest}"}
    return orjson.dumps({"paths": paths})


def document_for_path(path: str) -> bytes | None:
    """``/openapi/v3/api/v1`` or ``/openapi/v3/apis/<group>/<version>``."""
    rest = path.removeprefix("/openapi/v3/").strip("/")
    if rest == "api/v1":
        return group_version_document("v1")
    if rest.startswith("apis/"):
        return group_version_document(rest[len("apis/"):])
    return None
