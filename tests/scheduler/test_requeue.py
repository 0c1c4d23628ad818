"""Which cluster events bring an unschedulable pod back, end to end on virtual time: assigned-pod
events go through every rejector's queueing hints, node taint changes reach plugins that only
registered Node/Add, and freeing a nominated node wakes lower-priority pods."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from kubesched.api.kinds import NODE, POD
from kubesched.api.types import PodInfo
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import EnqueueExtensions, FilterPlugin, PermitPlugin
from kubesched.scheduler.framework.registry import Registry, merge
from kubesched.scheduler.framework.runtime import FrameworkError
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.scheduler.scheduler import Scheduler, build_hint_map
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock, ManualClock
from tests.helpers import make_node, make_pod
from tests.scheduler.conftest import core_config

HOSTNAME = "kubernetes.io/hostname"
#: Long enough for a failed attempt to settle, far shorter than the 5-minute unschedulable flush.
SETTLE = 15.0


@dataclass
class Running:
    sched: Scheduler
    store: ObjectStore

    def node_of(self, name: str) -> str | None:
        return self.store.get(POD, "default", name)["spec"].get("nodeName")

    def attempts(self, name: str) -> int:
        qpi = self.sched.queue.get(f"default/{name}")
        return 0 if qpi is None else qpi.attempts


@asynccontextmanager
async def running(objects: list[dict], config: SchedulerConfiguration, registry: Registry | None = None,
                  **options: Any) -> AsyncIterator[Running]:
    """A scheduler started on an embedded cluster holding ``objects`` (``options`` go to Scheduler)."""
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop, VIRTUAL_EPOCH)
    store = ObjectStore(clock, seed=1)
    for obj in objects:
        store.create(NODE if obj["kind"] == "Node" else POD, obj)
    sched = Scheduler(MemoryClient(store), config, registry=registry, clock=clock, seed=1, **options)
    await sched.start()
    runner = loop.create_task(sched.run())
    try:
        yield Running(sched, store)
    finally:
        await sched.stop()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


def run(scenario: Callable[[], object]) -> object:
    return run_virtual(scenario())  # type: ignore[arg-type]


def test_relabelling_the_bound_pod_an_anti_affinity_rejected_pod_avoids_requeues_it():
    """Upstream's QHint path sends AssignedPod/UpdatePodLabel to every unschedulable pod; a pre-filter
    on the pending pod's *affinity* terms would miss a pod kept out by its own anti-affinity."""
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOSTNAME}]}}

    async def scenario() -> tuple[str | None, str | None]:
        objects = [make_node("n1"), make_pod("db", labels={"app": "db"}, node="n1"), make_pod("p", affinity=anti)]
        async with running(objects, core_config("InterPodAffinity")) as r:
            await asyncio.sleep(SETTLE)
            before = r.node_of("p")
            r.store.mutate(POD, "default", "db", lambda pod: pod["metadata"]["labels"].update(app="other"))
            await asyncio.sleep(SETTLE)
            return before, r.node_of("p")

    assert run(scenario) == (None, "n1")


class NeedsReadyPod(FilterPlugin, EnqueueExtensions):
    """An out-of-tree plugin that waits for a bound pod labelled ready=true, and says so with a hint."""

    name = "NeedsReadyPod"

    def filter(self, state, pod, node_info):
        if any(p.labels.get("ready") == "true" for p in node_info.pods.values()):
            return None
        return Status(Code.Unschedulable, "no ready pod yet")

    def events_to_register(self):
        return [ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.Add), self._hint)]

    @staticmethod
    def _hint(pod, old, new):
        return QueueingHint.Queue if (new["metadata"].get("labels") or {}).get("ready") == "true" else QueueingHint.QueueSkip


