"""kube-apiserver's defaulting (``SetDefaults_*``) as the object store applies it, and the
selector/template validation of the workload kinds."""

import pytest

from kubesched.api.defaults import (
    default_deployment,
    default_pod,
    default_replica_set,
    default_stateful_set,
    pull_policy,
    set_defaults,
    validate_spec,
)
from kubesched.api.kinds import kind_named

DEPLOYMENT = kind_named("Deployment")


def test_deployment_defaults():
    d = {"kind": "Deployment", "spec": {"selector": {"matchLabels": {"app": "x"}},
                                        "template": {"metadata": {"labels": {"app": "x"}},
                                                     "spec": {"containers": [{"name": "x", "image": "nginx"}]}}}}
    set_defaults(DEPLOYMENT, d)
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


def test_explicit_null_replicas_default_to_one():
    rs = {"kind": "ReplicaSet", "spec": {"replicas": None}}
    default_replica_set(rs)
    assert rs["spec"]["replicas"] == 1


@pytest.mark.parametrize(("image", "policy"), [
    ("nginx", "Always"), ("nginx:latest", "Always"), ("nginx:1.27", "IfNotPresent"),
    ("registry:5000/nginx", "Always"), ("registry:5000/nginx:1", "IfNotPresent"), ("nginx@sha256:abc", "IfNotPresent"),
    ("nginx:latest@sha256:abc", "Always"),
])
def test_image_pull_policy_default(image, policy):
    assert pull_policy(image) == policy
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


def pod_with(spec: dict) -> dict:
    return {"kind": "Pod", "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


def test_host_network_container_ports_default_their_host_port():
    pod = pod_with({"hostNetwork": True, "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80},
                                                                                             {"containerPort": 81, "hostPort": 8081}]}],
                    "initContainers": [{"name": "init", "image": "i", "ports": [{"containerPort": 90}]}]})
    default_pod(pod)
    assert [p["hostPort"] for p in pod["spec"]["containers"][0]["ports"]] == [80, 8081]
    assert pod["spec"]["initContainers"][0]["ports"][0] == {"containerPort": 90, "hostPort": 90, "protocol": "TCP"}


