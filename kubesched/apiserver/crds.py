"""The custom resources an object store serves: the kinds of its established
CustomResourceDefinitions, looked up by the paths, manifests and clients that name them.

The store rebuilds this index after every write of a CRD (its objects are few and rarely
written), so every reader sees the CRDs as last committed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubesched.api import crd as crdapi
from kubesched.api.apierrors import NotFound
from kubesched.api.kinds import CustomKind, Kind, kind_for, kind_for_resource


class CustomResources:
    """Index of the served versions of every established CRD (see the module docstring)."""

    def __init__(self) -> None:
        self._by_path: dict[tuple[str, str, str], CustomKind] = {}
        self._by_gvk: dict[tuple[str, str], CustomKind] = {}
        self._by_group: dict[str, list[CustomKind]] = {}
        self._crds: dict[tuple[str, str], Mapping[str, Any]] = {}

    def refresh(self, crds: Iterable[Mapping[str, Any]]) -> None:
        """Index ``crds`` (every CRD of the store; those not established serve nothing)."""
        self._by_path, self._by_gvk, self._by_group, self._crds = {}, {}, {}, {}
        for crd in crds:
            if not crdapi.established(crd) or (crd.get("metadata") or {}).get("deletionTimestamp"):
                continue
            for kind in crdapi.served_kinds(crd):
                self._by_path[(kind.group, kind.version, kind.resource)] = kind
                self._by_gvk[(kind.api_version, kind.kind)] = kind
                self._by_group.setdefault(kind.group, []).append(kind)
                self._crds[(kind.group, kind.resource)] = crd

    # --- lookups --------------------------------------------------------------------------------
    def for_path(self, group: str, version: str, resource: str) -> CustomKind | None:
        """The kind served at ``/apis/<group>/<version>/<resource>``."""
        return self._by_path.get((group, version, resource))

    def for_object(self, api_version: str, kind: str) -> CustomKind | None:
        return self._by_gvk.get((api_version, kind))

    def kinds(self) -> list[CustomKind]:
        """Every served version of every established CRD, by group then resource then version."""
        return sorted(self._by_path.values(), key=lambda k: (k.group, k.resource, k.version))

    def groups(self) -> dict[str, list[CustomKind]]:
        return self._by_group

    def definition(self, kind: CustomKind) -> Mapping[str, Any] | None:
        """The CRD that serves ``kind``."""
        return self._crds.get((kind.group, kind.resource))

    def require(self, kind: CustomKind) -> CustomKind:
        """The served kind ``kind`` names (a kind built from group, version and plural alone gets
        its schema); 404 as kube-apiserver answers a resource nobody serves."""
        found = self._by_path.get((kind.group, kind.version, kind.resource))
        if found is None:
            raise NotFound(f"the server could not find the requested resource ({kind.resource}.{kind.version}.{kind.group})",
                           kind=kind.resource, group=kind.group)
        return found

    def resolve(self, api_version: str, kind: str) -> Kind | None:
        """The kind of an object's ``apiVersion``/``kind``: built in, or served by a CRD."""
        return kind_for(api_version, kind) or self._by_gvk.get((api_version, kind))

    def resolve_path(self, group: str, version: str, resource: str) -> Kind | None:
        """The kind served at a resource path: built in, or served by a CRD."""
        builtin = kind_for_resource(group, resource)
        if builtin is not None:
            return builtin if builtin.version == version else None
        return self._by_path.get((group, version, resource))

    def name_conflict(self, crd: Mapping[str, Any], others: Iterable[Mapping[str, Any]]) -> str:
        """Why ``crd``'s names cannot be accepted (a built-in resource or another established CRD
        of its group already uses one), or ""."""
        spec = crd.get("spec") or {}
        group = spec.get("group") or ""
        name = (crd.get("metadata") or {}).get("name")
        claimed = {(what, value) for other in others
                   if (other.get("spec") or {}).get("group") == group and (other.get("metadata") or {}).get("name") != name
                   and crdapi.established(other)
                   for what, value in crdapi.resource_names(other)}
        for what, value in crdapi.resource_names(crd):
            if (what, value) in claimed or (what == "resource" and kind_for_resource(group, value) is not None):
                return f'"{value}" is already in use'
        return ""
