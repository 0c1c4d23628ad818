"""Reading files: YAML, apiVersion/kind, strict decoding and plugin args, with upstream's messages."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import ClassVar

import pydantic
import pytest

from kubesched.api.errors import ConfigError
from kubesched.scheduler.config import API_VERSION, KIND, ConfigDecodeError, load_dict, load_file, load_text, to_v1
from kubesched.scheduler.config._decode import Field, Int, Str
from kubesched.scheduler.config.args import PluginArgs

HEAD = f"apiVersion: {API_VERSION}\nkind: {KIND}\n"
NOT_REGISTERED = 'in scheme "pkg/scheduler/apis/config/scheme/scheme.go:30"'


def _decode_error(text: str, **kw: object) -> str:
    with pytest.raises(ConfigDecodeError) as info:
        load_text(text, **kw)  # type: ignore[arg-type]
    assert len(info.value.errors) == 1
    return str(info.value.errors[0])


CASES = [
    ("yaml syntax error", HEAD + "profiles: [\n",
     "error converting YAML to JSON: yaml: line 4: expected the node content, but found '<stream end>'"),
    ("empty file", "", "Object 'Kind' is missing in ''"),
    ("missing kind", f"apiVersion: {API_VERSION}\n", f"Object 'Kind' is missing in 'apiVersion: {API_VERSION}\n'"),
    ("missing apiVersion", f"kind: {KIND}\n", f"Object 'apiVersion' is missing in 'kind: {KIND}\n'"),
    ("removed version v1beta3", "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
     f'no kind "KubeSchedulerConfiguration" is registered for version "kubescheduler.config.k8s.io/v1beta3" {NOT_REGISTERED}'),
    ("unknown version", "apiVersion: kubescheduler.config.k8s.io/unknown\nkind: KubeSchedulerConfiguration\n",
     f'no kind "KubeSchedulerConfiguration" is registered for version "kubescheduler.config.k8s.io/unknown" {NOT_REGISTERED}'),
    ("unknown kind", f"apiVersion: {API_VERSION}\nkind: Foo\n",
     f'no kind "Foo" is registered for version "{API_VERSION}" {NOT_REGISTERED}'),
    ("args kind at the top", f"apiVersion: {API_VERSION}\nkind: DefaultPreemptionArgs\n",
     f"couldn't decode as KubeSchedulerConfiguration, got {API_VERSION}, Kind=DefaultPreemptionArgs: "),
    ("not an object", "- a\n- b\n",
     "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct "
     '{ APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'),
    ("unknown top-level field", HEAD + "foo: 1\n", 'strict decoding error: unknown field "foo"'),
    ("unknown nested fields, sorted", HEAD + "profiles:\n- plugins:\n    zeta: {}\n    alpha: {}\n  schedulerName: x\n",
     'strict decoding error: unknown field "profiles[0].plugins.alpha", unknown field "profiles[0].plugins.zeta"'),
    ("field names are case-sensitive", HEAD + "Parallelism: 3\n", 'strict decoding error: unknown field "Parallelism"'),
    ("duplicate field", HEAD + "parallelism: 1\nparallelism: 2\n",
     'strict decoding error: error converting YAML to JSON: yaml: unmarshal errors:\n  line 4: key "parallelism" already set in map'),
    ("wrong type", HEAD + "parallelism: abc\n",
     "json: cannot unmarshal string into Go struct field KubeSchedulerConfiguration.parallelism of type int32"),
    ("wrong nested type", HEAD + "profiles:\n- schedulerName: 5\n",
     "json: cannot unmarshal number into Go struct field KubeSchedulerProfile.profiles.schedulerName of type string"),
    ("wrong list type", HEAD + "profiles: x\n",
     "json: cannot unmarshal string into Go struct field KubeSchedulerConfiguration.profiles of type []v1.KubeSchedulerProfile"),
    ("fraction for an integer", HEAD + "parallelism: 1.5\n",
     "json: cannot unmarshal number 1.5 into Go struct field KubeSchedulerConfiguration.parallelism of type int32"),
    ("integer overflow", HEAD + "parallelism: 3000000000\n",
     "json: cannot unmarshal number 3000000000 into Go struct field KubeSchedulerConfiguration.parallelism of type int32"),
    ("weight of the wrong type", HEAD + "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: A\n        weight: high\n",
     "json: cannot unmarshal string into Go struct field Plugin.profiles.plugins.score.enabled.weight of type int32"),
    ("bad duration", HEAD + "leaderElection:\n  leaseDuration: soon\n", 'time: invalid duration "soon"'),
    ("duration as a number", HEAD + "leaderElection:\n  leaseDuration: 15\n",
     "json: cannot unmarshal number into Go value of type string"),
    ("type error wins over unknown fields", HEAD + "foo: 1\nparallelism: x\n",
     "json: cannot unmarshal string into Go struct field KubeSchedulerConfiguration.parallelism of type int32"),
    ("unknown args field", HEAD + "profiles:\n- pluginConfig:\n  - name: InterPodAffinity\n    args:\n      foo: bar\n",
     'strict decoding error: decoding .profiles[0].pluginConfig[0]: strict decoding error: decoding args for plugin '
     'InterPodAffinity: strict decoding error: unknown field "foo"'),
    ("args shape encoding is strict", HEAD + "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n"
     "      scoringStrategy:\n        requestedToCapacityRatio:\n          shape:\n          - Score: 2\n            Utilization: 1\n",
     "strict decoding error: decoding .profiles[0].pluginConfig[0]: strict decoding error: decoding args for plugin NodeResourcesFit: "
     'strict decoding error: unknown field "scoringStrategy.requestedToCapacityRatio.shape[0].Score", '
     'unknown field "scoringStrategy.requestedToCapacityRatio.shape[0].Utilization"'),
    ("top and args unknown fields together", HEAD + "foo: 1\nprofiles:\n- pluginConfig:\n  - name: VolumeBinding\n    args:\n      x: 1\n",
     'strict decoding error: unknown field "foo", decoding .profiles[0].pluginConfig[0]: strict decoding error: '
     'decoding args for plugin VolumeBinding: strict decoding error: unknown field "x"'),
    ("args of the wrong type", HEAD + "profiles:\n- pluginConfig:\n  - name: InterPodAffinity\n    args:\n      hardPodAffinityWeight: x\n",
     "decoding .profiles[0].pluginConfig[0]: decoding args for plugin InterPodAffinity: json: cannot unmarshal string into "
     "Go struct field InterPodAffinityArgs.hardPodAffinityWeight of type int32"),
    ("args of another kind", HEAD + f"profiles:\n- pluginConfig:\n  - name: DefaultPreemption\n    args:\n      apiVersion: {API_VERSION}\n"
     "      kind: InterPodAffinityArgs\n",
     "decoding .profiles[0].pluginConfig[0]: args for plugin DefaultPreemption were not of type "
     "DefaultPreemptionArgs.kubescheduler.config.k8s.io, got InterPodAffinityArgs.kubescheduler.config.k8s.io"),
    ("args of an old version", HEAD + "profiles:\n- pluginConfig:\n  - name: DefaultPreemption\n    args:\n"
     "      apiVersion: kubescheduler.config.k8s.io/v1beta3\n",
     "decoding .profiles[0].pluginConfig[0]: decoding args for plugin DefaultPreemption: no kind \"DefaultPreemptionArgs\" is "
     f'registered for version "kubescheduler.config.k8s.io/v1beta3" {NOT_REGISTERED}'),
    ("args that are not an object", HEAD + "profiles:\n- pluginConfig:\n  - name: VolumeBinding\n    args: 5\n",
     "decoding .profiles[0].pluginConfig[0]: decoding args for plugin VolumeBinding: couldn't get version/kind; json parse error: "
     'json: cannot unmarshal number into Go value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
     'Kind string "json:\\"kind,omitempty\\"" }'),
    ("args duration", HEAD + "profiles:\n- pluginConfig:\n  - name: DynamicResources\n    args:\n      filterTimeout: 10\n",
     "decoding .profiles[0].pluginConfig[0]: decoding args for plugin DynamicResources: "
     "json: cannot unmarshal number into Go value of type string"),
    ("core fields inside args are strict", HEAD + "profiles:\n- pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n"
     "        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n          - matchExpressions:\n"
     "            - key: a\n              operator: In\n              value: [b]\n",
     "strict decoding error: decoding .profiles[0].pluginConfig[0]: strict decoding error: decoding args for plugin NodeAffinity: "
     'strict decoding error: unknown field "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].'
     'matchExpressions[0].value"'),
]


@pytest.mark.parametrize(("name", "text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_decoding_error(name: str, text: str, expected: str) -> None:
    assert _decode_error(text) == expected


def test_decode_error_names_the_source() -> None:
    with pytest.raises(ConfigError) as info:
        load_text(HEAD + "foo: 1\n", source="sched.yaml")
    assert str(info.value) == 'sched.yaml: invalid KubeSchedulerConfiguration: strict decoding error: unknown field "foo"'


def test_load_file(tmp_path: Path) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(HEAD + "parallelism: 4\nprofiles:\n- schedulerName: mine\n", encoding="utf-8")
    cfg = load_file(path)
    assert cfg.parallelism == 4 and cfg.profiles[0].scheduler_name == "mine"
    assert to_v1(cfg)["parallelism"] == 4


def test_json_files_are_yaml() -> None:
    cfg = load_text(f'{{"apiVersion": "{API_VERSION}", "kind": "{KIND}", "parallelism": 2}}')
    assert cfg.parallelism == 2


def test_nulls_mean_unset() -> None:
    cfg = load_text(HEAD + "parallelism: null\nprofiles:\n- schedulerName: null\n  pluginConfig:\n  - name: VolumeBinding\n    args:\n")
    assert cfg.parallelism == 16
    assert cfg.profiles[0].scheduler_name == "default-scheduler"
    assert cfg.profiles[0].plugin_config["VolumeBinding"].bind_timeout_seconds == 600


def test_dates_stay_strings() -> None:
    cfg = load_text(HEAD + "clientConnection:\n  kubeconfig: 2020-01-01\n")
    assert cfg.client_connection.kubeconfig == "2020-01-01"


def test_unknown_plugin_args_stay_raw() -> None:
    cfg = load_text(HEAD + "profiles:\n- pluginConfig:\n  - name: OutOfTreePlugin\n    args:\n      foo: bar\n      n: [1, 2]\n")
    assert cfg.profiles[0].plugin_config["OutOfTreePlugin"] == {"foo": "bar", "n": [1, 2]}
    printed = next(c for c in to_v1(cfg)["profiles"][0]["pluginConfig"] if c["name"] == "OutOfTreePlugin")
    assert printed == {"args": {"foo": "bar", "n": [1, 2]}, "name": "OutOfTreePlugin"}


# --- out-of-tree typed args ---------------------------------------------------------------------


@dataclasses.dataclass
class CoschedulingArgs(PluginArgs):
    KIND: ClassVar[str] = "CoschedulingArgs"
    PLUGIN: ClassVar[str] = "Coscheduling"
    GO: ClassVar[str] = "v1.CoschedulingArgs"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("permitWaitingTimeSeconds", Int(64), "permit_waiting_time_seconds", emit="always"),
        Field("mode", Str(), "mode"),
    )
    permit_waiting_time_seconds: int = 60
    mode: str = ""

    def validate(self, path: str = "", gates: object = None) -> list:
        from kubesched.api.errors import invalid

        return [invalid(f"{path}.permitWaitingTimeSeconds", self.permit_waiting_time_seconds, "must be positive")] \
            if self.permit_waiting_time_seconds <= 0 else []


class PydanticArgs(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True)
    max_pods: int = pydantic.Field(10, alias="maxPods")


@dataclasses.dataclass
class DataclassArgs:
    label_key: str = "zone"


class _Factory:
    def __init__(self, args: type) -> None:
        self.Args = args


def _with(name: str, args: type, body: str) -> object:
    text = HEAD + f"profiles:\n- pluginConfig:\n  - name: {name}\n    args:\n" + body
    return load_text(text, registry={name: _Factory(args)})


def test_registry_model_args_are_decoded_strictly() -> None:
    cfg = _with("Coscheduling", CoschedulingArgs, "      permitWaitingTimeSeconds: 5\n")
    assert cfg.profiles[0].plugin_config["Coscheduling"] == CoschedulingArgs(5)
    assert _decode_error(HEAD + "profiles:\n- pluginConfig:\n  - name: Coscheduling\n    args:\n      bogus: 1\n",
                         registry={"Coscheduling": _Factory(CoschedulingArgs)}) == (
        "strict decoding error: decoding .profiles[0].pluginConfig[0]: strict decoding error: decoding args for plugin "
        'Coscheduling: strict decoding error: unknown field "bogus"')


def test_registry_args_validate_themselves() -> None:
    with pytest.raises(ConfigError) as info:
        _with("Coscheduling", CoschedulingArgs, "      permitWaitingTimeSeconds: 0\n")
    assert [str(e) for e in info.value.errors] == [
        "profiles[0].pluginConfig[0].args.permitWaitingTimeSeconds: Invalid value: 0: must be positive"]


@dataclasses.dataclass
class OneArgValidate:
    n: int = 1

    def validate(self, path: str) -> list:
        return []


@dataclasses.dataclass
class BrokenValidate:
    n: int = 1

    def validate(self, path: str, gates: object) -> list:
        return [len(self.n)]  # type: ignore[arg-type]


class PydanticOwnValidate(pydantic.BaseModel):
    n: int = 1

    def validate(self, path: str, gates: object) -> list:  # type: ignore[override]
        return [f"{path}.n: Invalid value: {self.n}: must be 2"] if self.n != 2 else []


@pytest.mark.parametrize("args, expected", [
    (OneArgValidate, "OneArgValidate.validate must take (path, gates)"),
    (BrokenValidate, "object of type 'int' has no len()"),
])
def test_registry_args_validate_problems_are_not_hidden(args: type, expected: str) -> None:
    with pytest.raises(TypeError, match=re.escape(expected)):
        _with("Checked", args, "      n: 1\n")


def test_registry_pydantic_args_with_their_own_validate_are_checked() -> None:
    with pytest.raises(ConfigError) as info:
        _with("Checked", PydanticOwnValidate, "      n: 1\n")
    assert [str(e) for e in info.value.errors] == ["profiles[0].pluginConfig[0].args.n: Invalid value: 1: must be 2"]


def test_registry_pydantic_args() -> None:
    cfg = _with("Limit", PydanticArgs, "      maxPods: 3\n")
    assert cfg.profiles[0].plugin_config["Limit"] == PydanticArgs(maxPods=3)
    printed = [c for c in to_v1(cfg)["profiles"][0]["pluginConfig"] if c["name"] == "Limit"]
    assert printed == [{"args": {"maxPods": 3}, "name": "Limit"}]
    message = _decode_error(HEAD + "profiles:\n- pluginConfig:\n  - name: Limit\n    args:\n      other: 1\n",
                            registry={"Limit": _Factory(PydanticArgs)})
    assert message.startswith("decoding .profiles[0].pluginConfig[0]: decoding args for plugin Limit: other: Extra inputs")


def test_registry_dataclass_args() -> None:
    cfg = _with("Zoned", DataclassArgs, "      labelKey: rack\n")
    assert cfg.profiles[0].plugin_config["Zoned"] == DataclassArgs("rack")


def test_untyped_registry_plugin_keeps_raw_args() -> None:
    cfg = load_dict({"apiVersion": API_VERSION, "kind": KIND, "profiles": [{"pluginConfig": [{"name": "X", "args": {"a": 1}}]}]},
                    registry={"X": object()})
    assert cfg.profiles[0].plugin_config["X"] == {"a": 1}


def test_loading_does_not_modify_the_given_document() -> None:
    doc = {"apiVersion": API_VERSION, "kind": KIND, "profiles": [{"pluginConfig": [{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 5}}]}]}
    snapshot = repr(doc)
    load_dict(doc)
    assert repr(doc) == snapshot


def test_yaml_anchors_are_resolved() -> None:
    cfg = load_text(HEAD + "profiles:\n- schedulerName: a\n  pluginConfig: &pc\n  - name: InterPodAffinity\n"
                    "    args: {hardPodAffinityWeight: 3}\n- schedulerName: b\n  pluginConfig: *pc\n")
    assert [p.plugin_config["InterPodAffinity"].hard_pod_affinity_weight for p in cfg.profiles] == [3, 3]


def test_overriding_a_merged_key_is_a_duplicate_as_in_yaml_v2_strict_mode() -> None:
    message = _decode_error(HEAD + "profiles:\n- &a\n  schedulerName: a\n- <<: *a\n  schedulerName: b\n")
    assert message == ('strict decoding error: error converting YAML to JSON: yaml: unmarshal errors:\n'
                       '  line 7: key "schedulerName" already set in map')
