"""Event-driven requeueing: queueing hints, in-flight events, flushes, Activate, pod updates and assigned pods
(upstream Test_InFlightPods, Test_isPodWorthRequeuing, TestPriorityQueue_MoveAllToActiveOrBackoffQueue, _Activate,
_Update, TestHighPriorityFlushUnschedulablePodsLeftover, TestPriorityQueue_AssignedPodAdded)."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.backend.queue import QueuedPodInfo, QueueProfile
from kubesched.scheduler.backend.queue.testing import make_pod, new_test_queue
from kubesched.scheduler.framework.events import (
    EVENT_ASSIGNED_POD_ADD,
    EVENT_FORCE_ACTIVATE,
    EVENT_NODE_ADD,
    EVENT_UNSCHEDULABLE_TIMEOUT,
    EVENT_UNSCHEDULED_POD_UPDATE,
    ClusterEvent,
    QueueingHint,
    Resource,
)
from kubesched.scheduler.framework.events import ActionType as A
from kubesched.utils.clock import ManualClock

PV_ADD = ClusterEvent(Resource.PersistentVolume, A.Add)
PVC_ADD = ClusterEvent(Resource.PersistentVolumeClaim, A.Add)
PV_UPDATE = ClusterEvent(Resource.PersistentVolume, A.Update)
NODE_LABEL = ClusterEvent(Resource.Node, A.UpdateNodeLabel)
NODE_UPDATE = ClusterEvent(Resource.Node, A.Update)


def queue_hint(pod, old, new):
    return QueueingHint.Queue


def skip_hint(pod, old, new):
    return QueueingHint.QueueSkip


def broken_hint(pod, old, new):
    raise RuntimeError("boom")


def where(q, name: str) -> str:
    key = f"default/{name}"
    for label, place in (("active", q._active), ("backoff", q._backoff), ("unschedulable", q._unschedulable)):
        if key in place:
            return label
    return "nowhere"


def reject(q, qpi: QueuedPodInfo, unschedulable=(), pending=()) -> None:
    qpi.unschedulable_plugins = set(unschedulable)
    qpi.pending_plugins = set(pending)
    q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)


def unschedulable_queue(hints, clock=None, **kwargs):
    """A queue holding pod "p", rejected by plugin "P" in an attempt during which nothing happened."""
    q = new_test_queue(clock or ManualClock(), QueueProfile(hints=hints), **kwargs)
    q.add(make_pod("p"))
    reject(q, q.pop_nowait(), unschedulable={"P"})
    assert where(q, "p") == "unschedulable"
    return q


@pytest.mark.parametrize(("hints", "event", "want"), [
    pytest.param({EVENT_NODE_ADD: [("P", None)]}, EVENT_NODE_ADD, "backoff", id="registered event without hint fn: Queue"),
    pytest.param({EVENT_NODE_ADD: [("P", None)]}, PV_ADD, "unschedulable", id="unrelated event"),
    pytest.param({EVENT_NODE_ADD: [("P", skip_hint)]}, EVENT_NODE_ADD, "unschedulable", id="QueueSkip keeps it"),
    pytest.param({EVENT_NODE_ADD: [("P", broken_hint)]}, EVENT_NODE_ADD, "backoff", id="hint error counts as Queue"),
    pytest.param({EVENT_NODE_ADD: [("Other", queue_hint)]}, EVENT_NODE_ADD, "unschedulable", id="hint of a plugin that did not reject"),
    pytest.param({NODE_LABEL: [("P", queue_hint)]}, NODE_UPDATE, "unschedulable", id="generic update does not match a specific registration"),
    pytest.param({NODE_LABEL: [("P", queue_hint)]}, NODE_LABEL, "backoff", id="specific update matches"),
    pytest.param({NODE_UPDATE: [("P", queue_hint)]}, NODE_LABEL, "backoff", id="specific update matches a broad registration"),
    pytest.param({ClusterEvent(Resource.Node, A.All): [("P", queue_hint)]}, EVENT_NODE_ADD, "backoff", id="Node/All"),
    pytest.param({EVENT_NODE_ADD: [("P", None)]}, EVENT_UNSCHEDULABLE_TIMEOUT, "backoff", id="wildcard event moves every pod"),
])
def test_move_all_follows_hints_of_rejector_plugins(hints, event, want):
    q = unschedulable_queue(hints)
    new = None if event.is_wildcard() else {"kind": "Node", "metadata": {"name": "n1"}}
    q.move_all_to_active_or_backoff_queue(event, None, new)
    assert where(q, "p") == want


def test_wildcard_event_carrying_another_object_moves_nothing():
    """A wildcard event with an object targets that pod only; a non-pod object targets none (upstream)."""
    q = unschedulable_queue({EVENT_NODE_ADD: [("P", None)]})
    q.move_all_to_active_or_backoff_queue(EVENT_UNSCHEDULABLE_TIMEOUT, None, {"kind": "Node", "metadata": {"name": "n1"}})
    assert where(q, "p") == "unschedulable"


def test_requeued_pod_goes_to_active_q_once_backoff_is_over():
    clock = ManualClock()
    q = unschedulable_queue({EVENT_NODE_ADD: [("P", None)]}, clock)
    clock.step(10)
    q.move_all_to_active_or_backoff_queue(EVENT_NODE_ADD, None, None)
    assert where(q, "p") == "active"


@pytest.mark.parametrize(("unschedulable", "pending", "hints", "want"), [
    pytest.param((), ("P1",), {"P1": queue_hint}, "active", id="Pending plugin says Queue: skip backoff"),
    pytest.param(("P2",), ("P1",), {"P1": skip_hint, "P2": queue_hint}, "backoff", id="only the Unschedulable plugin says Queue"),
    pytest.param(("P2", "P3"), ("P1",), {"P3": skip_hint, "P2": queue_hint, "P1": queue_hint}, "active", id="Pending Queue wins"),
    pytest.param(("P2",), ("P1",), {"P1": skip_hint, "P2": skip_hint}, "unschedulable", id="all skip"),
])
def test_pending_plugins_requeue_immediately(unschedulable, pending, hints, want):
    q = new_test_queue(ManualClock(), QueueProfile(hints={EVENT_ASSIGNED_POD_ADD: list(hints.items())}))
    q.add(make_pod("p"))
    reject(q, q.pop_nowait(), unschedulable, pending)
    q.move_all_to_active_or_backoff_queue(EVENT_ASSIGNED_POD_ADD, None, None)
    assert where(q, "p") == want


ALL_QUEUE = {e: [("fooPlugin1", queue_hint)] for e in (PV_ADD, EVENT_NODE_ADD, PVC_ADD, ClusterEvent(Resource.CSINode, A.Update), EVENT_ASSIGNED_POD_ADD)}


@pytest.mark.parametrize(("hints", "actions", "want"), [
    pytest.param(
        ALL_QUEUE, ["event:PVC", "pop:p1", "event:PV", "event:PV_UPDATE"],
        {"in_flight": ["p1"], "events": [PV_ADD]}, id="interested events are recorded while pods are in flight"),
    pytest.param(
        ALL_QUEUE, ["event:PVC", "pop:p1", "event:PV", "pop:p2", "event:NODE", "fail:p1"],
        {"in_flight": ["p2"], "events": [EVENT_NODE_ADD], "backoff": ["p1"]}, id="events older than every in-flight pod are dropped"),
    pytest.param(
        ALL_QUEUE, ["pop:p1", "event:PV", "pop:p2", "event:NODE", "pop:p3", "event:ASSIGNED", "fail:p2"],
        {"in_flight": ["p1", "p3"], "events": [PV_ADD, EVENT_NODE_ADD, EVENT_ASSIGNED_POD_ADD], "backoff": ["p2"]},
        id="an intermediate pod done keeps events the first still needs"),
    pytest.param(
        ALL_QUEUE, ["pop:p1", "pop:p2", "fail:p1", "fail:p2"],
        {"in_flight": [], "events": [], "backoff": ["p1", "p2"]}, id="all done: nothing kept"),
    pytest.param(
        {EVENT_ASSIGNED_POD_ADD: [("fooPlugin1", skip_hint)]}, ["event:TIMEOUT", "pop:p1", "event:ASSIGNED", "reject:p1"],
        {"unschedulable": ["p1"]}, id="events before the pop are ignored; a skipping hint keeps it unschedulable"),
    pytest.param(
        {EVENT_ASSIGNED_POD_ADD: [("fooPlugin1", queue_hint)]}, ["pop:p1", "event:NODE", "reject:p1"],
        {"unschedulable": ["p1"]}, id="an event the rejector did not register does not help"),
    pytest.param(
        {EVENT_ASSIGNED_POD_ADD: [("fooPlugin1", queue_hint)]}, ["pop:p1", "event:ASSIGNED", "reject:p1"],
        {"backoff": ["p1"]}, id="an event during the attempt requeues the rejected pod"),
])
def test_in_flight_events(hints, actions, want):
    clock = ManualClock()
    q = new_test_queue(clock, QueueProfile(hints=hints))
    for name in ("p1", "p2", "p3"):
        q.add(make_pod(name))
        clock.step(1)
    events = {"PV": PV_ADD, "PVC": PVC_ADD, "PV_UPDATE": PV_UPDATE, "NODE": EVENT_NODE_ADD,
              "ASSIGNED": EVENT_ASSIGNED_POD_ADD, "TIMEOUT": EVENT_UNSCHEDULABLE_TIMEOUT}
    popped: dict[str, QueuedPodInfo] = {}
    for action in actions:
        verb, arg = action.split(":")
        if verb == "event":
            q.move_all_to_active_or_backoff_queue(events[arg], None, None)
        elif verb == "pop":
            popped[arg] = q.pop_nowait()
            assert popped[arg].pod_info.name == arg
        else:
            reject(q, popped[arg], unschedulable={"fooPlugin1"} if verb == "reject" else ())
    if "in_flight" in want:
        assert sorted(p.name for p in q.in_flight_pods()) == want["in_flight"]
        assert [e.event for e in q._active.in_flight_events()] == want["events"]
    for queue in ("backoff", "unschedulable"):
        for name in want.get(queue, []):
            assert where(q, name) == queue


def test_unschedulable_timeout_flush():
    """Pods stuck longer than 5 minutes are retried (upstream TestHighPriorityFlushUnschedulablePodsLeftover)."""
    clock = ManualClock()
    q = new_test_queue(clock, pop_from_backoff=False)
    q.add(make_pod("old", priority=0))
    q.add(make_pod("new", priority=0))
    old = q.pop_nowait()
    reject(q, old, unschedulable={"P"})
    clock.step(200)
    new = q.pop_nowait()
    reject(q, new, unschedulable={"P"})
    clock.step(100)  # "old" has waited exactly 300s: not longer than the limit
    q.flush_unschedulable_pods_left_over()
    assert (where(q, "old"), where(q, "new")) == ("unschedulable", "unschedulable")
    clock.step(0.5)
    q.flush_unschedulable_pods_left_over()
    assert (where(q, "old"), where(q, "new")) == ("active", "unschedulable")


def test_move_all_applies_precheck():
    """Upstream TestMoveAllToActiveOrBackoffQueue_PreEnqueueChecks."""
    clock = ManualClock()
    q = new_test_queue(clock)
    for i in range(5):
        q.add(make_pod(f"p{i}", priority=i))
    for _ in range(5):
        reject(q, q.pop_nowait(), unschedulable={"P"})
    q.move_all_to_active_or_backoff_queue(EVENT_UNSCHEDULABLE_TIMEOUT, None, None,
                                          precheck=lambda pod: pod.priority % 2 == 0 and pod.priority >= 2)
    assert sorted(p.name for p in q.pods_in_backoff_q()) == ["p2", "p4"]


def test_force_activate_event_only_targets_its_pod():
    q = new_test_queue(ManualClock())
    for name in ("a", "b"):
        q.add(make_pod(name))
    for _ in range(2):
        reject(q, q.pop_nowait(), unschedulable={"P"})
    q.move_all_to_active_or_backoff_queue(EVENT_FORCE_ACTIVATE, None, make_pod("a").pod)
    assert (where(q, "a"), where(q, "b")) == ("backoff", "unschedulable")


def test_activate():
    clock = ManualClock()
    q = new_test_queue(clock, pop_from_backoff=False)
    for name in ("unsched", "backoff", "inflight"):
        q.add(make_pod(name))
    reject(q, q.pop_nowait(), unschedulable={"P"})  # unsched
    reject(q, q.pop_nowait())  # backoff (error)
    inflight = q.pop_nowait()
    q.activate({f"default/{p}": make_pod(p) for p in ("unsched", "backoff", "inflight", "unknown")})
    assert (where(q, "unsched"), where(q, "backoff"), where(q, "unknown")) == ("active", "active", "nowhere")
    # The in-flight pod got a ForceActivate event: rejected now, it is requeued rather than parked.
    reject(q, inflight, unschedulable={"P"})
    assert where(q, "inflight") == "backoff"


@pytest.mark.parametrize(("hint", "step", "want"), [
    pytest.param(queue_hint, 0, "backoff", id="hint Queue, still backing off"),
    pytest.param(queue_hint, 10, "active", id="hint Queue, backoff over"),
    pytest.param(skip_hint, 0, "unschedulable", id="hint QueueSkip"),
])
def test_update_of_unschedulable_pod_asks_hints(hint, step, want):
    """Upstream TestPriorityQueue_Update, QHint cases."""
    clock = ManualClock()
    q = unschedulable_queue({EVENT_UNSCHEDULED_POD_UPDATE: [("P", hint)]}, clock)
    clock.step(step)
    old = q.get("default/p").pod_info
    new = make_pod("p", priority=0)  # a change no specific UpdatePodXYZ event describes: plain Update
    q.update(old, new)
    assert where(q, "p") == want
    assert q.get("default/p").pod_info is new


def test_update_in_backoff_q_stays_in_backoff_q():
    clock = ManualClock()
    q = new_test_queue(clock)
    q.add(make_pod("p"))
    reject(q, q.pop_nowait())
    new = make_pod("p", labels={"a": "b"})
    q.update(make_pod("p"), new)
    assert where(q, "p") == "backoff" and q.get("default/p").pod_info is new


def test_update_while_in_flight_requeues_the_rejected_pod():
    """Upstream TestPriorityQueue_UpdateWhenInflight: an update during the attempt is replayed."""
    q = new_test_queue(ManualClock(), QueueProfile(hints={EVENT_UNSCHEDULED_POD_UPDATE: [("fakePlugin", queue_hint)]}))
    pod = make_pod("test-pod")
    q.add(pod)
    qpi = q.pop_nowait()
    updated = PodInfo({**pod.pod, "spec": {**pod.pod["spec"], "tolerations": [{"key": "foo", "effect": "NoSchedule"}]}})
    q.update(pod, updated)
    qpi.pod_info = updated
    reject(q, qpi, unschedulable={"fakePlugin"})
    assert where(q, "test-pod") == "backoff"
    assert q.get("default/test-pod").pod_info is updated


def test_an_attempt_failing_with_an_error_after_a_rejection_gets_the_error_backoff():
    """Upstream clears the rejector plugins at every Pop: a pod once rejected by "P" that then fails
    with an error (bind, API, Reserve) is retried after backoff, not parked for P's events."""
    clock = ManualClock()
    q = unschedulable_queue({EVENT_NODE_ADD: [("P", None)]}, clock)
    clock.step(10)
    q.move_all_to_active_or_backoff_queue(EVENT_NODE_ADD, None, None)
    qpi = q.pop_nowait()
    assert (qpi.unschedulable_plugins, qpi.pending_plugins) == (set(), set())
    q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)  # an error sets no rejectors
    assert where(q, "p") == "backoff"


def test_a_cluster_event_pickled_into_another_process_hashes_as_one_made_there():
    """Its hash is worked out once, from strings whose hashes differ between processes: a loaded
    event is made again, so it finds the hints registered for the same event there."""
    probe = ("import pickle, sys; from kubesched.scheduler.framework.events import ClusterEvent, ActionType;"
             "loaded = pickle.loads(sys.stdin.buffer.read()); made = ClusterEvent('AssignedPod', ActionType.Add);"
             "print(hash(loaded) == hash(made), {made: 'hints'}.get(loaded), loaded.label)")
    sent = pickle.dumps(ClusterEvent("AssignedPod", A.Add))
    done = subprocess.run([sys.executable, "-c", probe], input=sent, capture_output=True, check=True, timeout=60)
    assert done.stdout.decode().split() == ["True", "hints", "AssignedPodAdd"]
