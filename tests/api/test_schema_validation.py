"""Decoding against 1.35's schemas: kube-apiserver's type errors, strict problems and normalisation."""

from __future__ import annotations

import datetime

import pytest

from kubesched.api.schema_validation import (
    MAX_FREE_FORM_DEPTH,
    DecodeError,
    decode,
    go_type_name,
    pairs_with_duplicates,
    strict_error_message,
)


def pod(**spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


def deployment(**spec) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": spec}


def node(**fields) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, **fields}


def go_struct_field(struct_field: str, json_type: str, go_type: str) -> str:
    return f"json: cannot unmarshal {json_type} into Go struct field {struct_field} of type {go_type}"


TYPE_ERRORS = [
    pytest.param(pod(tolerations="all"), "spec.tolerations", go_struct_field("PodSpec.spec.tolerations", "string", "[]v1.Toleration"),
                 id="string for a list of structs"),
    pytest.param({**pod(), "metadata": "x"}, "metadata", go_struct_field("Pod.metadata", "string", "v1.ObjectMeta"),
                 id="string for metadata"),
    pytest.param(pod(affinity="x"), "spec.affinity", go_struct_field("PodSpec.spec.affinity", "string", "v1.Affinity"),
                 id="string for a struct"),
    pytest.param(pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": "x"}}}),
                 "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
                 go_struct_field("NodeSelector.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
                                 "nodeSelectorTerms", "string", "[]v1.NodeSelectorTerm"),
                 id="innermost struct names the field"),
    pytest.param(pod(topologySpreadConstraints=[{"maxSkew": 1, "labelSelector": "x"}]),
                 "spec.topologySpreadConstraints[0].labelSelector",
                 go_struct_field("TopologySpreadConstraint.spec.topologySpreadConstraints.labelSelector", "string", "v1.LabelSelector"),
                 id="list indexes are not in Go's path"),
    pytest.param(deployment(replicas="three"), "spec.replicas", go_struct_field("DeploymentSpec.spec.replicas", "string", "int32"),
                 id="string for an int32"),
    pytest.param(deployment(replicas=1.5), "spec.replicas", go_struct_field("DeploymentSpec.spec.replicas", "number 1.5", "int32"),
                 id="fraction for an int32"),
    pytest.param(deployment(replicas=2**31), "spec.replicas",
                 go_struct_field("DeploymentSpec.spec.replicas", "number 2147483648", "int32"), id="int32 overflow"),
    pytest.param(deployment(replicas=True), "spec.replicas", go_struct_field("DeploymentSpec.spec.replicas", "bool", "int32"),
                 id="bool for an int32"),
    pytest.param(node(spec={"unschedulable": "yes"}), "spec.unschedulable",
                 go_struct_field("NodeSpec.spec.unschedulable", "string", "bool"), id="string for a bool"),
    pytest.param(node(status="x"), "status", go_struct_field("Node.status", "string", "v1.NodeStatus"), id="string for status"),
    pytest.param({**pod(), "metadata": {"name": "p", "labels": {"a": 1}}}, "metadata.labels.a",
                 go_struct_field("ObjectMeta.metadata.labels", "number", "string"), id="number for a label value (map keys are not in the path, as encoding/json reports)"),
    pytest.param(node(status={"capacity": "x"}), "status.capacity",
                 go_struct_field("NodeStatus.status.capacity", "string", "map[string]resource.Quantity"), id="string for a map"),
    pytest.param(node(status={"capacity": {"cpu": "abc"}}), "status.capacity.cpu",
                 "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                 id="quantity that does not parse"),
    pytest.param(deployment(strategy={"rollingUpdate": {"maxSurge": 1.5}}), "spec.strategy.rollingUpdate.maxSurge",
                 "json: cannot unmarshal number 1.5 into Go value of type int32", id="fraction for an int-or-string"),
    pytest.param({**pod(), "metadata": {"name": "p", "creationTimestamp": "yesterday"}}, "metadata.creationTimestamp",
                 'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": not an RFC 3339 time', id="time that does not parse"),
    pytest.param({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "not base64!"}}, "data.k",
                 "illegal base64 data at input byte 3", id="bytes that are not base64"),
    pytest.param({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": ["w"]}}, "metadata.name",
                 go_struct_field("ObjectMeta.metadata.name", "array", "string"), id="custom kinds have typed metadata"),
]


@pytest.mark.parametrize(("obj", "path", "detail"), TYPE_ERRORS)
def test_values_of_the_wrong_type_fail_decoding_as_kube_apiserver_reports_them(obj, path, detail):
    with pytest.raises(DecodeError) as info:
        decode(obj, obj["apiVersion"], obj["kind"])
    assert (info.value.path, info.value.detail) == (path, detail)
    kind, version = obj["kind"], obj["apiVersion"].rpartition("/")[2]  # the version alone, as kube-apiserver says
    assert str(info.value) == f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}'