def test_an_out_of_tree_plugin_registered_for_pod_add_gets_its_pods_back_when_a_bound_pod_appears():
    async def scenario() -> tuple[str | None, str | None]:
        registry = merge(in_tree_registry(), {"NeedsReadyPod": NeedsReadyPod})
        async with running([make_node("n1"), make_pod("p")], core_config("NeedsReadyPod"), registry) as r:
            await asyncio.sleep(SETTLE)
            before = r.node_of("p")
            r.store.create(POD, make_pod("helper", labels={"ready": "true"}, node="n1"))
            await asyncio.sleep(SETTLE)
            return before, r.node_of("p")

    assert run(scenario) == (None, "n1")


class WaitsThenTimesOut(PermitPlugin, EnqueueExtensions):
    """Parks every pod until its timeout; a deleted pod that was on a node may have made room."""

    name = "WaitsThenTimesOut"

    def permit(self, state, pod, node_name):
        return Status(Code.Wait), 5.0

    def events_to_register(self):
        return [ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.Delete), self._hint)]

    @staticmethod
    def _hint(pod, old, new):
        return QueueingHint.Queue if old["spec"].get("nodeName") else QueueingHint.QueueSkip


def test_a_pod_rejected_while_waiting_on_permit_is_not_requeued_by_forgetting_itself():
    """Forgetting the assumed pod is an AssignedPodDelete for the others only: sent before the failure
    handler, it would be kept as an in-flight event of the pod itself and retry it after backoff."""

    async def scenario() -> tuple[int, list[str]]:
        registry = merge(in_tree_registry(), {"WaitsThenTimesOut": WaitsThenTimesOut})
        async with running([make_node("n1"), make_pod("p")], core_config("WaitsThenTimesOut"), registry) as r:
            await asyncio.sleep(SETTLE)
            return r.attempts("p"), [p.name for p in r.sched.queue.unschedulable_pods()]

    assert run(scenario) == (1, ["p"])


NODE_ADD = ClusterEvent(Resource.Node, ActionType.Add)
NODE_TAINT = ClusterEvent(Resource.Node, ActionType.UpdateNodeTaint)


def hint_fn(pod, old, new):
    return QueueingHint.Queue


@pytest.mark.parametrize(("registered", "want_taint_hints"), [
    pytest.param([ClusterEventWithHint(NODE_ADD, hint_fn)], [("P", None)], id="Node/Add only: an always-Queue taint entry"),
    pytest.param([ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add | ActionType.UpdateNodeTaint), hint_fn)], [],
                 id="registers UpdateNodeTaint itself"),
    pytest.param([ClusterEventWithHint(NODE_ADD), ClusterEventWithHint(NODE_TAINT, hint_fn)], [("P", hint_fn)],
                 id="separate UpdateNodeTaint registration keeps its own hint"),
    pytest.param([ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Delete))], [], id="no Node/Add"),
    pytest.param([ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.Add))], [], id="Pod/Add is not Node/Add"),
])
def test_build_hint_map_gives_node_add_plugins_a_taint_update_entry(registered, want_taint_hints):
    """As upstream's buildQueueingHintMap: Node/Add plugins also hear of taint updates."""
    hints = build_hint_map(SimpleNamespace(enqueue_extensions=[("P", registered)]))
    assert hints.get(NODE_TAINT, []) == want_taint_hints


def test_a_node_taint_change_requeues_a_pod_node_affinity_rejected():
    """NodeAffinity registers Node/Add and UpdateNodeLabel only; a taint change still brings its pods back."""
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}}

    async def scenario() -> tuple[int, int]:
        async with running([make_node("n1"), make_pod("p", affinity=affinity)], core_config("NodeAffinity")) as r:
            await asyncio.sleep(SETTLE)
            before = r.attempts("p")
            r.store.mutate(NODE, None, "n1", lambda n: n["spec"].update(taints=[{"key": "k", "effect": "NoSchedule"}]))
            await asyncio.sleep(SETTLE)
            return before, r.attempts("p")

    assert run(scenario) == (1, 2)


def test_a_scheduler_needs_a_profile():
    with pytest.raises(FrameworkError, match="at least one profile is required"):
        Scheduler(MemoryClient(ObjectStore(ManualClock(), seed=1)), SchedulerConfiguration(profiles=[]))


