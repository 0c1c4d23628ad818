"""Plugin args: decoding, defaults and upstream's Validate*Args messages for each in-tree kind."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kubesched.scheduler.config import API_VERSION, KIND, load_dict, to_v1
from kubesched.scheduler.config.args import (
    ARGS_BY_KIND,
    ARGS_BY_PLUGIN,
    DefaultPreemptionArgs,
    DynamicResourcesArgs,
    InterPodAffinityArgs,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    PodTopologySpreadArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
    VolumeBindingArgs,
    args_to_v1,
)
from kubesched.scheduler.features import FeatureGates

QNAME_ERR = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def test_every_in_tree_plugin_with_args_is_registered() -> None:
    assert sorted(ARGS_BY_PLUGIN) == ["DefaultPreemption", "DynamicResources", "InterPodAffinity", "NodeAffinity",
                                      "NodeResourcesBalancedAllocation", "NodeResourcesFit", "PodTopologySpread", "VolumeBinding"]
    assert all(ARGS_BY_KIND[cls.KIND] is cls and name + "Args" == cls.KIND for name, cls in ARGS_BY_PLUGIN.items())


VALIDATION_CASES = [
    # DefaultPreemptionArgs
    ("preemption defaults are valid", DefaultPreemptionArgs(), []),
    ("preemption percentage above 100", DefaultPreemptionArgs(110, 100),
     ["args.minCandidateNodesPercentage: Invalid value: 110: not in valid range [0, 100]"]),
    ("preemption percentage negative", DefaultPreemptionArgs(-1, 100),
     ["args.minCandidateNodesPercentage: Invalid value: -1: not in valid range [0, 100]"]),
    ("preemption absolute negative", DefaultPreemptionArgs(10, -1),
     ["args.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"]),
    ("preemption both zero", DefaultPreemptionArgs(0, 0),
     ["args.minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute",
      "args.minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage"]),
    # InterPodAffinityArgs
    ("affinity weight 0 is valid", InterPodAffinityArgs(0), []),
    ("affinity weight above 100", InterPodAffinityArgs(101),
     ["args.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"]),
    ("affinity weight negative", InterPodAffinityArgs(-1),
     ["args.hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]"]),
    # NodeResourcesFitArgs
    ("fit defaults are valid", NodeResourcesFitArgs.defaulted(), []),
    ("fit bad ignored resource", replace(NodeResourcesFitArgs.defaulted(), ignored_resources=["-invalid-"]),
     [f'args.ignoredResources[0]: Invalid value: "-invalid-": {QNAME_ERR}']),
    ("fit group with slash", replace(NodeResourcesFitArgs.defaulted(), ignored_resource_groups=["example.com/aa"]),
     ["args.ignoredResourceGroups[0]: Invalid value: \"example.com/aa\": resource group name can't contain '/'"]),
    ("fit bad strategy type", NodeResourcesFitArgs(scoring_strategy=ScoringStrategy("Invalid", [ResourceSpec("cpu", 1)])),
     ['args.scoringStrategy.type: Unsupported value: "Invalid": supported values: "LeastAllocated", "MostAllocated", '
      '"RequestedToCapacityRatio"']),
    ("fit empty strategy type", NodeResourcesFitArgs(scoring_strategy=ScoringStrategy("", [ResourceSpec("cpu", 1)])),
     ['args.scoringStrategy.type: Unsupported value: "": supported values: "LeastAllocated", "MostAllocated", '
      '"RequestedToCapacityRatio"']),
    ("fit weights out of range", NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(
        "MostAllocated", [ResourceSpec("cpu", 0), ResourceSpec("memory", 101)])),
     ["args.scoringStrategy.resources[0].weight: Invalid value: 0: resource weight of cpu not in valid range (0, 100]",
      "args.scoringStrategy.resources[1].weight: Invalid value: 101: resource weight of memory not in valid range (0, 100]"]),
    ("fit without a scoring strategy", NodeResourcesFitArgs(),
     ["args.scoringStrategy: Required value: ScoringStrategy field is required"]),
    ("fit shape required", NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(
        "RequestedToCapacityRatio", [ResourceSpec("cpu", 1)], RequestedToCapacityRatioParam([]))),
     ["args.scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one point must be specified"]),
    ("fit ratio strategy without its parameters", NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(
        "RequestedToCapacityRatio", [ResourceSpec("cpu", 1)])),
     ["args.scoringStrategy.requestedToCapacityRatio: Required value: must be specified when type is RequestedToCapacityRatio"]),
    ("fit ratio parameters with another strategy", NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(
        "LeastAllocated", [ResourceSpec("cpu", 1)], RequestedToCapacityRatioParam([UtilizationShapePoint(0, 0)]))),
     ["args.scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio"]),
    ("fit shape unsorted and out of range", NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(
        "RequestedToCapacityRatio", [ResourceSpec("cpu", 1)], RequestedToCapacityRatioParam([
            UtilizationShapePoint(10, 1), UtilizationShapePoint(10, 11), UtilizationShapePoint(101, -1)]))),
     ["args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value: 10: values must be sorted in increasing order",
      "args.scoringStrategy.requestedToCapacityRatio.shape[1].score: Invalid value: 11: not in valid range [0, 10]",
      "args.scoringStrategy.requestedToCapacityRatio.shape[2].utilization: Invalid value: 101: not in valid range [0, 100]",
      "args.scoringStrategy.requestedToCapacityRatio.shape[2].score: Invalid value: -1: not in valid range [0, 10]"]),
    # NodeResourcesBalancedAllocationArgs
    ("balanced defaults are valid", NodeResourcesBalancedAllocationArgs.defaulted(), []),
    ("balanced duplicate and weight", NodeResourcesBalancedAllocationArgs([ResourceSpec("cpu", 1), ResourceSpec("cpu", 2)]),
     ['args.resources[1].name: Duplicate value: "cpu"', "args.resources[1].weight: Invalid value: 2: must be 1"]),
    # PodTopologySpreadArgs
    ("spread list with constraints is valid", PodTopologySpreadArgs(
        [{"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"}], "List"), []),
    ("spread bad constraints", PodTopologySpreadArgs([
        {"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "", "labelSelector": {}},
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Unknown"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "Unknown"},
    ], "List"),
     ["args.defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)",
      "args.defaultConstraints[0].topologyKey: Required value: can not be empty",
      "args.defaultConstraints[0].whenUnsatisfiable: Required value: can not be empty",
      "args.defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod",
      'args.defaultConstraints[1].whenUnsatisfiable: Unsupported value: "Unknown": supported values: "DoNotSchedule", "ScheduleAnyway"',
      'args.defaultConstraints[2].whenUnsatisfiable: Unsupported value: "Unknown": supported values: "DoNotSchedule", "ScheduleAnyway"',
      'args.defaultConstraints[2]: Duplicate value: "{zone, Unknown}"']),
    ("spread system with constraints", PodTopologySpreadArgs(
        [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}], "System"),
     ['args.defaultingType: Invalid value: "System": when .defaultConstraints are not empty']),
    ("spread unknown defaulting type", PodTopologySpreadArgs([], "Foo"),
     ['args.defaultingType: Unsupported value: "Foo": supported values: "System", "List"']),
    ("spread bad topology key", PodTopologySpreadArgs([{"maxSkew": 1, "topologyKey": "-bad", "whenUnsatisfiable": "DoNotSchedule"}], "List"),
     [f'args.defaultConstraints[0].topologyKey: Invalid value: "-bad": {QNAME_ERR}']),
    # VolumeBindingArgs
    ("volume binding zero timeout is valid", VolumeBindingArgs(0), []),
    ("volume binding negative timeout", VolumeBindingArgs(-10),
     ["args.bindTimeoutSeconds: Invalid value: -10: invalid BindTimeoutSeconds, should not be a negative value"]),
    ("volume binding shape without the gate", VolumeBindingArgs(600, [UtilizationShapePoint(0, 10)]),
     ["args.shape: Invalid value: []config.UtilizationShapePoint{config.UtilizationShapePoint{Utilization:0, Score:10}}: "
      "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring"]),
    # NodeAffinityArgs
    ("node affinity empty is valid", NodeAffinityArgs({}), []),
    ("node affinity bad terms", NodeAffinityArgs({
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "-bad", "operator": "In", "values": ["a"]}, {"key": "k", "operator": "Foo"}]},
            {},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]},
                             {"key": "metadata.name", "operator": "Exists"}]},
        ]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "k", "operator": "In"}]}},
            {"weight": 0, "preference": {"matchExpressions": [{"key": "k", "operator": "In"}]}},
            {"weight": 1, "preference": {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["x"]}]}},
        ],
    }),
     [f'args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key: '
      f'Invalid value: "-bad": {QNAME_ERR}',
      'args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].operator: '
      'Unsupported value: "Foo": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"',
      'args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[2].matchFields[0].values: '
      'Invalid value: []string{"a", "b"}: must have one element',
      'args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[2].matchFields[1].operator: '
      'Unsupported value: "Exists": supported values: "In", "NotIn"',
      "args.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].matchExpressions[0].values: "
      "Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty",
      'args.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[2].matchExpressions[0].values[0]: '
      "Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"]),
    # DynamicResourcesArgs
    ("dra defaults are valid", DynamicResourcesArgs.defaulted(), []),
    ("dra negative filter timeout", DynamicResourcesArgs(-1.0),
     ["args.filterTimeout: Invalid value: -1s: must be zero or positive"]),
    ("dra binding timeout without the gates", DynamicResourcesArgs(10.0, 60.0),
     ["args.bindingTimeout: Forbidden: DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled"]),
]


@pytest.mark.parametrize(("name", "args", "expected"), VALIDATION_CASES, ids=[c[0] for c in VALIDATION_CASES])
def test_args_validation(name: str, args: object, expected: list[str]) -> None:
    assert [str(e) for e in args.validate("args")] == expected  # type: ignore[attr-defined]


@pytest.mark.parametrize(("gates", "args", "expected"), [
    ({"StorageCapacityScoring": True}, VolumeBindingArgs(600, [UtilizationShapePoint(0, 10), UtilizationShapePoint(100, 0)]), []),
    ({"StorageCapacityScoring": True}, VolumeBindingArgs(600, [UtilizationShapePoint(0, 11)]),
     ["args.shape[0].score: Invalid value: 11: not in valid range [0, 10]"]),
    ({"DRASchedulerFilterTimeout": False}, DynamicResourcesArgs(5.0),
     ["args.filterTimeout: Forbidden: DRASchedulingFilterTimeout feature gate is disabled"]),
    ({"DRADeviceBindingConditions": True}, DynamicResourcesArgs(10.0, 0.5),
     ["args.bindingTimeout: Invalid value: 500ms: must be at least 1 second"]),
    ({"DRADeviceBindingConditions": True}, DynamicResourcesArgs(10.0, 1.0), []),
])
def test_args_validation_follows_feature_gates(gates: dict, args: object, expected: list[str]) -> None:
    assert [str(e) for e in args.validate("args", FeatureGates(gates))] == expected  # type: ignore[attr-defined]


HEAD = {"apiVersion": API_VERSION, "kind": KIND}


@pytest.mark.parametrize(("name", "args", "expected"), [
    ("DefaultPreemption", {"minCandidateNodesPercentage": 50, "minCandidateNodesAbsolute": 500}, DefaultPreemptionArgs(50, 500)),
    ("DefaultPreemption", {"apiVersion": API_VERSION, "kind": "DefaultPreemptionArgs", "minCandidateNodesPercentage": 50},
     DefaultPreemptionArgs(50, 100)),
    ("InterPodAffinity", {"hardPodAffinityWeight": 5, "ignorePreferredTermsOfExistingPods": True}, InterPodAffinityArgs(5, True)),
    ("NodeResourcesFit", {"ignoredResources": ["foo"]}, NodeResourcesFitArgs(["foo"], [], ScoringStrategy(
        "LeastAllocated", [ResourceSpec("cpu", 1), ResourceSpec("memory", 1)]))),
    ("NodeResourcesFit", {"scoringStrategy": {"type": "RequestedToCapacityRatio", "resources": [{"name": "cpu"}],
                                              "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10}]}}},
     NodeResourcesFitArgs(scoring_strategy=ScoringStrategy("RequestedToCapacityRatio", [ResourceSpec("cpu", 1)],
                                                           RequestedToCapacityRatioParam([UtilizationShapePoint(0, 10)])))),
    ("PodTopologySpread", {"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}],
                           "defaultingType": "List"},
     PodTopologySpreadArgs([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}], "List")),
    ("VolumeBinding", {"bindTimeoutSeconds": 300}, VolumeBindingArgs(300)),
    ("NodeAffinity", {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}]}}},
     NodeAffinityArgs({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
         {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}]}})),
    ("DynamicResources", {"filterTimeout": "1m30s"}, DynamicResourcesArgs(90.0)),
    ("DynamicResources", {"filterTimeout": "0s"}, DynamicResourcesArgs(0.0)),
])
def test_args_decode_and_default_through_the_file(name: str, args: dict, expected: object) -> None:
    cfg = load_dict({**HEAD, "profiles": [{"pluginConfig": [{"name": name, "args": args}]}]})
    assert cfg.profiles[0].plugin_config[name] == expected


@pytest.mark.parametrize(("args", "expected"), [
    (NodeResourcesFitArgs(["a"], [], ScoringStrategy("MostAllocated", [ResourceSpec("gpu", 3)])),
     {"apiVersion": API_VERSION, "kind": "NodeResourcesFitArgs", "ignoredResources": ["a"],
      "scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "gpu", "weight": 3}]}}),
    (VolumeBindingArgs(0, []), {"apiVersion": API_VERSION, "kind": "VolumeBindingArgs", "bindTimeoutSeconds": 0}),
    (PodTopologySpreadArgs([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}], "List"),
     {"apiVersion": API_VERSION, "kind": "PodTopologySpreadArgs", "defaultingType": "List",
      "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
    (NodeAffinityArgs({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 2, "preference": {}}]}),
     {"apiVersion": API_VERSION, "kind": "NodeAffinityArgs",
      "addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 2, "preference": {}}]}}),
    (DynamicResourcesArgs(0.25, 600.0), {"apiVersion": API_VERSION, "kind": "DynamicResourcesArgs",
                                         "filterTimeout": "250ms", "bindingTimeout": "10m0s"}),
    ({"foo": "bar"}, {"foo": "bar"}),
    (None, None),
])
def test_args_to_v1(args: object, expected: object) -> None:
    assert args_to_v1(args) == expected


def test_args_print_back_as_v1_in_the_document() -> None:
    cfg = load_dict({**HEAD, "profiles": [{"pluginConfig": [{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 0}}]}]})
    printed = next(c for c in to_v1(cfg)["profiles"][0]["pluginConfig"] if c["name"] == "InterPodAffinity")
    assert printed["args"] == {"apiVersion": API_VERSION, "hardPodAffinityWeight": 0,
                               "ignorePreferredTermsOfExistingPods": False, "kind": "InterPodAffinityArgs"}
