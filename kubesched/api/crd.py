"""CustomResourceDefinitions as kube-apiserver's apiextensions serves them: the CRD's own
defaults, validation and status, the kinds it serves, and its structural schema applied to custom
objects (pruning of unknown fields, defaults, validation).

Custom objects are decoded as upstream decodes them: ``apiVersion``, ``kind`` and ``metadata`` are
every object's; everything else is what the version's ``openAPIV3Schema`` says, unknown fields
pruned (a ``fieldValidation=Strict`` write refuses them instead), ``default`` values filled in, and
each value checked against its schema's type, ``required``, ``enum``, bounds, lengths and
``pattern``. Errors name the field, in kube-apiserver's words.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from kubesched.api.crd_rules import schema_rule_errors
from kubesched.api.errors import FieldError, forbidden, invalid, required, unsupported
from kubesched.api.kinds import CustomKind
from kubesched.api.names import dns1123_label_errors, dns1123_subdomain_errors

GROUP = "apiextensions.k8s.io"
#: The subresources of custom resources (``status``, and ``scale`` read and written at the
#: paths the version's ``subresources.scale`` names).
SERVED_SUBRESOURCES = ("status", "scale")
SCOPES = ["Cluster", "Namespaced"]
#: The JSON types a structural schema may name.
TYPES = ("array", "boolean", "integer", "number", "object", "string")
_ROOT_FIELDS = ("apiVersion", "kind", "metadata")


# --- the CRD itself ------------------------------------------------------------------------------
def set_crd_defaults(crd: dict[str, Any]) -> None:
    """``SetDefaults_CustomResourceDefinition``: singular and listKind from the kind, the
    ``None`` conversion strategy."""
    spec = crd.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and isinstance(names.get("kind"), str) and names["kind"]:
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
    spec.setdefault("conversion", {"strategy": "None"})


def validate_crd(crd: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateCustomResourceDefinition`` for what kubesched serves: the name, group, names,
    scope, versions (one storage version, at least one served) and each version's structural
    schema."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, plural = spec.get("group") or "", names.get("plural") or ""
    errors: list[FieldError] = []
    name = (crd.get("metadata") or {}).get("name") or ""
    if name != f"{plural}.{group}":
        errors.append(invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    errors += _group_errors(group)
    errors += _names_errors(names)
    scope = spec.get("scope")
    if not scope:
        errors.append(required("spec.scope"))
    elif scope not in SCOPES:
        errors.append(unsupported("spec.scope", scope, SCOPES))
    errors += _versions_errors(spec.get("versions"))
    strategy = (spec.get("conversion") or {}).get("strategy", "None")
    if strategy != "None":
        errors.append(unsupported("spec.conversion.strategy", strategy, ["None"]))
    return errors


def _group_errors(group: str) -> list[FieldError]:
    if not group:
        return [required("spec.group")]
    if "." not in group:
        return [invalid("spec.group", group, "should be a domain with at least one dot")]
    return [invalid("spec.group", group, detail) for detail in dns1123_subdomain_errors(group)]


def _names_errors(names: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    for field in ("plural", "singular", "kind", "listKind"):
        value = names.get(field)
        path = f"spec.names.{field}"
        if not value:
            errors.append(required(path))
        elif field in ("plural", "singular"):
            errors += [invalid(path, value, detail) for detail in dns1123_label_errors(value)]
        elif not _KIND.match(str(value)):
            errors.append(invalid(path, value, "may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?"))
    for i, short in enumerate(names.get("shortNames") or ()):
        errors += [invalid(f"spec.names.shortNames[{i}]", short, detail) for detail in dns1123_label_errors(str(short))]
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        errors.append(invalid("spec.names.listKind", names["listKind"], "kind and listKind may not be the same"))
    return errors


_KIND = re.compile(r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$")


def _versions_errors(versions: Any) -> list[FieldError]:
    if not versions:
        return [required("spec.versions", "must have exactly one version marked as storage version")]
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, version in enumerate(versions):
        path = f"spec.versions[{i}]"
        name = version.get("name") or ""
        if not name:
            errors.append(required(f"{path}.name"))
        elif name in seen:
            errors.append(FieldError(f"{path}.name", "Duplicate value", "", name))
        else:
            errors += [invalid(f"{path}.name", name, detail) for detail in dns1123_label_errors(name)]
        seen.add(name)
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is None:
            errors.append(required(f"{path}.schema.openAPIV3Schema", "schemas are required"))
        else:
            errors += structural_errors(schema, f"{path}.schema.openAPIV3Schema")
            errors += schema_rule_errors(schema, f"{path}.schema.openAPIV3Schema")
        errors += _columns_errors(version.get("additionalPrinterColumns") or (), f"{path}.additionalPrinterColumns")
        errors += _scale_errors((version.get("subresources") or {}).get("scale"), f"{path}.subresources.scale")
        errors += _selectable_errors(version.get("selectableFields") or (), schema, f"{path}.selectableFields")
    storage = [v.get("name") for v in versions if v.get("storage")]
    if len(storage) != 1:
        errors.append(invalid("spec.versions", _version_names(versions), "must have exactly one version marked as storage version"))
    if not any(v.get("served") for v in versions):
        errors.append(invalid("spec.versions", _version_names(versions), "must have at least one version marked as served"))
    return errors


def _scale_errors(scale: Any, path: str) -> list[FieldError]:
    """``subresources.scale``: the replicas paths under ``.spec`` and ``.status``, the optional
    label selector path under either."""
    if scale is None:
        return []
    if not isinstance(scale, Mapping):
        return [invalid(path, scale, "must be an object")]
    errors: list[FieldError] = []
    for field, roots, needed in (("specReplicasPath", (".spec.",), True), ("statusReplicasPath", (".status.",), True),
                                 ("labelSelectorPath", (".spec.", ".status."), False)):
        value = scale.get(field)
        if not value:
            if needed:
                errors.append(required(f"{path}.{field}"))
        elif not isinstance(value, str) or not value.startswith(roots) or not _SIMPLE_PATH.match(value):
            where = " or ".join(r.rstrip(".") for r in roots)
            errors.append(invalid(f"{path}.{field}", value, f"should be a json path under {where}"))
    return errors


_SIMPLE_PATH = re.compile(r"^(\.[A-Za-z0-9_-]+)+$")


def scale_paths(crd: Mapping[str, Any] | None, version: str) -> Mapping[str, str] | None:
    """The ``subresources.scale`` of ``version`` of ``crd``, None when it has none."""
    for served in (crd or {}).get("spec", {}).get("versions") or ():
        if served.get("name") == version:
            scale = (served.get("subresources") or {}).get("scale")
            return scale if isinstance(scale, Mapping) else None
    return None


def value_at(obj: Mapping[str, Any], json_path: str) -> Any:
    """The value at a simple JSON path (``.spec.replicas``), None when absent."""
    value: Any = obj
    for part in json_path.lstrip(".").split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def set_value_at(obj: dict[str, Any], json_path: str, value: Any) -> None:
    """Set the value at a simple JSON path, creating the objects on the way."""
    *parents, last = json_path.lstrip(".").split(".")
    node = obj
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = value


def _version_names(versions: list[Mapping[str, Any]]) -> str:
    return ", ".join(str(v.get("name")) for v in versions)


def _columns_errors(columns: Any, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, column in enumerate(columns):
        at = f"{path}[{i}]"
        for field in ("name", "type", "jsonPath"):
            if not column.get(field):
                errors.append(required(f"{at}.{field}"))
        kind = column.get("type")
        if kind and kind not in ("boolean", "date", "integer", "number", "string"):
            errors.append(unsupported(f"{at}.type", kind, ["boolean", "date", "integer", "number", "string"]))
    return errors


#: ``selectableFields`` a version may declare (``MaxSelectableFields``).
MAX_SELECTABLE_FIELDS = 8
_SELECTABLE_TYPES = ("string", "integer", "boolean")


def _selectable_errors(fields: Any, schema: Any, path: str) -> list[FieldError]:
    """Each selectable field a simple path to a string, integer or boolean field of the schema."""
    errors: list[FieldError] = []
    if len(fields) > MAX_SELECTABLE_FIELDS:
        errors.append(FieldError(path, "Too many", f"{len(fields)}: must have at most {MAX_SELECTABLE_FIELDS} items", len(fields)))
    for i, field in enumerate(fields):
        at = f"{path}[{i}].jsonPath"
        json_path = str(field.get("jsonPath") or "")
        if not json_path:
            errors.append(required(at))
            continue
        node = schema_at(schema, json_path.lstrip("."))
        if node is None:
            errors.append(invalid(at, json_path, "is an invalid path: does not refer to a field in the schema"))
        elif node.get("type") not in _SELECTABLE_TYPES:
            errors.append(invalid(at, json_path, "must point to a field of type string, boolean or integer"))
    return errors


def schema_at(schema: Any, dotted: str) -> Mapping[str, Any] | None:
    """The schema of the field at a simple dotted path (``spec.color``), None when it specifies none."""
    node = schema
    for part in dotted.split(".") if dotted else ():
        props = node.get("properties") if isinstance(node, Mapping) else None
        if not isinstance(props, Mapping) or part not in props:
            return None
        node = props[part]
    return node if isinstance(node, Mapping) and dotted else None


def field_value(obj: Mapping[str, Any], dotted: str) -> str:
    """An object's value at a simple dotted path as a field selector compares it ("" when absent)."""
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def structural_errors(schema: Any, path: str) -> list[FieldError]:
    """Why ``schema`` is not structural (``apiextensions.ValidateStructural``, the essentials):
    an object at the root, and a type for every node that neither preserves unknown fields nor
    is int-or-string."""
    if not isinstance(schema, Mapping):
        return [invalid(path, schema, "must be an object")]
    errors: list[FieldError] = []
    if not schema.get("type"):
        errors.append(required(f"{path}.type", "must not be empty at the root"))
    elif schema["type"] != "object":
        errors.append(invalid(f"{path}.type", schema["type"], "must be object at the root"))
    errors += _node_errors(schema, path, root=True)
    return errors


