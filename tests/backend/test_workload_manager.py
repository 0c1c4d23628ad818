"""The workload manager (upstream ``workloadmanager_test.go`` / ``podgroupinfo_test.go``): pods join
the group their whole ``workloadRef`` names, move from unscheduled to assumed to assigned, and a
group is forgotten with its last pod."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.backend.workloadmanager import WorkloadManager
from kubesched.utils.clock import ManualClock
from tests.helpers import make_pod
from tests.integration.wrappers import workload_ref

REF = {"name": "w", "podGroup": "pg"}


def member(name: str, node: str | None = None, key: str = "") -> PodInfo:
    return PodInfo(make_pod(name, uid=name, node=node, **workload_ref("w", "pg", key)))


def states(manager: WorkloadManager, ref: dict[str, Any] = REF) -> tuple[set[str], set[str], set[str], set[str]]:
    group = manager.pod_group_info("default", ref)
    return group.all_pods(), set(group.unscheduled_pods()), set(group.assumed_pods()), group.assigned_pods()


@pytest.mark.parametrize(("pods", "expected"), [
    pytest.param([member("a"), member("b")], ({"a", "b"}, {"a", "b"}, set(), set()), id="unscheduled pods join as unscheduled"),
    pytest.param([member("a"), member("b", node="n1")], ({"a", "b"}, {"a"}, set(), {"b"}), id="a bound pod joins as assigned"),
    pytest.param([member("a"), member("b", key="2")], ({"a"}, {"a"}, set(), set()), id="another replica key is another group"),
])
def test_add_pod(pods: list[PodInfo], expected: tuple[set[str], ...]) -> None:
    manager = WorkloadManager(ManualClock())
    for pod in pods:
        manager.add_pod(pod)
    assert states(manager) == expected


def test_pod_moves_from_unscheduled_to_assumed_to_assigned() -> None:
    manager = WorkloadManager(ManualClock())
    manager.add_pod(member("a"))
    group = manager.pod_group_info("default", REF)
    group.assume_pod("a")
    assert states(manager) == ({"a"}, set(), {"a"}, set())
    group.forget_pod("a")
    assert states(manager) == ({"a"}, {"a"}, set(), set())
    group.assume_pod("a")
    manager.update_pod(member("a"), member("a", node="n1"))
    assert states(manager) == ({"a"}, set(), set(), {"a"})


def test_group_is_forgotten_with_its_last_pod() -> None:
    manager = WorkloadManager(ManualClock())
    manager.add_pod(member("a"))
    manager.add_pod(member("b"))
    manager.delete_pod(member("a"))
    assert states(manager) == ({"b"}, {"b"}, set(), set())
    manager.delete_pod(member("b"))
    with pytest.raises(LookupError, match="internal pod group state doesn't exist for a pod's workload"):
        manager.pod_group_info("default", REF)


def test_pods_without_a_workload_are_ignored() -> None:
    manager = WorkloadManager(ManualClock())
    plain = PodInfo(make_pod("plain"))
    manager.add_pod(plain)
    manager.update_pod(plain, plain)
    manager.delete_pod(plain)
    with pytest.raises(LookupError):
        manager.pod_group_info("default", REF)
