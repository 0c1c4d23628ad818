"""PreEnqueue gating (upstream TestPriorityQueue_addToActiveQ, Test_queuedPodInfo_gatedSetUponCreationAndUnsetUponUpdate,
TestPriorityQueue_MoveAllToActiveOrBackoffQueueWithQueueingHint gated cases)."""

from __future__ import annotations

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.backend.queue import QueueProfile
from kubesched.scheduler.backend.queue.testing import make_pod, new_test_queue
from kubesched.scheduler.framework.events import EVENT_NODE_ADD, EVENT_UNSCHEDULABLE_TIMEOUT, ClusterEvent, QueueingHint, Resource
from kubesched.scheduler.framework.events import ActionType as A
from kubesched.scheduler.framework.interface import PreEnqueuePlugin
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.metrics import Metrics
from kubesched.utils.clock import ManualClock

GATES_ELIMINATED = ClusterEvent(Resource.Pod, A.UpdatePodSchedulingGatesEliminated)


class SchedulingGates(PreEnqueuePlugin):
    name = "SchedulingGates"

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if pod.scheduling_gates:
            return Status(Code.UnschedulableAndUnresolvable, f"waiting for scheduling gates: {pod.scheduling_gates}")
        return None


class Switch(PreEnqueuePlugin):
    """Gates every pod while ``code`` is set; raises if ``code`` is an exception."""

    name = "Switch"

    def __init__(self) -> None:
        super().__init__()
        self.code: Code | Exception | None = None

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if isinstance(self.code, Exception):
            raise self.code
        return None if self.code is None else Status(self.code, "switched off")


def gates_eliminated_hint(pod, old, new):
    """Like upstream's: only the update of this very pod can lift its gates."""
    return QueueingHint.Queue if new["metadata"]["uid"] == pod["metadata"]["uid"] else QueueingHint.QueueSkip


def where(q, name: str) -> str:
    key = f"default/{name}"
    for label, place in (("active", q._active), ("backoff", q._backoff), ("unschedulable", q._unschedulable)):
        if key in place:
            return label
    return "nowhere"


def gated_queue(*extra_plugins: PreEnqueuePlugin, clock=None, **kwargs):
    hints = {GATES_ELIMINATED: [("SchedulingGates", gates_eliminated_hint)], EVENT_NODE_ADD: [("NodeAffinity", None)]}
    return new_test_queue(clock or ManualClock(), QueueProfile([SchedulingGates(), *extra_plugins], hints), **kwargs)


def test_gated_pod_waits_in_unschedulable_pods():
    metrics = Metrics()
    q = gated_queue(metrics=metrics)
    q.add(make_pod("gated", gates=("example.com/gate",)))
    q.add(make_pod("free"))
    assert q.counts() == {"active": 1, "backoff": 0, "unschedulable": 0, "gated": 1}
    qpi = q.get("default/gated")
    assert (qpi.gating_plugin, qpi.unschedulable_plugins, qpi.gating_plugin_events) == ("SchedulingGates", {"SchedulingGates"}, [GATES_ELIMINATED])
    assert qpi.initial_attempt_timestamp is None  # never tried
    assert metrics.registry.get_sample_value("scheduler_queue_incoming_pods_total", {"queue": "unschedulable", "event": "UnschedulablePodAdd"}) == 1
    assert metrics.registry.get_sample_value("scheduler_pending_pods", {"queue": "gated"}) == 1
    assert q.pop_nowait().pod_info.name == "free"
    assert q.pop_nowait() is None


def test_removing_the_gates_moves_the_pod_to_active_q():
    q = gated_queue()
    gated = make_pod("p", gates=("g",))
    q.add(gated)
    relabelled = make_pod("p", gates=("g",), labels={"a": "b"})
    q.update(gated, relabelled)
    assert where(q, "p") == "unschedulable" and q.counts()["gated"] == 1
    ungated = make_pod("p", labels={"a": "b"})
    q.update(relabelled, ungated)
    assert where(q, "p") == "active"
    assert q.counts() == {"active": 1, "backoff": 0, "unschedulable": 0, "gated": 0}
    qpi = q.pop_nowait()
    assert qpi.pod_info is ungated and not qpi.gating_plugin


