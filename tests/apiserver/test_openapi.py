"""The OpenAPI documents (``/openapi/v2`` in JSON and gnostic protobuf, ``/openapi/v3``), as kubectl
reads them: PATCH operations that accept ``fieldValidation``, real 1.35 schemas closed over their
references, and the caching headers of kube-openapi's handlers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import yaml

from kubesched.api.kinds import KINDS, Kind
from kubesched.apiserver import openapi, openapi_proto, protowire
from kubesched.apiserver.discovery import group_versions

PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


def v3(group_version: str) -> dict[str, Any]:
    body = openapi.group_version_document(group_version)
    assert body is not None
    return orjson.loads(body)


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def schemas(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema object below a definitions/components map."""
    if isinstance(node, dict):
        yield node
        for key in ("properties",):
            for sub in (node.get(key) or {}).values():
                yield from schemas(sub)
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                yield from schemas(node[key])
        for key in ("allOf", "oneOf", "anyOf"):
            for sub in node.get(key) or []:
                yield from schemas(sub)


def item_path(kind: Kind) -> str:
    base = "/api/v1" if not kind.group else f"/apis/{kind.group}/{kind.version}"
    scope = "/namespaces/{namespace}" if kind.namespaced else ""
    return f"{base}{scope}/{kind.resource}/{{name}}"


def gvk(kind: Kind) -> dict[str, str]:
    return {"group": kind.group, "version": kind.version, "kind": kind.kind}


#: Kinds stored and read back (the review kinds are create-only, as kube-apiserver serves them).
STORED = [kind for kind in KINDS if kind.verbs != ("create",)]


@pytest.mark.parametrize("kind", STORED, ids=lambda k: f"{k.api_version}/{k.kind}")
def test_every_kinds_patch_accepts_field_validation_in_v2_and_v3(kind):
    for patch in (v3(kind.api_version)["paths"][item_path(kind)]["patch"], openapi.v2_spec()["paths"][item_path(kind)]["patch"]):
        assert patch["x-kubernetes-group-version-kind"] == gvk(kind)
        assert any(p["name"] == "fieldValidation" and p["in"] == "query" for p in patch["parameters"])
    consumes = v3(kind.api_version)["paths"][item_path(kind)]["patch"]["requestBody"]["content"]
    assert "application/strategic-merge-patch+json" in consumes
    assert "application/strategic-merge-patch+json" in openapi.v2_spec()["paths"][item_path(kind)]["patch"]["consumes"]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"{k.api_version}/{k.kind}")
def test_every_kind_has_its_real_schema_with_its_group_version_kind(kind):
    v2_defs = openapi.v2_spec()["definitions"]
    v3_defs = v3(kind.api_version)["components"]["schemas"]
    for defs in (v2_defs, v3_defs):
        named = [name for name, schema in defs.items() if gvk(kind) in schema.get("x-kubernetes-group-version-kind", [])]
        assert len(named) == 1, named
        schema = defs[named[0]]
        assert schema["type"] == "object" and "metadata" in schema["properties"]
        assert "enum" not in schema["properties"]["apiVersion"]


def test_references_are_closed_and_spelt_per_version():
    v2 = openapi.v2_spec()
    assert set(refs(v2)) and all(r.startswith("#/definitions/") for r in refs(v2))
    assert {r.removeprefix("#/definitions/") for r in refs(v2)} <= set(v2["definitions"])
    for group_version in group_versions():
        doc = v3(group_version)
        assert all(r.startswith("#/components/schemas/") for r in refs(doc))
        assert {r.removeprefix("#/components/schemas/") for r in refs(doc)} <= set(doc["components"]["schemas"])


def test_v2_has_swagger_types_only():
    for definition in openapi.v2_spec()["definitions"].values():
        for schema in schemas(definition):
            assert isinstance(schema.get("type", ""), str)
            assert not {"oneOf", "anyOf"} & set(schema)
            assert None not in schema.get("enum", [])
    defs = openapi.v2_spec()["definitions"]
    assert defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    assert defs["io.k8s.apimachinery.pkg.api.resource.Quantity"]["type"] == "string"


def test_v3_wraps_described_references_in_all_of():
    containers = v3("v1")["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["type"] == "array" and containers["x-kubernetes-patch-merge-key"] == "name"
    metadata = v3("v1")["components"]["schemas"]["io.k8s.api.core.v1.Pod"]["properties"]["metadata"]
    assert metadata["allOf"] == [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]
    assert "Standard object's metadata" in metadata["description"]


def test_v2_and_v3_describe_the_same_operations():
    v2_ops = {(path, method) for path, item in openapi.v2_spec()["paths"].items() for method in item if method != "parameters"}
    v3_ops = {(path, method) for gv in group_versions() for path, item in v3(gv)["paths"].items()
              for method in item if method != "parameters"}
    assert v2_ops == v3_ops


def decode(data: bytes) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for number, _, value in protowire.fields(data):
        out.setdefault(number, []).append(value)
    return out


def named(entries: list[bytes]) -> dict[str, bytes]:
    """Repeated ``Named<T>`` messages as name -> encoded value."""
    return {decode(entry)[1][0].decode(): decode(entry)[2][0] for entry in entries}


def extensions(entries: list[bytes]) -> dict[str, Any]:
    """``NamedAny`` vendor extensions, their ``Any.yaml`` read back."""
    return {name: yaml.safe_load(decode(value)[2][0]) for name, value in named(entries).items()}


def test_protobuf_document_carries_definitions_and_extensions_kubectl_reads():
    doc = decode(openapi.v2_protobuf())
    assert doc[1] == [b"2.0"]
    assert decode(doc[2][0])[1] == [b"Kubernetes"]
    definitions = named(decode(doc[9][0])[1])
    assert set(definitions) == set(openapi.v2_spec()["definitions"])
    pod = decode(definitions["io.k8s.api.core.v1.Pod"])
    assert extensions(pod[31])["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Pod", "version": "v1"}]
    assert decode(pod[22][0])[1] == [b"object"]
    properties = named(decode(pod[25][0])[1])
    assert decode(properties["spec"])[1] == [b"#/definitions/io.k8s.api.core.v1.PodSpec"]
    containers = decode(named(decode(decode(definitions["io.k8s.api.core.v1.PodSpec"])[25][0])[1])["containers"])
    assert extensions(containers[31])["x-kubernetes-patch-merge-key"] == "name"
    assert decode(decode(containers[23][0])[1][0])[1] == [b"#/definitions/io.k8s.api.core.v1.Container"]


