"""Label and node selectors with apimachinery's semantics and validation messages."""

import pytest

from kubesched.api.selectors import (
    DOES_NOT_EXIST,
    EQUALS,
    GT,
    IN,
    LT,
    NOT_IN,
    InvalidSelector,
    parse_label_selector,
    parse_node_selector,
    requirement_errors,
    selector_from_set,
)

VALUE_REGEX = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
               "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
               "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
QNAME_REGEX = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
               "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
               "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


@pytest.mark.parametrize(
    ("spec", "labels", "matches"),
    [
        (None, {"a": "b"}, False),
        ({}, {"a": "b"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}, {"tier": "b"}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {"tier": "a"}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": ""}, False),
    ],
)
def test_label_selector_matching(spec, labels, matches):
    assert parse_label_selector(spec).matches(labels) is matches


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "for 'in', 'notin' operators, values set can't be empty"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "values set must be empty for exists and does not exist"),
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "is not a valid label selector operator"),
        ({"matchLabels": {"bad key!": "x"}}, "name part must consist of alphanumeric characters"),
    ],
)
def test_invalid_label_selectors_name_the_problem(spec, message):
    with pytest.raises(InvalidSelector) as info:
        parse_label_selector(spec)
    assert message in str(info.value)


def node_selector(*terms):
    return parse_node_selector({"nodeSelectorTerms": list(terms)})


@pytest.mark.parametrize(
    ("selector", "labels", "name", "matches"),
    [
        (node_selector({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}), {"zone": "a"}, "n1", True),
        (node_selector({"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["4"]}]}), {"cpus": "8"}, "n1", True),
        (node_selector({"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["4"]}]}), {"cpus": "4"}, "n1", False),
        (node_selector({"matchExpressions": [{"key": "cpus", "operator": "Lt", "values": ["4"]}]}), {"cpus": "x"}, "n1", False),
        (node_selector({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}), {}, "n1", True),
        (node_selector({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}), {}, "n1", False),
        # terms are ORed, expressions within a term ANDed
        (node_selector({"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]},
                       {"matchExpressions": [{"key": "c", "operator": "Exists"}]}), {"a": "1", "c": "1"}, "n", True),
        (node_selector({"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}), {"a": "1"}, "n", False),
        # an empty term selects nothing
        (node_selector({}), {"a": "1"}, "n", False),
    ],
)
def test_node_selector_matching(selector, labels, name, matches):
    assert selector.matches(labels, name) is matches


def test_node_selector_term_with_errors_never_matches_and_reports_the_field():
    selector = node_selector({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]})
    assert not selector.matches({"a": "5"}, "n")
    assert "the value must be an integer" in str(selector.errors[0])
    assert selector.errors[0].path.startswith("nodeSelectorTerms[0].matchExpressions[0]")


def test_selector_from_set():
    assert selector_from_set({}).matches({"x": "y"})
    assert selector_from_set({"a": "b"}).matches({"a": "b"})
    assert not selector_from_set({"a": "b"}).matches({"a": "c"})


@pytest.mark.parametrize(("key", "op", "values", "path", "errors"), [
    pytest.param("k", IN, ["a", "b"], "", [], id="valid"),
    pytest.param("k", IN, None, "", ["values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"],
                 id="nil values print as a nil slice"),
    pytest.param("k", NOT_IN, [], "", ["values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"],
                 id="empty values print as an empty slice"),
    pytest.param("k", DOES_NOT_EXIST, ["a"], "", ['values: Invalid value: []string{"a"}: values set must be empty for exists '
                                                  "and does not exist"], id="exists with values"),
    pytest.param("k", EQUALS, ["a", "b"], "", ['values: Invalid value: []string{"a", "b"}: exact-match compatibility requires '
                                               "one single value"], id="exact match with two values"),
    pytest.param("k", GT, ["1", "x"], "", ['values: Invalid value: []string{"1", "x"}: for \'Gt\', \'Lt\' operators, exactly one '
                                           "value is required",
                                           "values[1]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"],
                 id="every Gt value is checked for an integer"),
    pytest.param("k", LT, ["-1"], "", [f'values[0][k]: Invalid value: "-1": {VALUE_REGEX}'],
                 id="Gt and Lt values must also be label values"),
    pytest.param("a/", IN, ["{{x}}"], "spec.m[0]", [
        f'spec.m[0].key: Invalid value: "a/": name part must be non-empty; {QNAME_REGEX}',
        f'spec.m[0].values[0][a/]: Invalid value: "{{{{x}}}}": {VALUE_REGEX}',
    ], id="every key message joined with a semicolon, value path keyed by the label"),
])
def test_requirement_errors_are_new_requirements(key, op, values, path, errors):
    assert [str(e) for e in requirement_errors(key, op, values, path)] == errors


def test_label_selector_reports_every_message_of_a_bad_key():
    with pytest.raises(InvalidSelector) as info:
        parse_label_selector({"matchLabels": {"a/": "x"}})
    assert str(info.value) == f'labelSelector.matchLabels.key: Invalid value: "a/": name part must be non-empty; {QNAME_REGEX}'


def test_label_selector_without_values_reports_a_nil_slice():
    with pytest.raises(InvalidSelector) as info:
        parse_label_selector({"matchExpressions": [{"key": "k", "operator": "In", "values": []}]})
    assert str(info.value) == ("labelSelector.matchExpressions[0].values: Invalid value: []string(nil): "
                               "for 'in', 'notin' operators, values set can't be empty")


def test_node_selector_gt_with_a_negative_number_never_matches():
    """"-1" is an integer but not a label value, so NewRequirement rejects it and the term never matches."""
    selector = node_selector({"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["-1"]}]})
    assert not selector.matches({"cpus": "5"}, "n")
    assert [str(e) for e in selector.errors] == [
        f'nodeSelectorTerms[0].matchExpressions[0].values[0][cpus]: Invalid value: "-1": {VALUE_REGEX}']


def test_node_selector_unknown_operator_is_the_only_error_of_its_requirement():
    selector = node_selector({"matchExpressions": [{"key": "-bad", "operator": "Foo", "values": ["{{x}}"]}]})
    assert [str(e) for e in selector.errors] == [
        'nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "Foo": supported values: '
        '"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"']
