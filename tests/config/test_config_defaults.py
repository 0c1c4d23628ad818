"""Defaulting: an empty configuration, per-field defaults, plugin sets and args (upstream defaults_test.go)."""

from __future__ import annotations

import copy

import pytest

from kubesched.scheduler.config import API_VERSION, KIND, default_configuration, load_dict, to_v1
from kubesched.scheduler.config.args import (
    ARGS_BY_PLUGIN,
    DefaultPreemptionArgs,
    DynamicResourcesArgs,
    InterPodAffinityArgs,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    PodTopologySpreadArgs,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
    VolumeBindingArgs,
)
from kubesched.scheduler.config.defaults import adaptive_percentage, default_plugins, plugin_names, set_defaults
from kubesched.scheduler.features import FeatureGates

HEAD = {"apiVersion": API_VERSION, "kind": KIND}


def _plugin(name: str, weight: int = 0) -> dict:
    return {"name": name, "weight": weight}


#: getDefaultPlugins() of 1.35 with its default gates (DynamicResourceAllocation is locked on).
DEFAULT_MULTI_POINT = [
    _plugin("SchedulingGates"), _plugin("PrioritySort"), _plugin("NodeUnschedulable"), _plugin("NodeName"),
    _plugin("TaintToleration", 3), _plugin("NodeAffinity", 2), _plugin("NodePorts"), _plugin("NodeResourcesFit", 1),
    _plugin("VolumeRestrictions"), _plugin("NodeVolumeLimits"), _plugin("VolumeBinding"), _plugin("VolumeZone"),
    _plugin("PodTopologySpread", 2), _plugin("InterPodAffinity", 2), _plugin("DynamicResources"),
    _plugin("DefaultPreemption"), _plugin("NodeResourcesBalancedAllocation", 1), _plugin("ImageLocality", 1),
    _plugin("DefaultBinder"),
]
EMPTY_POINTS = {p: {} for p in ("bind", "filter", "permit", "postBind", "postFilter", "preBind", "preEnqueue",
                                 "preFilter", "preScore", "queueSort", "reserve", "score")}


def _args(kind: str, **fields: object) -> dict:
    return {"apiVersion": API_VERSION, "kind": kind, **fields}


DEFAULT_PLUGIN_CONFIG = [
    {"name": "DefaultPreemption", "args": _args("DefaultPreemptionArgs", minCandidateNodesAbsolute=100, minCandidateNodesPercentage=10)},
    {"name": "DynamicResources", "args": _args("DynamicResourcesArgs", filterTimeout="10s")},
    {"name": "InterPodAffinity", "args": _args("InterPodAffinityArgs", hardPodAffinityWeight=1, ignorePreferredTermsOfExistingPods=False)},
    {"name": "NodeAffinity", "args": _args("NodeAffinityArgs")},
    {"name": "NodeResourcesBalancedAllocation", "args": _args(
        "NodeResourcesBalancedAllocationArgs", resources=[{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}])},
    {"name": "NodeResourcesFit", "args": _args("NodeResourcesFitArgs", scoringStrategy={
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}], "type": "LeastAllocated"})},
    {"name": "PodTopologySpread", "args": _args("PodTopologySpreadArgs", defaultingType="System")},
    {"name": "VolumeBinding", "args": _args("VolumeBindingArgs", bindTimeoutSeconds=600)},
]

#: What kube-scheduler 1.35 --write-config-to prints for an empty file (upstream "empty config" case).
EXPECTED_EMPTY = {
    "apiVersion": API_VERSION,
    "clientConnection": {"acceptContentTypes": "", "burst": 100, "contentType": "application/vnd.kubernetes.protobuf",
                         "kubeconfig": "", "qps": 50},
    "enableContentionProfiling": True,
    "enableProfiling": True,
    "kind": KIND,
    "leaderElection": {"leaderElect": True, "leaseDuration": "15s", "renewDeadline": "10s", "resourceLock": "leases",
                       "resourceName": "kube-scheduler", "resourceNamespace": "kube-system", "retryPeriod": "2s"},
    "parallelism": 16,
    "percentageOfNodesToScore": 0,
    "podInitialBackoffSeconds": 1,
    "podMaxBackoffSeconds": 10,
    "profiles": [{
        "pluginConfig": DEFAULT_PLUGIN_CONFIG,
        "plugins": {**EMPTY_POINTS, "multiPoint": {"enabled": DEFAULT_MULTI_POINT}},
        "schedulerName": "default-scheduler",
    }],
}


