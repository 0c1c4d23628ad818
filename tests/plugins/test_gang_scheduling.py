"""GangScheduling, translated from upstream's gangscheduling_test.go (1.35): the queueing hints
(Test_isSchedulableAfterPodAdded, Test_isSchedulableAfterWorkloadAdded) and TestGangSchedulingFlow
(PreEnqueue, Reserve, Permit and Unreserve against a workload manager and waiting pods)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.backend.workloadmanager import WorkloadManager
from kubesched.scheduler.config.types import PluginRef, Plugins, PluginSet, Profile
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, QueueingHint, Resource
from kubesched.scheduler.framework.runtime import Framework, HandleContext
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.gangscheduling import GangScheduling
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.utils.clock import ManualClock
from tests.helpers import make_pod
from tests.integration.wrappers import pod_group, workload, workload_ref


def gang_pod(name: str = "p", namespace: str = "default", *, wl: str, group: str, key: str = "") -> dict[str, Any]:
    """``st.MakePod().Namespace(ns).Name(name).UID(name).WorkloadRef(...)``."""
    return make_pod(name, namespace=namespace, uid=name, **workload_ref(wl, group, key))


# --- Test_isSchedulableAfterPodAdded ----------------------------------------------------------------
@pytest.mark.parametrize(("pod", "new_pod", "expected"), [
    pytest.param(gang_pod(wl="w1", group="pg"), gang_pod("q", wl="w1", group="pg"), QueueingHint.Queue,
                 id="add a newPod which matches the pod's workload and pod group"),
    pytest.param(gang_pod(wl="w1", group="pg", key="3"), gang_pod("q", wl="w1", group="pg", key="3"), QueueingHint.Queue,
                 id="add a newPod which matches the pod's workload, pod group and replica key"),
    pytest.param(gang_pod(wl="w1", group="pg"), gang_pod("q", "foo", wl="w1", group="pg"), QueueingHint.QueueSkip,
                 id="add a newPod which doesn't match the pod's namespace"),
    pytest.param(gang_pod(wl="w1", group="pg"), gang_pod("q", wl="w2", group="pg"), QueueingHint.QueueSkip,
                 id="add a newPod which doesn't match the pod's workload name"),
    pytest.param(gang_pod(wl="w1", group="pg"), gang_pod("q", wl="w1", group="pg2"), QueueingHint.QueueSkip,
                 id="add a newPod which doesn't match the pod's pod group name"),
    pytest.param(gang_pod(wl="w1", group="pg", key="3"), gang_pod("q", wl="w1", group="pg", key="4"), QueueingHint.QueueSkip,
                 id="add a newPod which doesn't match the pod's replica key"),
])
def test_is_schedulable_after_pod_added(pod: dict, new_pod: dict, expected: QueueingHint) -> None:
    assert GangScheduling.is_schedulable_after_pod_added(pod, None, new_pod) == expected


# --- Test_isSchedulableAfterWorkloadAdded -----------------------------------------------------------
@pytest.mark.parametrize(("pod", "new_workload", "expected"), [
    pytest.param(gang_pod(wl="w1", group="pg"), workload("w1", pod_group("pg", 1)), QueueingHint.Queue,
                 id="add a workload which matches the pod's workload name"),
    pytest.param(gang_pod(wl="w2", group="pg"), workload("w1", pod_group("pg", 1)), QueueingHint.QueueSkip,
                 id="add a workload which doesn't match the pod's workload name"),
    pytest.param(gang_pod("p", "ns1", wl="w1", group="pg"), workload("w1", pod_group("pg", 1), namespace="ns2"),
                 QueueingHint.QueueSkip, id="add a workload which doesn't match the pod's workload namespace"),
])
def test_is_schedulable_after_workload_added(pod: dict, new_workload: dict, expected: QueueingHint) -> None:
    assert GangScheduling.is_schedulable_after_workload_added(pod, None, new_workload) == expected


def test_events_to_register() -> None:
    """Pod and Workload additions only: workloadRef and a Workload's pod groups are immutable."""
    events = [(e.event.resource, e.event.action) for e in GangScheduling().events_to_register()]
    assert events == [(Resource.Pod, ActionType.Add), (Resource.Workload, ActionType.Add)]


