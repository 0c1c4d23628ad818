"""Discovery documents built from the served kinds table (``kubesched.api.kinds``): ``/version``,
legacy discovery (``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>[/<version>]``) and aggregated
discovery (``apidiscovery.k8s.io/v2``, which kubectl asks for first and falls back from).

Documents of the built-in kinds are built once per server: the table does not change while it
runs. Alpha kinds whose feature gate is off are left out (``hidden``: their ``group/version Kind``),
as kube-apiserver serves alpha APIs only when enabled. The kinds of CustomResourceDefinitions come
and go: ``with_custom`` and ``custom_*`` add them to a document at each request.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Sequence
from functools import cache

from kubesched.api.kinds import KINDS, CustomKind, Kind

#: Every kind shown (what the OpenAPI documents describe; servers pass the kinds their gates hide).
ALL_KINDS: frozenset[str] = frozenset()


def _kinds(hidden: frozenset[str]) -> list[Kind]:
    return [k for k in KINDS if f"{k.api_version} {k.kind}" not in hidden]

VERSION = {
    "major": "1", "minor": "35", "emulationMajor": "1", "emulationMinor": "35", "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "34", "gitVersion": "v1.35.0", "gitCommit": "kubesched", "gitTreeState": "clean",
    "buildDate": "2025-12-17T00:00:00Z", "goVersion": "go1.25.5", "compiler": "gc",
    "platform": f"linux/{'arm64' if platform.machine() in ('aarch64', 'arm64') else 'amd64'}",
}

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
AGGREGATED_MEDIA_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

#: subresource -> (group, version, kind of its body or None for the parent's kind, verbs)
SUBRESOURCES: dict[str, tuple[str, str, str | None, list[str]]] = {
    "status": ("", "", None, ["get", "patch", "update"]),
    "scale": ("autoscaling", "v1", "Scale", ["get", "patch", "update"]),
    "binding": ("", "v1", "Binding", ["create"]),
    "eviction": ("policy", "v1", "Eviction", ["create"]),
    "finalize": ("", "", None, ["update"]),
    "log": ("", "", "Pod", ["get"]),
    "exec": ("", "", "PodExecOptions", ["create", "get"]),
    "attach": ("", "", "PodAttachOptions", ["create", "get"]),
    "portforward": ("", "", "PodPortForwardOptions", ["create", "get"]),
    "proxy": ("", "", "PodProxyOptions", ["create", "delete", "get", "patch", "update"]),
}


def group_versions(hidden: frozenset[str] = ALL_KINDS) -> dict[str, list[Kind]]:
    """``group/version`` (``v1`` for core) -> its kinds, in table order."""
    out: dict[str, list[Kind]] = {}
    for kind in _kinds(hidden):
        out.setdefault(kind.api_version, []).append(kind)
    return out


def _resource(kind: Kind) -> dict:
    entry = {"name": kind.resource, "singularName": kind.singular, "namespaced": kind.namespaced, "kind": kind.kind,
             "verbs": list(kind.verbs) or VERBS}
    if kind.short_names:
        entry["shortNames"] = list(kind.short_names)
    if kind.categories:
        entry["categories"] = list(kind.categories)
    return entry


def _subresource_entries(kind: Kind) -> list[dict]:
    out = []
    for sub in kind.subresources:
        group, version, body_kind, verbs = SUBRESOURCES.get(sub, ("", "", None, ["get"]))
        entry = {"name": f"{kind.resource}/{sub}", "singularName": "", "namespaced": kind.namespaced,
                 "kind": body_kind or kind.kind, "verbs": verbs}
        if group or (version and body_kind):
            entry["group"], entry["version"] = group, version
        out.append(entry)
    return out


@cache
def resource_list(group_version: str, hidden: frozenset[str] = ALL_KINDS) -> dict | None:
    """The ``APIResourceList`` of ``/api/v1`` or ``/apis/<group>/<version>``."""
    kinds = group_versions(hidden).get(group_version)
    if kinds is None:
        return None
    resources = []
    for kind in kinds:
        resources.append(_resource(kind))
        resources += _subresource_entries(kind)
    if group_version == "v1":
        resources.append({"name": "bindings", "singularName": "binding", "namespaced": True, "kind": "Binding", "verbs": ["create"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def _group_entry(group: str, hidden: frozenset[str]) -> dict:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in sorted({k.version for k in _kinds(hidden) if k.group == group})]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


@cache
def api_versions() -> dict:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]}


def _groups(hidden: frozenset[str]) -> list[str]:
    seen: list[str] = []
    for kind in _kinds(hidden):
        if kind.group and kind.group not in seen:
            seen.append(kind.group)
    return seen


@cache
def api_group_list(hidden: frozenset[str] = ALL_KINDS) -> dict:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group_entry(g, hidden) for g in _groups(hidden)]}


def api_group(group: str, hidden: frozenset[str] = ALL_KINDS) -> dict | None:
    if group not in _groups(hidden):
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, hidden)}


# --- aggregated discovery ------------------------------------------------------------------------
def _aggregated_resource(kind: Kind) -> dict:
    entry: dict = {
        "resource": kind.resource,
        "responseKind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
        "scope": "Namespaced" if kind.namespaced else "Cluster",
        "singularResource": kind.singular,
        "verbs": list(kind.verbs) or VERBS,
    }
    if kind.short_names:
        entry["shortNames"] = list(kind.short_names)
    if kind.categories:
        entry["categories"] = list(kind.categories)
    subs = []
    for sub in kind.subresources:
        group, version, body_kind, verbs = SUBRESOURCES.get(sub, ("", "", None, ["get"]))
        response = {"group": group, "version": version, "kind": body_kind} if body_kind else \
            {"group": kind.group, "version": kind.version, "kind": kind.kind}
        subs.append({"subresource": sub, "responseKind": response, "verbs": verbs})
    if subs:
        entry["subresources"] = subs
    return entry


def _aggregated_group(group: str, hidden: frozenset[str]) -> dict:
    versions: dict[str, list[dict]] = {}
    for kind in _kinds(hidden):
        if kind.group == group:
            versions.setdefault(kind.version, []).append(_aggregated_resource(kind))
    meta = {"name": group} if group else {"creationTimestamp": None}
    return {"metadata": meta,
            "versions": [{"version": v, "resources": r, "freshness": "Current"} for v, r in sorted(versions.items())]}


@cache
def aggregated(legacy: bool, hidden: frozenset[str] = ALL_KINDS) -> dict:
    """``/api`` (legacy=True: the core group only) or ``/apis`` as an ``APIGroupDiscoveryList``."""
    items = [_aggregated_group("", hidden)] if legacy else [_aggregated_group(g, hidden) for g in _groups(hidden)]
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}


def wants_aggregated(accept: str) -> str | None:
    """The aggregated discovery version (``v2``/``v2beta1``) the client asks for first, if any."""
    for part in accept.split(","):
        params = {}
        for piece in part.split(";")[1:]:
            if "=" in piece:
                k, v = piece.split("=", 1)
                params[k.strip()] = v.strip()
        if params.get("g") == "apidiscovery.k8s.io" and params.get("as") == "APIGroupDiscoveryList":
            if params.get("v") in ("v2", "v2beta1"):
                return params["v"]
        elif part.strip().startswith("application/json") or part.strip().startswith("*/*"):
            return None
    return None


# --- custom resources ----------------------------------------------------------------------------
_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key of kube-aware version order (``v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > other``),
    which picks a custom group's preferred version as kube-apiserver does."""
    match = _VERSION.match(version)
    if match is None:
        return (3, 0, 0, version)
    stage = {None: 0, "beta": 1, "alpha": 2}[match.group(2)]
    return (stage, -int(match.group(1)), -int(match.group(3) or 0), version)


