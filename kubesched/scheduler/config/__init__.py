"""KubeSchedulerConfiguration (``kubescheduler.config.k8s.io/v1``), read the way kube-scheduler 1.35 reads it.

``load_file``/``load_dict`` go through upstream's steps in upstream's order, so a broken file gets
the error kube-scheduler would print:

1. YAML -> JSON (syntax errors, duplicate keys);
2. ``apiVersion``/``kind`` (only ``kubescheduler.config.k8s.io/v1`` is registered);
3. strict decoding into the v1 types (a wrong type stops; unknown fields are collected);
4. decoding of each ``pluginConfig[].args`` into its plugin's type (in-tree kinds, or an
   out-of-tree plugin's ``Args`` from the given registry; other args stay plain dicts);
5. v1 defaulting (``kubesched.scheduler.config.defaults``), conversion to the internal types;
6. validation (``kubesched.scheduler.config.validation``), every error at once.

``to_v1`` turns a configuration back into the v1 document ``kube-scheduler --write-config-to``
prints: keys sorted, pluginConfig sorted by name, every extension point present.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kubesched.api.errors import ConfigError
from kubesched.api.golang import format_duration, go_quote, seconds_to_ns
from kubesched.scheduler.config._decode import (
    Bool,
    DecodeError,
    Duration,
    Field,
    Float,
    Int,
    List,
    Raw,
    Str,
    Struct,
    YAMLError,
    decode_root,
    load_yaml,
    to_json,
)
from kubesched.scheduler.config.args import API_VERSION, ARGS_BY_KIND, ARGS_BY_PLUGIN, GROUP, Model, PluginArgs, args_to_v1
from kubesched.scheduler.config.defaults import plugins_from_v1, plugins_to_v1, set_defaults
from kubesched.scheduler.config.types import ClientConnection, LeaderElection, Profile, SchedulerConfiguration
from kubesched.scheduler.config.validation import validate
from kubesched.scheduler.features import FeatureGates

__all__ = [
    "API_VERSION",
    "KIND",
    "ConfigDecodeError",
    "default_configuration",
    "load_dict",
    "load_file",
    "load_text",
    "to_v1",
    "to_yaml",
]

KIND = "KubeSchedulerConfiguration"
#: Where upstream's scheme is created; it is part of "not registered" messages.
SCHEME_NAME = "pkg/scheduler/apis/config/scheme/scheme.go:30"
_TYPE_META = 'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'


class ConfigDecodeError(ConfigError):
    """The file could not be decoded at all; ``errors`` holds upstream's one message."""


# --- the v1 wire types -------------------------------------------------------------------------

