"""An embedded cluster for upstream's scheduler integration tests, translated: the object store on a
virtual-time loop, the fake kubelet, PV and ResourceClaim controllers, and a Scheduler on it.

Upstream's tests start an apiserver and a scheduler, create objects through a client and poll the
pod (``wait.PollUntilContextTimeout``); these do the same through the store, polling on virtual
time, so waiting costs no wall-clock time and a timeout is part of the scenario, not a race.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from kubesched.api.kinds import kind_named
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config import load_dict
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.features import FeatureGates
from kubesched.scheduler.framework.registry import Registry
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.components import start_components
from kubesched.simulator.simulate import SIMULATION_COMPONENTS
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock

T = TypeVar("T")
API_VERSION = "kubescheduler.config.k8s.io/v1"
#: Upstream's ``wait.ForeverTestTimeout`` (30 s), here in virtual seconds.
FOREVER = 30.0
#: Upstream's poll interval.
POLL = 0.1


def configuration(*profiles: Mapping[str, Any], gates: Mapping[str, bool] | None = None,
                  registry: Registry | None = None,
                  extenders: Iterable[Mapping[str, Any]] = (), **fields: Any) -> SchedulerConfiguration:
    """A v1 KubeSchedulerConfiguration with ``profiles`` (none: the default profile),
    ``extenders`` and other top-level ``fields`` (``podInitialBackoffSeconds``, ...), defaulted and
    validated as a file would be (against ``registry`` when out-of-tree plugins are named)."""
    doc: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration", **fields}
    if profiles:
        doc["profiles"] = [dict(p) for p in profiles]
    if extenders:
        doc["extenders"] = [dict(e) for e in extenders]
    return load_dict(doc, registry=registry, feature_gates=gates, source="integration test")


def scoring_configuration(score_plugin: str, pre_score_plugin: str | None = None) -> SchedulerConfiguration:
    """Upstream's ``initTestSchedulerForScoringTests``: the default profile with every PreScore and
    Score plugin disabled but ``score_plugin`` (weight 1) and its PreScore."""
    plugins: dict[str, Any] = {
        "preScore": {"disabled": [{"name": "*"}]},
        "score": {"enabled": [{"name": score_plugin, "weight": 1}], "disabled": [{"name": "*"}]},
    }
    if pre_score_plugin:
        plugins["preScore"]["enabled"] = [{"name": pre_score_plugin}]
    return configuration({"schedulerName": "default-scheduler", "plugins": plugins})


@dataclass
class Cluster:
    """The running cluster: create, change and delete objects; wait for pods as upstream's
    ``testutils`` do."""

    store: ObjectStore
    scheduler: Scheduler
    #: The scheduling loop (``Scheduler.run``) while it runs.
    runner: asyncio.Task | None = None

    async def stop_scheduling(self) -> None:
        """Stop the scheduling loop; the queue, its timers and the event handlers go on. Upstream's
        queueing tests run such a scheduler and call ``ScheduleOne`` by hand."""
        if self.runner is not None:
            self.runner.cancel()
            await asyncio.gather(self.runner, return_exceptions=True)
            self.runner = None

    def requeued(self) -> set[str]:
        """Names of the pods waiting in activeQ or backoffQ (upstream ``PodsInActiveQ`` and
        ``PodsInBackoffQ``): those moved out of the unschedulable pool."""
        pending, _summary = self.scheduler.queue.pending_pods()
        unschedulable = {p.uid for p in self.scheduler.queue.unschedulable_pods()}
        return {p.name for p in pending if p.uid not in unschedulable}

    def create(self, *objects: Mapping[str, Any]) -> None:
        """Create built-in objects, and custom objects of a CRD created before."""
        for obj in objects:
            api_version, kind_name = obj.get("apiVersion", ""), obj.get("kind", "")
            kind = self.store.custom.resolve(api_version, kind_name)
            if kind is None:
                raise ValueError(f"kind {kind_name!r} is not served by kubesched")
            self.store.create(kind, copy.deepcopy(dict(obj)))

    def mutate(self, kind: str, name: str, change: Callable[[dict], Any], namespace: str | None = None) -> None:
        self.store.mutate(_kind(kind), namespace, name, change)

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        self.store.delete(_kind(kind), namespace, name, grace_period=0)

    def pod(self, name: str, namespace: str = "default") -> dict:
        return self.store.get(_kind("Pod"), namespace, name)

    def exists(self, name: str, namespace: str = "default") -> bool:
        """Whether the pod is still stored (a deleted victim is not)."""
        return self.store.try_get(_kind("Pod"), namespace, name) is not None

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict:
        """Any stored object, by kind name."""
        return self.store.get(_kind(kind), namespace, name)

    def events(self, reason: str) -> list[dict]:
        """The core/v1 Events with ``reason``."""
        return [e for e in self.store.iter_all(_kind("Event")) if e.get("reason") == reason]

    def node_of(self, name: str, namespace: str = "default") -> str:
        return (self.pod(name, namespace).get("spec") or {}).get("nodeName") or ""

    def condition(self, name: str, namespace: str = "default") -> dict:
        """The pod's PodScheduled condition ({} when it has none yet)."""
        conditions = (self.pod(name, namespace).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c.get("type") == "PodScheduled"), {})

    async def wait_for(self, what: str, check: Callable[[], bool], timeout: float = FOREVER) -> None:
        """Poll ``check`` every 100 ms of virtual time; fail naming ``what`` after ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not check():
            if loop.time() >= deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(POLL)

    async def scheduled(self, name: str, namespace: str = "default", timeout: float = FOREVER) -> str:
        """``testutils.PodScheduled``: wait for a node name; returns it."""
        await self.wait_for(f"pod {namespace}/{name} to be scheduled (condition: {self.condition(name, namespace)})",
                            lambda: bool(self.node_of(name, namespace)), timeout)
        return self.node_of(name, namespace)

    async def unschedulable(self, name: str, namespace: str = "default", timeout: float = FOREVER) -> str:
        """``testutils.PodUnschedulable``: wait for PodScheduled=False/Unschedulable with no node;
        returns the condition's message."""

        def check() -> bool:
            c = self.condition(name, namespace)
            return not self.node_of(name, namespace) and c.get("status") == "False" and c.get("reason") == "Unschedulable"

        await self.wait_for(f"pod {namespace}/{name} to be unschedulable", check, timeout)
        return str(self.condition(name, namespace).get("message", ""))

    async def stays_pending(self, name: str, namespace: str = "default", seconds: float = 5.0) -> None:
        """Upstream's "wait and see it is still not scheduled" (``waitForPodToScheduleWithTimeout``
        expected to time out)."""
        await asyncio.sleep(seconds)
        assert not self.node_of(name, namespace), f"pod {namespace}/{name} was scheduled to {self.node_of(name, namespace)}"