def _node_errors(schema: Mapping[str, Any], path: str, *, root: bool = False) -> list[FieldError]:
    errors: list[FieldError] = []
    kind = schema.get("type")
    loose = schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-int-or-string")
    if not root and not kind and not loose:
        errors.append(required(f"{path}.type", "must not be empty for specified object fields"))
    if kind and kind not in TYPES:
        errors.append(unsupported(f"{path}.type", kind, list(TYPES)))
    if kind == "array" and not isinstance(schema.get("items"), Mapping):
        errors.append(required(f"{path}.items", "must be specified"))
    for key in ("properties", "additionalProperties", "items"):
        if key in schema and kind not in (None, "object" if key != "items" else "array"):
            errors.append(forbidden(f"{path}.{key}", f"must not be specified for type {kind}"))
    if schema.get("properties") and isinstance(schema.get("additionalProperties"), Mapping):
        errors.append(forbidden(f"{path}.additionalProperties", "additionalProperties and properties are mutual exclusive"))
    for name, child in (schema.get("properties") or {}).items():
        errors += _child_errors(child, f"{path}.properties[{name}]")
    if isinstance(schema.get("additionalProperties"), Mapping):
        errors += _child_errors(schema["additionalProperties"], f"{path}.additionalProperties")
    if isinstance(schema.get("items"), Mapping):
        errors += _child_errors(schema["items"], f"{path}.items")
    return errors


