"""backoffQ: durations, error backoff, flushing, ordering windows and SchedulerPopFromBackoffQ (upstream backoff_queue_test.go, TestBackOffFlow, TestPriorityQueue_Pop)."""

from __future__ import annotations

import math

import pytest

from kubesched.scheduler.backend.queue import QueuedPodInfo
from kubesched.scheduler.backend.queue.backoff_queue import BackoffQueue
from kubesched.scheduler.backend.queue.recorder import QueueRecorder
from kubesched.scheduler.backend.queue.testing import make_pod, new_test_queue, priority_less
from kubesched.scheduler.framework.events import EVENT_UNSCHEDULABLE_TIMEOUT
from kubesched.utils.clock import ManualClock


def fail(q, qpi: QueuedPodInfo, *plugins: str) -> None:
    """End an attempt as the scheduler would: rejected by ``plugins`` (none means an error)."""
    qpi.unschedulable_plugins = set(plugins)
    q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)


def where(q, name: str) -> str:
    key = f"default/{name}"
    if key in q._active:
        return "active"
    if key in q._backoff:
        return "backoff"
    if key in q._unschedulable:
        return "unschedulable"
    return "nowhere"


@pytest.mark.parametrize(("initial", "maximum", "count", "want"), [
    (1.0, 10.0, 0, 0.0),
    (1.0, 10.0, 1, 1.0),
    (1.0, 10.0, 2, 2.0),
    (1.0, 10.0, 3, 4.0),
    (1.0, 10.0, 4, 8.0),
    (1.0, 10.0, 5, 10.0),
    (1.0, 10.0, 6, 10.0),
    (3.0, 10.0, 3, 10.0),
    (1e-9, 32e-9, 16, 32e-9),
    (1e-9, 2**63 * 1e-9, 64, 2**63 * 1e-9),
])
def test_calculate_backoff_duration(initial, maximum, count, want):
    bq = BackoffQueue(ManualClock(), initial, maximum, priority_less, True, QueueRecorder(None))
    assert bq.calculate_backoff_duration(count) == pytest.approx(want)


def test_backoff_flow_doubles_up_to_the_maximum():
    """Upstream TestBackOffFlow, without ordering windows so expiries are exact."""
    clock = ManualClock()
    q = new_test_queue(clock, pop_from_backoff=False)
    q.add(make_pod("test-pod"))
    for i, want in enumerate([1, 2, 4, 8, 10, 10, 10]):
        started = clock.now()
        qpi = q.pop_nowait()
        assert qpi.attempts == i + 1
        fail(q, qpi, "P")
        assert where(q, "test-pod") == "unschedulable"  # no event happened during the attempt
        q.move_all_to_active_or_backoff_queue(EVENT_UNSCHEDULABLE_TIMEOUT, None, None)
        assert where(q, "test-pod") == "backoff"
        assert q._backoff.backoff_time(qpi) - started == want
        clock.step(0.001)
        q.flush_backoff_q_completed()
        assert where(q, "test-pod") == "backoff"  # an early flush leaves it there
        clock.step(want)
        q.flush_backoff_q_completed()
        assert where(q, "test-pod") == "active"


def test_ordering_window_truncates_expiry_and_holds_the_pod_through_its_window():
    clock = ManualClock(start=1000.25)
    q = new_test_queue(clock)
    q.add(make_pod("p"))
    qpi = q.pop_nowait()
    fail(q, qpi)  # an error: error backoff, 1s
    assert where(q, "p") == "backoff"
    assert qpi.backoff_expiration == 1001.0  # floor(1000.25 + 1)
    assert q.next_backoff_expiry() == 1002.0
    clock.step(1.0)  # 1001.25: past the raw expiry, but still inside its window
    q.flush_backoff_q_completed()
    assert where(q, "p") == "backoff"
    clock.step(0.75)  # 1002.0: the next window
    q.flush_backoff_q_completed()
    assert where(q, "p") == "active"


def test_error_backoff_uses_consecutive_errors_and_resets_on_rejection():
    clock = ManualClock()
    q = new_test_queue(clock, pop_from_backoff=False)
    q.add(make_pod("p"))
    for errors in (1, 2, 3):
        qpi = q.pop_nowait()
        fail(q, qpi)
        assert (qpi.consecutive_errors_count, qpi.unschedulable_count) == (errors, 0)
        assert where(q, "p") == "backoff"
        assert qpi.backoff_expiration - qpi.timestamp == 2 ** (errors - 1)
        clock.step(10)
        q.flush_backoff_q_completed()
    qpi = q.pop_nowait()
    fail(q, qpi, "P")
    assert (qpi.consecutive_errors_count, qpi.unschedulable_count) == (0, 1)
    assert where(q, "p") == "unschedulable"


