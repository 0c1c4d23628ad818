"""QOSSort: priority first, then QoS class (Guaranteed, Burstable, BestEffort), then the time the
pod was queued (scheduler-plugins ``pkg/qos/queue_sort_test.go``, ``TestSortLess``)."""

from __future__ import annotations

import pytest

from kubesched.contrib.qossort import QOSSort
from kubesched.testing import PluginHarness

EARLIER, LATER = 1.0, 2.0


def resources(cpu: str, memory: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory}


def pod(name: str, priority: int, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict:
    """Upstream's ``makePod``: one container with the given requests and limits."""
    container: dict = {"name": name, "image": "pause"}
    if requests or limits:
        container["resources"] = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"priority": priority, "containers": [container]}}


GUARANTEED = (resources("100m", "100Mi"), resources("100m", "100Mi"))
BURSTABLE = (resources("100m", "100Mi"), resources("200m", "200Mi"))
BEST_EFFORT: tuple[None, None] = (None, None)

CASES = [
    ("p1's priority greater than p2", pod("p1", 100), None, pod("p2", 50), None, True),
    ("p1's priority less than p2", pod("p1", 50), None, pod("p2", 80), None, False),
    ("p1 and p2 are both BestEfforts, but p2 is added to schedulingQ earlier than p1",
     pod("p1", 0, *BEST_EFFORT), LATER, pod("p2", 0, *BEST_EFFORT), EARLIER, False),
    ("p1 is BestEfforts, p2 is Guaranteed", pod("p1", 0, *BEST_EFFORT), None, pod("p2", 0, *GUARANTEED), None, False),
    ("p1 is Burstable, p2 is Guaranteed", pod("p1", 0, *BURSTABLE), None, pod("p2", 0, *GUARANTEED), None, False),
    ("both p1 and p2 are Burstable, but p2 is added to schedulingQ earlier than p1",
     pod("p1", 0, *BURSTABLE), LATER, pod("p2", 0, *BURSTABLE), EARLIER, False),
    ("p1 is Guaranteed, p2 is Burstable", pod("p1", 0, *GUARANTEED), None, pod("p2", 0, *BURSTABLE), None, True),
    ("both p1 and p2 are Guaranteed, but p1 is added to schedulingQ earlier than p2",
     pod("p1", 0, *GUARANTEED), EARLIER, pod("p2", 0, *GUARANTEED), LATER, True),
    # Beyond upstream's table: priority decides before QoS, and the recorded class is the one read.
    ("a higher-priority BestEffort pod goes before a Guaranteed one",
     pod("p1", 10, *BEST_EFFORT), None, pod("p2", 0, *GUARANTEED), None, True),
    ("p1 is Burstable, p2 is BestEffort", pod("p1", 0, *BURSTABLE), None, pod("p2", 0, *BEST_EFFORT), None, True),
]


@pytest.mark.parametrize("name,pod1,queued1,pod2,queued2,want", CASES, ids=[c[0] for c in CASES])
def test_sort_less(name, pod1, queued1, pod2, queued2, want):
    harness = PluginHarness(QOSSort)
    assert harness.less(pod1, pod2, queued1, queued2) is want


def test_recorded_qos_class_is_used():
    """``qos.GetPodQOS`` reads ``status.qosClass`` when the API server recorded one."""
    plugin = QOSSort()
    recorded = {**pod("p1", 0, *BEST_EFFORT), "status": {"qosClass": "Guaranteed"}}
    assert plugin.qos_of(recorded) == "Guaranteed"
    assert plugin.qos_of(pod("p2", 0, *BURSTABLE)) == "Burstable"