class RejectsUntilADeletion(FilterPlugin, EnqueueExtensions):
    name = "RejectsUntilADeletion"

    def filter(self, state, pod, node_info):
        return Status(Code.Unschedulable, "no")

    def events_to_register(self):
        return [ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.Delete))]


def nominee(nominated: str = "n1", **changes) -> dict:
    pod = make_pod("nominee", priority=10, **changes)
    pod["metadata"]["resourceVersion"] = "1"
    pod["status"] = {"nominatedNodeName": nominated} if nominated else {}
    return pod


def renominated(nominated: str) -> dict:
    pod = nominee(nominated)
    pod["metadata"]["resourceVersion"] = "2"
    return pod


@pytest.mark.parametrize(("event", "want"), [
    pytest.param(lambda h: h._pod_deleted(nominee()), {"low": "backoff", "equal": "backoff", "high": "unschedulable"},
                 id="nominated pod deleted: lower-or-equal priority pods retry"),
    pytest.param(lambda h: h._pod_deleted(nominee("")), {"low": "unschedulable", "equal": "unschedulable", "high": "unschedulable"},
                 id="pod without nomination deleted"),
    pytest.param(lambda h: h._pod_updated(nominee(), renominated("")), {"low": "backoff", "equal": "backoff", "high": "unschedulable"},
                 id="nomination cleared"),
    pytest.param(lambda h: h._pod_updated(nominee(), renominated("n2")), {"low": "backoff", "equal": "backoff", "high": "unschedulable"},
                 id="nomination moved to another node"),
    pytest.param(lambda h: h._pod_updated(nominee(""), renominated("n1")), {"low": "unschedulable", "equal": "unschedulable", "high": "unschedulable"},
                 id="newly nominated"),
    pytest.param(lambda h: h._pod_updated(nominee(), renominated("n1")), {"low": "unschedulable", "equal": "unschedulable", "high": "unschedulable"},
                 id="nomination unchanged"),
])
def test_a_nominated_pod_leaving_its_node_wakes_lower_or_equal_priority_pods(event, want):
    """Upstream deletePodFromSchedulingQueue / hasNominatedNodeNameChanged: lower-or-equal priority
    pods counted the nominee as already on its node, so its leaving is an AssignedPod deletion to them."""
    registry = merge(in_tree_registry(), {"RejectsUntilADeletion": RejectsUntilADeletion})
    sched = Scheduler(MemoryClient(ObjectStore(ManualClock(), seed=1)), core_config("RejectsUntilADeletion"), registry=registry)
    queue = sched.queue
    for name, priority in (("low", 5), ("equal", 10), ("high", 20)):
        queue.add(PodInfo(make_pod(name, priority=priority)))
        qpi = queue.pop_nowait()
        qpi.unschedulable_plugins = {"RejectsUntilADeletion"}
        queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
    event(sched.handlers)
    unschedulable = {p.name for p in queue.unschedulable_pods()}
    assert {name: "unschedulable" if name in unschedulable else "backoff" for name in want} == want


def test_an_expired_assumed_pod_is_only_forgotten():
    """Upstream's cleanupAssumedPods removes the pod from the cache and sends no queue event."""

    async def scenario() -> tuple[int, int, bool]:
        registry = merge(in_tree_registry(), {"RejectsUntilADeletion": RejectsUntilADeletion})
        async with running([make_node("n1"), make_pod("p")], core_config("RejectsUntilADeletion"), registry,
                           assumed_pod_ttl=1.0) as r:
            await asyncio.sleep(SETTLE)
            before = r.attempts("p")
            ghost = PodInfo(make_pod("ghost", node="n1"))
            r.sched.cache.assume_pod(ghost)
            r.sched.cache.finish_binding(ghost)
            await asyncio.sleep(SETTLE)
            return before, r.attempts("p"), r.sched.cache.get_pod(ghost.uid) is None

    assert run(scenario) == (1, 1, True)
