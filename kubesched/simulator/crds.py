"""CustomResourceDefinitions in the embedded cluster's inputs: the CRDs the enabled plugins need
(a plugin class names its manifests in ``crds``), and the order and checks of custom resources
among the user's manifests.

A plugin declares the CRDs it reads, as paths relative to its module's package (or absolute)::

    class Coscheduling(PermitPlugin, ...):
        crds: ClassVar[tuple[str, ...]] = ("crds/scheduling.x-k8s.io_podgroups.yaml",)

``simulate``, ``up``, ``capacity`` and ``compare`` install the CRDs of every plugin some profile
enables before the user's manifests, unless the input defines a CRD of the same name (the user's
wins). Against a real cluster (``run``) the CRDs are the cluster's business.
"""

from __future__ import annotations

import importlib.resources
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from kubesched.api import crd as crdapi
from kubesched.api.errors import KubeschedError
from kubesched.api.kinds import CRD, kind_for
from kubesched.api.openapi_spec import definition_name
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.framework.registry import Registry


class PluginCRDError(KubeschedError):
    """A plugin names a CRD manifest that cannot be read."""


def enabled_plugins(config: SchedulerConfiguration) -> list[str]:
    """Every plugin some profile enables, at any extension point, in first-seen order."""
    names: dict[str, None] = {}
    for profile in config.profiles:
        sets = [profile.plugins.multi_point, *profile.plugins.points.values()]
        for plugin_set in sets:
            for ref in plugin_set.enabled:
                names.setdefault(ref.name, None)
    return list(names)


def plugin_crds(config: SchedulerConfiguration, registry: Registry | None) -> list[dict[str, Any]]:
    """The CRD manifests of the plugins ``config`` enables, each once (by name)."""
    found: dict[str, dict[str, Any]] = {}
    for name in enabled_plugins(config):
        factory = (registry or {}).get(name)
        for path in getattr(factory, "crds", ()) or ():
            for doc in _read(factory, path):
                found.setdefault(str((doc.get("metadata") or {}).get("name")), doc)
    return list(found.values())


def _read(factory: object, path: str) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions of one manifest file a plugin names."""
    try:
        if Path(path).is_absolute():
            text = Path(path).read_text()
        else:
            module = sys.modules[getattr(factory, "__module__", "")]
            package = module.__package__ or module.__name__
            text = importlib.resources.files(package).joinpath(path).read_text()
        docs = [d for d in yaml.safe_load_all(text) if d]
    except (OSError, KeyError, yaml.YAMLError) as e:
        raise PluginCRDError(f"plugin {getattr(factory, 'name', factory)!s}: cannot read CRD manifest {path}: {e}") from None
    crds = [d for d in docs if isinstance(d, dict) and is_crd(d)]
    if len(crds) != len(docs):
        raise PluginCRDError(f"plugin {getattr(factory, 'name', factory)!s}: {path} holds objects other than CustomResourceDefinitions")
    return crds


def is_crd(obj: Mapping[str, Any]) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) == (CRD.api_version, CRD.kind)


def with_plugin_crds(objects: list[dict[str, Any]], config: SchedulerConfiguration, registry: Registry | None) -> list[dict[str, Any]]:
    """``objects`` after the plugins' CRDs that the input does not define itself."""
    given = {(o.get("metadata") or {}).get("name") for o in objects if is_crd(o)}
    return [c for c in plugin_crds(config, registry) if (c.get("metadata") or {}).get("name") not in given] + objects


#: Who the scheduler of ``kubesched up`` is to the API server.
SCHEDULER_USER = "system:kube-scheduler"
PLUGIN_ROLE = "kubesched:plugin-custom-resources"


def plugin_rbac(crds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ClusterRole letting the scheduler read and write the custom resources of ``crds`` (their
    status included) and its binding to ``system:kube-scheduler``: what scheduler-plugins'
    install manifests grant its scheduler, for the CRDs ``up`` installs for the enabled plugins."""
    if not crds:
        return []
    rules = []
    for crd in crds:
        spec = crd.get("spec") or {}
        plural = (spec.get("names") or {}).get("plural", "")
        rules.append({"apiGroups": [spec.get("group", "")], "resources": [plural],
                      "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]})
        rules.append({"apiGroups": [spec.get("group", "")], "resources": [f"{plural}/status"], "verbs": ["get", "update", "patch"]})
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": PLUGIN_ROLE}, "rules": rules}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": PLUGIN_ROLE},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": PLUGIN_ROLE},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": SCHEDULER_USER}]}
    return [role, binding]


def custom_kinds_of(objects: Iterable[Mapping[str, Any]]) -> set[tuple[str, str]]:
    """``(apiVersion, kind)`` of every version the CRDs among ``objects`` serve."""
    return {(k.api_version, k.kind) for o in objects if is_crd(o) for k in crdapi.served_kinds(o)}


def unserved_reason(obj: Mapping[str, Any]) -> str:
    """Why an object of the input is not created: its kind is neither built in nor defined by a
    CRD of the input (for a kind in a domain-named group, most likely a missing CRD)."""
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    group, _, version = api_version.rpartition("/")
    kubernetes_kind = definition_name(group, version, kind) is not None  # Kubernetes' own (Ingress, Job...)
    if "." in group and not kubernetes_kind and kind_for(api_version, kind) is None:
        return f"kind {api_version} {kind} is not served: no CustomResourceDefinition in the input defines it"
    return f"kind {api_version} {kind} is not served by kubesched"