_PLUGIN = Struct("v1.Plugin", [Field("name", Str(), emit="always"), Field("weight", Int(32), emit="omitnil")])
_PLUGIN_SET = Struct("v1.PluginSet", [Field("enabled", List(_PLUGIN)), Field("disabled", List(_PLUGIN))])
_PLUGINS = Struct("v1.Plugins", [Field(point, _PLUGIN_SET) for point in (
    "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
    "reserve", "permit", "preBind", "bind", "postBind", "multiPoint",
)])
_PLUGIN_CONFIG = Struct("v1.PluginConfig", [Field("name", Str(), emit="always"), Field("args", Raw())])
_PROFILE = Struct("v1.KubeSchedulerProfile", [
    Field("schedulerName", Str()),
    Field("percentageOfNodesToScore", Int(32)),
    Field("plugins", _PLUGINS),
    Field("pluginConfig", List(_PLUGIN_CONFIG)),
])
_TLS = Struct("v1.ExtenderTLSConfig", [
    Field("insecure", Bool()),
    Field("serverName", Str()),
    Field("certFile", Str()),
    Field("keyFile", Str()),
    Field("caFile", Str()),
    Field("certData", Str("[]uint8")),
    Field("keyData", Str("[]uint8")),
    Field("caData", Str("[]uint8")),
])
EXTENDER = Struct("v1.Extender", [
    Field("urlPrefix", Str(), emit="always"),
    Field("filterVerb", Str()),
    Field("preemptVerb", Str()),
    Field("prioritizeVerb", Str()),
    Field("weight", Int(64)),
    Field("bindVerb", Str()),
    Field("enableHTTPS", Bool()),
    Field("tlsConfig", _TLS, emit="omitnil"),
    Field("httpTimeout", Duration(), emit="always"),
    Field("nodeCacheCapable", Bool()),
    Field("managedResources", List(Struct("v1.ExtenderManagedResource", [
        Field("name", Str(), emit="always"),
        Field("ignoredByScheduler", Bool()),
    ]))),
    Field("ignorable", Bool()),
])
_LEADER_ELECTION = Struct("v1alpha1.LeaderElectionConfiguration", [
    Field("leaderElect", Bool()),
    Field("leaseDuration", Duration()),
    Field("renewDeadline", Duration()),
    Field("retryPeriod", Duration()),
    Field("resourceLock", Str()),
    Field("resourceName", Str()),
    Field("resourceNamespace", Str()),
])
_CLIENT_CONNECTION = Struct("v1alpha1.ClientConnectionConfiguration", [
    Field("kubeconfig", Str()),
    Field("acceptContentTypes", Str()),
    Field("contentType", Str()),
    Field("qps", Float(32)),
    Field("burst", Int(32)),
])
CONFIGURATION = Struct("v1.KubeSchedulerConfiguration", [
    Field("parallelism", Int(32)),
    Field("leaderElection", _LEADER_ELECTION),
    Field("clientConnection", _CLIENT_CONNECTION),
    Field("enableProfiling", Bool()),
    Field("enableContentionProfiling", Bool()),
    Field("percentageOfNodesToScore", Int(32)),
    Field("podInitialBackoffSeconds", Int(64)),
    Field("podMaxBackoffSeconds", Int(64)),
    Field("profiles", List(_PROFILE)),
    Field("extenders", List(EXTENDER)),
    Field("delayCacheUntilActive", Bool()),
], inline_type_meta=True)


# --- public API --------------------------------------------------------------------------------


def load_file(path: str | Path, registry: Mapping[str, Any] | None = None,
              feature_gates: FeatureGates | Mapping[str, bool] | None = None, *, validate: bool = True) -> SchedulerConfiguration:
    """Read, default and validate a configuration file. Raises ``ConfigError`` (or OSError).

    ``validate=False`` leaves validation to the caller, for ``kubesched run``, which (as
    kube-scheduler) applies its leader-election flags to the file before validating it."""
    text = Path(path).read_text(encoding="utf-8")
    return load_text(text, registry, feature_gates, source=str(path), validate=validate)


def load_text(text: str, registry: Mapping[str, Any] | None = None,
              feature_gates: FeatureGates | Mapping[str, bool] | None = None, source: str = "", *,
              validate: bool = True) -> SchedulerConfiguration:
    """Like ``load_file`` for YAML (or JSON) text already in memory."""
    try:
        doc, duplicates = load_yaml(text)
    except YAMLError as e:
        raise ConfigDecodeError([str(e)], source) from e
    return _load(doc, duplicates, text, registry, feature_gates, source, validate)


def load_dict(doc: Any, registry: Mapping[str, Any] | None = None,
              feature_gates: FeatureGates | Mapping[str, bool] | None = None, source: str = "") -> SchedulerConfiguration:
    """Like ``load_file`` for a parsed document (what ``yaml.safe_load`` returns)."""
    return _load(doc, [], None, registry, feature_gates, source, True)


def default_configuration(feature_gates: FeatureGates | Mapping[str, bool] | None = None) -> SchedulerConfiguration:
    """The configuration kube-scheduler runs with when given no file."""
    return load_dict({"apiVersion": API_VERSION, "kind": KIND}, feature_gates=feature_gates)