def _child_errors(child: Any, path: str) -> list[FieldError]:
    if not isinstance(child, Mapping):
        return [invalid(path, child, "must be an object")]
    return _node_errors(child, path)


# --- status and served kinds ------------------------------------------------------------------------
def accepted_status(crd: Mapping[str, Any], conflict: str, now: str, old_status: Mapping[str, Any] | None) -> dict[str, Any]:
    """The status the apiextensions controllers converge to: names accepted (or the conflict that
    keeps them from it) and the CRD established; ``storedVersions`` keeps every version that
    ever was the storage version."""
    spec = crd.get("spec") or {}
    status = dict(old_status or {})
    previous = {c.get("type"): c for c in status.get("conditions") or ()}
    if conflict:
        conditions = [_condition(previous, "NamesAccepted", "False", "NameConflict", conflict, now),
                      _condition(previous, "Established", "False", "NotAccepted", "not all names are accepted", now)]
    else:
        status["acceptedNames"] = copy.deepcopy(dict(spec.get("names") or {}))
        conditions = [_condition(previous, "NamesAccepted", "True", "NoConflicts", "no conflicts found", now),
                      _condition(previous, "Established", "True", "InitialNamesAccepted", "the initial names have been accepted", now)]
    status["conditions"] = conditions
    stored = list(status.get("storedVersions") or ())
    for version in spec.get("versions") or ():
        if version.get("storage") and version.get("name") not in stored:
            stored.append(version["name"])
    status["storedVersions"] = stored
    status.setdefault("acceptedNames", {"kind": "", "plural": ""})
    return status


