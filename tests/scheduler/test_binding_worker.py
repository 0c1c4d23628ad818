"""The binding worker: binding cycles that complete without waiting run one after another in one
task; a cycle that waits (on Permit, on a slow Bind) gets a task of its own and never holds back
the pods scheduled after it."""

from __future__ import annotations

import asyncio

from kubesched.api.kinds import NODE, POD
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config.types import PluginRef
from kubesched.scheduler.framework.interface import BindPlugin
from kubesched.scheduler.framework.registry import merge
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.scheduler.scheduler import Scheduler
from kubesched.utils.clock import RealClock
from tests.helpers import make_node, make_pod
from tests.run.test_scheduler_lifecycle import fresh_pod, until
from tests.scheduler.conftest import core_config
from tests.scheduler.test_scheduling import WaitForPartner


class SlowBindForSlowPods(BindPlugin):
    """Binds pods labelled ``slow`` only once ``release`` is set; skips the others (DefaultBinder binds them)."""

    name = "SlowBindForSlowPods"
    release: asyncio.Event

    async def bind(self, state, pod, node_name):
        if pod.labels.get("slow"):
            await self.release.wait()
            await self.handle.client.bind(pod.pod, node_name)
            return None
        return Status(Code.Skip)


def _pod(name: str, **labels: str) -> dict:
    pod = make_pod(name, cpu="100m", labels=labels or None)
    pod["metadata"].pop("uid", None)
    return pod


def _bound(store: ObjectStore, name: str) -> str | None:
    return store.get(POD, "default", name)["spec"].get("nodeName")


async def _started(store: ObjectStore, sched: Scheduler) -> asyncio.Task:
    await sched.start()
    return asyncio.get_running_loop().create_task(sched.run())


async def test_a_pod_waiting_on_permit_does_not_hold_back_the_bindings_after_it():
    store = ObjectStore(RealClock())
    store.create(NODE, make_node("n1", cpu="4"))
    store.create(POD, _pod("lonely", group="g"))
    store.create(POD, fresh_pod("free-1"))
    store.create(POD, fresh_pod("free-2"))
    sched = Scheduler(MemoryClient(store), core_config("WaitForPartner"),
                      registry=merge(in_tree_registry(), {"WaitForPartner": WaitForPartner}), seed=1)
    runner = await _started(store, sched)
    await until(lambda: bool(_bound(store, "free-1") and _bound(store, "free-2")))
    lonely_uid = store.get(POD, "default", "lonely")["metadata"]["uid"]
    waiting = next(iter(sched.frameworks.values())).ctx.waiting_pods.get(lonely_uid)
    assert waiting is not None and not _bound(store, "lonely") and len(sched.binding_tasks) == 1
    await sched.stop(binding_timeout=0.1)
    runner.cancel()


async def test_bindings_that_do_not_wait_run_in_the_worker_without_a_task_each():
    store = ObjectStore(RealClock())
    store.create(NODE, make_node("n1", cpu="4"))
    for i in range(5):
        store.create(POD, fresh_pod(f"p{i}"))
    sched = Scheduler(MemoryClient(store), core_config(), seed=1)
    created: list[str] = []
    loop = asyncio.get_running_loop()
    default_factory = loop.get_task_factory()

    def counting_factory(loop_: asyncio.AbstractEventLoop, coro, **kwargs):  # type: ignore[no-untyped-def]
        created.append(coro.__qualname__)
        if default_factory is None:
            return asyncio.Task(coro, loop=loop_, **kwargs)
        return default_factory(loop_, coro, **kwargs)

    loop.set_task_factory(counting_factory)
    try:
        runner = await _started(store, sched)
        await until(lambda: all(_bound(store, f"p{i}") for i in range(5)))
    finally:
        loop.set_task_factory(default_factory)
    assert created.count("Scheduler._run_bindings") == 1 and "Scheduler._binding_cycle" not in created
    await sched.stop()
    runner.cancel()


async def test_a_slow_bind_gets_its_own_task_and_the_next_pods_bind_meanwhile():
    SlowBindForSlowPods.release = asyncio.Event()
    cfg = core_config()
    bind = cfg.profiles[0].plugins.get("bind")
    bind.enabled = [PluginRef("SlowBindForSlowPods"), PluginRef("DefaultBinder")]
    bind.disabled = [PluginRef("*")]
    store = ObjectStore(RealClock())
    store.create(NODE, make_node("n1", cpu="4"))
    store.create(POD, _pod("slow", slow="yes"))
    store.create(POD, fresh_pod("quick"))
    sched = Scheduler(MemoryClient(store), cfg, registry=merge(in_tree_registry(), {"SlowBindForSlowPods": SlowBindForSlowPods}),
                      seed=1)
    runner = await _started(store, sched)
    await until(lambda: bool(_bound(store, "quick")))
    assert not _bound(store, "slow") and len(sched.binding_tasks) == 1
    SlowBindForSlowPods.release.set()
    await until(lambda: bool(_bound(store, "slow")))
    await until(lambda: not sched.binding_tasks)
    await sched.stop()
    runner.cancel()