def to_v1(cfg: SchedulerConfiguration) -> dict:
    """The full v1 document of ``cfg``, as ``kube-scheduler --write-config-to`` writes it."""
    doc: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "parallelism": cfg.parallelism,
        "leaderElection": _leader_election_to_v1(cfg.leader_election),
        "clientConnection": _client_connection_to_v1(cfg.client_connection),
        "enableProfiling": cfg.enable_profiling,
        "enableContentionProfiling": cfg.enable_contention_profiling,
        "percentageOfNodesToScore": cfg.percentage_of_nodes_to_score,
        "podInitialBackoffSeconds": cfg.pod_initial_backoff_seconds,
        "podMaxBackoffSeconds": cfg.pod_max_backoff_seconds,
        "profiles": [_profile_to_v1(p) for p in cfg.profiles],
    }
    if cfg.extenders:
        doc["extenders"] = [to_json(EXTENDER, e) for e in cfg.extenders]
    if cfg.delay_cache_until_active:
        doc["delayCacheUntilActive"] = True
    return _sorted(doc)


def to_yaml(cfg_or_doc: SchedulerConfiguration | Mapping[str, Any]) -> str:
    """YAML text of a configuration (or a v1 document), quoted the way Go's YAML encoder quotes."""
    doc = to_v1(cfg_or_doc) if isinstance(cfg_or_doc, SchedulerConfiguration) else cfg_or_doc
    return _dump(doc)


# --- loading -----------------------------------------------------------------------------------


def _gates(feature_gates: FeatureGates | Mapping[str, bool] | None) -> FeatureGates:
    if isinstance(feature_gates, FeatureGates):
        return feature_gates
    return FeatureGates(feature_gates)


def _load(doc: Any, duplicates: list[str], text: str | None, registry: Mapping[str, Any] | None,
          feature_gates: FeatureGates | Mapping[str, bool] | None, source: str, check: bool) -> SchedulerConfiguration:
    gates = _gates(feature_gates)
    v1 = _decode(doc, duplicates, text, registry or {}, source)
    set_defaults(v1, gates)
    cfg = _to_internal(v1, gates)
    errs = validate(cfg, gates) if check else []
    if errs:
        raise ConfigError(errs, source)
    return cfg


def _decode(doc: Any, duplicates: list[str], text: str | None, registry: Mapping[str, Any], source: str) -> dict:
    """Steps 2-4: kind and version, strict decoding, plugin args. Raises ConfigDecodeError."""
    def fail(message: str) -> ConfigDecodeError:
        return ConfigDecodeError([message], source)

    raw_text = text if text is not None else json.dumps(doc, sort_keys=True, separators=(",", ":"))
    message = _gvk_error(doc, raw_text)
    if message:
        raise fail(message)
    try:
        v1, unknown = decode_root(CONFIGURATION, doc)
        nested = _decode_plugin_args(v1, registry)
    except DecodeError as e:
        raise fail(str(e)) from e
    strict = duplicates + unknown + nested
    if strict:
        raise fail("strict decoding error: " + ", ".join(strict))
    return v1