@pytest.mark.parametrize("event", [
    pytest.param(EVENT_NODE_ADD, id="event only another plugin registered"),
    pytest.param(EVENT_UNSCHEDULABLE_TIMEOUT, id="wildcard flush event"),
])
def test_gated_pod_ignores_events_its_gating_plugin_did_not_register(event):
    q = gated_queue()
    q.add(make_pod("p", gates=("g",)))
    q.move_all_to_active_or_backoff_queue(event, None, None)
    assert where(q, "p") == "unschedulable" and q.counts()["gated"] == 1


@pytest.mark.parametrize("code", [Code.Pending, Code.Unschedulable, Code.Error, RuntimeError("plugin crashed")])
def test_any_non_success_pre_enqueue_result_gates(code):
    switch = Switch()
    switch.code = code
    q = gated_queue(switch)
    q.add(make_pod("p"))
    assert q.get("default/p").gating_plugin == "Switch"
    assert q.counts()["gated"] == 1


def test_gating_plugin_runs_first_then_the_others():
    switch = Switch()
    q = gated_queue(switch)
    gated = make_pod("p", gates=("g",))
    q.add(gated)
    switch.code = Code.UnschedulableAndUnresolvable
    q.update(gated, make_pod("p"))  # SchedulingGates now passes, Switch gates
    qpi = q.get("default/p")
    assert qpi.gating_plugin == "Switch"
    assert qpi.unschedulable_plugins == {"SchedulingGates", "Switch"}
    assert q.counts()["gated"] == 1


@pytest.mark.parametrize(("pop_from_backoff", "after_event", "after_flush"), [
    pytest.param(True, "unschedulable", "unschedulable", id="PreEnqueue runs on entering backoffQ"),
    pytest.param(False, "backoff", "unschedulable", id="PreEnqueue runs on leaving backoffQ"),
])
def test_pre_enqueue_gates_pods_coming_back_from_unschedulable(pop_from_backoff, after_event, after_flush):
    clock = ManualClock()
    switch = Switch()
    q = gated_queue(switch, clock=clock, pop_from_backoff=pop_from_backoff)
    q.add(make_pod("p"))
    qpi = q.pop_nowait()
    qpi.unschedulable_plugins = {"NodeAffinity"}
    q.add_unschedulable_if_not_present(qpi, 1)
    switch.code = Code.UnschedulableAndUnresolvable
    q.move_all_to_active_or_backoff_queue(EVENT_NODE_ADD, None, None)
    assert where(q, "p") == after_event
    clock.step(5)
    q.flush_backoff_q_completed()
    assert where(q, "p") == after_flush
    assert q.counts()["gated"] == 1


def test_activate_does_not_bypass_pre_enqueue():
    q = gated_queue()
    q.add(make_pod("p", gates=("g",)))
    q.activate({"default/p": make_pod("p", gates=("g",))})
    assert where(q, "p") == "unschedulable" and q.counts()["gated"] == 1


def test_deleting_a_gated_pod_clears_the_gated_count():
    q = gated_queue()
    pod = make_pod("p", gates=("g",))
    q.add(pod)
    q.delete(pod)
    assert q.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}


@pytest.mark.parametrize(("pop_from_backoff", "want"), [
    pytest.param(True, "active", id="PreEnqueue already ran on entering backoffQ: skipped"),
    pytest.param(False, "unschedulable", id="PreEnqueue runs on leaving backoffQ"),
])
def test_activate_from_backoff_q(pop_from_backoff, want):
    """Upstream TestPriorityQueue_moveToActiveQ, ForceActivate from backoffQ."""
    switch = Switch()
    q = gated_queue(switch, pop_from_backoff=pop_from_backoff)
    q.add(make_pod("p"))
    q.add_unschedulable_if_not_present(q.pop_nowait(), 1)  # an error: into backoffQ
    assert where(q, "p") == "backoff"
    switch.code = Code.UnschedulableAndUnresolvable
    q.activate({"default/p": make_pod("p")})
    assert where(q, "p") == want