def test_pod_network_container_ports_keep_no_host_port():
    pod = pod_with({"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]})
    default_pod(pod)
    assert "hostPort" not in pod["spec"]["containers"][0]["ports"][0]


def two_containers(cpu_a: str, cpu_b: str) -> list[dict]:
    return [{"name": "a", "image": "i", "resources": {"requests": {"cpu": cpu_a}}},
            {"name": "b", "image": "i", "resources": {"requests": {"cpu": cpu_b}}}]


@pytest.mark.parametrize(("containers", "pod_resources", "requests"), [
    pytest.param(two_containers("100m", "200m"), {"limits": {"cpu": "1", "memory": "1Gi"}}, {"cpu": "300m", "memory": "1Gi"},
                 id="containers' requests first, limits for the rest"),
    pytest.param([{"name": "a", "image": "i"}], {"limits": {"cpu": "1"}}, {"cpu": "1"}, id="no container request: the limit"),
    pytest.param(two_containers("100m", "200m"), {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}}, {"cpu": "2"},
                 id="pod-level requests are kept"),
    pytest.param([{"name": "a", "image": "i", "resources": {"requests": {"memory": "1Gi", "example.com/gpu": "1"}}}],
                 {"limits": {"memory": "2Gi"}}, {"memory": "1Gi"}, id="only cpu and memory come from containers"),
])
def test_pod_level_requests_default(containers, pod_resources, requests):
    pod = pod_with({"containers": containers, "resources": pod_resources})
    default_pod(pod)
    assert pod["spec"]["resources"]["requests"] == requests


def test_pod_level_defaults_wait_for_the_feature_gate():
    pod = pod_with({"resources": {"limits": {"cpu": "1"}}})
    default_pod(pod, {"PodLevelResources": False})
    assert "requests" not in pod["spec"]["resources"]


def test_hugepage_pod_limits_default_from_containers():
    hugepages = {"hugepages-2Mi": "4Mi"}
    pod = pod_with({"containers": [{"name": "a", "image": "i", "resources": {"limits": hugepages}},
                                   {"name": "b", "image": "i", "resources": {"limits": hugepages}}],
                    "resources": {"limits": {"cpu": "1"}}})
    default_pod(pod)
    assert pod["spec"]["resources"]["limits"] == {"cpu": "1", "hugepages-2Mi": "8Mi"}
    assert pod["spec"]["resources"]["requests"] == {"cpu": "1", "hugepages-2Mi": "8Mi"}


def workload(kind: str, selector: dict | None, labels: dict) -> dict:
    spec: dict = {"template": {"metadata": {"labels": labels}}}
    if selector is not None:
        spec["selector"] = selector
    return {"kind": kind, "spec": spec}


@pytest.mark.parametrize(("kind", "obj", "errors"), [
    pytest.param("Deployment", workload("Deployment", {"matchLabels": {"app": "x"}}, {"app": "x"}), [], id="matching"),
    pytest.param("Deployment", workload("Deployment", {"matchLabels": {"app": "x"}}, {"app": "y"}),
                 ['spec.template.metadata.labels: Invalid value: map[string]string{"app":"y"}: `selector` does not match template `labels`'],
                 id="mismatch"),
    pytest.param("ReplicaSet", workload("ReplicaSet", None, {"app": "y"}), ["spec.selector: Required value"], id="missing selector"),
    pytest.param("ReplicaSet", workload("ReplicaSet", {}, {"app": "y"}),
                 ["spec.selector: Invalid value: {}: empty selector is invalid for deployment"], id="empty (the RS message says deployment)"),
    pytest.param("StatefulSet", workload("StatefulSet", {}, {"app": "y"}),
                 ["spec.selector: Invalid value: {}: empty selector is invalid for statefulset"], id="empty statefulset selector"),
    pytest.param("DaemonSet", workload("DaemonSet", {"matchLabels": {"app": "x"}}, {}),
                 ['spec.template.metadata.labels: Invalid value: map[string]string{}: `selector` does not match template `labels`'],
                 id="daemonset mismatch"),
    pytest.param("Pod", {"kind": "Pod", "spec": {}}, [], id="other kinds are not checked"),
])
def test_validate_spec(kind, obj, errors):
    assert [str(e) for e in validate_spec(kind_named(kind), obj)] == errors


def rolling(max_surge: object, max_unavailable: object) -> dict:
    return {"kind": "Deployment", "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}}},
                                           "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                                               "maxSurge": max_surge, "maxUnavailable": max_unavailable}}}}


PERCENT = ("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used "
           "for validation is '[0-9]+%')")


@pytest.mark.parametrize(("kind", "obj", "errors"), [
    pytest.param("Deployment", rolling("25%", 1), [], id="percent and integer"),
    pytest.param("Deployment", rolling("5", "25%"), [f"spec.strategy.rollingUpdate.maxSurge: Invalid value: 5: {PERCENT}"],
                 id="a number in a string is no percentage"),
    pytest.param("Deployment", rolling(0, "0%"), ["spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0%: may not be 0 when `maxSurge` is 0"],
                 id="both zero"),
    pytest.param("Deployment", rolling("200%", "150%"),
                 ["spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 150%: must not be greater than 100%"],
                 id="only maxUnavailable is capped"),
    pytest.param("Deployment", rolling(-1, 1), ["spec.strategy.rollingUpdate.maxSurge: Invalid value: -1: must be greater than or equal to 0"],
                 id="negative"),
    pytest.param("PodDisruptionBudget", {"spec": {"minAvailable": "5"}}, [f"spec.minAvailable: Invalid value: 5: {PERCENT}"],
                 id="budget minAvailable"),
    pytest.param("PodDisruptionBudget", {"spec": {"maxUnavailable": "101%"}},
                 ["spec.maxUnavailable: Invalid value: 101%: must not be greater than 100%"], id="budget maxUnavailable"),
])
def test_int_or_percent_fields_are_validated(kind, obj, errors):
    assert [str(e) for e in validate_spec(kind_named(kind), obj)] == errors