def _kind(name: str) -> Any:
    kind = kind_named(name)
    if kind is None:
        raise ValueError(f"unknown kind {name}")
    return kind


@asynccontextmanager
async def embedded(config: SchedulerConfiguration | None = None, objects: Iterable[Mapping[str, Any]] = (), *,
                   gates: Mapping[str, bool] | None = None, registry: Registry | None = None,
                   controllers: bool = True, kubelet: bool = True) -> AsyncIterator[Cluster]:
    """A cluster holding ``objects`` with a scheduler running ``config`` (default: the default
    profile) and the fake cluster components. Without ``controllers`` (PV binding, claims,
    disruption budgets, garbage collection) and ``kubelet`` (node status and leases, pod phases)
    objects change only as the test changes them, as in upstream's tests that start just an API
    server and a scheduler."""
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop, VIRTUAL_EPOCH)
    feature_gates = FeatureGates(dict(gates or {}))
    store = ObjectStore(clock, seed=1, auto_create_namespaces=True, feature_gates=feature_gates)
    cluster_components = start_components(store, dataclasses.replace(SIMULATION_COMPONENTS, controllers=controllers, kubelet=kubelet))
    sched = Scheduler(MemoryClient(store), config or configuration(gates=gates), registry=registry, clock=clock, seed=1,
                      feature_gates=feature_gates)
    cluster = Cluster(store, sched)
    cluster.create(*objects)
    await sched.start()
    cluster.runner = loop.create_task(sched.run())
    try:
        yield cluster
    finally:
        await sched.stop()
        await cluster.stop_scheduling()
        await cluster_components.stop()


def run(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run one scenario on a fresh virtual-time loop."""
    return run_virtual(scenario())
