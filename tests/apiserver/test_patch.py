"""PATCH semantics: JSON merge patch, JSON patch, strategic merge patch, server-side apply."""

import re

import pytest

from kubesched.api.apierrors import BadRequest, Conflict
from kubesched.apiserver.apply import from_fields_v1, leaf_paths, record_update, server_side_apply
from kubesched.apiserver.patch import PatchError, apply_patch, json_patch, merge_patch, strategic_merge

POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
    "spec": {
        "containers": [
            {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 80}]},
            {"name": "side", "image": "side:1"},
        ],
        "tolerations": [{"key": "k", "operator": "Exists"}],
    },
    "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]},
}


@pytest.mark.parametrize("patch, expected_labels", [
    ({"metadata": {"labels": {"c": "3"}}}, {"a": "1", "b": "2", "c": "3"}),
    ({"metadata": {"labels": {"a": None}}}, {"b": "2"}),
    ({"metadata": {"labels": {"a": "9"}}}, {"a": "9", "b": "2"}),
])
def test_merge_patch_merges_maps_and_null_deletes(patch, expected_labels):
    assert merge_patch(POD, patch)["metadata"]["labels"] == expected_labels


def test_merge_patch_replaces_lists_and_leaves_input_alone():
    out = merge_patch(POD, {"spec": {"containers": [{"name": "only", "image": "i"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["only"]
    assert len(POD["spec"]["containers"]) == 2


@pytest.mark.parametrize("ops, check", [
    ([{"op": "add", "path": "/metadata/labels/c", "value": "3"}], lambda o: o["metadata"]["labels"]["c"] == "3"),
    ([{"op": "remove", "path": "/metadata/labels/a"}], lambda o: "a" not in o["metadata"]["labels"]),
    ([{"op": "replace", "path": "/spec/containers/0/image", "value": "app:2"}], lambda o: o["spec"]["containers"][0]["image"] == "app:2"),
    ([{"op": "add", "path": "/spec/containers/-", "value": {"name": "z"}}], lambda o: o["spec"]["containers"][-1]["name"] == "z"),
    ([{"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels/z"}], lambda o: o["metadata"]["labels"].get("z") == "1"),
    ([{"op": "copy", "from": "/metadata/labels/a", "path": "/metadata/labels/y"}], lambda o: o["metadata"]["labels"]["y"] == "1"),
    ([{"op": "add", "path": "/metadata/labels/a~1b", "value": "s"}], lambda o: o["metadata"]["labels"]["a/b"] == "s"),
    ([{"op": "test", "path": "/metadata/name", "value": "p"}], lambda o: o["metadata"]["name"] == "p"),
])
def test_json_patch_operations(ops, check):
    assert check(json_patch(POD, ops))
    assert "c" not in POD["metadata"]["labels"]


@pytest.mark.parametrize("ops", [
    [{"op": "test", "path": "/metadata/name", "value": "q"}],
    [{"op": "remove", "path": "/metadata/nope"}],
    [{"op": "replace", "path": "/spec/containers/9/image", "value": "x"}],
])
def test_json_patch_failures_are_unprocessable(ops):
    with pytest.raises(PatchError) as err:
        json_patch(POD, ops)
    assert err.value.code == 422


def test_strategic_merge_merges_containers_by_name_and_env_by_name():
    out = strategic_merge(POD, {"spec": {"containers": [{"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}]}]}}, "Pod")
    app = out["spec"]["containers"][0]
    assert [c["name"] for c in out["spec"]["containers"]] == ["app", "side"]
    assert app["image"] == "app:2"
    assert [e["name"] for e in app["env"]] == ["A", "B"]
    assert app["ports"] == [{"containerPort": 80}]


def test_strategic_merge_replaces_lists_without_merge_key():
    out = strategic_merge(POD, {"spec": {"tolerations": [{"key": "other", "operator": "Exists"}]}}, "Pod")
    assert out["spec"]["tolerations"] == [{"key": "other", "operator": "Exists"}]


def test_strategic_merge_directives():
    delete_one = strategic_merge(POD, {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}, "Pod")
    assert [c["name"] for c in delete_one["spec"]["containers"]] == ["app"]
    replace = strategic_merge(POD, {"spec": {"containers": [{"$patch": "replace"}, {"name": "new", "image": "n"}]}}, "Pod")
    assert replace["spec"]["containers"] == [{"name": "new", "image": "n"}]
    union = strategic_merge(POD, {"metadata": {"finalizers": ["y"]}}, "Pod")
    assert union["metadata"]["finalizers"] == ["x", "y"]
    removed = strategic_merge(POD, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}, "Pod")
    assert removed["metadata"]["finalizers"] == []
    ordered = strategic_merge(POD, {"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "app"}]}}, "Pod")
    assert [c["name"] for c in ordered["spec"]["containers"]] == ["side", "app"]
    map_replace = strategic_merge(POD, {"metadata": {"labels": {"$patch": "replace", "z": "1"}}}, "Pod")
    assert map_replace["metadata"]["labels"] == {"z": "1"}


def test_strategic_merge_retain_keys_drops_the_other_union_members():
    deployment = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    out = strategic_merge(deployment, {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}, "Deployment")
    assert out["spec"]["strategy"] == {"type": "Recreate"}


def test_strategic_merge_conditions_merge_by_type():
    out = strategic_merge(POD, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, "Pod")
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]


def test_strategic_merge_list_element_without_merge_key_is_bad_request():
    with pytest.raises(BadRequest, match="does not contain declared merge key: name"):
        strategic_merge(POD, {"spec": {"containers": [{"image": "x"}]}}, "Pod")


def test_apply_patch_dispatches_on_content_type():
    assert apply_patch("application/merge-patch+json", {"a": 1}, {"b": 2}, "ConfigMap") == {"a": 1, "b": 2}
    with pytest.raises(Exception, match="unknown format"):
        apply_patch("text/plain", {}, {}, "ConfigMap")


# --- server-side apply -----------------------------------------------------------------------------
CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"k1": "v1", "k2": "v2"}}


def test_field_sets_use_upstream_path_segments():
    paths = leaf_paths(POD, "Pod")
    assert ("f:spec", "f:containers", 'k:{"name":"app"}', "f:image") in paths
    assert ("f:metadata", "f:finalizers", 'v:"x"') in paths
    assert not any(p[0] == "f:status" for p in paths)


def test_apply_creates_then_removes_fields_no_longer_applied():
    created = server_side_apply(None, CM, "m", False, "ConfigMap", "t0")
    assert created["metadata"]["managedFields"][0]["manager"] == "m"
    second = {**CM, "data": {"k1": "v1", "k3": "v3"}}
    updated = server_side_apply(created, second, "m", False, "ConfigMap", "t1")
    assert updated["data"] == {"k1": "v1", "k3": "v3"}
    assert updated["metadata"]["labels"] == {"a": "1"}


def test_apply_keeps_fields_owned_by_someone_else():
    live = server_side_apply(None, CM, "m", False, "ConfigMap", "t0")
    other = server_side_apply(live, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k2": "v2"}},
                              "other", False, "ConfigMap", "t1")
    out = server_side_apply(other, {**CM, "data": {"k1": "v1"}}, "m", False, "ConfigMap", "t2")
    assert out["data"] == {"k1": "v1", "k2": "v2"}


def test_apply_conflicts_unless_forced():
    live = server_side_apply(None, CM, "m", False, "ConfigMap", "t0")
    changed = {**CM, "data": {"k1": "other"}}
    with pytest.raises(Conflict, match=re.escape('Apply failed with 1 conflict: conflict with "m" using v1: .data.k1')):
        server_side_apply(live, changed, "n", False, "ConfigMap", "t1")
    forced = server_side_apply(live, changed, "n", True, "ConfigMap", "t1")
    owners = {e["manager"]: from_fields_v1(e["fieldsV1"]) for e in forced["metadata"]["managedFields"]}
    assert ("f:data", "f:k1") in owners["n"] and ("f:data", "f:k1") not in owners["m"]


def test_same_value_is_shared_ownership_not_a_conflict():
    live = server_side_apply(None, CM, "m", False, "ConfigMap", "t0")
    out = server_side_apply(live, CM, "n", False, "ConfigMap", "t1")
    assert {e["manager"] for e in out["metadata"]["managedFields"]} == {"m", "n"}


def test_record_update_takes_over_changed_fields():
    live = server_side_apply(None, CM, "m", False, "ConfigMap", "t0")
    new = {**live, "data": {"k1": "changed", "k2": "v2"}, "metadata": dict(live["metadata"])}
    record_update(live, new, "editor", "v1", "ConfigMap", "t1")
    owners = {e["manager"]: from_fields_v1(e["fieldsV1"]) for e in new["metadata"]["managedFields"]}
    assert owners["editor"] == {("f:data", "f:k1")}
    assert ("f:data", "f:k1") not in owners["m"]
