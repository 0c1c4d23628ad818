"""The three PATCH formats kube-apiserver accepts for built-in kinds.

- JSON merge patch (RFC 7386, ``application/merge-patch+json``);
- JSON patch (RFC 6902, ``application/json-patch+json``);
- strategic merge patch (``application/strategic-merge-patch+json``, what kubectl sends for
  ``apply``, ``edit``, ``label``, ``patch``): maps merge, lists merge by their ``patchMergeKey``
  (containers by name, conditions by type, ...) or are replaced, and the ``$patch``,
  ``$retainKeys``, ``$setElementOrder/`` and ``$deleteFromPrimitiveList/`` directives apply.

The merge keys come from the ``patchStrategy``/``patchMergeKey`` tags of ``k8s.io/api``, kept in
``SCHEMA`` below for the kinds kubesched serves; a list this table does not know is replaced, as
a list without a strategy is upstream. Functions never mutate their inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from kubesched.api.apierrors import APIError, BadRequest, TooLarge
from kubesched.apiserver.bounds import MAX_BODY

#: The patch media types decoded here (server-side apply's is handled apart).
PATCH_TYPES = ("application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json")
#: kube-apiserver's ``maxJSONPatchOperations``.
MAX_JSON_PATCH_OPERATIONS = 10000
#: kube-apiserver's ``JSONPatchMaxCopyBytes`` (its body limit).
MAX_COPY_BYTES = MAX_BODY


class PatchError(APIError):
    """A patch that does not apply: 422, reason Invalid, with the patch library's message."""

    code = 422
    reason = "Invalid"


# --- JSON merge patch --------------------------------------------------------------------------
def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: ``null`` deletes, objects merge recursively, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- JSON patch --------------------------------------------------------------------------------
def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f'invalid JSON pointer: "{path}"')
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _pointer_text(op: Mapping, name: str, kind: str) -> str:
    """An operation's ``path`` or ``from``: json-patch's error when it is missing or not a string."""
    value = op.get(name)
    if isinstance(value, str):
        return value
    if value is None:
        raise PatchError(f"{kind} operation failed to decode {name}: operation missing {name} field")
    shown = {bool: "bool", list: "array", dict: "object"}.get(type(value), "number")
    raise PatchError(f"{kind} operation failed to decode {name}: json: cannot unmarshal {shown} into Go value of type string")


