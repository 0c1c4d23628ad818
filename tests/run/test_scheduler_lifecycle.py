"""What ``kubesched run`` needs from the Scheduler: sampled plugin metrics, a standby that syncs
without scheduling, and a shutdown that finishes or rolls back in-flight bindings."""

from __future__ import annotations

import asyncio

from kubesched.api.kinds import NODE, POD
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config.types import PluginRef
from kubesched.scheduler.framework.interface import BindPlugin, ReservePlugin
from kubesched.scheduler.framework.registry import merge
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.scheduler.scheduler import Scheduler
from kubesched.utils.clock import RealClock
from tests.helpers import make_node, make_pod
from tests.scheduler.conftest import core_config


def fresh_pod(name: str, cpu: str = "100m") -> dict:
    pod = make_pod(name, cpu=cpu)
    pod["metadata"].pop("uid", None)
    return pod


async def until(check, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_sampled_cycles_observe_plugin_execution_duration_per_plugin_and_point(monkeypatch):
    import kubesched.scheduler.scheduler as scheduler_module

    monkeypatch.setattr(scheduler_module, "PLUGIN_METRICS_SAMPLE_PERCENT", 100)
    store = ObjectStore(RealClock())
    store.create(NODE, make_node("n1", cpu="4"))
    store.create(NODE, make_node("n2", cpu="4"))  # two feasible nodes, so Score runs
    store.create(POD, fresh_pod("p"))
    sched = Scheduler(MemoryClient(store), core_config(), seed=1)
    await sched.start()
    runner = asyncio.get_running_loop().create_task(sched.run())
    await until(lambda: store.get(POD, "default", "p")["spec"].get("nodeName"))
    await sched.stop()
    runner.cancel()
    samples = {(s.labels["plugin"], s.labels["extension_point"], s.labels["status"])
               for metric in sched.metrics.plugin_execution_duration.collect() for s in metric.samples if s.name.endswith("_count")}
    assert {("NodeResourcesFit", "PreFilter", "Success"), ("NodeResourcesFit", "Filter", "Success"),
            ("NodeResourcesFit", "Score", "Success"), ("DefaultBinder", "Bind", "Success")} <= samples


async def test_without_sampling_no_plugin_durations_are_observed(monkeypatch):
    import kubesched.scheduler.scheduler as scheduler_module

    monkeypatch.setattr(scheduler_module, "PLUGIN_METRICS_SAMPLE_PERCENT", 0)
    store = ObjectStore(RealClock())
    store.create(NODE, make_node("n1", cpu="4"))
    store.create(POD, fresh_pod("p"))
    sched = Scheduler(MemoryClient(store), core_config(), seed=1)
    await sched.start()
    runner = asyncio.get_running_loop().create_task(sched.run())
    await until(lambda: store.get(POD, "default", "p")["spec"].get("nodeName"))
    await sched.stop()
    runner.cancel()
    assert not [s for m in sched.metrics.plugin_execution_duration.collect() for s in m.samples]


async def test_a_standby_syncs_its_cache_and_queue_without_scheduling():
    store = ObjectStore(RealClock())
    store.create(NODE, make_node("n1", cpu="4"))
    store.create(POD, fresh_pod("p"))
    sched = Scheduler(MemoryClient(store), core_config(), seed=1)
    await sched.start_informers()
    assert sched.handlers_synced and sched.cache.node_count() == 1 and sched.queue.counts()["active"] == 1
    await asyncio.sleep(0.05)
    assert not store.get(POD, "default", "p")["spec"].get("nodeName")
    sched.start_scheduling()  # leadership acquired
    runner = asyncio.get_running_loop().create_task(sched.run())
    await until(lambda: store.get(POD, "default", "p")["spec"].get("nodeName"))
    await sched.stop()
    runner.cancel()


class HangingBind(BindPlugin):
    name = "HangingBind"
    release: asyncio.Event | None = None

    async def bind(self, state, pod, node_name):
        assert HangingBind.release is not None
        await HangingBind.release.wait()
        return None


class RecordingReserve(ReservePlugin):
    name = "RecordingReserve"
    log: list[str] = []

    def reserve(self, state, pod, node_name):
        RecordingReserve.log.append(f"reserve {pod.name}")

    def unreserve(self, state, pod, node_name):
        RecordingReserve.log.append(f"unreserve {pod.name}")


def hanging_scheduler(store: ObjectStore) -> Scheduler:
    cfg = core_config("RecordingReserve")
    cfg.profiles[0].plugins.get("bind").enabled = [PluginRef("HangingBind")]
    cfg.profiles[0].plugins.get("bind").disabled = [PluginRef("*")]
    registry = merge(in_tree_registry(), {"HangingBind": HangingBind, "RecordingReserve": RecordingReserve})
    return Scheduler(MemoryClient(store), cfg, registry=registry, seed=1)


async def test_shutdown_rolls_back_a_binding_that_outlives_the_grace_period():
    HangingBind.release = asyncio.Event()
    RecordingReserve.log.clear()
    store = ObjectStore(RealClock())
    store.create(NODE, make_node("n1", cpu="4"))
    store.create(POD, fresh_pod("p"))
    sched = hanging_scheduler(store)
    await sched.start()
    runner = asyncio.get_running_loop().create_task(sched.run())
    await until(lambda: bool(sched.binding_tasks))
    await sched.stop(binding_timeout=0.1)
    runner.cancel()
    assert RecordingReserve.log == ["reserve p", "unreserve p"]
    assert not sched.cache.assumed and not sched.binding_tasks
    pod = store.get(POD, "default", "p")
    assert not pod["spec"].get("nodeName")
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert condition["reason"] == "SchedulerError" and "scheduler is shutting down" in condition["message"]


async def test_shutdown_lets_a_binding_that_finishes_within_the_grace_period_complete():
    HangingBind.release = asyncio.Event()
    RecordingReserve.log.clear()
    store = ObjectStore(RealClock())
    store.create(NODE, make_node("n1", cpu="4"))
    store.create(POD, fresh_pod("p"))
    sched = hanging_scheduler(store)
    await sched.start()
    runner = asyncio.get_running_loop().create_task(sched.run())
    await until(lambda: bool(sched.binding_tasks))
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, HangingBind.release.set)
    await sched.stop(binding_timeout=5)
    runner.cancel()
    assert RecordingReserve.log == ["reserve p"]
    assert sched.queue.pop_nowait() is None  # the closed queue hands out nothing more