def test_unknown_fields_are_reported_with_their_paths_and_dropped():
    obj = pod(nodeSelecter={"a": "b"})
    obj["spec"]["containers"][0]["resource"] = {}
    problems = decode(obj, "v1", "Pod")
    assert problems.unknown == ["spec.containers[0].resource", "spec.nodeSelecter"]  # in document order
    assert "nodeSelecter" not in obj["spec"] and "resource" not in obj["spec"]["containers"][0]
    assert strict_error_message("Pod", "v1", problems) == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.containers[0].resource", unknown field "spec.nodeSelecter"')


def test_duplicate_keys_from_a_json_body_are_reported_last_value_kept():
    import json

    obj = json.loads('{"apiVersion": "apps/v1", "kind": "Deployment", "kind": "Deployment", "metadata": {"name": "d"},'
                     ' "spec": {"replicas": 1, "replicas": 3}}', object_pairs_hook=pairs_with_duplicates)
    problems = decode(obj, "apps/v1", "Deployment")
    assert problems.messages() == ['duplicate field "kind"', 'duplicate field "spec.replicas"']
    assert obj["spec"] == {"replicas": 3} and type(obj["spec"]) is dict


@pytest.mark.parametrize(
    ("given", "decoded"),
    [
        pytest.param({"nodeName": None}, {}, id="null fields are unset"),
        pytest.param({"tolerations": [None]}, {"tolerations": [{}]}, id="null list items are zero values"),
        pytest.param({"nodeSelector": {1: "a", None: "b"}}, {"nodeSelector": {"1": "a", "null": "b"}},
                     id="yaml keys become json strings"),
        pytest.param({"priority": 5, "hostname": datetime.date(2024, 1, 2)}, {"priority": 5, "hostname": "2024-01-02"},
                     id="yaml dates in string fields become strings"),
    ],
)
def test_decoding_leaves_the_object_as_a_go_struct_would_hold_it(given, decoded):
    obj = pod(**given)
    decode(obj, "v1", "Pod")
    assert {k: v for k, v in obj["spec"].items() if k != "containers"} == decoded


def test_yaml_timestamps_in_time_fields_become_rfc3339():
    obj = {**pod(), "metadata": {"name": "p", "creationTimestamp": datetime.datetime(2024, 1, 2, 3, 4, 5)}}
    decode(obj, "v1", "Pod")
    assert obj["metadata"]["creationTimestamp"] == "2024-01-02T03:04:05Z"


def test_free_form_fields_take_any_json_up_to_a_depth():
    nested: object = "leaf"
    for _ in range(MAX_FREE_FORM_DEPTH + 1):
        nested = {"f:x": nested}
    fields = {"manager": "m", "operation": "Update", "fieldsType": "FieldsV1"}
    ok = {**pod(), "metadata": {"name": "p", "managedFields": [{**fields, "fieldsV1": {"f:spec": {"f:a": {}}}}]}}
    assert not decode(ok, "v1", "Pod")
    deep = {**pod(), "metadata": {"name": "p", "managedFields": [{**fields, "fieldsV1": nested}]}}
    with pytest.raises(DecodeError, match="exceeded max depth"):
        decode(deep, "v1", "Pod")


@pytest.mark.parametrize(
    ("schema", "name"),
    [
        ({"$ref": "#/$defs/io.k8s.api.core.v1.Toleration"}, "v1.Toleration"),
        ({"type": ["array", "null"], "items": {"$ref": "#/$defs/io.k8s.api.core.v1.Toleration"}}, "[]v1.Toleration"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "map[string]string"),
        ({"type": "integer", "format": "int64"}, "int64"),
        ({"type": "string", "format": "byte"}, "[]uint8"),
        ({"type": "number", "format": "double"}, "float64"),
    ],
)
def test_go_type_names_follow_encoding_json(schema, name):
    assert go_type_name(schema) == name
