"""The scheduling loop's time slice: with the embedded store, pods are scheduled back to back until
the slice is used up, then the binding cycles and informers run; once many pods wait for their
binding, or against an API server in another process, the loop gives way after every pod."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.api.kinds import NODE, POD
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler import scheduler as scheduler_module
from kubesched.scheduler.backend.cache import Cache
from kubesched.scheduler.framework.interface import PostBindPlugin
from kubesched.scheduler.framework.registry import merge
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.scheduler.scheduler import Scheduler
from kubesched.utils.clock import RealClock
from tests.helpers import make_node
from tests.run.test_scheduler_lifecycle import fresh_pod, until
from tests.scheduler.conftest import core_config

PODS = 12


class CountsAssumed(PostBindPlugin):
    """Records, at each pod's PostBind, how many pods the scheduler's cache holds assumed."""

    name = "CountsAssumed"
    cache: Cache
    seen: list[int]

    def post_bind(self, state, pod, node_name):  # type: ignore[no-untyped-def]
        self.seen.append(len(self.cache.assumed))


class OutOfProcess(MemoryClient):
    """The embedded store, presented as a client whose calls wait on I/O (as an API server's do)."""

    @property
    def in_process(self) -> bool:
        return False


async def _assumed_at_each_binding(monkeypatch: pytest.MonkeyPatch, time_slice: float, max_assumed: int,
                                   client: type[MemoryClient] = MemoryClient) -> list[int]:
    monkeypatch.setattr(scheduler_module, "SCHEDULING_TIME_SLICE", time_slice)
    monkeypatch.setattr(scheduler_module, "MAX_ASSUMED_IN_SLICE", max_assumed)
    store = ObjectStore(RealClock())
    store.create(NODE, make_node("n1", cpu="64", pods=110))
    for i in range(PODS):
        store.create(POD, fresh_pod(f"p{i}"))
    sched = Scheduler(client(store), core_config("CountsAssumed"),
                      registry=merge(in_tree_registry(), {"CountsAssumed": CountsAssumed}), seed=1)
    CountsAssumed.cache, CountsAssumed.seen = sched.cache, []
    await sched.start()
    runner = asyncio.get_running_loop().create_task(sched.run())
    await until(lambda: len(CountsAssumed.seen) == PODS)
    await sched.stop()
    runner.cancel()
    return CountsAssumed.seen


async def test_within_a_slice_every_pending_pod_is_scheduled_before_the_first_binding(monkeypatch):
    seen = await _assumed_at_each_binding(monkeypatch, time_slice=60.0, max_assumed=1000)
    assert seen[0] == PODS


async def test_without_a_slice_each_pod_is_bound_before_the_pod_after_the_next_is_scheduled(monkeypatch):
    seen = await _assumed_at_each_binding(monkeypatch, time_slice=0.0, max_assumed=1000)
    assert max(seen) <= 2


async def test_many_pods_awaiting_their_binding_end_the_slice(monkeypatch):
    seen = await _assumed_at_each_binding(monkeypatch, time_slice=60.0, max_assumed=3)
    assert seen[0] == 4 and max(seen) <= 5, seen


async def test_against_an_api_server_in_another_process_the_loop_yields_after_every_pod(monkeypatch):
    seen = await _assumed_at_each_binding(monkeypatch, time_slice=60.0, max_assumed=1000, client=OutOfProcess)
    assert max(seen) <= 2