def _index(container: list, token: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index: {token}")
    index = int(token)
    if index > len(container) or (index == len(container) and not allow_end):
        raise PatchError(f"Unable to access invalid index: {index}")
    return index


def _copy_path(doc: Any, parts: list[str]) -> tuple[Any, Any]:
    """A copy of ``doc`` whose containers along ``parts[:-1]`` are fresh, and the last container."""
    root = _shallow(doc)
    parent = root
    for token in parts[:-1]:
        if isinstance(parent, dict):
            if token not in parent:
                raise PatchError(f"missing value at path: {token}")
            parent[token] = _shallow(parent[token])
            parent = parent[token]
        elif isinstance(parent, list):
            i = _index(parent, token, False)
            parent[i] = _shallow(parent[i])
            parent = parent[i]
        else:
            raise PatchError(f"cannot traverse into a scalar at: {token}")
    return root, parent


def _shallow(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value


def _get(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for token in parts:
        if isinstance(cur, dict):
            if token not in cur:
                raise PatchError(f"path not found: /{'/'.join(parts)}")
            cur = cur[token]
        elif isinstance(cur, list):
            cur = cur[_index(cur, token, False)]
        else:
            raise PatchError(f"path not found: /{'/'.join(parts)}")
    return cur


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    root, parent = _copy_path(doc, parts)
    token = parts[-1]
    if isinstance(parent, dict):
        parent[token] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, token, True), value)
    else:
        raise PatchError("add operation does not apply: doc is missing path")
    return root


def _remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise PatchError("unable to remove the whole document")
    root, parent = _copy_path(doc, parts)
    token = parts[-1]
    if isinstance(parent, dict):
        if token not in parent:
            raise PatchError(f"remove operation does not apply: doc is missing path: \"/{'/'.join(parts)}\"")
        del parent[token]
    elif isinstance(parent, list):
        del parent[_index(parent, token, False)]
    else:
        raise PatchError("remove operation does not apply: doc is missing path")
    return root


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 over ``doc``; a failing ``test`` or a missing path is a 422 as upstream. At most
    ``MAX_JSON_PATCH_OPERATIONS`` operations (413 beyond), and ``copy`` may add at most
    ``MAX_COPY_BYTES`` in all (json-patch's ``AccumulatedCopySizeLimit``, which kube-apiserver sets
    to its body limit): copies share their value, so without it a few dozen copies of a copy
    would describe an object of terabytes."""
    if not isinstance(operations, list):
        raise BadRequest("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    if len(operations) > MAX_JSON_PATCH_OPERATIONS:
        raise TooLarge(f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, "
                              f"got {len(operations)}")
    copied = 0
    for op in operations:
        if not isinstance(op, Mapping) or not isinstance(op.get("op"), str):
            raise BadRequest("Unexpected kind: unknown")
        kind = op["op"]
        parts = _pointer(_pointer_text(op, "path", kind))
        if kind == "add":
            doc = _add(doc, parts, op.get("value"))
        elif kind == "remove":
            doc = _remove(doc, parts)
        elif kind == "replace":
            _get(doc, parts)
            doc = _add(_remove(doc, parts), parts, op.get("value")) if parts else op.get("value")
        elif kind == "move":
            source = _pointer(_pointer_text(op, "from", kind))
            value = _get(doc, source)
            doc = _add(_remove(doc, source), parts, value)
        elif kind == "copy":
            value = _get(doc, _pointer(_pointer_text(op, "from", kind)))
            copied += len(orjson.dumps(value))
            if copied > MAX_COPY_BYTES:
                raise PatchError(f"Unable to complete the copy, the accumulated size increase of copy is {copied}, "
                                 f"exceeding the limit {MAX_COPY_BYTES}")
            doc = _add(doc, parts, value)
        elif kind == "test":
            if _get(doc, parts) != op.get("value"):
                raise PatchError(f"testing value /{'/'.join(parts)} failed: test failed")
        else:
            raise BadRequest(f"Unexpected kind: {kind}")
    return doc


# --- strategic merge patch ---------------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    """Patch metadata of one field: its type name and, for lists, the strategy and merge key."""

    type: str | None = None
    merge_key: str | None = None
    merge: bool = False  # a list with patchStrategy "merge" (keyed, or a primitive set)
    retain_keys: bool = False


def _list(type_name: str | None, key: str | None = None, retain: bool = False) -> Field:
    return Field(type_name, key, True, retain)


_META = Field("ObjectMeta")
_POD_TEMPLATE = {"metadata": _META, "spec": Field("PodSpec")}
_CONDITIONS = _list(None, "type")

SCHEMA: dict[str, dict[str, Field]] = {
    "ObjectMeta": {"finalizers": _list(None), "ownerReferences": _list(None, "uid")},
    "PodTemplateSpec": _POD_TEMPLATE,
    "PodSpec": {
        "containers": _list("Container", "name"), "initContainers": _list("Container", "name"),
        "ephemeralContainers": _list("Container", "name"), "volumes": _list("Volume", "name", retain=True),
        "imagePullSecrets": _list(None, "name"), "hostAliases": _list(None, "ip"),
        "topologySpreadConstraints": _list(None, "topologyKey"), "schedulingGates": _list(None, "name"),
        "resourceClaims": _list(None, "name", retain=True), "affinity": Field("Affinity"),
    },
    "Container": {
        "ports": _list(None, "containerPort"), "env": _list(None, "name"), "volumeMounts": _list(None, "mountPath"),
        "volumeDevices": _list(None, "devicePath"),
    },
    "PodStatus": {
        "conditions": _CONDITIONS, "podIPs": _list(None, "ip"), "hostIPs": _list(None, "ip"),
        "resourceClaimStatuses": _list(None, "name", retain=True),
    },
    "Pod": {"metadata": _META, "spec": Field("PodSpec"), "status": Field("PodStatus")},
    "Node": {"metadata": _META, "spec": Field("NodeSpec"), "status": Field("NodeStatus")},
    "NodeSpec": {"podCIDRs": _list(None)},
    "NodeStatus": {"conditions": _CONDITIONS, "addresses": _list(None, "type")},
    "Service": {"metadata": _META, "spec": Field("ServiceSpec"), "status": Field("ConditionedStatus")},
    "ServiceSpec": {"ports": _list(None, "port")},
    "ConditionedStatus": {"conditions": _CONDITIONS},
    "Deployment": {"metadata": _META, "spec": Field("DeploymentSpec"), "status": Field("ConditionedStatus")},
    "DeploymentSpec": {"template": Field("PodTemplateSpec"), "strategy": Field(None, retain_keys=True)},
    "ReplicaSet": {"metadata": _META, "spec": Field("WorkloadSpec"), "status": Field("ConditionedStatus")},
    "StatefulSet": {"metadata": _META, "spec": Field("WorkloadSpec"), "status": Field("ConditionedStatus")},
    "DaemonSet": {"metadata": _META, "spec": Field("WorkloadSpec"), "status": Field("ConditionedStatus")},
    "ReplicationController": {"metadata": _META, "spec": Field("WorkloadSpec"), "status": Field("ConditionedStatus")},
    "WorkloadSpec": {"template": Field("PodTemplateSpec")},
    "Namespace": {"metadata": _META, "status": Field("ConditionedStatus")},
    "PersistentVolumeClaim": {"metadata": _META, "status": Field("ConditionedStatus")},
    "PodDisruptionBudget": {"metadata": _META, "status": Field("ConditionedStatus")},
}
OBJECT = {"metadata": _META}


def fields_of(type_name: str | None) -> Mapping[str, Field]:
    if type_name is None:
        return {}
    return SCHEMA.get(type_name, OBJECT)


def strategic_merge(original: Any, patch: Any, type_name: str | None) -> Any:
    """Apply a strategic merge patch to ``original`` (a kind name selects the patch metadata)."""
    if not isinstance(patch, dict):
        raise BadRequest(f"json: cannot unmarshal {type(patch).__name__} into Go value of type map[string]interface {{}}")
    return _merge_map(original if isinstance(original, dict) else {}, patch, fields_of(type_name))


def _merge_map(original: dict, patch: dict, fields: Mapping[str, Field]) -> dict | None:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    if directive not in (None, "merge"):
        raise BadRequest(f"Unknown patch type: {directive} in map: {patch}")
    result = dict(original)
    orders: dict[str, list] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$setElementOrder/"):
            if not isinstance(value, list):
                raise BadRequest("invalid patch format of setElementOrder list")
            orders[key.split("/", 1)[1]] = value
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            if not isinstance(value, list):
                raise BadRequest("invalid patch format of primitive list")
            name = key.split("/", 1)[1]
            drop = value
            if isinstance(result.get(name), list):
                result[name] = [v for v in result[name] if v not in drop]
            continue
        if value is None:
            result.pop(key, None)
            continue
        meta = fields.get(key, Field())
        merged = _merge_value(result.get(key), value, meta)
        if merged is _DELETE:
            result.pop(key, None)
        else:
            result[key] = merged
    for name, order in orders.items():
        if isinstance(result.get(name), list):
            result[name] = _reorder(result[name], order, fields.get(name, Field()).merge_key)
    retain = patch.get("$retainKeys")
    if retain is not None and not (isinstance(retain, list) and all(isinstance(k, str) for k in retain)):
        raise BadRequest("invalid patch format of retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


_DELETE = object()


def _merge_value(current: Any, value: Any, meta: Field) -> Any:
    if isinstance(value, dict):
        if value.get("$patch") == "delete" and len(value) == 1:
            return _DELETE
        merged = _merge_map(current if isinstance(current, dict) else {}, value, fields_of(meta.type))
        return _DELETE if merged is None else merged
    if isinstance(value, list):
        if not meta.merge:
            return [_strip_directives(v) for v in value]
        if meta.merge_key is None:
            return _merge_primitive_list(current if isinstance(current, list) else [], value)
        return _merge_keyed_list(current if isinstance(current, list) else [], value, meta)
    return value


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    return value


def _merge_primitive_list(current: list, patch: list) -> list:
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [v for v in patch if not isinstance(v, dict)]
    out = list(current)
    for v in patch:
        if v not in out:
            out.append(v)
    return out


def _merge_keyed_list(current: list, patch: list, meta: Field) -> list:
    key = meta.merge_key
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [_strip_directives(v) for v in patch if not (isinstance(v, dict) and v.get("$patch") == "replace")]
    out = list(current)
    fields = fields_of(meta.type)
    for element in patch:
        if not isinstance(element, dict):
            raise BadRequest(f"merging list with key {key}: element is not a map: {element}")
        if key not in element:
            raise BadRequest(f"map: {element} does not contain declared merge key: {key}")
        at = next((i for i, e in enumerate(out) if isinstance(e, dict) and e.get(key) == element[key]), None)
        if element.get("$patch") == "delete":
            if at is not None:
                del out[at]
            continue
        if at is None:
            merged = _merge_map({}, element, fields)
            if merged is not None:
                out.append(merged)
        else:
            merged = _merge_map(out[at], element, fields)
            if merged is None:
                del out[at]
            else:
                out[at] = merged
    return out


def _reorder(items: list, order: list, key: str | None) -> list:
    def ident(item: Any) -> Any:
        if key is not None and isinstance(item, dict):
            return item.get(key)
        return item

    wanted = [ident(o) if isinstance(o, dict) else o for o in order]
    rank = {repr(w): i for i, w in enumerate(wanted)}
    indexed = list(enumerate(items))
    indexed.sort(key=lambda t: (rank.get(repr(ident(t[1])), len(rank) + t[0]), t[0]))
    return [item for _, item in indexed]


def apply_patch(patch_type: str, original: dict, body: Any, kind_name: str) -> dict:
    """Dispatch on the request's Content-Type (already reduced to its media type)."""
    if patch_type == "application/merge-patch+json":
        result = merge_patch(original, body)
    elif patch_type == "application/json-patch+json":
        result = json_patch(original, body)
    elif patch_type == "application/strategic-merge-patch+json":
        result = strategic_merge(original, body, kind_name)
    else:
        raise UnsupportedPatch(patch_type)
    if not isinstance(result, dict):
        raise BadRequest("the patch produced an object that is not a JSON object")
    return result


class UnsupportedPatch(APIError):
    code = 415
    reason = "UnsupportedMediaType"

    def __init__(self, media_type: str) -> None:
        super().__init__(f"the body of the request was in an unknown format - accepted media types include: "
                         f"application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
                         f"application/strategic-merge-patch+json (got {media_type})")
