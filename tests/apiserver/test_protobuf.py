"""Protobuf request bodies, encoded the way Go's generated marshalling writes them, decoded to the
JSON the store keeps."""

from __future__ import annotations

import re

import pytest

from kubesched.api.apierrors import BadRequest
from kubesched.api.kinds import KINDS
from kubesched.apiserver import protobuf, protogen
from kubesched.apiserver.proto_schema import MAP_ENTRIES, MESSAGES
from kubesched.apiserver.protowire import length_delimited

PROTOBUF = "application/vnd.kubernetes.protobuf"
INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _tagged(number: int, payload: bytes | int) -> bytes:
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _value(ftype: int, tname: str, value) -> bytes | int:
    if tname == INT_OR_STRING:  # Go writes all three fields of the struct
        is_str = isinstance(value, str)
        return _tagged(1, int(is_str)) + _tagged(2, 0 if is_str else value) + _tagged(3, (value if is_str else "").encode())
    if tname == protobuf.QUANTITY:
        return _tagged(1, value.encode())
    if ftype == 11:
        return encode(tname, value)
    return value.encode() if ftype == 9 else int(value)


def encode(message: str, obj: dict) -> bytes:
    """``obj`` as ``message``: enough of gogo-protobuf's marshalling for these tests."""
    by_name = {spec[0]: (number, spec) for number, spec in MESSAGES[message].items()}
    out = b""
    for key, value in obj.items():
        number, (_, ftype, repeated, tname) = by_name[key]
        if tname in MAP_ENTRIES:
            out += b"".join(_tagged(number, encode(tname, {"key": k, "value": v})) for k, v in value.items())
        elif repeated:
            out += b"".join(_tagged(number, _value(ftype, tname, item)) for item in value)
        else:
            out += _tagged(number, _value(ftype, tname, value))
    return out


def body(obj: dict) -> bytes:
    """A ``k8s\\0``-prefixed ``runtime.Unknown`` carrying ``obj``, as client-go sends it."""
    message = protobuf.message_for(obj["apiVersion"], obj["kind"])
    assert message is not None, obj["kind"]
    type_meta = encode("k8s.io.apimachinery.pkg.runtime.TypeMeta", {"apiVersion": obj["apiVersion"], "kind": obj["kind"]})
    raw = encode(message, {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})
    return protobuf.MAGIC + _tagged(1, type_meta) + _tagged(2, raw)


@pytest.mark.parametrize("obj, path, expected", [
    ({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"},
      "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "web"}}}},
     ["spec", "minAvailable"], 0),
    ({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"},
      "spec": {"maxUnavailable": "0%", "selector": {"matchLabels": {"app": "web"}}}},
     ["spec", "maxUnavailable"], "0%"),
    ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
      "spec": {"selector": {"matchLabels": {"app": "web"}},
               "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
               "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}},
     ["spec", "strategy", "rollingUpdate", "maxUnavailable"], 0),
])
def test_protobuf_int_or_string_zero_is_kept(obj, path, expected):
    decoded = protobuf.decode(body(obj))
    for key in path:
        decoded = decoded[key]
    assert decoded == expected


@pytest.mark.parametrize("nanos, text", [(500_000_000, "500ms"), (90 * 10**9, "1m30s"), (3600 * 10**9, "1h0m0s"), (0, "0s")])
def test_protobuf_duration_prints_as_go(nanos, text):
    data = _tagged(1, nanos) if nanos else b""
    assert protobuf._SPECIAL[protobuf.DURATION](data) == text


async def test_protobuf_pdb_with_min_available_zero_is_stored_with_it(api):
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "zero"},
           "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "web"}}}}
    status, created, _ = await api.call("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", raw=body(pdb),
                                        content_type=PROTOBUF)
    assert status == 201, created
    assert created["spec"]["minAvailable"] == 0


async def test_protobuf_resourceclaim_status_update_as_a_scheduler_sends_it(api):
    claims = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu"},
             "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}
    status, created, _ = await api.call("POST", claims, raw=body(claim), content_type=PROTOBUF)
    assert status == 201, created
    assert created["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.example.com"
    allocated = {**claim, "metadata": {"name": "gpu", "resourceVersion": created["metadata"]["resourceVersion"],
                                        "uid": created["metadata"]["uid"]},
                 "status": {"allocation": {"devices": {"results": [
                     {"request": "req", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]}},
                            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u-1"}]}}
    status, updated, _ = await api.call("PUT", f"{claims}/gpu/status", raw=body(allocated), content_type=PROTOBUF)
    assert status == 200, updated
    assert updated["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert updated["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "u-1"}]


#: Served in JSON only: the message schema comes from kubectl's binary, which carries no apiextensions types.
JSON_ONLY = ("apiextensions.k8s.io",)


@pytest.mark.parametrize("kind", [k for k in KINDS if k.group not in JSON_ONLY and not k.feature_gate],
                         ids=lambda k: f"{k.api_version}/{k.kind}")
def test_protobuf_every_served_kind_has_a_message(kind):
    assert protobuf.message_for(kind.api_version, kind.kind) is not None


def test_protobuf_alpha_kind_without_a_message_is_refused_by_name():
    """The alpha Workload kind's generated.proto is not in the schema: its protobuf bodies are
    refused naming the kind (JSON bodies are served)."""
    type_meta = length_delimited(1, b"scheduling.k8s.io/v1alpha1") + length_delimited(2, b"Workload")
    body = protobuf.MAGIC + length_delimited(1, type_meta)
    with pytest.raises(BadRequest, match=re.escape('no kind "Workload" is registered for version "scheduling.k8s.io/v1alpha1"')):
        protobuf.decode(body)


def test_protogen_reads_generated_proto_source():
    messages, maps = protogen.parse_text('''
        syntax = "proto2";
        package k8s.io.api.example.v1;
        // Widget is an example.
        message Widget {
          // name is the name.
          optional string name = 1;
          repeated .k8s.io.apimachinery.pkg.api.resource.Quantity sizes = 3;
          map<string, Part> parts = 4;
          optional int64 count = 5;
        }
    ''')
    assert messages["k8s.io.api.example.v1.Widget"] == {
        1: ("name", 9, 0, ""), 3: ("sizes", 11, 1, protobuf.QUANTITY),
        4: ("parts", 11, 1, "k8s.io.api.example.v1.Widget.PartsEntry"), 5: ("count", 3, 0, "")}
    assert messages["k8s.io.api.example.v1.Widget.PartsEntry"] == {1: ("key", 9, 0, ""), 2: ("value", 11, 0, "k8s.io.api.example.v1.Part")}
    assert maps == {"k8s.io.api.example.v1.Widget.PartsEntry"}


async def test_unknown_body_media_type_is_415_naming_the_decoded_ones(api):
    status, error, _ = await api.call("POST", "/api/v1/namespaces/default/pods", raw=b"x", content_type="application/cbor")
    assert (status, error["reason"]) == (415, "UnsupportedMediaType")
    assert error["message"] == ("the body of the request was in an unknown format - accepted media types include: "
                                "application/json, application/yaml, application/vnd.kubernetes.protobuf")
