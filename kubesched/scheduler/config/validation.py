"""Upstream ``ValidateKubeSchedulerConfiguration`` (``pkg/scheduler/apis/config/validation``).

Validation runs on the defaulted internal configuration and returns *every* error, in upstream's
order, so a user fixes a file in one go. ``validate_or_raise`` wraps them in ``ConfigError``,
whose message reads like upstream's error aggregate.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.api.errors import ConfigError, FieldError, invalid, required
from kubesched.api.golang import GoRepr, duplicate, format_duration, go_quote, seconds_to_ns
from kubesched.api.names import qualified_name_errors
from kubesched.scheduler.config.args import API_VERSION, ARGS_BY_PLUGIN, args_to_v1
from kubesched.scheduler.config.types import POINTS, PluginSet, Profile, SchedulerConfiguration
from kubesched.scheduler.features import DEFAULT_GATES, FeatureGates

#: Plugins removed from v1 (``invalidPluginsByVersion``); naming them is an error.
REMOVED_PLUGINS: tuple[str, ...] = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")


def validate(cfg: SchedulerConfiguration, gates: FeatureGates | None = None) -> list[FieldError]:
    """Every problem with ``cfg``, in the order kube-scheduler reports them."""
    gates = gates or DEFAULT_GATES
    errs = _client_connection_errors(cfg) + _leader_election_errors(cfg)
    if cfg.parallelism <= 0:
        errs.append(invalid("parallelism", cfg.parallelism, "should be an integer value greater than zero"))
    errs += _profiles_errors(cfg.profiles, gates)
    errs += _percentage_errors("percentageOfNodesToScore", cfg.percentage_of_nodes_to_score)
    if cfg.pod_initial_backoff_seconds <= 0:
        errs.append(invalid("podInitialBackoffSeconds", cfg.pod_initial_backoff_seconds, "must be greater than 0"))
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        errs.append(invalid("podMaxBackoffSeconds", cfg.pod_max_backoff_seconds,
                            "must be greater than or equal to PodInitialBackoffSeconds"))
    errs += validate_extenders(cfg.extenders)
    return errs


def validate_or_raise(cfg: SchedulerConfiguration, gates: FeatureGates | None = None, source: str = "") -> None:
    """Raise ``ConfigError`` listing every problem, if there is any."""
    errs = validate(cfg, gates)
    if errs:
        raise ConfigError(errs, source)


# --- component-base ----------------------------------------------------------------------------


def _client_connection_errors(cfg: SchedulerConfiguration) -> list[FieldError]:
    if cfg.client_connection.burst < 0:
        return [invalid("clientConnection.burst", cfg.client_connection.burst, "must be non-negative")]
    return []


def _leader_election_errors(cfg: SchedulerConfiguration) -> list[FieldError]:
    """component-base's checks (only when leader election is on), then the scheduler's lease rule."""
    le = cfg.leader_election
    if not le.leader_elect:
        return []
    p = "leaderElection"
    errs: list[FieldError] = []
    for name, seconds in (("leaseDuration", le.lease_duration), ("renewDeadline", le.renew_deadline), ("retryPeriod", le.retry_period)):
        if seconds <= 0:
            errs.append(invalid(f"{p}.{name}", _duration(seconds), "must be greater than zero"))
    if le.lease_duration <= le.renew_deadline:
        errs.append(invalid(f"{p}.leaseDuration", _duration(le.renew_deadline), "must be greater than `RenewDeadline`"))
    for name, value in (("resourceLock", le.resource_lock), ("resourceNamespace", le.resource_namespace), ("resourceName", le.resource_name)):
        if not value:
            errs.append(required(f"{p}.{name}"))
    if le.resource_lock != "leases":
        errs.append(invalid(f"{p}.resourceLock", le.resource_lock, 'resourceLock value must be "leases"'))
    return errs


def _duration(seconds: float) -> GoRepr:
    return GoRepr(format_duration(seconds_to_ns(seconds)))


def _percentage_errors(path: str, value: int | None) -> list[FieldError]:
    if value is not None and not 0 <= value <= 100:
        return [invalid(path, value, "not in valid range [0-100]")]
    return []


# --- profiles ----------------------------------------------------------------------------------


def _profiles_errors(profiles: Sequence[Profile], gates: FeatureGates) -> list[FieldError]:
    if not profiles:
        return [required("profiles")]
    errs: list[FieldError] = []
    seen: dict[str, int] = {}
    for i, profile in enumerate(profiles):
        path = f"profiles[{i}]"
        errs += validate_profile(path, profile, gates)
        if profile.scheduler_name in seen:
            # Upstream prints the other field's *field.Path with %#v (a pointer); we print the path.
            errs.append(duplicate(f"{path}.schedulerName", f"profiles[{seen[profile.scheduler_name]}].schedulerName"))
        seen[profile.scheduler_name] = i
    errs += _common_queue_sort_errors(profiles)
    return errs


def validate_profile(path: str, profile: Profile, gates: FeatureGates | None = None) -> list[FieldError]:
    """``validateKubeSchedulerProfile``: name, percentage, removed plugins, plugin config."""
    gates = gates or DEFAULT_GATES
    errs: list[FieldError] = []
    if not profile.scheduler_name:
        errs.append(required(f"{path}.schedulerName"))
    errs += _percentage_errors(f"{path}.percentageOfNodesToScore", profile.percentage_of_nodes_to_score)
    for point in POINTS:  # upstream walks a map here; MultiPoint is not checked
        for i, ref in enumerate(profile.plugins.get(point).enabled):
            if ref.name in REMOVED_PLUGINS:
                errs.append(_removed(f"{path}.plugins.{point}.enabled[{i}]", ref.name))
    errs += _plugin_config_errors(path, profile, gates)
    return errs


def _removed(path: str, name: str) -> FieldError:
    return invalid(path, name, f"was invalid in version {go_quote(API_VERSION)} (KubeSchedulerConfiguration is version {go_quote(API_VERSION)})")


def _plugin_config_errors(path: str, profile: Profile, gates: FeatureGates) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    names = profile.plugin_config_names or list(profile.plugin_config)
    for i, name in enumerate(names):
        p = f"{path}.pluginConfig[{i}]"
        first = name not in seen
        if not first:
            errs.append(duplicate(p, name))
        seen.add(name)
        if name in REMOVED_PLUGINS:
            errs.append(_removed(p, name))
        elif first:  # only the first entry of a name is kept, so only its args are checked
            errs += _args_errors(name, profile.plugin_config.get(name), f"{p}.args", gates)
    return errs


def _args_errors(name: str, args: Any, path: str, gates: FeatureGates) -> list[FieldError]:
    """In-tree args are validated by their kind; out-of-tree typed args may validate themselves."""
    cls = ARGS_BY_PLUGIN.get(name)
    if cls is not None:
        if isinstance(args, cls):
            return args.validate(path, gates)
        if args is not None:
            return [invalid(path, GoRepr(_json(args)), "has to match plugin args")]
        return []
    check = getattr(args, "validate", None)
    if not callable(check) or isinstance(args, Mapping) or _pydantic_validate(args):
        return []
    try:
        inspect.signature(check).bind(path, gates)
    except TypeError as e:
        raise TypeError(f"{type(args).__name__}.validate must take (path, gates): {e}") from None
    return list(check(path, gates))


def _pydantic_validate(args: Any) -> bool:
    """pydantic's deprecated ``BaseModel.validate(value)`` classmethod is a constructor, not the hook."""
    pydantic = sys.modules.get("pydantic")
    return (pydantic is not None and isinstance(args, pydantic.BaseModel)
            and inspect.getattr_static(type(args), "validate") is inspect.getattr_static(pydantic.BaseModel, "validate"))