# --- TestGangSchedulingFlow -------------------------------------------------------------------------
WORKLOAD = workload("gang-wl", pod_group("pg1", 3), pod_group("pg2", 4), namespace="ns1")
BASIC_WORKLOAD = workload("basic-wl", pod_group("pg1"), namespace="ns1")
P1, P2, P3 = (gang_pod(f"p{i}", "ns1", wl="gang-wl", group="pg1") for i in (1, 2, 3))
P4 = gang_pod("p4", "ns1", wl="gang-wl", group="pg2")
P5 = gang_pod("p5", "ns1", wl="gang-wl", group="pg1", key="2")
BASIC_POD = gang_pod("basic-pod", "ns1", wl="basic-wl", group="pg1")
NON_GANG_POD = make_pod("non-gang", namespace="ns1", uid="non-gang")
WAIT_AT_PERMIT = "waiting for minCount pods from a gang to be waiting on permit"


@dataclass
class Flow:
    pod: dict
    workloads: list[dict] = field(default_factory=list)
    initial_pods: list[dict] = field(default_factory=list)
    waiting_on_permit: list[dict] = field(default_factory=list)
    pre_enqueue: Status | None = None
    permit: Status | None = None
    activated: list[str] = field(default_factory=list)
    allowed: list[str] = field(default_factory=list)


class _Informers:
    def __init__(self, workloads: list[dict]) -> None:
        self.workloads = {f"{w['metadata']['namespace']}/{w['metadata']['name']}": w for w in workloads}

    def store(self, kind: str) -> dict:
        return self.workloads if kind == "Workload" else {}


def _framework(workloads: list[dict], manager: WorkloadManager, activated: list[str]) -> Framework:
    refs = [PluginRef("PrioritySort"), PluginRef("GangScheduling"), PluginRef("DefaultBinder")]
    ctx = HandleContext(clock=ManualClock(), snapshot=lambda: NodeTable.from_infos([]), informers=_Informers(workloads),
                        workload_manager=manager, activator=lambda pods: activated.extend(sorted(pods)))
    return Framework(in_tree_registry(), Profile(plugins=Plugins(multi_point=PluginSet(refs))), ctx)


def _status(status: Status | None) -> tuple[Code, list[str]] | None:
    return None if status is None else (status.code, status.reasons)


