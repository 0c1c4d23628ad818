"""``PodInfo.reuse_views``: a newer version of a pod takes over the views an older one computed
only where they cannot differ (equal spec, labels and uid; request views only while no status
sizes containers), and the views taken over equal what the newer version computes itself."""

from __future__ import annotations

from kubesched.api.meta import json_copy
from kubesched.api.types import PodInfo
from tests.helpers import make_pod

VIEWS = ("labels", "requests_key", "requests", "non_zero_requests", "host_ports", "tolerations", "has_affinity",
         "required_anti_affinity_terms", "scheduler_name", "priority")


def computed(info: PodInfo) -> PodInfo:
    for name in VIEWS:
        getattr(info, name)
    return info


def running(pod: dict) -> dict:
    """The same pod after a kubelet's status write: spec and metadata carried over as they are."""
    return {**pod, "status": {"phase": "Running", "startTime": "2025-01-01T00:00:00Z",
                              "containerStatuses": [{"name": "c", "ready": True}]}}


def test_a_status_write_takes_over_every_view_of_the_unchanged_spec():
    pod = make_pod("p", cpu="100m", labels={"app": "a"}, node="n1",
                   tolerations=[{"key": "k", "operator": "Exists"}])
    earlier = computed(PodInfo(pod))
    later = PodInfo(running(pod))
    later.reuse_views(earlier)
    for name in VIEWS:
        assert later.__dict__[name] is earlier.__dict__[name]
        assert getattr(computed(PodInfo(running(pod))), name) == getattr(later, name)
    assert later.start_time is not None and earlier.start_time is None


def test_an_equal_spec_built_apart_is_taken_over_too():
    pod = make_pod("p", cpu="100m")
    later = PodInfo(json_copy(pod))
    later.reuse_views(computed(PodInfo(pod)))
    assert "requests_key" in later.__dict__


def test_nothing_is_taken_over_from_a_changed_spec_labels_or_another_pod():
    pod = make_pod("p", cpu="100m", labels={"app": "a"})
    earlier = computed(PodInfo(pod))
    for changed in (make_pod("p", cpu="200m", labels={"app": "a"}), make_pod("p", cpu="100m", labels={"app": "b"}),
                    {**pod, "metadata": {**pod["metadata"], "uid": "other"}}):
        later = PodInfo(changed)
        later.reuse_views(earlier)
        assert later.__dict__ == {}


def test_request_views_are_not_taken_over_while_a_status_sizes_containers():
    pod = make_pod("p", cpu="100m")
    resized = {**pod, "status": {"containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": "50m"}}}]}}
    later = PodInfo(resized)
    later.reuse_views(computed(PodInfo(pod)))
    assert "requests_key" not in later.__dict__ and "requests" not in later.__dict__
    assert "tolerations" in later.__dict__
