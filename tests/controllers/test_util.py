"""Controller helpers: hashing, int-or-percent, fenceposts and the event writer."""

import pytest

from kubesched.api.kinds import EVENT
from kubesched.apiserver.store import ObjectStore
from kubesched.simulator.controllers.deployment import resolve_fenceposts
from kubesched.simulator.controllers.util import (
    EventWriter,
    SelectorCache,
    compute_hash,
    fnv32a,
    replicas_of,
    safe_encode_string,
    scaled_value,
)


def test_fnv32a_and_safe_encoding():
    assert fnv32a(b"") == 0x811C9DC5
    assert fnv32a(b"a") == 0xE40C292C
    assert fnv32a(b"foobar") == 0xBF9CF968
    assert safe_encode_string("0123456789") == "456789bcdf"


def test_template_hash_is_stable_and_moves_with_collision_count():
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "x", "image": "nginx"}]}}
    same = {"spec": {"containers": [{"image": "nginx", "name": "x"}]}, "metadata": {"labels": {"app": "x"}}}
    assert compute_hash(template) == compute_hash(same)
    assert compute_hash(template) != compute_hash(template, 1)
    assert compute_hash(template, 0) != compute_hash(template)


@pytest.mark.parametrize(("value", "total", "round_up", "expected"), [
    ("25%", 10, True, 3), ("25%", 10, False, 2), (2, 10, True, 2), ("0%", 5, True, 0), ("100%", 3, False, 3),
])
def test_scaled_value(value, total, round_up, expected):
    assert scaled_value(value, total, round_up) == expected


@pytest.mark.parametrize(("value", "message"), [
    pytest.param("5", "invalid value for IntOrString: invalid type: string is not a percentage", id="a number in a string"),
    pytest.param("x%", 'invalid value for IntOrString: invalid value "x%": strconv.Atoi: parsing "x": invalid syntax',
                 id="not a number"),
])
def test_scaled_value_refuses_what_upstream_refuses(value, message):
    with pytest.raises(ValueError) as e:
        scaled_value(value, 10, True)
    assert str(e.value) == message


@pytest.mark.parametrize(("replicas", "expected"), [(None, 1), (0, 0), (3, 3)])
def test_replicas_default_to_one_when_unset_or_null(replicas, expected):
    assert replicas_of({"spec": {} if replicas is None else {"replicas": replicas}}) == expected
    assert replicas_of({"spec": {"replicas": replicas}}) == expected


def test_selector_cache_parses_again_when_the_spec_moves():
    cache = SelectorCache()
    rs = {"kind": "ReplicaSet", "metadata": {"uid": "u", "generation": 1}, "spec": {"selector": {"matchLabels": {"a": "1"}}}}
    first = cache.get(rs)
    assert cache.get({**rs, "spec": {"selector": {"matchLabels": {"a": "2"}}}}) is first  # same generation: cached
    moved = cache.get({**rs, "metadata": {"uid": "u", "generation": 2}, "spec": {"selector": {"matchLabels": {"a": "2"}}}})
    assert moved is not None and moved.matches({"a": "2"}) and not moved.matches({"a": "1"})


@pytest.mark.parametrize(("replicas", "surge", "unavailable", "expected"), [
    (10, "25%", "25%", (3, 2)),
    (1, "25%", "25%", (1, 0)),
    (2, "0%", "1%", (0, 1)),  # both resolve to zero: one may be unavailable
])
def test_resolve_fenceposts(replicas, surge, unavailable, expected):
    d = {"spec": {"replicas": replicas, "strategy": {"type": "RollingUpdate",
                                                     "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}}}
    assert resolve_fenceposts(d) == expected


def test_an_identical_event_bumps_the_count_of_the_first():
    store = ObjectStore(seed=1)
    write = EventWriter(store, "controllermanager")
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "default", "uid": "u"}}
    write(pod, "Warning", "NotDeleted", "late")
    write(pod, "Warning", "NotDeleted", "late")
    write(pod, "Warning", "NotDeleted", "later")
    events = sorted(store.iter_all(EVENT), key=lambda e: e["message"])
    assert [(e["message"], e["count"]) for e in events] == [("late", 2), ("later", 1)]
    store.delete(EVENT, "default", events[0]["metadata"]["name"])
    write(pod, "Warning", "NotDeleted", "late")
    assert sorted(e["count"] for e in store.iter_all(EVENT)) == [1, 1]
