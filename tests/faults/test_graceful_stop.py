"""SIGTERM: what the scheduler holds in memory (bindings in flight, events and status patches not
yet written) is written before it exits, within bounded grace periods, so a stalled API server
never keeps a stopping scheduler alive. (``kill -9`` loses what is buffered: see
docs/reliability.md.)"""

from __future__ import annotations

import asyncio
import signal
from typing import cast

from kubesched.api.kinds import Kind
from kubesched.apiserver import store as kinds
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.scheduler import Scheduler as InProcessScheduler
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock
from tests.helpers import make_node, make_pod
from tests.run.harness import NODE, POD, Scheduler, scheduler_config, until
from tests.scheduler.conftest import core_config

NODE_KIND, POD_KIND = cast(Kind, kinds.NODE), cast(Kind, kinds.POD)


def pods(names: list[str], cpu: str) -> str:
    return "---".join(POD.format(name=n, cpu=cpu, scheduler="kubesched") for n in names)


def scheduled_events(api) -> dict[str, int]:
    items = api.get("events.events.k8s.io", "-n", "default")["items"]
    counts: dict[str, int] = {}
    for event in items:
        if event.get("reason") == "Scheduled":
            name = (event.get("regarding") or {}).get("name", "")
            counts[name] = counts.get(name, 0) + 1
    return counts


def test_every_pod_bound_before_sigterm_gets_its_scheduled_event(api, processes, tmp_path):
    api.start()
    sched = Scheduler(tmp_path, "sched", scheduler_config(tmp_path / "sched.yaml"), api.write_kubeconfig())
    processes.append(sched)
    sched.start()
    api.apply(NODE.format(name="n1", cpu="1000"))
    names = [f"p{i}" for i in range(150)]
    api.apply(pods(names, "10m"))
    until(lambda: sum(1 for n in api.nodes_of_pods().values() if n) >= 20, 30, lambda: f"nothing bound:\n{sched.output()}")
    sched.signal(signal.SIGTERM)
    assert sched.wait(30) == 0, sched.output()
    bound = sorted(name for name, node in api.nodes_of_pods().items() if node)
    events = scheduled_events(api)
    assert [name for name in bound if events.get(name) != 1] == [], sched.output()
    assert set(events) <= set(bound)


class StalledWrites(MemoryClient):
    """The embedded cluster behind a server that accepts reads and never answers writes."""

    async def bind(self, pod: dict, node_name: str) -> None:
        await asyncio.Event().wait()

    async def patch_pod_status(self, pod: dict, conditions: list[dict], nominated_node_name: str | None) -> None:
        await asyncio.Event().wait()

    async def create(self, kind, obj: dict) -> dict:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_stop_with_a_stalled_api_server_rolls_back_and_gives_up_on_its_writes_after_the_grace_periods():
    async def scenario() -> tuple[int, int, int]:
        loop = asyncio.get_running_loop()
        clock = LoopClock(loop, VIRTUAL_EPOCH)
        store = ObjectStore(clock, seed=1)
        store.create(NODE_KIND, make_node("n1"))
        for i in range(5):
            store.create(POD_KIND, {**make_pod(f"p{i}", cpu="100m"), "metadata": {"name": f"p{i}", "namespace": "default"}})
        sched = InProcessScheduler(StalledWrites(store), core_config(), clock=clock, seed=1)
        await sched.start()
        loop_task = loop.create_task(sched.run())
        await asyncio.sleep(5)
        in_flight = len(sched.binding_tasks)
        await asyncio.wait_for(sched.stop(binding_timeout=2.0, flush_timeout=2.0), 60)  # raises if it hangs
        loop_task.cancel()
        await asyncio.gather(loop_task, return_exceptions=True)
        return in_flight, len(sched.cache.assumed), len(sched.api_tasks)

    in_flight, assumed, writes = run_virtual(scenario())
    assert in_flight == 5 and assumed == 0 and writes == 0
