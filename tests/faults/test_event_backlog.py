"""Events a busy scheduler records must not pile up in memory behind slow writes: whatever is in the
queue when the process is killed is lost (a leader killed while binding 2,000 pods left about a
quarter of them without a Scheduled event when events were written one at a time)."""

from __future__ import annotations

import asyncio

import pytest
from lightkube.config.kubeconfig import KubeConfig

from kubesched.api.apierrors import APIError, Invalid
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.client.kube import KubeClient
from kubesched.client.recorder import MAX_TRIES, WRITE_CONCURRENCY, Broadcaster, EventSink
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock
from tests.helpers import make_pod

WRITE_SECONDS = 0.01


class SlowSink:
    """An API server that takes ``WRITE_SECONDS`` per event write."""

    def __init__(self, concurrent: bool = True) -> None:
        self.created: list[str] = []
        self.concurrent = concurrent

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


def test_writes_to_an_in_process_client_go_in_turn_and_in_order():
    """An in-process client's writes never wait, so the drain writes them one after the other
    instead of a task each; a sink that did wait would show it as one write's time per event."""

    async def scenario() -> tuple[list[str], float]:
        loop = asyncio.get_running_loop()
        sink = SlowSink(concurrent=False)
        broadcaster = Broadcaster(sink, LoopClock(loop, VIRTUAL_EPOCH))  # type: ignore[arg-type]
        broadcaster.start()
        recorder = broadcaster.recorder("default-scheduler")
        started = loop.time()
        for i in range(3):
            recorder.eventf(make_pod(f"p{i}"), None, "Normal", "Scheduled", "Binding", f"Successfully assigned default/p{i} to n1")
        await broadcaster.flush()
        took = loop.time() - started
        await broadcaster.stop(1.0)
        return sink.created, took

    created, took = run_virtual(scenario())
    assert created == ["p0", "p1", "p2"] and took == pytest.approx(3 * WRITE_SECONDS)


def test_only_an_in_process_client_is_written_to_in_turn():
    assert EventSink(MemoryClient(ObjectStore(seed=1))).concurrent is False
    config = KubeConfig.from_server("https://127.0.0.1:1").get()
    assert EventSink(KubeClient(config)).concurrent is True


class FlakySink:
    """Unreachable for the first ``failures`` writes, then fine; or refusing every write."""

    concurrent = True

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
