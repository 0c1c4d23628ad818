"""activeQ ordering, add/update/delete, pop bookkeeping and introspection (upstream TestPriorityQueue_Add, _Pop, _Update, _Delete, _PendingPods)."""

from __future__ import annotations

import pytest

from kubesched.scheduler.backend.queue import QueueProfile
from kubesched.scheduler.backend.queue.heap import KeyedHeap
from kubesched.scheduler.backend.queue.testing import make_pod, new_test_queue
from kubesched.scheduler.framework.events import EVENT_UNSCHEDULABLE_TIMEOUT, ClusterEvent, Resource
from kubesched.scheduler.framework.events import ActionType as A
from kubesched.scheduler.metrics import Metrics
from kubesched.utils.clock import ManualClock

HIGH, MEDIUM, LOW = 1000, 500, 0


def popped_names(q, n: int) -> list[str]:
    return [q.pop_nowait().pod_info.name for _ in range(n)]


@pytest.mark.parametrize(("pods", "want"), [
    pytest.param([("mpp", MEDIUM), ("up", LOW), ("hpp", HIGH)], ["hpp", "mpp", "up"], id="higher priority first"),
    pytest.param([("a", LOW), ("b", LOW), ("c", LOW)], ["a", "b", "c"], id="equal priority: earlier timestamp first"),
    pytest.param([("a", LOW), ("b", HIGH), ("c", LOW), ("d", HIGH)], ["b", "d", "a", "c"], id="fifo within each priority"),
])
def test_pop_follows_priority_then_fifo(pods, want):
    clock = ManualClock()
    q = new_test_queue(clock)
    for name, prio in pods:
        q.add(make_pod(name, priority=prio))
        clock.step(0.001)
    assert popped_names(q, len(want)) == want
    assert q.pop_nowait() is None


def test_same_timestamp_ties_pop_in_insertion_order():
    q = new_test_queue(ManualClock())  # the clock never moves: every timestamp is equal
    for i in range(20):
        q.add(make_pod(f"p{i:02d}"))
    assert popped_names(q, 20) == [f"p{i:02d}" for i in range(20)]


def test_add_records_nominated_pods():
    q = new_test_queue()
    q.add(make_pod("mpp", "ns2", priority=MEDIUM, nominated_node="node1"))
    q.add(make_pod("up", "ns1", priority=LOW, nominated_node="node1"))
    q.add(make_pod("hpp", "ns1", priority=HIGH))
    assert [p.name for p in q.nominated_pods_for_node("node1")] == ["mpp", "up"]
    assert popped_names(q, 3) == ["hpp", "mpp", "up"]
    # Popping does not forget nominations: only the scheduler's assume/delete does.
    assert len(q.nominated_pods_for_node("node1")) == 2


def test_pop_counts_attempts_cycles_and_in_flight():
    clock = ManualClock()
    q = new_test_queue(clock)
    q.add(make_pod("a"))
    q.add(make_pod("b"))
    first = q.pop_nowait()
    assert (first.attempts, q.scheduling_cycle, q.in_flight()) == (1, 1, 1)
    assert first.initial_attempt_timestamp == clock.now()
    q.pop_nowait()
    assert (q.scheduling_cycle, q.in_flight(), q.is_idle()) == (2, 2, False)
    q.done(first.uid)
    q.done(first.uid)  # a second done is a no-op
    assert q.in_flight() == 1
    q.done("default-b-uid")
    assert q.is_idle()


def test_pop_discards_a_pod_already_in_flight():
    """Upstream "Pop is made twice for the same Pod": the duplicate is dropped, not tracked twice."""
    clock = ManualClock()
    q = new_test_queue(clock)
    q.add(make_pod("p1"))
    p1 = q.pop_nowait()
    q._active.add(p1, "UnschedulablePodAdd")  # simulate the bug: p1 back in activeQ while in flight
    clock.step(1)
    q.add(make_pod("p3"))
    assert q.pop_nowait().pod_info.name == "p3"
    assert q.counts()["active"] == 0
    assert q.in_flight() == 2


def test_update_in_active_q_replaces_pod_and_resorts():
    clock = ManualClock()
    q = new_test_queue(clock)
    q.add(make_pod("a", priority=LOW))
    clock.step(1)
    q.add(make_pod("b", priority=MEDIUM))
    old = make_pod("a", priority=LOW)
    new = make_pod("a", priority=HIGH, labels={"x": "y"})
    q.update(old, new)
    head = q.pop_nowait()
    assert head.pod_info is new
    assert q.counts()["active"] == 1


def test_update_of_unknown_pod_adds_it_to_active_q_and_nominator():
    q = new_test_queue()
    old = make_pod("hpp", priority=HIGH)
    new = make_pod("hpp", priority=HIGH, nominated_node="node1")
    q.update(old, new)
    assert q.counts()["active"] == 1
    assert [p.name for p in q.nominated_pods_for_node("node1")] == ["hpp"]


def test_update_of_in_flight_pod_only_records_events():
    q = new_test_queue()
    pod = make_pod("p")
    q.add(pod)
    q.pop_nowait()
    q.update(pod, make_pod("p", labels={"a": "b"}))
    assert q.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}
    assert [e.event for e in q._active.in_flight_events()] == [ClusterEvent(Resource.UnschedulablePod, A.UpdatePodLabel)]


