"""labelSelector / fieldSelector query strings as apimachinery parses them."""

import pytest

from kubesched.api.apierrors import BadRequest
from kubesched.api.kinds import kind_named
from kubesched.apiserver.selectors import (
    field_predicate,
    format_label_selector,
    label_predicate,
    parse_field_selector,
    single_name,
)

POD = kind_named("Pod")
EVENT = kind_named("Event")


def obj(labels):
    return {"metadata": {"labels": labels}}


@pytest.mark.parametrize("selector, labels, matches", [
    ("app=web", {"app": "web"}, True),
    ("app==web", {"app": "web"}, True),
    ("app!=web", {"app": "db"}, True),
    ("app!=web", {}, True),
    ("app", {"app": ""}, True),
    ("!app", {"app": "x"}, False),
    ("app in (web, db)", {"app": "db"}, True),
    ("app notin (web,db)", {"app": "db"}, False),
    ("app=web,tier=front", {"app": "web"}, False),
    ("size>3", {"size": "4"}, True),
    ("size<3", {"size": "4"}, False),
    ("app=", {"app": ""}, True),
    ("  app = web ", {"app": "web"}, True),
])
def test_label_selector_strings(selector, labels, matches):
    assert label_predicate(selector)(obj(labels)) is matches


def test_empty_label_selector_selects_everything():
    assert label_predicate("") is None


@pytest.mark.parametrize("selector, message", [
    ("app in web", r"found 'web', expected: '\('"),
    ("=x", "expected: identifier"),
    ("a b", "found 'b', expected: '=', '!=', '==', 'in', notin'"),
    ("a=b c", "expected: ',' or 'end of string'"),
    ("app=-bad-", "Invalid value"),
    ("size>x", "the value must be an integer"),
])
def test_bad_label_selectors_are_bad_requests(selector, message):
    with pytest.raises(BadRequest, match=message):
        label_predicate(selector)


def test_field_selectors_on_pods():
    bound = {"metadata": {"name": "a", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    pending = {"metadata": {"name": "b", "namespace": "ns"}, "spec": {}, "status": {"phase": "Pending"}}
    unbound = field_predicate(POD, "spec.nodeName=")
    assert [unbound(p) for p in (bound, pending)] == [False, True]
    assert field_predicate(POD, "status.phase!=Pending,metadata.namespace=ns")(bound)
    assert field_predicate(POD, "metadata.name==b")(pending)


def test_field_selectors_on_events_find_the_involved_object():
    event = {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ns", "uid": "u1"}}
    assert field_predicate(EVENT, "involvedObject.name=p,involvedObject.namespace=ns,involvedObject.uid=u1")(event)
    assert not field_predicate(EVENT, "involvedObject.kind=Node")(event)


def test_unsupported_field_label_is_a_bad_request():
    with pytest.raises(BadRequest, match=r"field label not supported: spec\.foo"):
        field_predicate(POD, "spec.foo=1")


def test_field_selector_escapes_and_name_lookup():
    reqs = parse_field_selector(r"metadata.name=a\,b,spec.nodeName!=x")
    assert [(r.field, r.value, r.negate) for r in reqs] == [("metadata.name", "a,b", False), ("spec.nodeName", "x", True)]
    assert single_name("metadata.name=p1") == "p1"
    with pytest.raises(BadRequest, match=r"can't understand"):
        parse_field_selector("nonsense")


@pytest.mark.parametrize("selector, text", [
    (None, "<none>"),
    ({}, "<none>"),
    ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
    ({"matchExpressions": [{"key": "k", "operator": "In", "values": ["y", "x"]}, {"key": "e", "operator": "Exists"}]}, "e,k in (x,y)"),
    ({"matchLabels": {"z": "1"}, "matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, "!a,z=1"),
])
def test_format_label_selector(selector, text):
    assert format_label_selector(selector) == text
