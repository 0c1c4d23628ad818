"""Fault containment: whatever raises for one pod or one object (a plugin, the framework, the cache,
the failure handler, an event handler) fails that pod with an Error status, or is a logged and
counted handler error; the scheduling loop goes on and every other pod is scheduled. The cache
comparer then repairs what a failed handler left out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

import pytest

from kubesched.api.kinds import Kind
from kubesched.apiserver import store as kinds
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.comparer import CacheComparer, compare_cache
from kubesched.scheduler.config.types import PluginRef
from kubesched.scheduler.framework.interface import (
    BindPlugin,
    FilterPlugin,
    PermitPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    ReservePlugin,
    ScorePlugin,
)
from kubesched.scheduler.framework.registry import merge
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock
from tests.helpers import make_node, make_pod
from tests.scheduler.conftest import core_config

GOOD = [f"good-{i}" for i in range(4)]
NODE, POD, EVENT = cast(Kind, kinds.NODE), cast(Kind, kinds.POD), cast(Kind, kinds.EVENT)


class Raises(PreFilterPlugin, FilterPlugin, ScorePlugin, ReservePlugin, PermitPlugin, PreBindPlugin, BindPlugin):
    """Raises at the extension point ``point`` for the pod named "bad"; passes otherwise."""

    name = "Raises"
    point = ""

    def _maybe_raise(self, point: str, pod: Any) -> None:
        if point == self.point and pod.name == "bad":
            raise ZeroDivisionError(f"{point} blew up")

    def pre_filter(self, state, pod, nodes):
        self._maybe_raise("PreFilter", pod)
        return None, None

    def filter(self, state, pod, node_info):
        self._maybe_raise("Filter", pod)
        return None

    def score(self, state, pod, node_name):
        self._maybe_raise("Score", pod)
        return 0

    def reserve(self, state, pod, node_name):
        self._maybe_raise("Reserve", pod)
        return None

    def unreserve(self, state, pod, node_name):
        return None

    def permit(self, state, pod, node_name):
        self._maybe_raise("Permit", pod)
        return None, 0.0

    def pre_bind(self, state, pod, node_name):
        self._maybe_raise("PreBind", pod)
        return None

    def bind(self, state, pod, node_name):
        self._maybe_raise("Bind", pod)
        return Status(Code.Skip)  # DefaultBinder binds


def plugin_raising_at(point: str) -> type[Raises]:
    return type(f"RaisesAt{point}", (Raises,), {"point": point})


def new_pod(name: str, cpu: str = "100m") -> dict:
    pod = make_pod(name, cpu=cpu)
    del pod["metadata"]["uid"]
    return pod


def new_node(name: str) -> dict:
    return make_node(name, cpu="4")


async def run_for(sched: Scheduler, seconds: float) -> asyncio.Task:
    await sched.start()
    loop_task = asyncio.get_running_loop().create_task(sched.run())
    await asyncio.sleep(seconds)
    return loop_task


def scenario(objects: list[dict], *, registry_extra: dict | None = None, extra_plugin: str = "",
             before_start: Callable[[Scheduler], None] | None = None, seconds: float = 30.0,
             after: Callable[[Scheduler], Any] | None = None) -> dict[str, Any]:
    """Run a scheduler on the embedded cluster with a virtual clock; what tests look at afterwards."""

    async def body() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        clock = LoopClock(loop, VIRTUAL_EPOCH)
        store = ObjectStore(clock, seed=1)
        for obj in objects:
            store.create(NODE if obj["kind"] == "Node" else POD, obj)
        registry = merge(in_tree_registry(), registry_extra or {})
        config = core_config()
        if extra_plugin:  # first, so its Bind runs before DefaultBinder's
            multi_point = config.profiles[0].plugins.multi_point
            multi_point.enabled.insert(0, PluginRef(extra_plugin))
        sched = Scheduler(MemoryClient(store), config, registry=registry, clock=clock, seed=1)
        if before_start is not None:
            before_start(sched)
        loop_task = await run_for(sched, seconds)
        extra = await after(sched) if after is not None else None
        out = {
            "nodes": {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in store.iter_all(POD)},
            "failed": [e for e in store.iter_all(EVENT) if e["reason"] == "FailedScheduling"],
            "errors": sched.metrics.schedule_attempts.labels("error", "default-scheduler")._value.get(),
            "handler_errors": sched.metrics.event_handler_errors.labels("Node")._value.get(),
            "loop_alive": not loop_task.done(),
            "extra": extra,
        }
        await sched.stop()
        loop_task.cancel()
        await asyncio.gather(loop_task, return_exceptions=True)
        return out

    return run_virtual(body())


@pytest.mark.parametrize("point", ["PreFilter", "Filter", "Score", "Reserve", "Permit", "PreBind", "Bind"])
def test_a_plugin_raising_for_one_pod_fails_that_pod_with_an_error_and_the_others_are_scheduled(point):
    plugin = plugin_raising_at(point)
    objects = [new_node("n1"), new_node("n2"), new_pod("bad"), *(new_pod(name) for name in GOOD)]
    out = scenario(objects, registry_extra={"Raises": plugin}, extra_plugin="Raises")
    assert out["loop_alive"]
    assert all(out["nodes"][name] for name in GOOD)
    assert out["nodes"]["bad"] == ""
    failed = [e for e in out["failed"] if e["involvedObject"]["name"] == "bad"]
    assert failed and f"{point} blew up" in failed[0]["message"]
    assert out["errors"] >= 2  # retried after backoff, failed again


def test_a_pod_whose_request_overflows_the_node_table_does_not_stop_the_others():
    objects = [new_node("n1"), new_pod("huge", cpu="1e17"), *(new_pod(name) for name in GOOD)]
    out = scenario(objects)
    assert out["loop_alive"]
    assert all(out["nodes"][name] for name in GOOD)
    assert out["nodes"]["huge"] == ""
    assert [e for e in out["failed"] if e["involvedObject"]["name"] == "huge"]


def test_a_failure_handler_that_raises_requeues_the_pod_and_the_loop_goes_on():
    def break_failure_handling(sched: Scheduler) -> None:
        original = sched._handle_failure

        def handle(fw, qpi, status, nominating, start):
            if qpi.pod_info.name == "bad":
                raise RuntimeError("failure handler blew up")
            original(fw, qpi, status, nominating, start)

        sched._handle_failure = handle  # type: ignore[method-assign]

    plugin = plugin_raising_at("Filter")
    objects = [new_node("n1"), new_pod("bad"), *(new_pod(name) for name in GOOD)]
    out = scenario(objects, registry_extra={"Raises": plugin}, extra_plugin="Raises", before_start=break_failure_handling)
    assert out["loop_alive"]
    assert all(out["nodes"][name] for name in GOOD)
    failed = [e for e in out["failed"] if e["involvedObject"]["name"] == "bad"]
    assert len(failed) == 1 and "failure handler blew up" in failed[0]["message"]
    assert out["errors"] >= 2


def test_a_handler_raising_for_one_node_is_counted_and_the_comparer_repairs_the_cache():
    broken = {"on": True}

    def break_node_adds(sched: Scheduler) -> None:
        original = sched.cache.add_node

        def add_node(node: dict) -> Any:
            if broken["on"] and node["metadata"]["name"] == "broken":
                raise ValueError("cache refused the node")
            return original(node)

        sched.cache.add_node = add_node  # type: ignore[method-assign]

    async def compare_then_repair(sched: Scheduler) -> dict[str, Any]:
        before = compare_cache(sched).as_dict()
        broken["on"] = False
        comparer = CacheComparer(sched, interval=0)
        first = (await comparer.check()).as_dict()
        second = (await comparer.check()).as_dict()
        return {"before": before, "first": first, "second": second, "after": compare_cache(sched).as_dict(),
                "repaired": sched.metrics.cache_divergences.labels("Node")._value.get()}

    objects = [new_node("broken"), new_node("n1"), *(new_pod(name) for name in GOOD)]
    out = scenario(objects, before_start=break_node_adds, after=compare_then_repair)
    assert out["loop_alive"]
    assert out["handler_errors"] == 1
    assert {out["nodes"][name] for name in GOOD} == {"n1"}
    repair = out["extra"]
    assert repair["before"]["missedNodes"] == ["broken"]
    assert repair["first"]["missedNodes"] == []  # seen once: maybe a change on its way, not repaired yet
    assert repair["second"]["missedNodes"] == ["broken"]
    assert repair["after"]["missedNodes"] == [] and repair["repaired"] == 1


def test_an_informer_that_diverged_from_the_api_server_is_relisted_by_the_comparer():
    async def drop_a_node_from_the_informer(sched: Scheduler) -> dict[str, Any]:
        sched.informers.store("Node").pop("n2")  # as if its watch had missed the node's creation
        comparer = CacheComparer(sched, interval=0)
        first = await comparer.check()
        second = await comparer.check()
        await asyncio.sleep(1)
        return {"first": sorted(first.stale_informers), "second": sorted(second.stale_informers),
                "relisted": sched.metrics.informer_relists.labels("Node", "stale")._value.get(),
                "held": sorted(sched.informers.store("Node"))}

    out = scenario([new_node("n1"), new_node("n2"), new_pod("good-0")], after=drop_a_node_from_the_informer)
    repair = out["extra"]
    assert repair["first"] == [] and repair["second"] == ["Node"]
    assert repair["relisted"] == 1 and repair["held"] == ["n1", "n2"]
