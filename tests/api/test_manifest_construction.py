"""Manifests are built from YAML nodes directly (``FastStrictLoader``) unless a document has
something only PyYAML's construction handles; either way the objects, shared anchors, duplicate
keys and errors are those PyYAML's strict loader gives."""

from __future__ import annotations

import pytest
import yaml

from kubesched.api.manifests import FastStrictLoader, StrictLoader


def both(text: str) -> tuple[object, object]:
    return list(yaml.load_all(text, Loader=StrictLoader)), list(yaml.load_all(text, Loader=FastStrictLoader))


@pytest.mark.parametrize(("name", "text"), [
    ("plain objects", "kind: Pod\nmetadata: {name: a, labels: {x: 'y'}}\nspec:\n  containers: [{name: c, image: i}]\n"),
    ("several documents, one empty", "a: 1\n---\n---\nb: [1, 2]\n"),
    ("YAML 1.1 scalars", "a: yes\nb: ~\nc: 0x1F\nd: 1_000\ne: .inf\nf: 2024-01-02T03:04:05Z\ng: 2024-01-02\nh: !!binary aGk=\n"),
    ("explicit string tags", "a: !!str 1\nb: !!int '7'\n"),
    ("keys given twice", "a: 1\nb: {c: 1, c: 2}\na: 3\n"),
    ("equal keys of other types", "1: a\ntrue: b\n1.0: c\n"),
    ("anchors and aliases", "base: &b {x: 1, y: [1, 2]}\nsame: *b\nlist: &l [a, b]\nagain: *l\n"),
    ("merge keys", "base: &b {x: 1, y: 2}\nmerged: {<<: *b, y: 3, y: 4}\n"),
    ("a set", "s: !!set {a, b}\n"),
    ("ordered pairs", "p: !!omap [{a: 1}, {b: 2}]\n"),
    ("deep nesting", "a: " + "[" * 100 + "]" * 100 + "\n"),
])
def test_documents_are_built_as_pyyaml_builds_them(name, text):
    slow, fast = both(text)
    assert repr(fast) == repr(slow), name
    assert [getattr(d, "duplicates", None) for d in fast] == [getattr(d, "duplicates", None) for d in slow]


def test_nested_duplicates_are_remembered_where_they_were_given():
    _, (doc,) = both("spec: {a: 1, a: 2}\n")
    assert doc["spec"].duplicates == ["a"] and not getattr(doc, "duplicates", [])


def test_aliases_share_one_object():
    _, (doc,) = both("a: &x {k: v}\nb: *x\n")
    assert doc["a"] is doc["b"]


@pytest.mark.parametrize(("name", "text"), [
    ("an unhashable key", "? [a, b]\n: 1\n"),
    ("a recursive mapping", "a: &a {b: *a}\n"),
    ("a recursive sequence", "a: &a [1, *a]\n"),
    ("an unknown tag", "a: !custom 1\n"),
])
def test_errors_are_pyyaml_s(name, text):
    errors = []
    for loader in (StrictLoader, FastStrictLoader):
        with pytest.raises(yaml.YAMLError) as raised:
            list(yaml.load_all(text, Loader=loader))
        errors.append(str(raised.value))
    assert errors[0] == errors[1], name
