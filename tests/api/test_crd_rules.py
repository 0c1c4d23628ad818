"""CEL validation rules of CRDs (``x-kubernetes-validations``), in the shapes of upstream's
``schema/cel`` validation tests: rules compiled when the CRD is written, then evaluated with
``self`` (and ``oldSelf`` on updates) on every write of a custom object."""

from __future__ import annotations

import copy

import pytest

from kubesched.api.crd_rules import object_rule_errors, schema_rule_errors

ROOT = "spec.versions[0].schema.openAPIV3Schema"


def crontab(*rules: dict, replicas: dict | None = None) -> dict:
    """The CronTab of the Kubernetes documentation's CEL examples."""
    return {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-validations": list(rules), "properties": {
            "minReplicas": {"type": "integer"}, "maxReplicas": {"type": "integer"},
            "replicas": replicas or {"type": "integer"}, "image": {"type": "string"},
            "ratio": {"type": "number"},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                                "x-kubernetes-validations": [{"rule": "self.port >= oldSelf.port", "message": "ports only grow"}]}},
            "tags": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self.size() <= 5"}]}}}}}}


def obj(**spec) -> dict:
    return {"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "my-new-cron-object"}, "spec": spec}


MIN_MAX = {"rule": "self.minReplicas <= self.replicas && self.replicas <= self.maxReplicas",
           "message": "replicas should be in the range minReplicas..maxReplicas."}

CREATE_CASES = {
    "a true rule admits the object": ([MIN_MAX], obj(minReplicas=1, replicas=2, maxReplicas=3), []),
    "a false rule answers with its message at the field":
        ([MIN_MAX], obj(minReplicas=1, replicas=5, maxReplicas=3),
         ['spec: Invalid value: replicas should be in the range minReplicas..maxReplicas.']),
    "without a message the rule itself is named":
        ([{"rule": "self.replicas > 0"}], obj(replicas=0), ['spec: Invalid value: failed rule: self.replicas > 0']),
    "messageExpression builds the message":
        ([{"rule": "self.replicas > 0", "messageExpression": "'replicas is ' + string(self.replicas) + ', must be positive'"}],
         obj(replicas=-2), ['spec: Invalid value: replicas is -2, must be positive']),
    "fieldPath and reason place and type the error":
        ([{"rule": "has(self.image)", "message": "an image is required", "fieldPath": ".image", "reason": "FieldValueRequired"}],
         obj(replicas=1), ["spec.image: Required value: an image is required"]),
    "reason FieldValueForbidden answers Forbidden":
        ([{"rule": "!has(self.image) || !self.image.endsWith(':latest')", "message": "the latest tag is not allowed",
           "fieldPath": ".image", "reason": "FieldValueForbidden"}], obj(image="nginx:latest"),
         ["spec.image: Forbidden: the latest tag is not allowed"]),
    "Kubernetes' quantity library": ([{"rule": "quantity(self.image).isLessThan(quantity('1Gi'))"}], obj(image="512Mi"), []),
    "a missing key is an evaluation error naming the rule":
        ([{"rule": "self.image.startsWith('registry.k8s.io/')"}], obj(replicas=1),
         ['spec: Invalid value: "object": no such key: image evaluating rule: self.image.startsWith(\'registry.k8s.io/\')']),
    "macros and string functions": ([{"rule": "self.tags.all(t, t.matches('^[a-z]+$')) && self.tags.exists(t, t == 'prod')"}],
                                    obj(tags=["prod", "eu"]), []),
    "a number field is a double": ([{"rule": "self.ratio == 1.0"}], obj(ratio=1), []),
    "rules on map values see each value":
        ([], obj(labels={"team": "sched", "owner": "kube-scheduler"}),
         ['spec.labels[owner]: Invalid value: "kube-scheduler": failed rule: self.size() <= 5']),
    "a transition rule is not evaluated on create": ([], obj(ports=[{"name": "http", "port": 80}]), []),
    "the root sees the name alone of the metadata":
        ([], {**obj(), "metadata": {"name": "x", "labels": {"a": "b"}}}, []),
}


@pytest.mark.parametrize("case", list(CREATE_CASES))
def test_rules_on_create(case):
    rules, value, want = CREATE_CASES[case]
    assert [str(e) for e in object_rule_errors(crontab(*rules), value, None)] == want


UPDATE_CASES = {
    "a transition rule compares with the old value": (
        [{"rule": "self.replicas >= oldSelf.replicas", "message": "replicas may not decrease"}], obj(replicas=2), obj(replicas=3),
        ['spec: Invalid value: replicas may not decrease']),
    "map list items correlate by their keys": (
        [], obj(ports=[{"name": "https", "port": 443}, {"name": "http", "port": 8080}]),
        obj(ports=[{"name": "http", "port": 9090}, {"name": "https", "port": 443}]),
        ['spec.ports[1]: Invalid value: ports only grow']),
    "an unchanged value is not held to a rule it breaks (ratcheting)": (
        [{"rule": "self.replicas > 0"}], obj(replicas=0), obj(replicas=0), []),
}


@pytest.mark.parametrize("case", list(UPDATE_CASES))
def test_rules_on_update(case):
    rules, new, old, want = UPDATE_CASES[case]
    assert [str(e) for e in object_rule_errors(crontab(*rules), new, old)] == want


def test_a_rule_at_the_root_sees_the_name_and_errors_at_a_nil_path():
    schema = {**crontab(), "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('cron-')",
                                                         "message": "names start with cron-"}]}
    assert [str(e) for e in object_rule_errors(schema, obj(), None)] == ["<nil>: Invalid value: names start with cron-"]


