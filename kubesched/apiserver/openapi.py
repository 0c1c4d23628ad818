"""The OpenAPI documents kube-apiserver serves: ``/openapi/v2`` and ``/openapi/v3`` (root and one
document per group-version), built from Kubernetes 1.35's own definitions
(``kubesched.api.openapi_spec``) for the kinds kubesched serves.

kubectl reads them for:

- validation: whether a kind's PATCH accepts the ``fieldValidation`` query parameter (then it asks
  the server to validate, v3 first, v2 as the fallback), else client-side validation against the
  v2 definitions (unknown fields, wrong types);
- ``apply``: strategic merge patches computed from the schemas' ``x-kubernetes-patch-*``
  extensions when the PATCH consumes ``application/strategic-merge-patch+json``;
- ``explain``: field names, types and descriptions (v3, or v2 with ``--output=plaintext-openapiv2``).

The definitions are converted to each format as kube-apiserver writes it: Swagger 2.0 for v2 (one
``type``, ``#/definitions/...`` references beside their description), OpenAPI 3.0 for v3
(``#/components/schemas/...`` references wrapped in ``allOf`` when they carry a description), both
closed over every reference. Documents of the built-in kinds are built once per server: the table of
kinds does not change. They describe the alpha kinds too, whether or not their feature gate is on
(discovery and the resource paths follow the gates). The kinds of CustomResourceDefinitions (their
schemas as definitions named as kube-apiserver names them, ``io.x-k8s.scheduling.v1alpha1.PodGroup``)
are added to ``/openapi/v2`` and served as their own group-version documents under ``/openapi/v3``,
rebuilt when they change.
"""

from __future__ import annotations

import copy
import email.utils
import hashlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any

import orjson

from kubesched.api.kinds import CustomKind, Kind
from kubesched.api.openapi_spec import KUBERNETES_VERSION, definition, definition_name, ref_name, schema_types
from kubesched.apiserver import openapi_proto
from kubesched.apiserver.discovery import SUBRESOURCES, group_versions

_QUERY = {
    "dryRun": "When present, indicates that modifications should not be persisted.",
    "fieldManager": "fieldManager is a name associated with the actor or entity that is making these changes.",
    "fieldValidation": "fieldValidation instructs the server on how to handle objects in the request containing "
                       "unknown or duplicate fields. Valid values are: Ignore, Warn, Strict.",
    "pretty": "If 'true', then the output is pretty printed.",
}
_PATCH_TYPES = ("application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json",
                "application/strategic-merge-patch+json")
_PRODUCES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
#: Definitions every document carries besides the kinds: what DELETE and PATCH take and answer.
_META = ("io.k8s.apimachinery.pkg.apis.meta.v1.Status", "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
         "io.k8s.apimachinery.pkg.apis.meta.v1.Patch")
_STATUS = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
_DELETE_OPTIONS = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
_PATCH = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"

V2_REF = "#/definitions/"
V3_REF = "#/components/schemas/"


# --- schemas ------------------------------------------------------------------------------------
def _kind_definition(kind: Kind) -> str:
    """The 1.35 definition of a served kind (every served kind has one; a KeyError names it if not)."""
    if isinstance(kind, CustomKind):
        return custom_definition_name(kind)
    name = definition_name(kind.group, kind.version, kind.kind)
    if name is None:
        raise KeyError(f"Kubernetes {KUBERNETES_VERSION} has no OpenAPI definition for {kind.api_version} {kind.kind}")
    return name


def _body_definition(kind: Kind, sub: str) -> str:
    """The definition a subresource's requests carry: its own kind (Scale, Binding...) or the parent's."""
    group, version, body_kind, _ = SUBRESOURCES[sub]
    if body_kind is None:
        return _kind_definition(kind)
    name = definition_name(group, version, body_kind)
    if name is None:
        raise KeyError(f"Kubernetes {KUBERNETES_VERSION} has no OpenAPI definition for {group}/{version} {body_kind}")
    return name


def _documented_subresources(kind: Kind) -> list[str]:
    """The subresources whose requests have a body schema. The streaming ones the kubelet serves
    (log, exec, attach, portforward, proxy) carry options in the query and answer plain text; the
    embedded cluster refuses them, so the documents leave them out."""
    return [sub for sub in kind.subresources if _has_body_schema(sub)]