def test_empty_config_defaults_equal_upstream() -> None:
    assert to_v1(default_configuration()) == EXPECTED_EMPTY


def test_empty_config_internal_values() -> None:
    cfg = default_configuration()
    assert (cfg.parallelism, cfg.percentage_of_nodes_to_score, cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (16, 0, 1, 10)
    assert cfg.leader_election.lease_duration == 15.0 and cfg.leader_election.leader_elect
    assert (cfg.client_connection.qps, cfg.client_connection.burst) == (50.0, 100)
    profile = cfg.profiles[0]
    assert profile.scheduler_name == "default-scheduler" and profile.percentage_of_nodes_to_score is None
    assert [r.name for r in profile.plugins.multi_point.enabled] == [p["name"] for p in DEFAULT_MULTI_POINT]
    assert sorted(profile.plugin_config) == sorted(ARGS_BY_PLUGIN)
    assert profile.plugin_config["NodeResourcesFit"] == NodeResourcesFitArgs(
        scoring_strategy=ScoringStrategy("LeastAllocated", [ResourceSpec("cpu", 1), ResourceSpec("memory", 1)]))
    assert to_v1(cfg) == EXPECTED_EMPTY


@pytest.mark.parametrize(("name", "doc", "check"), [
    ("explicit values are kept", {"parallelism": 8, "percentageOfNodesToScore": 20, "podInitialBackoffSeconds": 2,
                                  "podMaxBackoffSeconds": 20, "delayCacheUntilActive": True},
     lambda d: (d["parallelism"], d["percentageOfNodesToScore"], d["podInitialBackoffSeconds"], d["podMaxBackoffSeconds"],
                d["delayCacheUntilActive"]) == (8, 20, 2, 20, True)),
    ("profiling off leaves contention profiling off", {"enableProfiling": False},
     lambda d: d["enableProfiling"] is False and d["enableContentionProfiling"] is False),
    ("contention profiling can be on alone", {"enableProfiling": True, "enableContentionProfiling": False},
     lambda d: d["enableContentionProfiling"] is False),
    ("leader election keeps explicit values", {"leaderElection": {"leaderElect": False, "leaseDuration": "30s", "resourceName": "x"}},
     lambda d: d["leaderElection"] == {"leaderElect": False, "leaseDuration": "30s", "renewDeadline": "10s", "resourceLock": "leases",
                                       "resourceName": "x", "resourceNamespace": "kube-system", "retryPeriod": "2s"}),
    ("client connection keeps explicit values", {"clientConnection": {"qps": 12.5, "burst": 7, "kubeconfig": "/k", "contentType": "application/json"}},
     lambda d: d["clientConnection"] == {"acceptContentTypes": "", "burst": 7, "contentType": "application/json", "kubeconfig": "/k", "qps": 12.5}),
    ("profile percentage is kept", {"profiles": [{"percentageOfNodesToScore": 30}]},
     lambda d: d["profiles"][0]["percentageOfNodesToScore"] == 30),
    ("a single named profile keeps its name", {"profiles": [{"schedulerName": "mine"}]},
     lambda d: [p["schedulerName"] for p in d["profiles"]] == ["mine"]),
    ("extenders are printed with httpTimeout", {"extenders": [{"urlPrefix": "http://e", "filterVerb": "filter"}]},
     lambda d: d["extenders"] == [{"filterVerb": "filter", "httpTimeout": "0s", "urlPrefix": "http://e"}]),
])
def test_top_level_defaults(name: str, doc: dict, check: object) -> None:
    assert check(to_v1(load_dict({**HEAD, **doc})))  # type: ignore[operator]


def test_multiple_profiles_get_no_default_name() -> None:
    """Only a lone profile is named default-scheduler; two unnamed profiles fail validation instead."""
    v1 = {"profiles": [{}, {}]}
    set_defaults(v1)
    assert [p.get("schedulerName") for p in v1["profiles"]] == [None, None]


def test_multiple_profiles_each_get_default_plugins_and_args() -> None:
    cfg = load_dict({**HEAD, "profiles": [
        {"schedulerName": "a"},
        {"schedulerName": "b", "plugins": {"score": {"disabled": [{"name": "*"}]}},
         "pluginConfig": [{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 5}}]},
    ]})
    a, b = cfg.profiles
    assert [r.name for r in a.plugins.multi_point.enabled] == [r.name for r in b.plugins.multi_point.enabled]
    assert [r.name for r in b.plugins.get("score").disabled] == ["*"]
    assert a.plugin_config["InterPodAffinity"].hard_pod_affinity_weight == 1
    assert b.plugin_config["InterPodAffinity"].hard_pod_affinity_weight == 5
    assert b.plugin_config_names[0] == "InterPodAffinity"  # the user's entry first, defaults appended after