def _common_queue_sort_errors(profiles: Sequence[Profile]) -> list[FieldError]:
    """``validateCommonQueueSort``: every profile must sort its queue the same way."""
    errs: list[FieldError] = []
    canon = profiles[0].plugins.get("queueSort")
    queue_sort = canon.enabled[0].name if canon.enabled else ""
    if len(canon.enabled) > 1:
        errs.append(invalid("profiles[0].plugins.queueSort.Enabled", len(canon.enabled), "only one queue sort plugin can be enabled"))
    canon_args = profiles[0].plugin_config.get(queue_sort) if queue_sort else None
    for i, profile in enumerate(profiles[1:], start=1):
        current = profile.plugins.get("queueSort")
        if not _same_set(canon, current):
            errs.append(invalid(f"profiles[{i}].plugins.queueSort", _plugin_set_repr(current), "must be the same for all profiles"))
        if queue_sort and queue_sort in profile.plugin_config and profile.plugin_config[queue_sort] != canon_args:
            errs.append(invalid(f"profiles[{i}].pluginConfig.args", GoRepr(_json(profile.plugin_config[queue_sort])),
                                "queueSort must be the same for all profiles"))
    return errs


def _same_set(a: PluginSet, b: PluginSet) -> bool:
    key = lambda s: ([(p.name, p.weight) for p in s.enabled], [(p.name, p.weight) for p in s.disabled])  # noqa: E731
    return key(a) == key(b)