def test_error_pod_whose_backoff_already_passed_goes_straight_to_active():
    clock = ManualClock()
    q = new_test_queue(clock, max_backoff=0)  # max 0 disables backoff entirely
    q.add(make_pod("p"))
    fail(q, q.pop_nowait())
    assert where(q, "p") == "active"


@pytest.mark.parametrize(("pop_from_backoff", "want"), [
    pytest.param(True, ["pod5", "pod4", "pod2", "pod3"], id="same window ordered by priority"),
    pytest.param(False, ["pod5", {"pod4", "pod3"}, "pod2"], id="priority ignored without windows"),
])
def test_backoff_completed_ordering(pop_from_backoff, want):
    """Upstream TestBackoffQueueOrdering."""
    clock = ManualClock(start=1000.0)
    bq = BackoffQueue(clock, 1.0, 10.0, priority_less, pop_from_backoff, QueueRecorder(None))
    specs = [("pod0", 1, 0.0), ("pod1", 1, -1.0), ("pod2", 2, -2.0 + 0.001), ("pod3", 1, -2.0), ("pod4", 2, -2.0), ("pod5", 1, -3.0)]
    for name, prio, offset in specs:
        qpi = QueuedPodInfo(make_pod(name, priority=prio), clock.now() + offset, unschedulable_count=1, unschedulable_plugins={"plugin"})
        bq.add(qpi, "UnschedulablePodAdd")
    got = [q.pod_info.name for q in bq.pop_all_completed()]
    flat = []
    for w in want:
        if isinstance(w, set):
            assert set(got[len(flat):len(flat) + len(w)]) == w
            flat.extend(got[len(flat):len(flat) + len(w)])
        else:
            flat.append(w)
    assert got == flat
    assert len(bq) == 2  # pod0 and pod1 are still backing off


@pytest.mark.parametrize(("pop_from_backoff", "want"), [
    pytest.param(True, ["mpp", "hpp"], id="enabled: activeQ then backoffQ, never the error backoffQ"),
    pytest.param(False, ["mpp"], id="disabled: activeQ only"),
])
def test_pop_from_backoff_q(pop_from_backoff, want):
    """Upstream TestPriorityQueue_Pop."""
    clock = ManualClock()
    q = new_test_queue(clock, pop_from_backoff=pop_from_backoff)
    q.add(make_pod("mpp", priority=500))
    now = clock.now()
    rejected = QueuedPodInfo(make_pod("hpp", priority=1000), now, unschedulable_count=1, unschedulable_plugins={"plugin"})
    errored = QueuedPodInfo(make_pod("hpp2", priority=1000), now, consecutive_errors_count=1)
    q._backoff.add(rejected, "UnschedulablePodAdd")
    q._backoff.add(errored, "UnschedulablePodAdd")
    got = []
    while (qpi := q.pop_nowait()) is not None:
        got.append(qpi.pod_info.name)
    assert got == want


def test_rejected_pod_waits_in_backoff_then_pop_takes_it_early():
    clock = ManualClock()
    q = new_test_queue(clock)
    q.add(make_pod("p"))
    qpi = q.pop_nowait()
    fail(q, qpi, "P")
    q.move_all_to_active_or_backoff_queue(EVENT_UNSCHEDULABLE_TIMEOUT, None, None)
    assert where(q, "p") == "backoff" and q._backoff.is_backing_off(qpi)
    assert q.pop_nowait() is qpi  # still backing off, but activeQ is empty
    assert qpi.attempts == 2


def test_next_backoff_expiry():
    clock = ManualClock(start=50.0)
    q = new_test_queue(clock, pop_from_backoff=False)
    assert q.next_backoff_expiry() is None
    q.add(make_pod("a"))
    q.add(make_pod("b"))
    a = q.pop_nowait()
    clock.step(0.5)
    b = q.pop_nowait()
    fail(q, b)
    fail(q, a)
    assert q.next_backoff_expiry() == math.nextafter(51.5, math.inf)
    clock.step(1.0)  # exactly at the expiry: still backing off
    q.flush_backoff_q_completed()
    assert q.counts()["backoff"] == 2
    clock.step(1e-9)
    q.flush_backoff_q_completed()
    assert q.counts()["active"] == 2 and q.next_backoff_expiry() is None
