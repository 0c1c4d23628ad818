"""The table of kinds: lookups that may miss answer None, ``known_kind`` never does."""

from __future__ import annotations

import pytest

from kubesched.api.kinds import EVENT, NODE, POD, kind_for, kind_named, known_kind


@pytest.mark.parametrize(
    ("name", "api_version", "resource"),
    [
        ("Pod", "v1", "pods"),
        ("PersistentVolumeClaim", "v1", "persistentvolumeclaims"),
        ("ResourceClaim", "resource.k8s.io/v1", "resourceclaims"),
        ("Event", "v1", "events"),
    ],
    ids=["core kind", "core kind with a long name", "kind of a named group", "core Event wins over events.k8s.io"],
)
def test_known_kind_finds_a_served_kind_by_name(name, api_version, resource):
    kind = known_kind(name)
    assert (kind.api_version, kind.resource) == (api_version, resource)
    assert kind_named(name) is kind


def test_known_kind_refuses_a_kind_kubesched_does_not_serve():
    assert kind_named("Ingress") is None
    with pytest.raises(LookupError, match="kind 'Ingress' is not in kubesched's table of kinds"):
        known_kind("Ingress")


def test_module_constants_are_the_table_entries():
    assert POD is kind_for("v1", "Pod")
    assert NODE is kind_for("v1", "Node")
    assert EVENT is kind_for("v1", "Event")
