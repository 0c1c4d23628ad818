"""Decoding a request body as kube-apiserver does: YAML within go-yaml's alias rule and the depth and
size bounds, and the decoder's view of types and nulls (``api.schema_validation.decode``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.api.apierrors import BadRequest, TooLarge
from kubesched.api.schema_validation import DecodeError, decode
from kubesched.apiserver import codec
from kubesched.apiserver.bounds import MAX_DEPTH, allowed_alias_ratio, check_depth, load_yaml


def laughs(levels: int) -> str:
    """The billion laughs: each level a list of nine aliases of the level below."""
    lines = ["l0: &l0 [" + ",".join(["lol"] * 9) + "]"]
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_three_levels_of_laughs_are_expanded_as_written():
    assert load_yaml(laughs(3))["l2"][8][8] == ["lol"] * 9


def test_moderate_aliasing_is_expanded_as_written():
    text = "base: &base {cpu: 1, memory: 2Gi}\n" + "".join(f"c{i}: *base\n" for i in range(50))
    document = load_yaml(text)
    assert document["c49"] == {"cpu": 1, "memory": "2Gi"} and len(document) == 51


@pytest.mark.parametrize(("decoded", "ratio"), [
    pytest.param(1000, 0.99, id="small-documents-may-be-mostly-aliases"),
    pytest.param(400_000, 0.99, id="up-to-400k-nodes"),
    pytest.param(2_200_000, 0.545, id="halfway-down"),
    pytest.param(4_000_000, 0.10, id="from-4M-nodes-a-tenth"),
])
def test_the_alias_ratio_falls_as_go_yamls_does(decoded, ratio):
    assert allowed_alias_ratio(decoded) == pytest.approx(ratio)


@pytest.mark.parametrize(("text", "error"), [
    pytest.param(laughs(9), BadRequest, id="nine-levels-of-laughs"),
    pytest.param("big: &big " + "x" * (1 << 20) + "\n" + "".join(f"k{i}: *big\n" for i in range(4)), TooLarge,
                 id="aliased-megabyte-scalar"),
    pytest.param("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), BadRequest, id="one-level-too-deep"),
])
def test_yaml_past_the_bounds_is_refused(text, error):
    with pytest.raises(error):
        load_yaml(text)


def test_nesting_up_to_the_limit_is_accepted_and_one_more_is_not():
    nested: object = {}
    for _ in range(MAX_DEPTH - 1):
        nested = [nested]
    check_depth(nested)
    with pytest.raises(BadRequest, match=f"exceeded max depth of {MAX_DEPTH}"):
        check_depth([nested])


@pytest.mark.parametrize(("obj", "after"), [
    pytest.param({"spec": {"nodeName": None}}, {"spec": {}}, id="null-field-unset"),
    pytest.param({"spec": {"tolerations": [None]}}, {"spec": {"tolerations": [{}]}}, id="null-struct-item-empty"),
    pytest.param({"spec": {"nodeSelector": {"a": None}}}, {"spec": {"nodeSelector": {"a": ""}}}, id="null-string-value-empty"),
    pytest.param({"spec": {"containers": [{"name": "c", "args": [None]}]}},
                 {"spec": {"containers": [{"name": "c", "args": [""]}]}}, id="null-string-item-empty"),
    pytest.param({"spec": {"overhead": {"cpu": None}}}, {"spec": {"overhead": {"cpu": "0"}}}, id="null-quantity-zero"),
    pytest.param({"metadata": {"managedFields": [{"fieldsV1": {"f:a": None}}]}},
                 {"metadata": {"managedFields": [{"fieldsV1": {"f:a": None}}]}}, id="free-form-left-alone"),
])
def test_nulls_become_what_gos_decoder_makes_of_them(obj, after):
    decode(obj, "v1", "Pod")
    assert obj == after


@pytest.mark.parametrize(("obj", "message"), [
    pytest.param({"spec": {"containers": [{"ports": [{"containerPort": "80"}]}]}},
                 "json: cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32",
                 id="string-for-int32"),
    pytest.param({"spec": {"tolerations": [{"tolerationSeconds": 2**63}]}},
                 "json: cannot unmarshal number 9223372036854775808 into Go struct field Toleration.spec.tolerations.tolerationSeconds "
                 "of type int64", id="past-int64"),
    pytest.param({"spec": {"hostNetwork": "true"}},
                 "json: cannot unmarshal string into Go struct field PodSpec.spec.hostNetwork of type bool", id="string-for-bool"),
    pytest.param({"spec": {"nodeSelector": ["a"]}},
                 "json: cannot unmarshal array into Go struct field PodSpec.spec.nodeSelector of type map[string]string",
                 id="array-for-map"),
    pytest.param({"spec": {"containers": [{"ports": [{"containerPort": 80}],
                                           "livenessProbe": {"httpGet": {"port": 1.5}}}]}},
                 "json: cannot unmarshal number 1.5 into Go value of type int32", id="fraction-for-int-or-string"),
])
def test_wrong_types_get_encoding_jsons_message(obj, message):
    with pytest.raises(DecodeError) as raised:
        decode(obj, "v1", "Pod")
    assert raised.value.detail == message


# --- keys given twice: the fast parse is taken only when it loses nothing ---------------------

_json_keys = st.text(alphabet=st.sampled_from('ab:"\\ é'), max_size=4)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(alphabet=st.sampled_from('x:"\\ '), max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.lists(st.tuples(_json_keys, inner), max_size=4),
    max_leaves=12,
)


def _written(value: object) -> str:
    """JSON text of ``value``, where a list of (key, value) pairs is an object written with those
    keys in that order, repeated keys and all."""
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        return "{" + ",".join(f"{json.dumps(k)}:{_written(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_written(v) for v in value) + "]"
    return json.dumps(value)


def _with_duplicates_named(value: object) -> object:
    """``value`` with the keys each mapping was given twice beside it, and each scalar's type, for
    comparing parses."""
    if isinstance(value, dict):
        named = {k: _with_duplicates_named(v) for k, v in value.items()}
        return (named, sorted(set(getattr(value, "duplicates", None) or ())))
    if isinstance(value, list):
        return [_with_duplicates_named(v) for v in value]
    return (type(value), value)  # 1 and 1.0 (and True) are equal in Python, but not in an object


@settings(max_examples=400, deadline=None)
@given(_json_values)
def test_a_body_parses_alike_whether_or_not_the_fast_parse_is_taken(document):
    body = _written(document).encode()
    slow = codec._loads_keeping_duplicates(body)
    assert _with_duplicates_named(codec.decode_body(body, "application/json", duplicates=True)) == _with_duplicates_named(slow)


@pytest.mark.parametrize("body", [
    pytest.param(b'{"a": 1, "a": 2}', id="top level"),
    pytest.param(b'{"m": {"x": ":", "x": "y"}}', id="nested, a colon in the dropped value"),
    pytest.param(b'{"m": [{"k:": 1, "k:": 1}]}', id="in a list, colons in the keys"),
])
def test_keys_given_twice_are_named(body):
    assert codec._loads_without_duplicates(body) is None
    assert _with_duplicates_named(codec.decode_body(body, "application/json", duplicates=True)) != _with_duplicates_named(json.loads(body))


@pytest.mark.parametrize(("body", "fast"), [
    pytest.param(b'{"a": "b:c", "d": {"e": [1, ":"]}}', True, id="colons inside strings"),
    pytest.param(b'{"x": "\\u003a", "a": 1, "a": 2}', False, id="an escaped colon, which would hide a key given twice"),
    pytest.param(b'{"a": 18446744073709551616}', False, id="an integer past 64 bits"),
    pytest.param(b'{"a": -9223372036854775809}', False, id="a negative integer past 64 bits"),
    pytest.param(b'{"a": ', False, id="malformed: the slower parser words the error"),
])
def test_the_fast_parse_is_taken_only_when_counting_can_decide(body, fast):
    assert (codec._loads_without_duplicates(body) is not None) == fast
