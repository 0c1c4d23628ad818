"""Upstream's v1 defaulting (``pkg/scheduler/apis/config/v1/defaults.go``, ``default_plugins.go``).

Defaults are applied to the *decoded v1 document* (a dict keyed by JSON names, where a missing key
is Go's nil pointer), because upstream tells "unset" from "explicitly zero": ``parallelism: 0``
is an error, an absent ``parallelism`` is 16. ``kubesched.scheduler.config`` converts the defaulted
document to the internal types afterwards.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, overload

from kubesched.scheduler.config.args import ARGS_BY_PLUGIN, PluginArgs
from kubesched.scheduler.config.types import POINTS, PluginRef, Plugins, PluginSet
from kubesched.scheduler.features import DEFAULT_GATES, FeatureGates

DEFAULT_SCHEDULER_NAME = "default-scheduler"
DEFAULT_PARALLELISM = 16
DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE = 0
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5

#: ``getDefaultPlugins``: every default plugin goes through MultiPoint, in this order.
_DEFAULT_MULTI_POINT: tuple[tuple[str, int], ...] = (
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0),
    ("NodeVolumeLimits", 0),
    ("VolumeBinding", 0),
    ("VolumeZone", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
)


def default_plugins(gates: FeatureGates | None = None) -> Plugins:
    """The 1.35 default plugin set (``getDefaultPlugins`` + ``applyFeatureGates``)."""
    gates = gates or DEFAULT_GATES
    enabled = [PluginRef(name, weight) for name, weight in _DEFAULT_MULTI_POINT]
    if gates.enabled("NodeDeclaredFeatures"):
        enabled.append(PluginRef("NodeDeclaredFeatures"))
    if gates.enabled("DynamicResourceAllocation"):
        # Before DefaultPreemption: deallocating an idle ResourceClaim beats evicting a pod.
        at = next(i for i, ref in enumerate(enabled) if ref.name == "DefaultPreemption")
        enabled.insert(at, PluginRef("DynamicResources"))
    if gates.enabled("GangScheduling"):
        enabled.append(PluginRef("GangScheduling"))
    return Plugins(multi_point=PluginSet(enabled=enabled))


def merge_plugins(default: Plugins, custom: Plugins | None) -> Plugins:
    """``mergePlugins``: each extension point of ``custom`` merged into ``default``'s."""
    if custom is None:
        return copy.deepcopy(default)
    merged = Plugins(multi_point=merge_plugin_set(default.multi_point, custom.multi_point))
    for point in POINTS:
        merged.points[point] = merge_plugin_set(default.get(point), custom.get(point))
    return merged


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """``mergePluginSet``.

    A custom plugin that is also a default replaces it in place (so its weight wins and the default
    order is kept); other custom plugins follow, duplicates included (the framework rejects them
    later). ``*`` in ``disabled`` drops every default. Disabled names from both sets are kept so
    MultiPoint expansion knows what not to add.
    """
    disabled = [PluginRef(p.name) for p in custom.disabled] + [PluginRef(p.name) for p in default.disabled]
    disabled_names = {p.name for p in disabled}
    custom_by_name = {p.name: (i, p) for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled_names:
        for plugin in default.enabled:
            if plugin.name in disabled_names:
                continue
            if plugin.name in custom_by_name:
                index, plugin = custom_by_name[plugin.name]
                replaced.add(index)
            enabled.append(PluginRef(plugin.name, plugin.weight))
    enabled += [PluginRef(p.name, p.weight) for i, p in enumerate(custom.enabled) if i not in replaced]
    return PluginSet(enabled=enabled, disabled=disabled)


def plugin_names(plugins: Plugins) -> list[str]:
    """``pluginsNames``: every enabled plugin name, at any point, sorted and unique."""
    sets = [plugins.multi_point, *(plugins.get(p) for p in POINTS)]
    return sorted({ref.name for s in sets for ref in s.enabled})


# --- v1 <-> internal plugin sets ----------------------------------------------------------------


@overload
def plugins_from_v1(doc: Mapping[str, Any]) -> Plugins: ...


@overload
def plugins_from_v1(doc: None) -> None: ...


@overload
def plugins_from_v1(doc: Mapping[str, Any] | None) -> Plugins | None: ...


def plugins_from_v1(doc: Mapping[str, Any] | None) -> Plugins | None:
    """Decoded ``v1.Plugins`` -> internal ``Plugins``; an unset weight is 0, as conversion makes it."""
    if doc is None:
        return None
    plugins = Plugins(multi_point=_set_from_v1(doc.get("multiPoint")))
    for point in POINTS:
        plugins.points[point] = _set_from_v1(doc.get(point))
    return plugins


def _set_from_v1(doc: Mapping[str, Any] | None) -> PluginSet:
    doc = doc or {}
    return PluginSet(
        enabled=[PluginRef(p.get("name", ""), p.get("weight") or 0) for p in doc.get("enabled") or []],
        disabled=[PluginRef(p.get("name", ""), p.get("weight") or 0) for p in doc.get("disabled") or []],
    )


def plugins_to_v1(plugins: Plugins) -> dict:
    """Internal ``Plugins`` -> v1 JSON, the way ``--write-config-to`` prints them.

    Every extension point is present (empty ones as ``{}``) and every plugin carries ``weight``,
    because the internal weight is converted to a non-nil pointer.
    """
    out = {point: _set_to_v1(plugins.get(point)) for point in POINTS}
    out["multiPoint"] = _set_to_v1(plugins.multi_point)
    return out


def _set_to_v1(pset: PluginSet) -> dict:
    out: dict[str, Any] = {}
    if pset.enabled:
        out["enabled"] = [{"name": p.name, "weight": p.weight} for p in pset.enabled]
    if pset.disabled:
        out["disabled"] = [{"name": p.name, "weight": p.weight} for p in pset.disabled]
    return out


# --- KubeSchedulerConfiguration ------------------------------------------------------------------


def set_defaults(doc: dict[str, Any], gates: FeatureGates | None = None) -> dict[str, Any]:
    """``SetDefaults_KubeSchedulerConfiguration`` on a decoded v1 document, in place; returns it.

    Plugin args in ``pluginConfig`` must already be decoded (in-tree kinds as ``PluginArgs``).
    """
    gates = gates or DEFAULT_GATES
    doc.setdefault("parallelism", DEFAULT_PARALLELISM)
    profiles = doc.setdefault("profiles", [])
    if not profiles:
        profiles.append({})
    if len(profiles) == 1 and profiles[0].get("schedulerName") is None:
        profiles[0]["schedulerName"] = DEFAULT_SCHEDULER_NAME
    for profile in profiles:
        set_profile_defaults(profile, gates)
    doc.setdefault("percentageOfNodesToScore", DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE)
    _leader_election_defaults(doc.setdefault("leaderElection", {}))
    _client_connection_defaults(doc.setdefault("clientConnection", {}))
    doc.setdefault("podInitialBackoffSeconds", 1)
    doc.setdefault("podMaxBackoffSeconds", 10)
    doc.setdefault("enableProfiling", True)
    if doc["enableProfiling"]:
        doc.setdefault("enableContentionProfiling", True)
    return doc


def set_profile_defaults(profile: dict[str, Any], gates: FeatureGates | None = None) -> None:
    """``setDefaults_KubeSchedulerProfile``: merge default plugins, default every plugin's args.

    In-tree plugins that are enabled anywhere and have no ``pluginConfig`` entry get one with their
    default args, appended in name order after the user's entries.
    """
    gates = gates or DEFAULT_GATES
    plugins = merge_plugins(default_plugins(gates), plugins_from_v1(profile.get("plugins")))
    profile["plugins"] = plugins_to_v1(plugins)
    configs: list[dict[str, Any]] = profile.setdefault("pluginConfig", [])
    existing = set()
    for entry in configs:
        existing.add(entry.get("name", ""))
        if isinstance(entry.get("args"), PluginArgs):
            entry["args"].set_defaults(gates)
    for name in plugin_names(plugins):
        cls = ARGS_BY_PLUGIN.get(name)
        if cls is not None and name not in existing:
            configs.append({"name": name, "args": cls.defaulted(gates)})


def _leader_election_defaults(le: dict[str, Any]) -> None:
    """The scheduler's lock (``leases`` in kube-system/kube-scheduler), then component-base's timings."""
    for key, value in (("resourceLock", "leases"), ("resourceNamespace", "kube-system"), ("resourceName", "kube-scheduler")):
        if not le.get(key):
            le[key] = value
    le.setdefault("leaderElect", True)
    for key, seconds in (("leaseDuration", 15.0), ("renewDeadline", 10.0), ("retryPeriod", 2.0)):
        if not le.get(key):
            le[key] = seconds


def _client_connection_defaults(cc: dict[str, Any]) -> None:
    """The scheduler's own QPS/burst (50/100) rather than client-go's generic ones."""
    if not cc.get("contentType"):
        cc["contentType"] = "application/vnd.kubernetes.protobuf"
    if not cc.get("qps"):
        cc["qps"] = 50.0
    if not cc.get("burst"):
        cc["burst"] = 100


def adaptive_percentage(num_nodes: int, configured: int | None = None) -> int:
    """How many feasible nodes to find before scoring (upstream ``numFeasibleNodesToFind``).

    ``configured`` is the profile's percentageOfNodesToScore, else the global one. Small clusters
    (< 100 nodes) are searched fully; 0 means adaptive: ``50 - nodes/125`` percent, at least 5%.
    The result is never below 100 nodes. Returns a number of nodes, not a percentage.
    """
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_nodes
    percentage = configured or 0
    if percentage == 0:
        percentage = max(50 - num_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    found = num_nodes * percentage // 100
    return max(found, MIN_FEASIBLE_NODES_TO_FIND)