@pytest.mark.parametrize("flow", [
    pytest.param(Flow(NON_GANG_POD, [WORKLOAD, BASIC_WORKLOAD]), id="non-gang pod succeeds immediately"),
    pytest.param(Flow(BASIC_POD, [WORKLOAD, BASIC_WORKLOAD]), id="basic policy pod succeeds immediately"),
    pytest.param(Flow(P1, [], [P2, P3, P4, P5],
                      pre_enqueue=Status(Code.UnschedulableAndUnresolvable,
                                         'waiting for pods\'s workload "gang-wl" to appear in scheduling queue')),
                 id="gang pod fails PreEnqueue when workload is not yet created"),
    pytest.param(Flow(P1, [WORKLOAD], [P2, P4, P5],
                      pre_enqueue=Status(Code.UnschedulableAndUnresolvable,
                                         "waiting for minCount pods from a gang to appear in scheduling queue")),
                 id="gang pod fails PreEnqueue when quorum is not met"),
    pytest.param(Flow(P1, [WORKLOAD], [P2, P3, P4, P5], waiting_on_permit=[P2, P4, P5],
                      permit=Status(Code.Wait, WAIT_AT_PERMIT), activated=["p3"]),
                 id="gang pod passes PreEnqueue, but waits at Permit"),
    pytest.param(Flow(P1, [WORKLOAD], [P2, P3, P4, P5], waiting_on_permit=[P2, P3, P4, P5], allowed=["p2", "p3"]),
                 id="final gang pod arrives at Permit and allows all waiting pods from a gang"),
    pytest.param(Flow(gang_pod("wrong", "ns1", wl="gang-wl", group="pg3"), [WORKLOAD],
                      pre_enqueue=Status(Code.UnschedulableAndUnresolvable, 'pod group "pg3" doesn\'t exist for a workload "gang-wl"')),
                 id="gang pod fails PreEnqueue when its pod group doesn't exist in the workload"),
])
def test_gang_scheduling_flow(flow: Flow) -> None:
    async def body() -> None:
        manager = WorkloadManager(ManualClock())
        activated: list[str] = []
        fw = _framework(flow.workloads, manager, activated)
        for p in [*flow.initial_pods, flow.pod]:
            manager.add_pod(PodInfo(p))
        pl = fw.plugins["GangScheduling"]
        assert isinstance(pl, GangScheduling)
        pod = PodInfo(flow.pod)
        assert _status(pl.pre_enqueue(pod)) == _status(flow.pre_enqueue)
        if flow.pre_enqueue is not None:
            return
        # Other pods of the gang already passed Reserve and wait at Permit.
        for other in map(PodInfo, flow.waiting_on_permit):
            assert pl.reserve(CycleState(), other, "some-node") is None
            status = fw.run_permit(CycleState(), other, "some-node")
            assert status is not None and status.code == Code.Wait, f"{other.name}: {status}"
        assert pl.reserve(CycleState(), pod, "some-node") is None
        activated.clear()
        status, timeout = pl.permit(CycleState(), pod, "some-node")
        assert _status(status) == _status(flow.permit)
        if status is not None and status.code == Code.Wait:
            assert activated == flow.activated
            assert timeout == pytest.approx(300)
            pl.unreserve(CycleState(), pod, "some-node")
            assert pod.uid not in manager.pod_group_info("ns1", flow.pod["spec"]["workloadRef"]).assumed_pods()
            return
        for uid in flow.allowed:
            waiting = fw.get_waiting_pod(uid)
            assert waiting is not None and waiting.pending_plugins() == [] and await waiting.wait() is None

    asyncio.run(body())


def test_permit_errors_when_the_workload_is_gone() -> None:
    """Deleted between PreEnqueue and Permit: an error, so the pod is retried once it is back."""
    manager = WorkloadManager(ManualClock())
    manager.add_pod(PodInfo(P1))
    pl = _framework([], manager, []).plugins["GangScheduling"]
    status, _ = pl.permit(CycleState(), PodInfo(P1), "some-node")  # type: ignore[attr-defined]
    assert _status(status) == (Code.Error, ['failed to get workload ns1/gang-wl: workload.scheduling.k8s.io "gang-wl" not found'])


def test_waiting_pods_share_one_deadline_per_gang() -> None:
    """Every pod of a gang gets what is left of the gang's timeout; a passed deadline starts anew."""
    clock = ManualClock()
    manager = WorkloadManager(clock)
    for p in (P1, P2):
        manager.add_pod(PodInfo(p))
    group = manager.pod_group_info("ns1", P1["spec"]["workloadRef"])
    assert group.scheduling_timeout() == pytest.approx(300)
    clock.step(100)
    assert group.scheduling_timeout() == pytest.approx(200)
    clock.step(250)
    assert group.scheduling_timeout() == pytest.approx(300)


def test_gang_pod_without_a_workload_manager_gets_an_error_naming_the_gate() -> None:
    """GangScheduling on with GenericWorkload off: no pod group is tracked, and the pod says why."""
    refs = [PluginRef("PrioritySort"), PluginRef("GangScheduling"), PluginRef("DefaultBinder")]
    ctx = HandleContext(clock=ManualClock(), snapshot=lambda: NodeTable.from_infos([]), informers=_Informers([WORKLOAD]))
    pl = Framework(in_tree_registry(), Profile(plugins=Plugins(multi_point=PluginSet(refs))), ctx).plugins["GangScheduling"]
    status = pl.pre_enqueue(PodInfo(P1))  # type: ignore[attr-defined]
    assert status is not None and status.code == Code.Error
    assert "the GenericWorkload feature gate is off" in status.message()
