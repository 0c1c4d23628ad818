"""A pod's effective request, as component-helpers' PodRequests computes it."""

import pytest

from kubesched.api.resources import non_zero_requests, pod_requests, qos_class, scheduler_resources


def container(name, requests=None, limits=None, restart_policy=None):
    c = {"name": name, "image": "img", "resources": {}}
    if requests:
        c["resources"]["requests"] = requests
    if limits:
        c["resources"]["limits"] = limits
    if restart_policy:
        c["restartPolicy"] = restart_policy
    return c


def pod(containers, init=None, overhead=None, pod_resources=None):
    spec = {"containers": containers}
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = overhead
    if pod_resources:
        spec["resources"] = pod_resources
    return {"metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize(
    ("name", "the_pod", "expected"),
    [
        ("containers are summed", pod([container("a", {"cpu": "1", "memory": "1G"}), container("b", {"cpu": "2", "memory": "1G"})]),
         {"cpu": 3000, "memory": 2_000_000_000}),
        ("an init container is a floor",
         pod([container("a", {"cpu": "2", "memory": "1G"}), container("b", {"cpu": "1", "memory": "1G"})],
             init=[container("i1", {"cpu": "2", "memory": "1G"}), container("i2", {"cpu": "2", "memory": "3G"})]),
         {"cpu": 3000, "memory": 3_000_000_000}),
        ("sidecars add to containers and to later init containers",
         pod([container("a", {"cpu": "1"})],
             init=[container("side", {"cpu": "1"}, restart_policy="Always"), container("i", {"cpu": "3"})]),
         {"cpu": 4000}),
        ("sidecar after an init container is added but does not raise the earlier floor",
         pod([container("a", {"cpu": "1"})],
             init=[container("i", {"cpu": "5"}), container("side", {"cpu": "1"}, restart_policy="Always")]),
         {"cpu": 5000}),
        ("overhead is added last", pod([container("a", {"cpu": "500m"})], overhead={"cpu": "250m", "memory": "10Mi"}),
         {"cpu": 750, "memory": 10 * 2**20}),
        ("pod-level requests override containers", pod([container("a", {"cpu": "1", "memory": "1Gi"})], pod_resources={"requests": {"cpu": "3"}}),
         {"cpu": 3000, "memory": 2**30}),
        ("extended resources are kept", pod([container("a", {"example.com/gpu": "2"})]), {"example.com/gpu": 2}),
        ("hugepages are kept", pod([container("a", {"hugepages-2Mi": "4Mi"})]), {"hugepages-2Mi": 4 * 2**20}),
    ],
)
def test_pod_requests(name, the_pod, expected):
    assert scheduler_resources(pod_requests(the_pod)) == expected, name


def test_non_zero_defaults_apply_to_missing_requests_only():
    assert non_zero_requests(pod([container("a")]), pod_requests(pod([container("a")]))) == (100, 200 * 2**20)
    explicit_zero = pod([container("a", {"cpu": "0", "memory": "0"})])
    assert non_zero_requests(explicit_zero, pod_requests(explicit_zero)) == (0, 0)
    two = pod([container("a"), container("b", {"cpu": "1"})])
    assert non_zero_requests(two, pod_requests(two)) == (1100, 400 * 2**20)


def with_pod_resources(the_pod: dict, resources: dict) -> dict:
    return {**the_pod, "spec": {**the_pod["spec"], "resources": resources}}


GUARANTEED = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("the_pod", "expected"),
    [
        pytest.param(pod([container("a")]), "BestEffort", id="nothing asked"),
        pytest.param(pod([container("a", {"cpu": "1"})]), "Burstable", id="requests only"),
        pytest.param(pod([container("a", GUARANTEED, GUARANTEED)]), "Guaranteed", id="requests equal limits"),
        pytest.param(pod([container("a", None, GUARANTEED)]), "Burstable",
                     id="limits without requests (defaulting copies them first)"),
        pytest.param(pod([container("a", {"cpu": "1"}, GUARANTEED)]), "Burstable", id="fewer requests than limits"),
        pytest.param(pod([container("a", GUARANTEED, {"cpu": "2", "memory": "1Gi"})]), "Burstable", id="requests below limits"),
        pytest.param(pod([container("a", GUARANTEED, GUARANTEED), container("b")]), "Burstable", id="one container unbounded"),
        pytest.param(pod([container("a", {"cpu": "0"}, {"cpu": "0"})]), "BestEffort", id="zero amounts do not count"),
        pytest.param(with_pod_resources(pod([container("a", GUARANTEED, GUARANTEED)]), {}), "BestEffort",
                     id="empty pod-level resources decide alone"),
        pytest.param(with_pod_resources(pod([container("a")]), {"requests": GUARANTEED, "limits": GUARANTEED}), "Guaranteed",
                     id="pod-level requests equal limits"),
        pytest.param(with_pod_resources(pod([container("a")]), {"limits": {"cpu": "1"}}), "Burstable",
                     id="pod-level limits without memory"),
    ],
)
def test_qos_class(the_pod, expected):
    assert qos_class(the_pod) == expected


def test_qos_class_ignores_pod_level_resources_with_the_gate_off():
    the_pod = with_pod_resources(pod([container("a", GUARANTEED, GUARANTEED)]), {})
    assert qos_class(the_pod, pod_level=False) == "Guaranteed"


def resizing(spec_cpu: str, status_cpu: str, allocated_cpu: str, reason: str | None) -> dict:
    """A pod asking ``spec_cpu`` whose container runs with ``status_cpu`` and was allocated ``allocated_cpu``."""
    the_pod = pod([container("a", {"cpu": spec_cpu})])
    the_pod["status"] = {"containerStatuses": [{"name": "a", "resources": {"requests": {"cpu": status_cpu}},
                                                "allocatedResources": {"cpu": allocated_cpu}}]}
    if reason:
        the_pod["status"]["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": reason}]
    return the_pod


@pytest.mark.parametrize(
    ("the_pod", "cpu"),
    [
        pytest.param(resizing("2", "1", "1", None), 2000, id="resize up in progress counts the desired requests"),
        pytest.param(resizing("2", "1", "1", "Deferred"), 2000, id="a deferred resize still counts them"),
        pytest.param(resizing("2", "1", "1", "Infeasible"), 1000, id="an infeasible resize counts what runs"),
        pytest.param(resizing("500m", "1", "750m", "Infeasible"), 1000, id="infeasible: the larger of actual and allocated"),
    ],
)
def test_requests_during_an_in_place_resize(the_pod, cpu):
    assert scheduler_resources(pod_requests(the_pod))["cpu"] == cpu
