"""Kubernetes protobuf request bodies (``application/vnd.kubernetes.protobuf``) decoded to the JSON
shape the store keeps.

kubectl's typed clients (``create deployment|namespace|configmap|...``, ``drain``'s evictions) send
protobuf and accept JSON back, so only decoding is needed. A body is the ``k8s\\0`` magic, then a
``runtime.Unknown`` whose TypeMeta names the message and whose ``raw`` is the message itself.

Go's generated marshalling writes non-pointer scalars even when zero, while its JSON encoding
omits them (``omitempty``); zero scalars are therefore dropped, except for the pointer fields in
``KEEP_ZERO`` where an explicit 0/false/"" means something (``replicas: 0``, ``storageClassName: ""``).
Message-typed fields are written only when set (pointers) or always (structs, which JSON writes
too), so a message that decodes to a zero value is kept: ``minAvailable: 0`` is an IntOrString.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import orjson

from kubesched.api.apierrors import BadRequest
from kubesched.api.golang import format_duration
from kubesched.apiserver.proto_schema import MAP_ENTRIES, MESSAGES
from kubesched.apiserver.protowire import WireError, bytes_value, fields, number_value, signed32, signed64, zigzag

MAGIC = b"k8s\x00"
META = "k8s.io.apimachinery.pkg.apis.meta.v1"
TIME, MICRO_TIME, DURATION = f"{META}.Time", f"{META}.MicroTime", f"{META}.Duration"
FIELDS_V1 = f"{META}.FieldsV1"
QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
RAW_EXTENSION = "k8s.io.apimachinery.pkg.runtime.RawExtension"

KEEP_ZERO = frozenset({
    "replicas", "terminationGracePeriodSeconds", "gracePeriodSeconds", "revisionHistoryLimit", "progressDeadlineSeconds",
    "activeDeadlineSeconds", "partition", "priority", "tolerationSeconds", "defaultMode", "mode", "runAsUser", "runAsGroup",
    "fsGroup", "backoffLimit", "completions", "parallelism", "ttlSecondsAfterFinished", "deletionGracePeriodSeconds",
    "expirationSeconds", "automountServiceAccountToken", "enableServiceLinks", "attachRequired", "allowPrivilegeEscalation",
    "privileged", "readOnlyRootFilesystem", "runAsNonRoot", "hostUsers", "immutable", "allowVolumeExpansion", "optional",
    "suspend", "storageCapacity", "requiresRepublish", "seLinuxMount", "podInfoOnMount", "storageClassName",
    "volumeAttributesClassName", "shareProcessNamespace", "setHostnameAsFQDN",
})

_GROUP_PACKAGES = {"": "core", "apps": "apps", "policy": "policy", "autoscaling": "autoscaling"}


def message_for(api_version: str, kind: str) -> str | None:
    """The protobuf message of ``apiVersion``/``kind`` (``k8s.io.api.<group>.<version>.<Kind>``)."""
    group, _, version = api_version.rpartition("/")
    if group == "meta.k8s.io" or kind in ("DeleteOptions", "Status"):
        return f"{META}.{kind}"
    package = _GROUP_PACKAGES.get(group, group.split(".")[0])
    name = f"k8s.io.api.{package}.{version}.{kind}"
    return name if name in MESSAGES else None


def decode(data: bytes) -> dict:
    """A protobuf-encoded object as its JSON form, ``apiVersion`` and ``kind`` included."""
    if not data.startswith(MAGIC):
        raise BadRequest("the body of the request was in an unknown format: missing the protobuf magic prefix")
    api_version, kind, raw = "", "", b""
    try:
        for number, _, value in fields(data[len(MAGIC):]):
            if number == 1 and isinstance(value, bytes):
                for n, _, v in fields(value):
                    if n == 1 and isinstance(v, bytes):
                        api_version = v.decode()
                    elif n == 2 and isinstance(v, bytes):
                        kind = v.decode()
            elif number == 2 and isinstance(value, bytes):
                raw = value
        message = message_for(api_version, kind)
        if message is None:
            raise BadRequest(f'no kind "{kind}" is registered for version "{api_version}"')
        obj = _message(raw, message)
    except (WireError, UnicodeDecodeError, ValueError) as e:
        if isinstance(e, BadRequest):
            raise
        raise BadRequest(f"unable to decode the protobuf body: {e}") from None
    return {"apiVersion": api_version, "kind": kind, **obj}


def _message(data: bytes, name: str) -> Any:
    special = _SPECIAL.get(name)
    if special is not None:
        return special(data)
    schema = MESSAGES.get(name)
    if schema is None:
        return {}
    out: dict[str, Any] = {}
    messages: set[str] = set()
    for number, wire, value in fields(data):
        spec = schema.get(number)
        if spec is None:
            continue
        fname, ftype, repeated, tname = spec
        if tname in MAP_ENTRIES:
            key, item = _map_entry(bytes_value(value), tname)
            out.setdefault(fname, {})[key] = item
            continue
        if repeated and wire == 2 and ftype not in (9, 11, 12):
            decoded: Any = _packed(bytes_value(value), ftype)
            out.setdefault(fname, []).extend(decoded)
            continue
        decoded = _scalar(value, ftype, tname)
        if repeated:
            out.setdefault(fname, []).append(decoded)
        elif decoded is not _OMIT:
            out[fname] = decoded
            if ftype == 11:
                messages.add(fname)
    keep = (KEEP_ZERO if not name.endswith("Status") else frozenset()) | messages
    return {k: v for k, v in out.items() if k in keep or not _zero(v)}


_OMIT = object()


def _zero(value: Any) -> bool:
    return value is _OMIT or (value in ("", 0, False) and not isinstance(value, dict | list)) or value is None


def _map_entry(data: bytes, entry: str) -> tuple[str, Any]:
    schema = MESSAGES[entry]
    key, item = "", None
    for number, _, value in fields(data):
        _, ftype, _, tname = schema[number]
        decoded = _scalar(value, ftype, tname)
        if number == 1:
            key = decoded
        else:
            item = decoded
    if item is None:
        _, ftype, _, tname = schema[2]
        item = "" if ftype == 9 else {} if ftype == 11 else 0
    return key, item


def _packed(data: bytes, ftype: int) -> list:
    from kubesched.apiserver.protowire import read_varint

    out, pos = [], 0
    while pos < len(data):
        value, pos = read_varint(data, pos)
        out.append(_scalar(value, ftype, ""))
    return out


def _scalar(value: int | bytes, ftype: int, tname: str) -> Any:
    if ftype == 11:
        return _message(bytes_value(value), tname)
    if ftype == 9:
        return bytes_value(value).decode()
    if ftype == 12:
        return base64.b64encode(bytes_value(value)).decode()
    if ftype == 8:
        return bool(value)
    if ftype in (3, 18):
        return zigzag(number_value(value)) if ftype == 18 else signed64(number_value(value))
    if ftype in (5, 17):
        return zigzag(number_value(value)) if ftype == 17 else signed32(number_value(value))
    return value


def _time(data: bytes, micro: bool = False) -> Any:
    seconds, nanos = 0, 0
    for number, _, value in fields(data):
        if number == 1:
            seconds = signed64(number_value(value))
        elif number == 2:
            nanos = signed32(number_value(value))
    if seconds == 0 and nanos == 0:
        return _OMIT
    stamp = dt.datetime.fromtimestamp(seconds, dt.UTC)
    if micro:
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{nanos // 1000:06d}Z"
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def _duration(data: bytes) -> str:
    nanos = 0
    for number, _, value in fields(data):
        if number == 1:
            nanos = signed64(number_value(value))
    return format_duration(nanos)


def _quantity(data: bytes) -> str:
    for number, _, value in fields(data):
        if number == 1 and isinstance(value, bytes):
            return value.decode()
    return "0"


def _int_or_string(data: bytes) -> Any:
    kind, int_val, str_val = 0, 0, ""
    for number, _, value in fields(data):
        if number == 1:
            kind = number_value(value)
        elif number == 2:
            int_val = signed32(number_value(value))
        elif number == 3 and isinstance(value, bytes):
            str_val = value.decode()
    return str_val if kind == 1 else int_val


def _raw_json(data: bytes) -> Any:
    for number, _, value in fields(data):
        if number == 1 and isinstance(value, bytes) and value:
            return orjson.loads(value)
    return {}


_SPECIAL = {
    TIME: _time, MICRO_TIME: lambda d: _time(d, micro=True), DURATION: _duration, QUANTITY: _quantity,
    INT_OR_STRING: _int_or_string, RAW_EXTENSION: _raw_json, FIELDS_V1: _raw_json,
}