def _plugin_set_repr(s: PluginSet) -> GoRepr:
    """``%#v`` of an internal ``config.PluginSet``."""
    def plugins(refs: list) -> str:
        if not refs:
            return "[]config.Plugin(nil)"
        return "[]config.Plugin{" + ", ".join(f"config.Plugin{{Name:{go_quote(p.name)}, Weight:{p.weight}}}" for p in refs) + "}"

    return GoRepr(f"config.PluginSet{{Enabled:{plugins(s.enabled)}, Disabled:{plugins(s.disabled)}}}")


def _json(args: Any) -> str:
    return json.dumps(args_to_v1(args), sort_keys=True, separators=(",", ":"), default=str)


# --- extenders ---------------------------------------------------------------------------------


def validate_extenders(extenders: Sequence[Mapping[str, Any]], path: str = "extenders") -> list[FieldError]:
    """``validateExtenders``: positive weights for prioritizers, one binder, valid managed resources."""
    errs: list[FieldError] = []
    binders = 0
    managed: set[str] = set()
    for i, ext in enumerate(extenders):
        p = f"{path}[{i}]"
        if ext.get("prioritizeVerb") and ext.get("weight", 0) <= 0:
            errs.append(invalid(f"{p}.weight", ext.get("weight", 0), "must have a positive weight applied to it"))
        if ext.get("bindVerb"):
            binders += 1
        for j, resource in enumerate(ext.get("managedResources") or []):
            name = resource.get("name", "")
            rp = f"{p}.managedResources[{j}].name"
            errs += _extended_resource_name_errors(rp, name)
            if name in managed:
                errs.append(invalid(rp, name, "duplicate extender managed resource name"))
            managed.add(name)
    if binders > 1:
        errs.append(invalid(path, f"found {binders} extenders implementing bind", "only one extender can implement bind"))
    return errs


def _extended_resource_name_errors(path: str, name: str) -> list[FieldError]:
    errs = [invalid(path, name, msg) for msg in qualified_name_errors(name)]
    if errs:
        return errs
    if not is_extended_resource_name(name):
        return [invalid(path, name, "is an invalid extended resource name")]
    return []


def is_extended_resource_name(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: prefixed, not ``kubernetes.io/``, valid as a quota name."""
    native = "/" not in name or "kubernetes.io/" in name
    if native or name.startswith("requests."):
        return False
    return not qualified_name_errors("requests." + name)

