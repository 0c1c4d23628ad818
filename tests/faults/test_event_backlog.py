"""Events a busy scheduler records must not pile up in memory behind slow writes: whatever is in the
queue when the process is killed is lost (a leader killed while binding 2,000 pods left about a
quarter of them without a Scheduled event when events were written one at a time)."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.api.apierrors import APIError, Invalid
from kubesched.client.recorder import MAX_TRIES, WRITE_CONCURRENCY, Broadcaster
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock
from tests.helpers import make_pod

WRITE_SECONDS = 0.01


class SlowSink:
    """An API server that takes ``WRITE_SECONDS`` per event write."""

    def __init__(self) -> None:
        self.created: list[str] = []

    async def create(self, event: dict) -> None:
        await asyncio.sleep(WRITE_SECONDS)
        self.created.append(event["regarding"]["name"])

    async def update_series(self, event: dict) -> None:
        await asyncio.sleep(WRITE_SECONDS)


@pytest.mark.parametrize("burst", [WRITE_CONCURRENCY, 10 * WRITE_CONCURRENCY])
def test_a_burst_of_events_is_written_in_the_time_of_a_few_writes_not_one_write_per_event(burst):
    async def scenario() -> tuple[int, int]:
        clock = LoopClock(asyncio.get_running_loop(), VIRTUAL_EPOCH)
        sink = SlowSink()
        broadcaster = Broadcaster(sink, clock)  # type: ignore[arg-type]
        broadcaster.start()
        recorder = broadcaster.recorder("default-scheduler")
        for i in range(burst):
            pod = make_pod(f"p{i}")
            recorder.eventf(pod, None, "Normal", "Scheduled", "Binding", f"Successfully assigned default/p{i} to n1")
        rounds = burst // WRITE_CONCURRENCY
        await asyncio.sleep(rounds * WRITE_SECONDS + WRITE_SECONDS / 2)
        written = len(sink.created)
        await broadcaster.stop(1.0)
        return written, len(set(sink.created))

    written, distinct = run_virtual(scenario())
    assert written == burst and distinct == burst


class FlakySink:
    """Unreachable for the first ``failures`` writes, then fine; or refusing every write."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.attempts = 0
        self.created: list[str] = []

    async def create(self, event: dict) -> None:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise self.error
        self.created.append(event["regarding"]["name"])

    async def update_series(self, event: dict) -> None:
        await self.create(event)


@pytest.mark.parametrize(("failures", "error", "want_written", "want_attempts"), [
    pytest.param(3, ConnectionRefusedError("connection refused"), ["p"], 4, id="an unreachable server: retried until written"),
    pytest.param(3, APIError("etcd leader changed"), ["p"], 4, id="a failing server (500): retried until written"),
    pytest.param(1, Invalid("event is invalid"), [], 1, id="a refused event (422): dropped at once"),
    pytest.param(100, ConnectionRefusedError("connection refused"), [], MAX_TRIES, id="never reachable: given up after the tries"),
])
def test_an_event_write_is_retried_only_while_the_server_cannot_take_it(failures, error, want_written, want_attempts):
    async def scenario() -> FlakySink:
        clock = LoopClock(asyncio.get_running_loop(), VIRTUAL_EPOCH)
        sink = FlakySink(failures, error)
        broadcaster = Broadcaster(sink, clock)  # type: ignore[arg-type]
        broadcaster.start()
        broadcaster.recorder("default-scheduler").eventf(make_pod("p"), None, "Normal", "Scheduled", "Binding", "assigned")
        await asyncio.sleep(3600)
        await broadcaster.stop(1.0)
        return sink

    sink = run_virtual(scenario())
    assert sink.created == want_written and sink.attempts == want_attempts
