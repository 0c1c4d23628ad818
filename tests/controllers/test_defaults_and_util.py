"""Defaulting of the workload kinds, the selector/template validation, hashing and int-or-percent."""

import pytest

from kubesched.cluster.store import EVENT, ObjectStore
from kubesched.controllers import (
    default_deployment,
    default_replica_set,
    default_stateful_set,
    default_workload,
    validate_workload,
)
from kubesched.controllers.deployment import resolve_fenceposts
from kubesched.controllers.util import EventWriter, compute_hash, fnv32a, safe_encode_string, scaled_value


def test_deployment_defaults():
    d = {"kind": "Deployment", "spec": {"selector": {"matchLabels": {"app": "x"}},
                                        "template": {"metadata": {"labels": {"app": "x"}},
                                                     "spec": {"containers": [{"name": "x", "image": "nginx"}]}}}}
    default_workload(d)
    spec = d["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert (spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (10, 600)
    pod_spec = spec["template"]["spec"]
    assert (pod_spec["restartPolicy"], pod_spec["dnsPolicy"], pod_spec["terminationGracePeriodSeconds"]) == ("Always", "ClusterFirst", 30)
    container = pod_spec["containers"][0]
    assert (container["imagePullPolicy"], container["terminationMessagePath"]) == ("Always", "/dev/termination-log")


def test_defaults_keep_what_is_set_and_recreate_has_no_rolling_parameters():
    d = {"kind": "Deployment", "spec": {"replicas": 0, "strategy": {"type": "Recreate"}, "revisionHistoryLimit": 2}}
    default_deployment(d)
    assert (d["spec"]["replicas"], d["spec"]["strategy"], d["spec"]["revisionHistoryLimit"]) == (0, {"type": "Recreate"}, 2)


@pytest.mark.parametrize(("image", "policy"), [
    ("nginx", "Always"), ("nginx:latest", "Always"), ("nginx:1.27", "IfNotPresent"),
    ("registry:5000/nginx", "Always"), ("registry:5000/nginx:1", "IfNotPresent"), ("nginx@sha256:abc", "IfNotPresent"),
])
def test_image_pull_policy_default(image, policy):
    rs = {"kind": "ReplicaSet", "spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}}
    default_replica_set(rs)
    assert rs["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_stateful_set_defaults():
    sts = {"kind": "StatefulSet", "spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {}}]}}
    default_stateful_set(sts)
    spec = sts["spec"]
    assert (spec["replicas"], spec["podManagementPolicy"]) == (1, "OrderedReady")
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert spec["volumeClaimTemplates"][0]["spec"]["volumeMode"] == "Filesystem"


@pytest.mark.parametrize(("obj", "errors"), [
    pytest.param({"kind": "Deployment", "spec": {"selector": {"matchLabels": {"app": "x"}},
                                                 "template": {"metadata": {"labels": {"app": "x"}}}}}, [], id="matching"),
    pytest.param({"kind": "Deployment", "spec": {"selector": {"matchLabels": {"app": "x"}},
                                                 "template": {"metadata": {"labels": {"app": "y"}}}}},
                 ['spec.template.metadata.labels: Invalid value: map[string]string{"app":"y"}: `selector` does not match template `labels`'],
                 id="mismatch"),
    pytest.param({"kind": "ReplicaSet", "spec": {"template": {"metadata": {"labels": {"app": "y"}}}}},
                 ["spec.selector: Required value"], id="missing selector"),
    pytest.param({"kind": "Pod", "spec": {}}, [], id="other kinds are not checked"),
])
def test_validate_workload(obj, errors):
    assert [str(e) for e in validate_workload(obj)] == errors


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