def test_delete_removes_pod_from_every_queue_and_nominator():
    clock = ManualClock()
    q = new_test_queue(clock)
    for name in ("active", "backoff", "unsched"):
        q.add(make_pod(name, nominated_node="n1"))
    backoff, unsched = q.get("default/backoff"), q.get("default/unsched")
    # Move two of them through a failed attempt: one errors (backoff), one is rejected (unschedulable).
    q.delete(make_pod("active", nominated_node="n1"))
    first, second = q.pop_nowait(), q.pop_nowait()
    assert {first.pod_info.name, second.pod_info.name} == {"backoff", "unsched"}
    unsched.unschedulable_plugins = {"P"}
    q.add_unschedulable_if_not_present(backoff, q.scheduling_cycle)
    q.add_unschedulable_if_not_present(unsched, q.scheduling_cycle)
    assert q.counts() == {"active": 0, "backoff": 1, "unschedulable": 1, "gated": 0}
    q.delete(backoff.pod_info)
    q.delete(unsched.pod_info)
    assert q.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}
    assert q.nominated_pods_for_node("n1") == []


def test_pending_pods_summary():
    clock = ManualClock()
    q = new_test_queue(clock)
    for name in ("a", "b", "c", "d"):
        q.add(make_pod(name))
    err, rejected = q.pop_nowait(), q.pop_nowait()
    rejected.unschedulable_plugins = {"P"}
    q.add_unschedulable_if_not_present(err, 1)
    q.add_unschedulable_if_not_present(rejected, 2)
    pods, summary = q.pending_pods()
    assert summary == "activeQ:2; backoffQ:1; unschedulablePods:1"
    assert sorted(p.name for p in pods) == ["a", "b", "c", "d"]


def test_pending_pods_gauges_follow_queues():
    metrics = Metrics()
    clock = ManualClock()
    q = new_test_queue(clock, metrics=metrics)
    q.add(make_pod("a"))
    q.add(make_pod("b"))
    qpi = q.pop_nowait()
    qpi.unschedulable_plugins = {"P"}
    q.add_unschedulable_if_not_present(qpi, 1)

    def gauge(queue: str) -> float:
        return metrics.registry.get_sample_value("scheduler_pending_pods", {"queue": queue})

    assert (gauge("active"), gauge("backoff"), gauge("unschedulable"), gauge("gated")) == (1, 0, 1, 0)
    assert metrics.registry.get_sample_value("scheduler_unschedulable_pods", {"plugin": "P", "profile": "default-scheduler"}) == 1
    clock.step(301)
    q.flush_unschedulable_pods_left_over()
    assert (gauge("active"), gauge("unschedulable")) == (2, 0)


def test_incoming_pods_metric_labels():
    metrics = Metrics()
    clock = ManualClock()
    q = new_test_queue(clock, metrics=metrics, pop_from_backoff=False)
    q.add(make_pod("a"))
    qpi = q.pop_nowait()
    qpi.unschedulable_plugins = {"P"}
    q.add_unschedulable_if_not_present(qpi, 1)
    q.move_all_to_active_or_backoff_queue(EVENT_UNSCHEDULABLE_TIMEOUT, None, None)
    clock.step(2)
    q.flush_backoff_q_completed()

    def incoming(queue: str, event: str) -> float | None:
        return metrics.registry.get_sample_value("scheduler_queue_incoming_pods_total", {"queue": queue, "event": event})

    assert incoming("active", "UnschedulablePodAdd") == 1
    assert incoming("unschedulable", "ScheduleAttemptFailure") == 1
    assert incoming("backoff", "UnschedulableTimeout") == 1
    assert incoming("active", "BackoffComplete") == 1


def test_keyed_heap_survives_many_lazy_deletions():
    heap: KeyedHeap[int] = KeyedHeap(lambda a, b: a < b)
    for i in range(1000):
        heap.add_or_update(str(i), i)
    for i in range(0, 1000, 2):
        heap.remove(str(i))
    for i in range(1, 1000, 4):
        heap.add_or_update(str(i), -i)  # re-sort in place
    out = []
    while (item := heap.pop()) is not None:
        out.append(item)
    assert out == sorted(out)
    assert len(out) == 500 and len(heap) == 0


def test_closed_queue_pops_nothing():
    q = new_test_queue()
    q.add(make_pod("a"))
    q.close()
    assert q.pop_nowait() is None


def test_profiles_are_per_scheduler_name():
    q = new_test_queue(profile=QueueProfile())
    q.add(make_pod("a"))
    assert q.pop_nowait().pod_info.scheduler_name == "default-scheduler"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_priority_sorts_key_pops_in_the_same_order_as_its_less(seed):
    """The active queue compares PrioritySort's keys instead of calling ``less``: same order,
    ties (same priority and timestamp) in insertion order, through removals and re-sorts."""
    import random

    from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo
    from kubesched.scheduler.plugins.queuesort import PrioritySort

    sort = PrioritySort.__new__(PrioritySort)
    rng = random.Random(seed)
    by_less: KeyedHeap[QueuedPodInfo] = KeyedHeap(sort.less, QueuedPodInfo.snapshot)
    by_key: KeyedHeap[QueuedPodInfo] = KeyedHeap(sort.less, QueuedPodInfo.snapshot, sort.sort_key())
    for i in range(300):
        pod, queued = make_pod(f"p{i}", priority=rng.choice([LOW, MEDIUM, HIGH, -5])), float(rng.randrange(20))
        for heap in (by_less, by_key):
            heap.add_or_update(pod.key, QueuedPodInfo(pod, queued))
    removed = set(rng.sample(range(300), 120))
    readded = set(rng.sample(range(300), 60))
    for i in removed:
        for heap in (by_less, by_key):
            heap.remove(f"default/p{i}")
    for i in readded:
        pod = make_pod(f"p{i}", priority=HIGH)
        for heap in (by_less, by_key):
            heap.add_or_update(pod.key, QueuedPodInfo(pod, 7.0))
    order = [[q.pod_info.name for q in iter(heap.pop, None)] for heap in (by_less, by_key)]
    assert order[0] == order[1] and len(order[0]) == 300 - len(removed - readded)