def _custom_groups(custom: Sequence[CustomKind]) -> dict[str, dict[str, list[CustomKind]]]:
    groups: dict[str, dict[str, list[CustomKind]]] = {}
    for kind in custom:
        groups.setdefault(kind.group, {}).setdefault(kind.version, []).append(kind)
    return groups


def _custom_group_entry(group: str, versions: dict[str, list[CustomKind]]) -> dict:
    ordered = [{"groupVersion": f"{group}/{v}", "version": v} for v in sorted(versions, key=version_priority)]
    return {"name": group, "versions": ordered, "preferredVersion": ordered[0]}


def with_custom_groups(doc: dict, custom: Sequence[CustomKind]) -> dict:
    """``/apis``' APIGroupList with the groups of the custom kinds after the built-in ones."""
    extra = [_custom_group_entry(g, v) for g, v in _custom_groups(custom).items()]
    return {**doc, "groups": doc["groups"] + extra} if extra else doc


def custom_group(group: str, custom: Sequence[CustomKind]) -> dict | None:
    versions = _custom_groups(custom).get(group)
    if versions is None:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_custom_group_entry(group, versions)}


def custom_resource_list(group: str, version: str, custom: Sequence[CustomKind]) -> dict | None:
    kinds = _custom_groups(custom).get(group, {}).get(version)
    if kinds is None:
        return None
    resources = []
    for kind in kinds:
        resources.append(_resource(kind))
        resources += _subresource_entries(kind)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}", "resources": resources}


def with_custom_aggregated(doc: dict, custom: Sequence[CustomKind]) -> dict:
    """``/apis``' APIGroupDiscoveryList with the custom groups after the built-in ones."""
    items = []
    for group, versions in _custom_groups(custom).items():
        ordered = sorted(versions, key=version_priority)
        items.append({"metadata": {"name": group}, "versions": [
            {"version": v, "resources": [_aggregated_resource(k) for k in versions[v]], "freshness": "Current"} for v in ordered]})
    return {**doc, "items": doc["items"] + items} if items else doc
