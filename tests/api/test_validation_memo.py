"""Pod specs and resource sections found valid once are not checked again; anything else still
is, and reports its errors at its own path."""

from __future__ import annotations

from kubesched.api.validation import validate
from tests.helpers import make_pod


def _paths(pod: dict) -> list[str]:
    return [e.path for e in validate(pod)]


def test_a_valid_spec_seen_before_stays_valid_and_an_invalid_one_is_still_reported():
    valid = make_pod("a", cpu="100m")
    assert _paths(valid) == []
    assert _paths(make_pod("b", cpu="100m")) == []
    invalid = make_pod("c", cpu="100m")
    invalid["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "50m"}
    first, again = _paths(invalid), _paths(invalid)
    assert first == again == ["spec.containers[0].resources.requests"]


def test_a_section_valid_in_one_place_is_checked_where_it_is_invalid():
    pod = make_pod("a", cpu="100m")
    assert _paths(pod) == []
    overhead = make_pod("b", cpu="100m")
    overhead["spec"]["overhead"] = {"cpu": "-1"}
    assert _paths(overhead) == ["spec.overhead[cpu]"]
