"""pop() waiting and waking, close(), and run() driving both flushes on virtual time."""

from __future__ import annotations

import asyncio
import itertools

from kubesched.scheduler.backend.queue.testing import make_pod, new_test_queue
from kubesched.scheduler.framework.events import EVENT_UNSCHEDULABLE_TIMEOUT
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import LoopClock, ManualClock


def test_pop_does_not_suspend_when_a_pod_is_ready():
    q = new_test_queue()
    q.add(make_pod("p"))
    coro = q.pop()
    try:
        coro.send(None)
    except StopIteration as done:
        assert done.value.pod_info.name == "p"
    else:
        coro.close()
        raise AssertionError("pop() suspended although a pod was available")


async def test_pop_waits_until_a_pod_is_added():
    q = new_test_queue()
    waiter = asyncio.create_task(q.pop())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not waiter.done()
    q.add(make_pod("p"))
    qpi = await asyncio.wait_for(waiter, 1)
    assert qpi.pod_info.name == "p" and q.in_flight() == 1


async def test_pop_wakes_when_a_pod_enters_backoff_q():
    clock = ManualClock()
    q = new_test_queue(clock)
    q.add(make_pod("p"))
    qpi = await q.pop()
    waiter = asyncio.create_task(q.pop())
    await asyncio.sleep(0)
    q.move_all_to_active_or_backoff_queue(EVENT_UNSCHEDULABLE_TIMEOUT, None, None)  # seen while in flight
    qpi.unschedulable_plugins = {"P"}
    q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)
    assert (await asyncio.wait_for(waiter, 1)) is qpi  # from backoffQ, still backing off


async def test_close_wakes_pop_with_none():
    q = new_test_queue()
    waiter = asyncio.create_task(q.pop())
    await asyncio.sleep(0)
    q.close()
    assert await asyncio.wait_for(waiter, 1) is None
    assert await q.pop() is None


async def test_cancelled_pop_leaves_the_queue_usable():
    q = new_test_queue()
    waiter = asyncio.create_task(q.pop())
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    q.add(make_pod("p"))
    assert (await q.pop()).pod_info.name == "p"


def test_run_flushes_backoff_and_leftover_unschedulable_pods_on_virtual_time():
    async def scenario() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        clock = LoopClock(loop)
        q = new_test_queue(clock)
        runner = asyncio.create_task(q.run())
        q.add(make_pod("stuck"))
        q.add(make_pod("retry"))
        stuck, retry = await q.pop(), await q.pop()
        stuck.unschedulable_plugins = {"NeverHelped"}
        q.add_unschedulable_if_not_present(stuck, q.scheduling_cycle)
        q.add_unschedulable_if_not_present(retry, q.scheduling_cycle)  # error: 1s backoff
        start = clock.now()
        back = await q.pop()  # error backoff is never popped early: this waits for the backoff flush
        assert back is retry and 1 <= clock.now() - start <= 2
        q.done(back.uid)
        moved = await q.pop()  # waits for the 5-minute leftover flush
        assert moved is stuck
        waited = clock.now() - start
        q.close()
        await asyncio.wait_for(runner, 5)
        return waited, clock.now() - start

    waited, total = run_virtual(scenario())
    assert 300 < waited <= 331
    assert total == waited


def test_run_moves_completed_backoff_to_active_q_each_window():
    async def scenario() -> list[float]:
        clock = LoopClock(asyncio.get_running_loop())
        q = new_test_queue(clock, pop_from_backoff=False)
        runner = asyncio.create_task(q.run())
        q.add(make_pod("p"))
        seen = []
        for _ in range(3):
            qpi = await q.pop()
            seen.append(clock.now())
            qpi.unschedulable_plugins = {"P"}
            q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)
            q.move_all_to_active_or_backoff_queue(EVENT_UNSCHEDULABLE_TIMEOUT, None, None)
        q.close()
        await runner
        return seen

    seen = run_virtual(scenario())
    gaps = [b - a for a, b in itertools.pairwise(seen)]
    # Backoffs 1s then 2s, observed at the next flush tick (ticks every second).
    assert 1 <= gaps[0] <= 2 and 2 <= gaps[1] <= 3