def test_custom_weight_overrides_default_in_place() -> None:
    cfg = load_dict({**HEAD, "profiles": [{"plugins": {"multiPoint": {"enabled": [
        {"name": "ImageLocality", "weight": 7}, {"name": "CustomPlugin", "weight": 3}]}}}]})
    refs = cfg.profiles[0].plugins.multi_point.enabled
    names = [r.name for r in refs]
    assert names[:-1] == [p["name"] for p in DEFAULT_MULTI_POINT]
    assert names[-1] == "CustomPlugin"
    assert {r.name: r.weight for r in refs}["ImageLocality"] == 7


def test_disabled_plugin_has_no_default_args() -> None:
    cfg = load_dict({**HEAD, "profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "VolumeBinding"}]}}}]})
    assert "VolumeBinding" not in cfg.profiles[0].plugin_config


def test_all_disabled_then_reenabled_keeps_only_named_args() -> None:
    cfg = load_dict({**HEAD, "profiles": [{"plugins": {"multiPoint": {
        "enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}, {"name": "NodeResourcesFit", "weight": 2}],
        "disabled": [{"name": "*"}]}}}]})
    profile = cfg.profiles[0]
    assert [r.name for r in profile.plugins.multi_point.enabled] == ["PrioritySort", "DefaultBinder", "NodeResourcesFit"]
    assert list(profile.plugin_config) == ["NodeResourcesFit"]


def test_explicit_plugin_config_is_defaulted_and_kept_first() -> None:
    """Upstream scheme_test "all plugin args in default profile": given args defaulted, others appended."""
    cfg = load_dict({**HEAD, "profiles": [{"pluginConfig": [
        {"name": "NodeResourcesBalancedAllocation", "args": {"resources": [
            {"name": "cpu"}, {"name": "memory", "weight": 0}, {"name": "scalar0", "weight": 1}]}},
        {"name": "DefaultPreemption", "args": None},
        {"name": "OutOfTreePlugin", "args": {"foo": "bar"}},
    ]}]})
    profile = cfg.profiles[0]
    assert profile.plugin_config_names[:3] == ["NodeResourcesBalancedAllocation", "DefaultPreemption", "OutOfTreePlugin"]
    assert profile.plugin_config_names[3:] == ["DynamicResources", "InterPodAffinity", "NodeAffinity", "NodeResourcesFit",
                                               "PodTopologySpread", "VolumeBinding"]
    balanced = profile.plugin_config["NodeResourcesBalancedAllocation"]
    assert [(r.name, r.weight) for r in balanced.resources] == [("cpu", 1), ("memory", 1), ("scalar0", 1)]
    assert profile.plugin_config["DefaultPreemption"] == DefaultPreemptionArgs(10, 100)
    assert profile.plugin_config["OutOfTreePlugin"] == {"foo": "bar"}


@pytest.mark.parametrize(("args", "expected"), [
    (DefaultPreemptionArgs, DefaultPreemptionArgs(min_candidate_nodes_percentage=10, min_candidate_nodes_absolute=100)),
    (InterPodAffinityArgs, InterPodAffinityArgs(hard_pod_affinity_weight=1, ignore_preferred_terms_of_existing_pods=False)),
    (NodeResourcesFitArgs, NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(
        "LeastAllocated", [ResourceSpec("cpu", 1), ResourceSpec("memory", 1)]))),
    (NodeResourcesBalancedAllocationArgs, NodeResourcesBalancedAllocationArgs([ResourceSpec("cpu", 1), ResourceSpec("memory", 1)])),
    (PodTopologySpreadArgs, PodTopologySpreadArgs(default_constraints=[], defaulting_type="System")),
    (VolumeBindingArgs, VolumeBindingArgs(bind_timeout_seconds=600, shape=None)),
    (NodeAffinityArgs, NodeAffinityArgs(added_affinity=None)),
    (DynamicResourcesArgs, DynamicResourcesArgs(filter_timeout=10.0, binding_timeout=None)),
])
def test_args_defaults(args: type, expected: object) -> None:
    assert args.defaulted() == expected


@pytest.mark.parametrize(("gates", "args", "expected"), [
    ({"StorageCapacityScoring": True}, VolumeBindingArgs(),
     VolumeBindingArgs(600, [UtilizationShapePoint(0, 10), UtilizationShapePoint(100, 0)])),
    ({"StorageCapacityScoring": True}, VolumeBindingArgs(shape=[UtilizationShapePoint(1, 2)]),
     VolumeBindingArgs(600, [UtilizationShapePoint(1, 2)])),
    ({"DRASchedulerFilterTimeout": False}, DynamicResourcesArgs(), DynamicResourcesArgs(None, None)),
    ({"DRADeviceBindingConditions": True}, DynamicResourcesArgs(), DynamicResourcesArgs(10.0, 600.0)),
    ({"DRADeviceBindingConditions": True, "DRAResourceClaimDeviceStatus": False}, DynamicResourcesArgs(), DynamicResourcesArgs(10.0, None)),
    ({}, DynamicResourcesArgs(filter_timeout=0.0), DynamicResourcesArgs(0.0, None)),
    ({}, NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(type="MostAllocated")),
     NodeResourcesFitArgs(scoring_strategy=ScoringStrategy("MostAllocated", [ResourceSpec("cpu", 1), ResourceSpec("memory", 1)]))),
    ({}, NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(type="", resources=[ResourceSpec("gpu", 0)])),
     NodeResourcesFitArgs(scoring_strategy=ScoringStrategy("", [ResourceSpec("gpu", 1)]))),
    ({}, NodeResourcesBalancedAllocationArgs([ResourceSpec("cpu", 0), ResourceSpec("x", 2)]),
     NodeResourcesBalancedAllocationArgs([ResourceSpec("cpu", 1), ResourceSpec("x", 2)])),
    ({}, PodTopologySpreadArgs(defaulting_type="List"), PodTopologySpreadArgs(defaulting_type="List")),
])
def test_args_set_defaults(gates: dict, args: object, expected: object) -> None:
    args = copy.deepcopy(args)
    args.set_defaults(FeatureGates(gates))  # type: ignore[attr-defined]
    assert args == expected


