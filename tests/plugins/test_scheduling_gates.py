"""SchedulingGates: gated pods wait outside activeQ; removing the gates requeues the pod itself."""

from __future__ import annotations

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.events import ActionType, QueueingHint, Resource
from kubesched.scheduler.framework.status import Code
from kubesched.scheduler.plugins.schedulinggates.scheduling_gates import SchedulingGates
from tests.helpers import make_pod


def test_ungated_pod_is_enqueued():
    assert SchedulingGates().pre_enqueue(PodInfo(make_pod("p"))) is None


def test_gated_pod_waits_with_its_gates_listed():
    pod = PodInfo(make_pod("p", schedulingGates=[{"name": "foo"}, {"name": "bar"}]))
    status = SchedulingGates().pre_enqueue(pod)
    assert status.code == Code.UnschedulableAndUnresolvable
    assert status.reasons == ["waiting for scheduling gates: [foo bar]"]


def test_gates_eliminated_hint_queues_only_the_pod_itself():
    pod = make_pod("p", schedulingGates=[{"name": "foo"}])
    assert SchedulingGates._gates_eliminated(pod, pod, make_pod("p")) == QueueingHint.Queue
    assert SchedulingGates._gates_eliminated(pod, None, make_pod("other")) == QueueingHint.QueueSkip


def test_events():
    events = [(e.event.resource, e.event.action) for e in SchedulingGates().events_to_register()]
    assert events == [(Resource.Pod, ActionType.UpdatePodSchedulingGatesEliminated)]
