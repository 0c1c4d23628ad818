"""Kubernetes 1.35's own OpenAPI definitions, as the single structural schema of every kind.

The definitions are the ones kube-apiserver 1.35 publishes (field names, types, required fields,
descriptions and the ``x-kubernetes-*`` list, map and patch extensions), shipped by the
``kubernetes-validate`` package in JSON Schema form. kubesched reads them rather than writing a
schema per kind by hand: strict decoding, type checks, ``kubectl explain`` and the served
``/openapi/v2`` and ``/openapi/v3`` documents all come from this one source.

Nullable types are spelt JSON-Schema style (``"type": ["string", "null"]``) and references as
``#/$defs/<name>``; :func:`schema_types` and :func:`ref_name` read both forms.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import orjson

KUBERNETES_VERSION = "v1.35.0"

_REF_PREFIX = "#/$defs/"


@cache
def definitions() -> Mapping[str, dict[str, Any]]:
    """Every 1.35 definition by its OpenAPI name (``io.k8s.api.core.v1.Pod``, ...)."""
    raw = (_package_dir("kubernetes_validate") / "kubernetes-json-schema" / f"{KUBERNETES_VERSION}-local"
           / "_definitions.json").read_bytes()
    defs: dict[str, dict[str, Any]] = orjson.loads(raw)["$defs"]
    return defs


def _package_dir(package: str) -> Path:
    """An installed package's directory, found without running the package (kubernetes-validate's
    ``__init__`` imports jsonschema, a tenth of a second of every start, for data files alone)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"no package named {package!r}", name=package)
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def _names_by_gvk() -> Mapping[tuple[str, str, str], str]:
    index: dict[tuple[str, str, str], str] = {}
    for name, schema in definitions().items():
        for gvk in schema.get("x-kubernetes-group-version-kind", ()):
            index.setdefault((gvk["group"], gvk["version"], gvk["kind"]), name)
    return index


def definition_name(group: str, version: str, kind: str) -> str | None:
    """The definition's name for a group/version/kind, or None when 1.35 has no such kind."""
    return _names_by_gvk().get((group, version, kind))


def definition(name: str) -> dict[str, Any]:
    """One definition by name; a KeyError names it when 1.35 has none."""
    return definitions()[name]


def ref_name(schema: Mapping[str, Any]) -> str | None:
    """The definition a ``$ref`` schema points to, or None for an inline schema."""
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith(_REF_PREFIX):
        return None
    return ref[len(_REF_PREFIX):]


def schema_types(schema: Mapping[str, Any]) -> tuple[str, ...]:
    """The non-null JSON types a schema allows (``()`` when it does not constrain the type)."""
    declared = schema.get("type")
    if declared is None:
        return ()
    names = (declared,) if isinstance(declared, str) else tuple(declared)
    return tuple(name for name in names if name != "null")