def _gvk_error(doc: Any, text: str) -> str:
    """What the serializer says before decoding: missing or unregistered ``kind``/``apiVersion``."""
    if doc is not None and not isinstance(doc, dict):
        kind = {list: "array", str: "string", bool: "bool"}.get(type(doc), "number")
        return f"couldn't get version/kind; json parse error: json: cannot unmarshal {kind} into Go value of type {_TYPE_META}"
    doc = doc or {}
    for key in ("apiVersion", "kind"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            return (f"couldn't get version/kind; json parse error: json: cannot unmarshal {_kind_of(doc[key])} "
                    f"into Go struct field .{key} of type string")
    kind, api_version = doc.get("kind") or "", doc.get("apiVersion") or ""
    if not kind:
        return f"Object 'Kind' is missing in '{text}'"
    if not api_version:
        return f"Object 'apiVersion' is missing in '{text}'"
    if api_version != API_VERSION or (kind != KIND and kind not in ARGS_BY_KIND):
        return f"no kind {go_quote(kind)} is registered for version {go_quote(api_version)} in scheme {go_quote(SCHEME_NAME)}"
    if kind != KIND:
        return f"couldn't decode as KubeSchedulerConfiguration, got {API_VERSION}, Kind={kind}: "
    return ""


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "object"


def _decode_plugin_args(v1: dict, registry: Mapping[str, Any]) -> list[str]:
    """``DecodeNestedObjects``: typed args in place of raw ones; returns the strict errors."""
    strict: list[str] = []
    for i, profile in enumerate(v1.get("profiles") or []):
        for j, entry in enumerate(profile.get("pluginConfig") or []):
            where = f"decoding .profiles[{i}].pluginConfig[{j}]"
            try:
                entry["args"], unknown = _decode_args(entry.get("name", ""), entry.get("args"), registry)
            except DecodeError as e:
                raise DecodeError(f"{where}: {e}") from e
            if unknown:
                strict.append(f"{where}: strict decoding error: decoding args for plugin {entry.get('name', '')}: "
                              f"strict decoding error: {', '.join(unknown)}")
    return strict


def _decode_args(name: str, raw: Any, registry: Mapping[str, Any]) -> tuple[Any, list[str]]:
    cls = ARGS_BY_PLUGIN.get(name)
    if cls is not None:
        return _decode_in_tree(name, cls, raw)
    factory = registry.get(name)
    args_type = getattr(factory, "Args", None) if factory is not None else None
    if args_type is None or raw is None:
        return raw, []
    try:
        return _decode_typed(args_type, raw)
    except DecodeError as e:
        raise DecodeError(f"decoding args for plugin {name}: {e}") from e


def _decode_in_tree(name: str, cls: type[PluginArgs], raw: Any) -> tuple[Any, list[str]]:
    """An in-tree kind: ``apiVersion``/``kind`` in the args must name this very kind."""
    def fail(message: str) -> DecodeError:
        return DecodeError(f"decoding args for plugin {name}: {message}")

    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise fail(f"couldn't get version/kind; json parse error: json: cannot unmarshal {_kind_of(raw)} into Go value of type {_TYPE_META}")
    kind = raw.get("kind") or cls.KIND
    api_version = raw.get("apiVersion") or API_VERSION
    if api_version != API_VERSION or (kind not in ARGS_BY_KIND and kind != KIND):
        raise fail(f"no kind {go_quote(kind)} is registered for version {go_quote(api_version)} in scheme {go_quote(SCHEME_NAME)}")
    if kind != cls.KIND:
        raise DecodeError(f"args for plugin {name} were not of type {cls.KIND}.{GROUP}, got {kind}.{GROUP}")
    try:
        decoded, unknown = decode_root(cls.schema(), raw)
    except DecodeError as e:
        raise fail(str(e)) from e
    return cls.from_decoded(decoded), unknown


def _decode_typed(args_type: Any, raw: Any) -> tuple[Any, list[str]]:
    """An out-of-tree plugin's ``Args``: a ``Model`` (strict), a pydantic model, a dataclass or a
    callable (whatever the plugin author declared, hence ``Any``)."""
    if isinstance(args_type, type) and issubclass(args_type, Model):
        decoded, unknown = decode_root(args_type.schema(), raw)
        return args_type.from_decoded(decoded), unknown
    if hasattr(args_type, "model_validate"):
        try:
            return args_type.model_validate(raw), []
        except ValueError as e:
            raise DecodeError(_pydantic_message(e)) from e
    if isinstance(args_type, type) and dataclasses.is_dataclass(args_type) and isinstance(raw, dict):
        return _decode_dataclass(args_type, raw)
    try:
        return args_type(raw), []
    except (TypeError, ValueError) as e:
        raise DecodeError(str(e)) from e


def _decode_dataclass(args_type: type, raw: dict) -> tuple[Any, list[str]]:
    """camelCase (or snake_case) keys to dataclass fields; unknown keys are strict errors."""
    names = {f.name for f in dataclasses.fields(args_type)}
    by_json = {_camel(n): n for n in names} | {n: n for n in names}
    kwargs, unknown = {}, []
    for key in sorted(raw):
        if key in ("apiVersion", "kind"):
            continue
        if key in by_json:
            kwargs[by_json[key]] = raw[key]
        else:
            unknown.append(f"unknown field {go_quote(key)}")
    try:
        return args_type(**kwargs), unknown
    except (TypeError, ValueError) as e:
        raise DecodeError(str(e)) from e


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _pydantic_message(e: ValueError) -> str:
    errors = getattr(e, "errors", None)
    if not callable(errors):
        return str(e)
    return "; ".join(f"{'.'.join(str(p) for p in err.get('loc', ()))}: {err.get('msg', '')}" for err in errors())


# --- v1 -> internal ----------------------------------------------------------------------------


def _to_internal(v1: dict, gates: FeatureGates) -> SchedulerConfiguration:
    """Convert a defaulted v1 document to the internal types (upstream's generated conversion)."""
    le, cc = v1["leaderElection"], v1["clientConnection"]
    return SchedulerConfiguration(
        profiles=[_profile_to_internal(p) for p in v1["profiles"]],
        parallelism=v1["parallelism"],
        percentage_of_nodes_to_score=v1["percentageOfNodesToScore"],
        pod_initial_backoff_seconds=v1["podInitialBackoffSeconds"],
        pod_max_backoff_seconds=v1["podMaxBackoffSeconds"],
        leader_election=LeaderElection(
            leader_elect=le["leaderElect"], lease_duration=le["leaseDuration"], renew_deadline=le["renewDeadline"],
            retry_period=le["retryPeriod"], resource_lock=le["resourceLock"], resource_name=le["resourceName"],
            resource_namespace=le["resourceNamespace"],
        ),
        client_connection=ClientConnection(
            kubeconfig=cc.get("kubeconfig", ""), accept_content_types=cc.get("acceptContentTypes", ""),
            content_type=cc["contentType"], qps=cc["qps"], burst=cc["burst"],
        ),
        enable_profiling=v1["enableProfiling"],
        enable_contention_profiling=v1.get("enableContentionProfiling", False),
        delay_cache_until_active=v1.get("delayCacheUntilActive", False),
        extenders=list(v1.get("extenders") or []),
    )


def _profile_to_internal(p: dict) -> Profile:
    configs: dict[str, Any] = {}
    names = []
    for entry in p.get("pluginConfig") or []:
        name = entry.get("name", "")
        names.append(name)
        configs.setdefault(name, entry.get("args"))
    return Profile(
        scheduler_name=p.get("schedulerName", ""),
        percentage_of_nodes_to_score=p.get("percentageOfNodesToScore"),
        plugins=plugins_from_v1(p["plugins"]),
        plugin_config=configs,
        plugin_config_names=names,
    )


# --- internal -> v1 ----------------------------------------------------------------------------


def _leader_election_to_v1(le: LeaderElection) -> dict:
    return {
        "leaderElect": le.leader_elect,
        "leaseDuration": format_duration(seconds_to_ns(le.lease_duration)),
        "renewDeadline": format_duration(seconds_to_ns(le.renew_deadline)),
        "retryPeriod": format_duration(seconds_to_ns(le.retry_period)),
        "resourceLock": le.resource_lock,
        "resourceName": le.resource_name,
        "resourceNamespace": le.resource_namespace,
    }


def _client_connection_to_v1(cc: ClientConnection) -> dict:
    qps = cc.qps
    return {
        "kubeconfig": cc.kubeconfig,
        "acceptContentTypes": cc.accept_content_types,
        "contentType": cc.content_type,
        "qps": int(qps) if float(qps).is_integer() else qps,
        "burst": cc.burst,
    }


def _profile_to_v1(p: Profile) -> dict:
    out: dict[str, Any] = {"schedulerName": p.scheduler_name, "plugins": plugins_to_v1(p.plugins)}
    if p.percentage_of_nodes_to_score is not None:
        out["percentageOfNodesToScore"] = p.percentage_of_nodes_to_score
    if p.plugin_config:
        out["pluginConfig"] = [{"name": name, "args": args_to_v1(p.plugin_config[name])} for name in sorted(p.plugin_config)]
    return out


def _sorted(value: Any) -> Any:
    """Keys sorted at every level, as sigs.k8s.io/yaml marshals through a JSON map."""
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


# --- YAML output -------------------------------------------------------------------------------


class _GoDumper(yaml.SafeDumper):
    """Double-quotes strings that need quotes (Go's YAML encoder does), never wraps long lines."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    tag = dumper.resolve(yaml.ScalarNode, data, (True, False))
    style = '"' if data == "" or tag != "tag:yaml.org,2002:str" else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_GoDumper.add_representer(str, _represent_str)


def _dump(doc: Any) -> str:
    return yaml.dump(doc, Dumper=_GoDumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1 << 20)
