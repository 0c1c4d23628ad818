"""ValidateKubeSchedulerConfiguration: each rule with its exact upstream message."""

from __future__ import annotations

import pytest

from kubesched.api.errors import ConfigError
from kubesched.scheduler.config import API_VERSION, KIND, default_configuration, load_dict
from kubesched.scheduler.config.validation import REMOVED_PLUGINS, is_extended_resource_name, validate

HEAD = {"apiVersion": API_VERSION, "kind": KIND}
REMOVED_MSG = ('was invalid in version "kubescheduler.config.k8s.io/v1" '
               '(KubeSchedulerConfiguration is version "kubescheduler.config.k8s.io/v1")')


def _errors(doc: dict, gates: dict | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_dict({**HEAD, **doc}, feature_gates=gates)
    return [str(e) for e in info.value.errors]


CASES = [
    ("parallelism zero", {"parallelism": 0},
     ["parallelism: Invalid value: 0: should be an integer value greater than zero"]),
    ("parallelism negative", {"parallelism": -1},
     ["parallelism: Invalid value: -1: should be an integer value greater than zero"]),
    ("percentageOfNodesToScore above 100", {"percentageOfNodesToScore": 101},
     ["percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"]),
    ("percentageOfNodesToScore negative", {"percentageOfNodesToScore": -1},
     ["percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]"]),
    ("profile percentageOfNodesToScore", {"profiles": [{"percentageOfNodesToScore": 101}]},
     ["profiles[0].percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"]),
    ("initial backoff zero", {"podInitialBackoffSeconds": 0, "podMaxBackoffSeconds": 1},
     ["podInitialBackoffSeconds: Invalid value: 0: must be greater than 0"]),
    ("max backoff below initial", {"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 4},
     ["podMaxBackoffSeconds: Invalid value: 4: must be greater than or equal to PodInitialBackoffSeconds"]),
    ("burst negative", {"clientConnection": {"burst": -1}},
     ["clientConnection.burst: Invalid value: -1: must be non-negative"]),
    ("lease duration not above renew deadline", {"leaderElection": {"leaseDuration": "10s", "renewDeadline": "10s"}},
     ["leaderElection.leaseDuration: Invalid value: 10s: must be greater than `RenewDeadline`"]),
    ("negative durations", {"leaderElection": {"leaseDuration": "-1s", "retryPeriod": "-2s"}},
     ["leaderElection.leaseDuration: Invalid value: -1s: must be greater than zero",
      "leaderElection.retryPeriod: Invalid value: -2s: must be greater than zero",
      "leaderElection.leaseDuration: Invalid value: 10s: must be greater than `RenewDeadline`"]),
    ("resource lock must be leases", {"leaderElection": {"resourceLock": "configmapsleases"}},
     ['leaderElection.resourceLock: Invalid value: "configmapsleases": resourceLock value must be "leases"']),
    ("leader election checks are skipped when off", {"leaderElection": {"leaderElect": False, "resourceLock": "endpoints",
                                                                         "leaseDuration": "-1s"}}, []),
    ("scheduler name required with two profiles", {"profiles": [{"schedulerName": "a"}, {}]},
     ["profiles[1].schedulerName: Required value"]),
    ("repeated scheduler name", {"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]},
     ['profiles[1].schedulerName: Duplicate value: "profiles[0].schedulerName"']),
    ("different queue sort", {"profiles": [
        {"schedulerName": "a", "plugins": {"queueSort": {"enabled": [{"name": "CustomSort"}]}}},
        {"schedulerName": "b", "plugins": {"queueSort": {"enabled": [{"name": "AnotherSort"}]}}}]},
     ['profiles[1].plugins.queueSort: Invalid value: config.PluginSet{Enabled:[]config.Plugin{config.Plugin{Name:"AnotherSort", '
      'Weight:0}}, Disabled:[]config.Plugin(nil)}: must be the same for all profiles']),
    ("one empty queue sort", {"profiles": [
        {"schedulerName": "a"},
        {"schedulerName": "b", "plugins": {"queueSort": {"enabled": [{"name": "CustomSort"}]}}}]},
     ['profiles[1].plugins.queueSort: Invalid value: config.PluginSet{Enabled:[]config.Plugin{config.Plugin{Name:"CustomSort", '
      'Weight:0}}, Disabled:[]config.Plugin(nil)}: must be the same for all profiles']),
    ("two queue sorts", {"profiles": [{"plugins": {"queueSort": {"enabled": [{"name": "A"}, {"name": "B"}]}}}]},
     ["profiles[0].plugins.queueSort.Enabled: Invalid value: 2: only one queue sort plugin can be enabled"]),
    ("same queue sort everywhere is fine", {"profiles": [
        {"schedulerName": "a", "plugins": {"queueSort": {"enabled": [{"name": "CustomSort"}], "disabled": [{"name": "*"}]}}},
        {"schedulerName": "b", "plugins": {"queueSort": {"enabled": [{"name": "CustomSort"}], "disabled": [{"name": "*"}]}}}]}, []),
    ("mismatched queue sort args", {"profiles": [
        {"schedulerName": "a", "plugins": {"queueSort": {"enabled": [{"name": "CustomSort"}]}},
         "pluginConfig": [{"name": "CustomSort", "args": {"a": 1}}]},
        {"schedulerName": "b", "plugins": {"queueSort": {"enabled": [{"name": "CustomSort"}]}},
         "pluginConfig": [{"name": "CustomSort", "args": {"a": 2}}]}]},
     ['profiles[1].pluginConfig.args: Invalid value: {"a":2}: queueSort must be the same for all profiles']),
    ("duplicated plugin config", {"profiles": [{"pluginConfig": [{"name": "config"}, {"name": "config"}]}]},
     ['profiles[0].pluginConfig[1]: Duplicate value: "config"']),
    ("removed plugin in an extension point", {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "EBSLimits"}]}}}]},
     [f'profiles[0].plugins.filter.enabled[0]: Invalid value: "EBSLimits": {REMOVED_MSG}']),
    ("removed plugin in multiPoint is not checked", {"profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "GCEPDLimits"}]}}}]}, []),
    ("removed plugin config", {"profiles": [{"pluginConfig": [{"name": "AzureDiskLimits", "args": {}}]}]},
     [f'profiles[0].pluginConfig[0]: Invalid value: "AzureDiskLimits": {REMOVED_MSG}']),
    ("invalid plugin args", {"profiles": [{"pluginConfig": [{"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 200}}]}]},
     ["profiles[0].pluginConfig[0].args.minCandidateNodesPercentage: Invalid value: 200: not in valid range [0, 100]"]),
    ("extender negative weight", {"extenders": [{"urlPrefix": "http://e", "prioritizeVerb": "prioritize", "weight": -1}]},
     ["extenders[0].weight: Invalid value: -1: must have a positive weight applied to it"]),
    ("extender without weight", {"extenders": [{"urlPrefix": "http://e", "prioritizeVerb": "prioritize"}]},
     ["extenders[0].weight: Invalid value: 0: must have a positive weight applied to it"]),
    ("two binders", {"extenders": [{"urlPrefix": "http://a", "bindVerb": "bind"}, {"urlPrefix": "http://b", "bindVerb": "bind"}]},
     ['extenders: Invalid value: "found 2 extenders implementing bind": only one extender can implement bind']),
    ("duplicate managed resource", {"extenders": [
        {"urlPrefix": "http://a", "managedResources": [{"name": "foo.com/bar"}]},
        {"urlPrefix": "http://b", "managedResources": [{"name": "foo.com/bar"}]}]},
     ['extenders[1].managedResources[0].name: Invalid value: "foo.com/bar": duplicate extender managed resource name']),
    ("invalid extended resource name", {"extenders": [{"urlPrefix": "http://a", "managedResources": [{"name": "kubernetes.io/foo"}]}]},
     ['extenders[0].managedResources[0].name: Invalid value: "kubernetes.io/foo": is an invalid extended resource name']),
    ("unqualified extended resource name", {"extenders": [{"urlPrefix": "http://a", "managedResources": [{"name": "a/b/c"}]}]},
     ["extenders[0].managedResources[0].name: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, "
      "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
      "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' "
      "(e.g. 'example.com/MyName')"]),
]


@pytest.mark.parametrize(("name", "doc", "expected"), CASES, ids=[c[0] for c in CASES])
def test_validation_rule(name: str, doc: dict, expected: list[str]) -> None:
    if not expected:
        load_dict({**HEAD, **doc})
        return
    assert _errors(doc) == expected


def test_every_error_is_reported_in_upstream_order() -> None:
    errors = _errors({
        "parallelism": 0,
        "percentageOfNodesToScore": 200,
        "podInitialBackoffSeconds": 0,
        "clientConnection": {"burst": -5},
        "profiles": [{"schedulerName": "a", "pluginConfig": [{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 101}}]},
                     {"schedulerName": "a"}],
    })
    assert errors == [
        "clientConnection.burst: Invalid value: -5: must be non-negative",
        "parallelism: Invalid value: 0: should be an integer value greater than zero",
        "profiles[0].pluginConfig[0].args.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]",
        'profiles[1].schedulerName: Duplicate value: "profiles[0].schedulerName"',
        "percentageOfNodesToScore: Invalid value: 200: not in valid range [0-100]",
        "podInitialBackoffSeconds: Invalid value: 0: must be greater than 0",
    ]


def test_config_error_message_reads_like_an_aggregate() -> None:
    with pytest.raises(ConfigError) as info:
        load_dict({**HEAD, "parallelism": 0, "percentageOfNodesToScore": 101}, source="sched.yaml")
    assert str(info.value) == ("sched.yaml: invalid KubeSchedulerConfiguration: [parallelism: Invalid value: 0: should be an integer "
                               "value greater than zero, percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]]")


def test_validate_accepts_programmatic_configurations() -> None:
    cfg = default_configuration()
    assert validate(cfg) == []
    cfg.parallelism = 0
    cfg.profiles.append(cfg.profiles[0])
    assert [str(e) for e in validate(cfg)] == [
        "parallelism: Invalid value: 0: should be an integer value greater than zero",
        'profiles[1].schedulerName: Duplicate value: "profiles[0].schedulerName"',
    ]


def test_removed_plugins_are_upstreams() -> None:
    assert REMOVED_PLUGINS == ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")


@pytest.mark.parametrize(("name", "extended"), [
    ("example.com/gpu", True), ("cpu", False), ("kubernetes.io/foo", False), ("requests.example.com/x", False),
    ("foo.kubernetes.io/bar", False), ("a/b", True),
])
def test_extended_resource_names(name: str, extended: bool) -> None:
    assert is_extended_resource_name(name) is extended