def _condition(previous: Mapping[str, Mapping[str, Any]], kind: str, value: str, reason: str, message: str, now: str) -> dict[str, Any]:
    old = previous.get(kind) or {}
    since = old.get("lastTransitionTime") if old.get("status") == value else now
    return {"type": kind, "status": value, "lastTransitionTime": since or now, "reason": reason, "message": message}


def established(crd: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or ())


def served_kinds(crd: Mapping[str, Any]) -> list[CustomKind]:
    """One kind per served version, with that version's schema and printer columns."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    storage = next((v["name"] for v in spec.get("versions") or () if v.get("storage")), "")
    kinds = []
    for version in spec.get("versions") or ():
        if not version.get("served"):
            continue
        subresources = tuple(sub for sub in SERVED_SUBRESOURCES if sub in (version.get("subresources") or {}))
        kinds.append(CustomKind(
            names.get("kind", ""), spec.get("group", ""), version["name"], names.get("plural", ""),
            spec.get("scope") == "Namespaced", tuple(names.get("shortNames") or ()), tuple(names.get("categories") or ()),
            subresources, schema=(version.get("schema") or {}).get("openAPIV3Schema"),
            printer_columns=tuple(version.get("additionalPrinterColumns") or ()), storage_version=storage,
            singular_name=names.get("singular", ""),
            selectable_fields=tuple(str(f.get("jsonPath", "")).lstrip(".") for f in version.get("selectableFields") or ())))
    return kinds


def resource_names(crd: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(what, name)`` of every name a CRD claims in its group: plural, singular, short names, kind."""
    names = (crd.get("spec") or {}).get("names") or {}
    for what in ("plural", "singular"):
        if names.get(what):
            yield "resource", names[what]
    for short in names.get("shortNames") or ():
        yield "resource", short
    if names.get("kind"):
        yield "kind", names["kind"]


# --- custom objects ----------------------------------------------------------------------------
def prune(schema: Mapping[str, Any] | None, obj: dict[str, Any]) -> list[str]:
    """Drop the fields ``schema`` does not specify (structural pruning), keeping ``apiVersion``,
    ``kind`` and ``metadata`` at the root; the paths dropped, in document order."""
    if schema is None:
        return []
    dropped: list[str] = []
    _prune(schema, obj, "", dropped, root=True)
    return dropped


def _prune(schema: Mapping[str, Any], value: Any, path: str, dropped: list[str], *, root: bool = False) -> None:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        keep_all = schema.get("x-kubernetes-preserve-unknown-fields") or extra is True
        for key in list(value):
            if root and key in _ROOT_FIELDS:
                continue  # every object's, decoded as such
            child = props.get(key) if key in props else (extra if isinstance(extra, Mapping) else None)
            at = f"{path}.{key}" if path else str(key)
            if child is not None:
                _prune(child, value[key], at, dropped)
            elif not keep_all:
                dropped.append(at)
                del value[key]
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            _prune(schema["items"], item, f"{path}[{i}]", dropped)


def apply_defaults(schema: Mapping[str, Any] | None, obj: Any) -> None:
    """Fill in the ``default`` of every specified field that is absent (or null and not
    nullable), depth first, as the structural defaulting of a read or a write does."""
    if schema is None:
        return
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        for key, child in props.items():
            if "default" in child and (key not in obj or (obj[key] is None and not child.get("nullable"))):
                obj[key] = copy.deepcopy(child["default"])
        extra = schema.get("additionalProperties")
        for key, value in obj.items():
            child = props.get(key) if key in props else (extra if isinstance(extra, Mapping) else None)
            if child is not None:
                apply_defaults(child, value)
    elif isinstance(obj, list) and isinstance(schema.get("items"), Mapping):
        for item in obj:
            apply_defaults(schema["items"], item)


def validate_object(schema: Mapping[str, Any] | None, obj: Mapping[str, Any]) -> list[FieldError]:
    """Every way ``obj`` breaks ``schema`` (its root metadata aside, validated as every object's)."""
    if schema is None:
        return []
    errors: list[FieldError] = []
    body = {k: v for k, v in obj.items() if k not in _ROOT_FIELDS}
    root = {**schema, "properties": {k: v for k, v in (schema.get("properties") or {}).items() if k not in _ROOT_FIELDS},
            "required": [r for r in schema.get("required") or () if r not in _ROOT_FIELDS]}
    _validate(root, body, "", errors)
    return errors