def _has_body_schema(sub: str) -> bool:
    """The subresource takes its parent's body (status, finalize) or one 1.35's OpenAPI defines."""
    group, version, body_kind, _ = SUBRESOURCES[sub]
    return body_kind is None or definition_name(group, version, body_kind) is not None


def _references(schema: Any) -> Iterable[str]:
    if isinstance(schema, dict):
        target = ref_name(schema)
        if target is not None:
            yield target
        for value in schema.values():
            yield from _references(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _references(value)


def closure(names: Iterable[str]) -> list[str]:
    """``names`` and every definition they reference, transitively, sorted."""
    seen: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending.extend(_references(definition(name)))
    return sorted(seen)


def _convert(schema: Mapping[str, Any], ref_prefix: str, v3: bool) -> dict[str, Any]:
    """One JSON-Schema-style schema of kubernetes-validate as kube-apiserver's OpenAPI spells it."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            types = schema_types(schema)
            if len(types) == 1:
                out["type"] = types[0]
        elif key == "$ref":
            target = ref_name(schema)
            if target is not None:
                out["$ref"] = ref_prefix + target
        elif key == "properties":
            out[key] = {name: _convert(sub, ref_prefix, v3) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _convert(value, ref_prefix, v3)
        elif key in ("oneOf", "anyOf", "allOf"):
            if v3:
                out[key] = [_convert(sub, ref_prefix, v3) for sub in value]
        elif key == "enum":
            out[key] = [item for item in value if item is not None]
        else:
            out[key] = value
    if not v3 and ("oneOf" in schema or "anyOf" in schema) and "type" not in out:
        out["type"] = "string"  # IntOrString and Quantity: Swagger 2.0 has no oneOf; upstream says string
    if v3 and "$ref" in out and len(out) > 1:
        ref = {"$ref": out.pop("$ref")}
        out = {"allOf": [ref], **out}
    return out


def _definition(name: str, ref_prefix: str, v3: bool) -> dict[str, Any]:
    """A top-level definition; kubernetes-validate's one-value ``apiVersion``/``kind`` enums go
    (kube-apiserver has none there, and a kind with several group-versions cannot have them)."""
    converted = _convert(definition(name), ref_prefix, v3)
    if name == _INT_OR_STRING:
        converted["format"] = "int-or-string"  # kube-openapi's format for it; kubernetes-validate drops it
    if converted.get("x-kubernetes-group-version-kind"):
        for field in ("apiVersion", "kind"):
            converted.get("properties", {}).get(field, {}).pop("enum", None)
    return converted


# --- paths --------------------------------------------------------------------------------------
def _collection_path(kind: Kind) -> str:
    base = "/api/v1" if not kind.group else f"/apis/{kind.group}/{kind.version}"
    return f"{base}/namespaces/{{namespace}}/{kind.resource}" if kind.namespaced else f"{base}/{kind.resource}"


def _gvk_of(name: str) -> dict[str, str]:
    gvks = definition(name).get("x-kubernetes-group-version-kind") or [{}]
    return dict(gvks[0])


def _gvk(kind: Kind) -> dict[str, str]:
    return {"group": kind.group, "version": kind.version, "kind": kind.kind}


class _Spelling:
    """How one OpenAPI version writes parameters, bodies and responses."""

    def __init__(self, v3: bool) -> None:
        self.v3 = v3
        self.ref_prefix = V3_REF if v3 else V2_REF

    def ref(self, name: str) -> dict[str, str]:
        return {"$ref": self.ref_prefix + name}

    def parameter(self, name: str, where: str, description: str) -> dict[str, Any]:
        param: dict[str, Any] = {"name": name, "in": where, "description": description}
        if where == "path":
            param["required"] = True
        kind = {"type": "string", "uniqueItems": True}
        if self.v3:
            param["schema"] = kind
        else:
            param.update(kind)
        return param

    def operation(self, op: dict[str, Any], body: str | None, consumes: tuple[str, ...], response: str) -> dict[str, Any]:
        """``op`` with its request body (``body``'s definition, as ``consumes``) and 200 answer."""
        if self.v3:
            if body is not None:
                op["requestBody"] = {"content": {media: {"schema": self.ref(body)} for media in consumes}, "required": True}
            op["responses"] = {"200": {"description": "OK",
                                       "content": {media: {"schema": self.ref(response)} for media in _PRODUCES}},
                               "401": {"description": "Unauthorized"}}
            return op
        op["consumes"] = list(consumes)
        op["produces"] = list(_PRODUCES)
        op["schemes"] = ["https"]
        if body is not None:
            op["parameters"].insert(0, {"name": "body", "in": "body", "required": True, "schema": self.ref(body)})
        op["responses"] = {"200": {"description": "OK", "schema": self.ref(response)}, "401": {"description": "Unauthorized"}}
        return op


def _operation(spelling: _Spelling, kind: Kind, action: str, op_id: str, *, body: str | None = None,
               consumes: tuple[str, ...] = ("*/*",), response: str, gvk: Mapping[str, str] | None = None,
               query: Iterable[str] = ("dryRun", "fieldManager", "fieldValidation")) -> dict[str, Any]:
    params = [spelling.parameter(name, "query", _QUERY[name]) for name in query]
    op = {"tags": [kind.api_version.replace(".", "_").replace("/", "_")], "description": f"{action} {kind.kind}",
          "operationId": op_id, "parameters": params, "x-kubernetes-action": action,
          "x-kubernetes-group-version-kind": dict(gvk or _gvk(kind))}
    return spelling.operation(op, body, consumes, response)


def _path_parameters(spelling: _Spelling, kind: Kind, named: bool) -> list[dict[str, Any]]:
    params = []
    if named:
        params.append(spelling.parameter("name", "path", f"name of the {kind.kind}"))
    if kind.namespaced:
        params.append(spelling.parameter("namespace", "path", "object name and auth scope, such as for teams and projects"))
    params.append(spelling.parameter("pretty", "query", _QUERY["pretty"]))
    return params


def _paths(spelling: _Spelling, kind: Kind) -> dict[str, Any]:
    """The collection, the object and each subresource with the verbs kube-apiserver gives them."""
    prefix, schema = _collection_path(kind), _kind_definition(kind)
    name = f"{kind.kind}{'Namespaced' if kind.namespaced else ''}"
    op = partial(_operation, spelling, kind, response=schema)
    if kind.verbs == ("create",):  # the review kinds: POST only, nothing stored to read back
        return {prefix: {"post": op("post", f"create{name}", body=schema),
                         "parameters": _path_parameters(spelling, kind, named=False)}}
    listed = f"{schema}List" if isinstance(kind, CustomKind) or _has(f"{schema}List") else schema
    collection = {"get": op("list", f"list{name}", response=listed, query=()),
                  "post": op("post", f"create{name}", body=schema),
                  "delete": op("deletecollection", f"deletecollection{name}", body=_DELETE_OPTIONS, response=_STATUS,
                               query=("dryRun",)),
                  "parameters": _path_parameters(spelling, kind, named=False)}
    item = {"get": op("get", f"read{name}", query=()), "put": op("put", f"replace{name}", body=schema),
            "patch": op("patch", f"patch{name}", body=_PATCH, consumes=_patch_types(kind)),
            "delete": op("delete", f"delete{name}", body=_DELETE_OPTIONS, response=_STATUS, query=("dryRun",)),
            "parameters": _path_parameters(spelling, kind, named=True)}
    paths = {prefix: collection, f"{prefix}/{{name}}": item}
    for sub in _documented_subresources(kind):
        paths[f"{prefix}/{{name}}/{sub}"] = _subresource_path(spelling, kind, sub, name)
    return paths


def _subresource_path(spelling: _Spelling, kind: Kind, sub: str, name: str) -> dict[str, Any]:
    body = _body_definition(kind, sub)
    gvk = _gvk_of(body) if SUBRESOURCES[sub][2] else _gvk(kind)
    label = f"{name}{sub.capitalize()}"
    op = partial(_operation, spelling, kind, response=body, gvk=gvk)
    verbs: dict[str, Callable[[], dict[str, Any]]] = {
        "get": lambda: op("get", f"read{label}", query=()),
        "update": lambda: op("put", f"replace{label}", body=body),
        "patch": lambda: op("patch", f"patch{label}", body=_PATCH, consumes=_patch_types(kind)),
        "create": lambda: op("post", f"create{label}", body=body),
    }
    method = {"get": "get", "update": "put", "patch": "patch", "create": "post"}
    path: dict[str, Any] = {method[verb]: verbs[verb]() for verb in SUBRESOURCES[sub][3] if verb in verbs}
    path["parameters"] = _path_parameters(spelling, kind, named=True)
    return path


def _patch_types(kind: Kind) -> tuple[str, ...]:
    """What a PATCH consumes: custom resources take no strategic merge patch, which is how kubectl
    knows to send them a JSON merge patch instead."""
    if isinstance(kind, CustomKind):
        return tuple(t for t in _PATCH_TYPES if t != "application/strategic-merge-patch+json")
    return _PATCH_TYPES


def _has(name: str) -> bool:
    try:
        definition(name)
    except KeyError:
        return False
    return True


def _definition_names(kinds: Iterable[Kind]) -> list[str]:
    """Every definition the paths of ``kinds`` reference, closed over."""
    names: list[str] = list(_META)
    for kind in kinds:
        schema = _kind_definition(kind)
        names.append(schema)
        if _has(f"{schema}List"):
            names.append(f"{schema}List")
        names += [_body_definition(kind, sub) for sub in _documented_subresources(kind)]
    return closure(names)


# --- documents ----------------------------------------------------------------------------------
def _info() -> dict[str, str]:
    return {"title": "Kubernetes", "version": KUBERNETES_VERSION}


@cache
def v2_spec() -> dict[str, Any]:
    """``/openapi/v2`` as a JSON object: every served kind's paths and the definitions they use."""
    spelling = _Spelling(v3=False)
    kinds = [kind for gv_kinds in group_versions().values() for kind in gv_kinds]
    paths: dict[str, Any] = {}
    for kind in kinds:
        paths.update(_paths(spelling, kind))
    definitions = {name: _definition(name, V2_REF, v3=False) for name in _definition_names(kinds)}
    return {"swagger": "2.0", "info": _info(), "paths": paths, "definitions": definitions}


@cache
def v2_json() -> bytes:
    return orjson.dumps(v2_spec())


@cache
def v2_protobuf() -> bytes:
    """gnostic's ``openapi.v2.Document``, what kubectl asks for first."""
    return openapi_proto.document(v2_spec())


@cache
def group_version_document(group_version: str) -> bytes | None:
    """``/openapi/v3/api/v1`` or ``/openapi/v3/apis/<group>/<version>``; None for an unserved one."""
    kinds = group_versions().get(group_version)
    if kinds is None:
        return None
    spelling = _Spelling(v3=True)
    paths: dict[str, Any] = {}
    for kind in kinds:
        paths.update(_paths(spelling, kind))
    schemas = {name: _definition(name, V3_REF, v3=True) for name in _definition_names(kinds)}
    doc = {"openapi": "3.0.0", "info": _info(), "paths": paths, "components": {"schemas": schemas}}
    return orjson.dumps(doc)


def etag(body: bytes) -> str:
    """kube-openapi's ETag: the upper-case hex SHA-512 of the served bytes (also the v3 ``hash``)."""
    return hashlib.sha512(body).hexdigest().upper()


def _url(group_version: str) -> str:
    return "api/v1" if group_version == "v1" else f"apis/{group_version}"


@cache
def root_document() -> bytes:
    """``/openapi/v3``: each group-version's document URL, with the hash that makes it cacheable."""
    paths = {}
    for gv in group_versions():
        body = group_version_document(gv) or b""
        paths[_url(gv)] = {"serverRelativeURL": f"/openapi/v3/{_url(gv)}?hash={etag(body)}"}
    return orjson.dumps({"paths": paths})


def document_for_path(path: str) -> bytes | None:
    """The v3 document of ``/openapi/v3/api/v1`` or ``/openapi/v3/apis/<group>/<version>``."""
    rest = path.removeprefix("/openapi/v3/").strip("/")
    if rest == "api/v1":
        return group_version_document("v1")
    if rest.startswith("apis/"):
        return group_version_document(rest[len("apis/"):])
    return None


# --- serving ------------------------------------------------------------------------------------
#: (type, subtype asked for, Content-Type answered, body). The ``@`` spelling kubectl asks for is
#: answered with the ``.`` one: ``@`` is not allowed in a media type, and Go's mime parser refuses it.
V2_FORMATS = (("application", "json", "application/json", v2_json),
              *(("application", media.split("/", 1)[1], openapi_proto.MEDIA_TYPES[1], v2_protobuf)
                for media in openapi_proto.MEDIA_TYPES))


@dataclass(frozen=True)
class Served:
    """One answer of the OpenAPI endpoints: status, body and headers, as kube-openapi's handlers give them."""

    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


def _accept_clauses(accept: str) -> list[tuple[str, str]]:
    """``Accept`` as (type, subtype) pairs, best quality first (goautoneg's order; ties keep their place)."""
    clauses: list[tuple[float, int, str, str]] = []
    for position, part in enumerate((accept or "*/*").split(",")):
        media, *params = [piece.strip() for piece in part.split(";")]
        if "/" not in media:
            continue
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        kind, _, sub = media.partition("/")
        clauses.append((-quality, position, kind, sub))
    return [(kind, sub) for quality, _, kind, sub in sorted(clauses) if quality < 0]


def _content(body: bytes, content_type: str, if_none_match: str, extra: Mapping[str, str] | None = None) -> Served:
    """``http.ServeContent`` with a quoted ETag: a matching ``If-None-Match`` gets 304 and no body."""
    tag = f'"{etag(body)}"'
    headers = {"Etag": tag, "Content-Type": content_type, **(extra or {})}
    if tag in [candidate.strip() for candidate in if_none_match.split(",")] or if_none_match.strip() == "*":
        return Served(304, b"", headers)
    return Served(200, body, headers)


def serve_v2(accept: str, if_none_match: str = "", custom: Sequence[CustomKind] = ()) -> Served:
    """``/openapi/v2``: JSON or gnostic protobuf by ``Accept``; 406 when neither is acceptable."""
    for kind, sub in _accept_clauses(accept):
        for want_kind, want_sub, content_type, build in V2_FORMATS:
            if kind in (want_kind, "*") and sub in (want_sub, "*"):
                body = build() if not custom else _custom_v2(custom, protobuf=build is v2_protobuf)
                return _content(body, content_type, if_none_match, {"Vary": "Accept"})
    return Served(406, b"", {"Vary": "Accept"})


def serve_v3(path: str, hash_param: str | None, if_none_match: str = "", now: float | None = None,
             custom: Sequence[CustomKind] = ()) -> Served | None:
    """``/openapi/v3`` and its group-version documents; None for a path that names none.

    With ``?hash=`` the document is immutable: a current hash gets a year of caching, a stale one
    a 301 to the current URL (so a client's cached root never serves an old document)."""
    if path.rstrip("/") == "/openapi/v3":
        return _content(root_document() if not custom else _custom_root(custom), "application/json", if_none_match)
    body = document_for_path(path) or _custom_document_for_path(path, custom)
    if body is None:
        return None
    current = etag(body)
    if hash_param is None:
        return _content(body, "application/json", if_none_match)
    if hash_param != current:
        location = f"/openapi/v3/{path.removeprefix('/openapi/v3/').strip('/')}?hash={current}"
        return Served(301, b"", {"Location": location})
    expires = email.utils.formatdate((time.time() if now is None else now) + 365 * 86400, usegmt=True)
    return _content(body, "application/json", if_none_match,
                    {"Vary": "Accept", "Cache-Control": "public, immutable", "Expires": expires})


# --- custom resources ----------------------------------------------------------------------------
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_LIST_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
#: Keywords Swagger 2.0 cannot say, which kube-apiserver leaves out of a CRD's v2 definition.
_V3_ONLY = ("anyOf", "oneOf", "allOf", "not", "nullable", "x-kubernetes-validations")
_CUSTOM_CACHE_LIMIT = 8
_custom_cache: dict[tuple[str, str], bytes] = {}


def custom_definition_name(kind: CustomKind) -> str:
    """kube-apiserver's definition name of a custom kind: the group reversed, the version, the kind."""
    return ".".join(reversed(kind.group.split("."))) + f".{kind.version}.{kind.kind}"


def _custom_schema(schema: Any, v3: bool) -> Any:
    """A CRD schema node as the document writes it (v2: without what Swagger 2.0 cannot say; an
    int-or-string without a type)."""
    if isinstance(schema, list):
        return [_custom_schema(item, v3) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {key: _custom_schema(value, v3) for key, value in schema.items() if v3 or key not in _V3_ONLY}
    if not v3 and schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
    return out


def _custom_definitions(kind: CustomKind, v3: bool) -> dict[str, Any]:
    """The kind's definition and its list's, with ``metadata`` the ObjectMeta (ListMeta) reference."""
    prefix = V3_REF if v3 else V2_REF
    schema = _custom_schema(copy.deepcopy(dict(kind.schema or {"type": "object"})), v3)
    props = schema.setdefault("properties", {})
    meta_ref = {"$ref": prefix + _OBJECT_META}
    props["metadata"] = {"allOf": [meta_ref]} if v3 else meta_ref
    schema.setdefault("type", "object")
    gvk = [{"group": kind.group, "version": kind.version, "kind": kind.kind}]
    schema["x-kubernetes-group-version-kind"] = gvk
    name = custom_definition_name(kind)
    list_schema = {
        "description": f"{kind.kind}List is a list of {kind.kind}", "type": "object", "required": ["items"],
        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                       "items": {"type": "array", "items": {"$ref": prefix + name}},
                       "metadata": {"allOf": [{"$ref": prefix + _LIST_META}]} if v3 else {"$ref": prefix + _LIST_META}},
        "x-kubernetes-group-version-kind": [{**gvk[0], "kind": f"{kind.kind}List"}],
    }
    return {name: schema, f"{name}List": list_schema}


def _builtin_for_custom(v3: bool, kinds: Sequence[CustomKind] = ()) -> dict[str, Any]:
    """The built-in definitions a group version of custom kinds references: the metadata's, and
    the bodies of their subresources (``autoscaling/v1`` Scale)."""
    prefix = V3_REF if v3 else V2_REF
    bodies = [body for kind in kinds for sub in _documented_subresources(kind) if _has(body := _body_definition(kind, sub))]
    return {name: _definition(name, prefix, v3) for name in closure([*_META, _OBJECT_META, _LIST_META, *bodies])}


def _fingerprint(custom: Sequence[CustomKind]) -> str:
    shape = [(k.group, k.version, k.resource, k.kind, k.namespaced, k.subresources, k.schema) for k in custom]
    return hashlib.sha256(orjson.dumps(shape, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _cached(key: tuple[str, str], build: Callable[[], bytes]) -> bytes:
    found = _custom_cache.get(key)
    if found is None:
        if len(_custom_cache) >= _CUSTOM_CACHE_LIMIT:
            _custom_cache.clear()
        found = _custom_cache[key] = build()
    return found


def _custom_v2(custom: Sequence[CustomKind], protobuf: bool) -> bytes:
    """``/openapi/v2`` with the custom kinds' paths and definitions."""
    def spec() -> dict[str, Any]:
        base = v2_spec()
        spelling = _Spelling(v3=False)
        paths, definitions = dict(base["paths"]), dict(base["definitions"])
        for kind in custom:
            paths.update(_paths(spelling, kind))
            definitions.update(_custom_definitions(kind, v3=False))
        return {**base, "paths": paths, "definitions": definitions}

    key = (_fingerprint(custom), "v2-proto" if protobuf else "v2-json")
    return _cached(key, lambda: openapi_proto.document(spec()) if protobuf else orjson.dumps(spec()))


def _custom_group_versions(custom: Sequence[CustomKind]) -> dict[str, list[CustomKind]]:
    out: dict[str, list[CustomKind]] = {}
    for kind in custom:
        out.setdefault(kind.api_version, []).append(kind)
    return out


def _custom_document(kinds: Sequence[CustomKind]) -> bytes:
    def build() -> bytes:
        spelling = _Spelling(v3=True)
        paths: dict[str, Any] = {}
        schemas = _builtin_for_custom(v3=True, kinds=kinds)
        for kind in kinds:
            paths.update(_paths(spelling, kind))
            schemas.update(_custom_definitions(kind, v3=True))
        return orjson.dumps({"openapi": "3.0.0", "info": _info(), "paths": paths, "components": {"schemas": schemas}})

    return _cached((_fingerprint(kinds), "v3"), build)


def _custom_root(custom: Sequence[CustomKind]) -> bytes:
    """``/openapi/v3`` listing the custom group-versions after the built-in ones."""
    root = orjson.loads(root_document())
    for gv, kinds in _custom_group_versions(custom).items():
        root["paths"][_url(gv)] = {"serverRelativeURL": f"/openapi/v3/{_url(gv)}?hash={etag(_custom_document(kinds))}"}
    return orjson.dumps(root)


def _custom_document_for_path(path: str, custom: Sequence[CustomKind]) -> bytes | None:
    rest = path.removeprefix("/openapi/v3/").strip("/")
    kinds = _custom_group_versions(custom).get(rest.removeprefix("apis/")) if rest.startswith("apis/") else None
    return _custom_document(kinds) if kinds else None