def test_filter_timeout_gate_off_prints_null() -> None:
    doc = to_v1(default_configuration({"DRASchedulerFilterTimeout": False}))
    dra = next(c for c in doc["profiles"][0]["pluginConfig"] if c["name"] == "DynamicResources")
    assert dra["args"] == _args("DynamicResourcesArgs", filterTimeout=None)


@pytest.mark.parametrize(("gates", "appended"), [
    ({}, []),
    ({"NodeDeclaredFeatures": True}, ["NodeDeclaredFeatures"]),
    ({"GenericWorkload": True, "GangScheduling": True}, ["GangScheduling"]),
    ({"NodeDeclaredFeatures": True, "GenericWorkload": True, "GangScheduling": True}, ["NodeDeclaredFeatures", "GangScheduling"]),
])
def test_default_plugins_follow_gates(gates: dict, appended: list[str]) -> None:
    names = [r.name for r in default_plugins(FeatureGates(gates)).multi_point.enabled]
    assert names == [p["name"] for p in DEFAULT_MULTI_POINT] + appended
    assert names.index("DynamicResources") == names.index("DefaultPreemption") - 1


def test_default_plugins_only_use_multi_point() -> None:
    plugins = default_plugins()
    assert all(not plugins.get(p).enabled for p in plugins.points)
    assert plugin_names(plugins) == sorted(p["name"] for p in DEFAULT_MULTI_POINT)


@pytest.mark.parametrize(("nodes", "configured", "expected"), [
    (0, None, 0),
    (99, None, 99),             # small clusters are searched fully
    (99, 10, 99),
    (100, None, 100),           # 50% of 100 is 50, raised to the 100-node floor
    (1000, None, 420),          # 50 - 1000/125 = 42%
    (5000, None, 500),          # 50 - 40 = 10%
    (6000, None, 300),          # 50 - 48 = 2%, raised to 5%
    (10000, None, 500),
    (1000, 0, 420),             # 0 means adaptive too
    (1000, 30, 300),
    (1000, 5, 100),             # never below 100 nodes
    (1000, 100, 1000),
])
def test_adaptive_percentage(nodes: int, configured: int | None, expected: int) -> None:
    assert adaptive_percentage(nodes, configured) == expected