def _validate(schema: Mapping[str, Any], value: Any, path: str, errors: list[FieldError]) -> None:
    if value is None:
        if not schema.get("nullable") and schema.get("type"):
            errors.append(invalid(path, "null", f"{path} in body must be of type {schema['type']}: \"null\""))
        return
    if not _type_ok(schema, value, path, errors):
        return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(unsupported(path, value, [_shown(v) for v in schema["enum"]]))
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        _bounds(schema, value, path, errors)
    elif isinstance(value, str):
        _string(schema, value, path, errors)
    elif isinstance(value, list):
        _array(schema, value, path, errors)
    elif isinstance(value, dict):
        _object(schema, value, path, errors)


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _type_ok(schema: Mapping[str, Any], value: Any, path: str, errors: list[FieldError]) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
        want = "integer,string"
    else:
        want = schema.get("type") or ""
        ok = not want or _JSON_TYPE.get(want, lambda _v: True)(value)
    if not ok:
        actual = _json_type(value)
        errors.append(invalid(path, actual, f"{path} in body must be of type {want}: \"{actual}\""))
    return ok


_JSON_TYPE = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


def _json_type(value: Any) -> str:
    for name in ("boolean", "integer", "number", "string", "array", "object"):
        if _JSON_TYPE[name](value):
            return name
    return "null"


def _bounds(schema: Mapping[str, Any], value: float, path: str, errors: list[FieldError]) -> None:
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None:
        if schema.get("exclusiveMinimum") and value <= low:
            errors.append(invalid(path, value, f"{path} in body should be greater than {low}"))
        elif value < low:
            errors.append(invalid(path, value, f"{path} in body should be greater than or equal to {low}"))
    if high is not None:
        if schema.get("exclusiveMaximum") and value >= high:
            errors.append(invalid(path, value, f"{path} in body should be less than {high}"))
        elif value > high:
            errors.append(invalid(path, value, f"{path} in body should be less than or equal to {high}"))
    step = schema.get("multipleOf")
    if step and value % step:
        errors.append(invalid(path, value, f"{path} in body should be a multiple of {step}"))


def _string(schema: Mapping[str, Any], value: str, path: str, errors: list[FieldError]) -> None:
    if schema.get("maxLength") is not None and len(value) > schema["maxLength"]:
        errors.append(FieldError(path, "Too long", f"may not be more than {schema['maxLength']} bytes", value))
    if schema.get("minLength") is not None and len(value) < schema["minLength"]:
        errors.append(invalid(path, value, f"{path} in body should be at least {schema['minLength']} chars long"))
    pattern = schema.get("pattern")
    if pattern and _pattern(pattern).search(value) is None:
        errors.append(invalid(path, value, f"{path} in body should match '{pattern}'"))


@lru_cache(maxsize=256)
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _array(schema: Mapping[str, Any], value: list[Any], path: str, errors: list[FieldError]) -> None:
    if schema.get("maxItems") is not None and len(value) > schema["maxItems"]:
        errors.append(FieldError(path, "Too many", f"{len(value)}: must have at most {schema['maxItems']} items", len(value)))
    if schema.get("minItems") is not None and len(value) < schema["minItems"]:
        errors.append(invalid(path, len(value), f"{path} in body should have at least {schema['minItems']} items"))
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            _validate(items, item, f"{path}[{i}]", errors)


def _object(schema: Mapping[str, Any], value: dict[str, Any], path: str, errors: list[FieldError]) -> None:
    prefix = f"{path}." if path else ""
    for name in schema.get("required") or ():
        if name not in value:
            errors.append(required(f"{prefix}{name}"))
    if schema.get("maxProperties") is not None and len(value) > schema["maxProperties"]:
        errors.append(FieldError(path, "Too many", f"{len(value)}: must have at most {schema['maxProperties']} items", len(value)))
    if schema.get("minProperties") is not None and len(value) < schema["minProperties"]:
        errors.append(invalid(path, len(value), f"{path} in body should have at least {schema['minProperties']} properties"))
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        child = props.get(key) if key in props else (extra if isinstance(extra, Mapping) else None)
        if child is not None:
            _validate(child, item, f"{prefix}{key}", errors)