def test_protobuf_patch_operation_has_field_validation_query_parameter():
    paths = named(decode(decode(openapi.v2_protobuf())[8][0])[2])
    patch = decode(decode(paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"])[8][0])
    assert extensions(patch[13])["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    query_names = []
    for item in patch[8]:
        parameter = decode(decode(item)[1][0])
        if 2 in parameter:
            query = decode(decode(parameter[2][0]).get(3, [b""])[0])
            query_names += [name.decode() for name in query.get(4, [])]
    assert "fieldValidation" in query_names


@pytest.mark.parametrize(("message", "value", "error"), [
    ("Schema", {"$id": "x"}, "Schema: the field '$id' has no place"),
    ("Operation", {"parameters": [{"name": "x", "in": "cookie"}]}, "parameter 'x': unknown location 'cookie'"),
], ids=["unknown-schema-keyword", "unknown-parameter-location"])
def test_encoder_refuses_what_gnostic_cannot_carry(message, value, error):
    with pytest.raises(openapi_proto.EncodeError, match=error.replace("$", r"\$")):
        openapi_proto.encode(message, value)


@pytest.mark.parametrize(("accept", "status", "content_type"), [
    ("", 200, "application/json"),
    ("application/json", 200, "application/json"),
    (PROTOBUF, 200, openapi_proto.MEDIA_TYPES[1]),
    (f"{PROTOBUF}, application/json", 200, openapi_proto.MEDIA_TYPES[1]),
    (f"application/json;q=0.5, {PROTOBUF}", 200, openapi_proto.MEDIA_TYPES[1]),
    ("application/*", 200, "application/json"),
    ("text/html", 406, None),
], ids=["no-accept", "json", "protobuf", "protobuf-first", "quality-order", "wildcard-subtype", "unacceptable"])
def test_v2_content_negotiation(accept, status, content_type):
    served = openapi.serve_v2(accept)
    assert served.status == status
    assert served.headers.get("Content-Type") == content_type
    assert served.headers["Vary"] == "Accept"


def test_v2_etag_answers_304_to_a_matching_if_none_match():
    first = openapi.serve_v2(PROTOBUF)
    assert first.headers["Etag"] == f'"{openapi.etag(first.body)}"'
    again = openapi.serve_v2(PROTOBUF, first.headers["Etag"])
    assert (again.status, again.body) == (304, b"")
    assert openapi.serve_v2("application/json", first.headers["Etag"]).status == 200  # the JSON has its own tag


def test_v3_hash_urls_are_immutable_and_stale_hashes_redirect():
    root = orjson.loads(openapi.serve_v3("/openapi/v3", None).body)
    url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
    path, _, digest = url.partition("?hash=")
    served = openapi.serve_v3(path, digest, now=0.0)
    assert served.status == 200 and served.headers["Cache-Control"] == "public, immutable"
    assert served.headers["Expires"] == "Fri, 01 Jan 1971 00:00:00 GMT"
    assert served.headers["Etag"] == f'"{digest}"'
    stale = openapi.serve_v3(path, "0" * 128)
    assert (stale.status, stale.headers["Location"]) == (301, url)
    plain = openapi.serve_v3(path, None)
    assert plain.status == 200 and "Cache-Control" not in plain.headers
    assert openapi.serve_v3(path, None, plain.headers["Etag"]).status == 304
    assert openapi.serve_v3("/openapi/v3/apis/apps/v9", None) is None


async def test_the_server_serves_v2_in_both_formats_and_v3_with_its_caching_headers(api):
    status, body, headers = await api.call("GET", "/openapi/v2", accept=PROTOBUF)
    assert (status, headers["Content-Type"], body) == (200, openapi_proto.MEDIA_TYPES[1], openapi.v2_protobuf())
    status, body, headers = await api.call("GET", "/openapi/v2", accept="application/json")
    assert status == 200 and body["swagger"] == "2.0" and headers["Etag"] == f'"{openapi.etag(openapi.v2_json())}"'
    status, body, _ = await api.call("GET", "/openapi/v2", accept="text/html")
    assert (status, body["reason"]) == (406, "NotAcceptable")
    status, root, _ = await api.call("GET", "/openapi/v3")
    url = root["paths"]["api/v1"]["serverRelativeURL"]
    status, doc, headers = await api.call("GET", url)
    assert status == 200 and doc["openapi"] == "3.0.0" and headers["Cache-Control"] == "public, immutable"
    status, _, headers = await api.call("GET", url.partition("?")[0], params={"hash": "stale"})
    assert status == 200 and headers["Cache-Control"] == "public, immutable"  # aiohttp followed the 301
    status, body, _ = await api.call("GET", "/openapi/v3/apis/apps/v9")
    assert (status, body["reason"]) == (404, "NotFound")
