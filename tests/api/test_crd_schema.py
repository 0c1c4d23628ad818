"""A CRD's structural schema applied to custom objects: pruning, defaulting and validation, each as
kube-apiserver's apiextensions does it, with its field paths and messages."""

from __future__ import annotations

import copy

import pytest

from kubesched.api.crd import apply_defaults, prune, structural_errors, validate_object

SCHEMA = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {
            "replicas": {"type": "integer", "minimum": 0, "exclusiveMinimum": True, "default": 1},
            "ratio": {"type": "number", "maximum": 1, "multipleOf": 0.25},
            "size": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "note": {"type": "string", "nullable": True, "minLength": 2},
            "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}, "maxProperties": 2},
            "ports": {"type": "array", "maxItems": 2, "items": {"type": "object", "required": ["port"], "properties": {
                "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        }},
    },
}


def obj(**spec) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "labels": {"a": "b"}}, "spec": spec}


def test_pruning_drops_unspecified_fields_and_keeps_the_preserved_and_the_root_metadata():
    widget = obj(replicas=2, colour="blue", ports=[{"port": 80, "name": "http"}], free={"any": {"thing": 1}},
                 labels={"x": "y"})
    widget["status"] = {"ready": True}
    assert prune(SCHEMA, widget) == ["spec.colour", "spec.ports[0].name", "status"]
    assert widget == obj(replicas=2, ports=[{"port": 80}], free={"any": {"thing": 1}}, labels={"x": "y"})


def test_defaults_fill_absent_and_null_fields_in_objects_and_list_items():
    widget = obj(replicas=None, ports=[{"port": 80}, {"port": 53, "protocol": "UDP"}])
    apply_defaults(SCHEMA, widget)
    assert widget["spec"] == {"replicas": 1, "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}


VIOLATIONS = {
    "exclusive minimum": ({"replicas": 0}, "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than 0"),
    "maximum": ({"ratio": 2}, "spec.ratio: Invalid value: 2: spec.ratio in body should be less than or equal to 1"),
    "multiple of": ({"ratio": 0.3}, "spec.ratio: Invalid value: 0.3: spec.ratio in body should be a multiple of 0.25"),
    "int-or-string": ({"size": True}, 'spec.size: Invalid value: "boolean": spec.size in body must be of type integer,string: "boolean"'),
    "min length": ({"note": "x"}, 'spec.note: Invalid value: "x": spec.note in body should be at least 2 chars long'),
    "map value too long": ({"labels": {"k": "long"}}, "spec.labels.k: Too long: may not be more than 3 bytes"),
    "too many properties": ({"labels": {"a": "1", "b": "2", "c": "3"}}, "spec.labels: Too many: 3: must have at most 2 items"),
    "too many items": ({"ports": [{"port": 1}, {"port": 2}, {"port": 3}]}, "spec.ports: Too many: 3: must have at most 2 items"),
    "required in a list item": ({"ports": [{"protocol": "TCP"}]}, "spec.ports[0].port: Required value"),
    "null where not nullable": ({"ratio": None}, 'spec.ratio: Invalid value: "null": spec.ratio in body must be of type number: "null"'),
}


@pytest.mark.parametrize("case", list(VIOLATIONS))
def test_validation_names_the_field_in_kube_apiservers_words(case):
    spec, message = VIOLATIONS[case]
    assert [str(e) for e in validate_object(SCHEMA, obj(**spec))] == [message]


def test_a_valid_object_and_nullable_null_pass():
    assert validate_object(SCHEMA, obj(replicas=3, ratio=0.5, size="1Gi", note=None, labels={"a": "b"}, free={"x": [1]})) == []


STRUCTURAL = {
    "items missing": ({"type": "object", "properties": {"xs": {"type": "array"}}}, "s.properties[xs].items: Required value: must be specified"),
    "unknown type": ({"type": "object", "properties": {"x": {"type": "map"}}}, 's.properties[x].type: Unsupported value: "map"'),
    "properties on a string": ({"type": "object", "properties": {"x": {"type": "string", "properties": {}}}},
                               "s.properties[x].properties: Forbidden: must not be specified for type string"),
}


@pytest.mark.parametrize("case", list(STRUCTURAL))
def test_a_schema_that_is_not_structural_is_refused_naming_the_node(case):
    schema, message = STRUCTURAL[case]
    errors = [str(e) for e in structural_errors(copy.deepcopy(schema), "s")]
    assert len(errors) == 1 and errors[0].startswith(message)