def test_a_rule_on_a_field_sees_the_value_itself():
    schema = crontab(replicas={"type": "integer", "x-kubernetes-validations": [
        {"rule": "self == oldSelf", "message": "Value is immutable"}]})
    assert [str(e) for e in object_rule_errors(schema, obj(replicas=2), obj(replicas=1))] == \
        ["spec.replicas: Invalid value: 2: Value is immutable"]
    assert object_rule_errors(schema, obj(replicas=2), obj()) == []


INVALID_RULES = {
    "an undeclared reference": ({"rule": "self.replicas > foo"}, f"{ROOT}.properties[spec].x-kubernetes-validations[0].rule",
                                "compilation failed: undeclared reference to 'foo' (in container '')"),
    "a function the interpreter lacks": ({"rule": "timestamp(self.image) > timestamp('2024-01-01T00:00:00Z')"},
                                         f"{ROOT}.properties[spec].x-kubernetes-validations[0].rule",
                                         "compilation failed: undeclared reference to 'timestamp' (in container '')"),
    "a field the schema does not declare": ({"rule": "self.replica > 0"}, f"{ROOT}.properties[spec].x-kubernetes-validations[0].rule",
                                            "compilation failed: undefined field 'replica'"),
    "an undeclared field under has()": ({"rule": "has(self.ports[0].host)"},
                                        f"{ROOT}.properties[spec].x-kubernetes-validations[0].rule",
                                        "compilation failed: undefined field 'host'"),
    "a rule that is not a bool": ({"rule": "'text'"}, f"{ROOT}.properties[spec].x-kubernetes-validations[0].rule",
                                  "compilation failed: cel expression must evaluate to a bool"),
    "an empty rule": ({"rule": ""}, f"{ROOT}.properties[spec].x-kubernetes-validations[0].rule", ""),
    "a reason kube-apiserver does not know": ({"rule": "true", "reason": "FieldValueWrong"},
                                              f"{ROOT}.properties[spec].x-kubernetes-validations[0].reason", "supported values"),
    "a fieldPath outside the schema": ({"rule": "true", "fieldPath": ".nope"},
                                       f"{ROOT}.properties[spec].x-kubernetes-validations[0].fieldPath",
                                       "fieldPath must be a valid path: does not refer to a valid field"),
    "a message with a line break": ({"rule": "true", "message": "one\ntwo"},
                                    f"{ROOT}.properties[spec].x-kubernetes-validations[0].message", "must not contain line breaks"),
    "optionalOldSelf (optional types are not implemented)": (
        {"rule": "self == oldSelf", "optionalOldSelf": True},
        f"{ROOT}.properties[spec].x-kubernetes-validations[0].optionalOldSelf", "optional types are not supported"),
}


@pytest.mark.parametrize("case", list(INVALID_RULES))
def test_a_rule_that_does_not_compile_refuses_the_crd(case):
    rule, path, detail = INVALID_RULES[case]
    errors = schema_rule_errors(crontab(rule), ROOT)
    assert [e.path for e in errors] == [path]
    assert detail in errors[0].detail


def test_a_transition_rule_under_uncorrelatable_list_items_refuses_the_crd():
    schema = copy.deepcopy(crontab())
    schema["properties"]["spec"]["properties"]["tags"]["items"]["x-kubernetes-validations"] = [{"rule": "self == oldSelf"}]
    errors = schema_rule_errors(schema, ROOT)
    assert [e.path for e in errors] == [f"{ROOT}.properties[spec].properties[tags].items.x-kubernetes-validations[0].rule"]
    assert "uncorrelatable" in errors[0].detail


@pytest.mark.parametrize("rule", [
    "has(self.image) || self.replicas > 0",
    "!has(self.labels.team) || self.labels.team != ''",  # map values: any key
    "self.ports.all(p, p.port > 0)",
    "self.tags.exists(t, t == 'prod') || size(self.tags) == 0",
])
def test_rules_that_select_declared_fields_compile(rule):
    assert schema_rule_errors(crontab({"rule": rule}), ROOT) == []
