"""Label and node selectors with apimachinery's semantics and validation messages."""

import pytest

from kubesched.api.selectors import InvalidSelector, parse_label_selector, parse_node_selector, selector_from_set


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
