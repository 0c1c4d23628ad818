"""Manifests are read whole or not at all, with errors naming the object and field."""

import json

import pytest

from kubesched.api.errors import InvalidObject, ManifestError
from kubesched.api.manifests import load, parse_documents

NODE = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {capacity: {cpu: "4", memory: 8Gi, pods: "110"}}
"""


def test_multi_document_yaml_and_lists_are_flattened(tmp_path):
    (tmp_path / "a.yaml").write_text(NODE + "---\n" + """
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: p1}
  spec: {containers: [{name: c, image: nginx}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: p2}
  spec: {containers: [{name: c, image: nginx}]}
---
""")
    objs = load([tmp_path])
    assert [o["kind"] for o in objs] == ["Node", "Pod", "Pod"]


def test_json_and_unknown_kinds_are_kept(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}))
    assert load([tmp_path / "x.json"])[0]["kind"] == "Widget"


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, resources: {requests: {cpu: '-1'}}}]}",
         'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}", "spec.containers: Required value"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_Name}\nspec: {containers: [{name: c, image: i}]}", "metadata.name: Invalid value"),
        ("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: {taints: [{key: k, effect: Sometimes}]}",
         'spec.taints[0].effect: Unsupported value: "Sometimes"'),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}}]}",
         "must be less than or equal to cpu limit"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i}]\n  tolerations: [{operator: Equal, value: x}]",
         "operator must be Exists when `key` is empty"),
    ],
)
def test_invalid_objects_name_object_and_field(tmp_path, doc, needle):
    (tmp_path / "ok.yaml").write_text(NODE)
    (tmp_path / "zbad.yaml").write_text(doc)
    with pytest.raises(InvalidObject) as info:
        load([tmp_path])
    assert needle in str(info.value)


def test_syntax_errors_and_missing_kind_are_manifest_errors():
    with pytest.raises(ManifestError, match="cannot parse"):
        parse_documents("a: [unclosed", "f.yaml")
    with pytest.raises(ManifestError, match="Object 'Kind' is missing"):
        parse_documents("apiVersion: v1\nmetadata: {name: x}", "f.yaml")
    with pytest.raises(ManifestError, match="no such file"):
        load(["/nonexistent/path.yaml"])


def test_a_directory_read_leaves_out_the_files_to_skip(tmp_path):
    """The scheduler configuration kept beside the manifests is not one of them."""
    (tmp_path / "node.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    assert [o["metadata"]["name"] for o in load([tmp_path], skip=[str(config)])] == ["n1"]
    with pytest.raises(InvalidObject):
        load([tmp_path])
