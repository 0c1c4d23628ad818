"""Upstream's test/integration/scheduler/eventhandler/eventhandler_test.go, end to end on the
embedded cluster (without kubelet and controllers, as upstream's runs): TestUpdateNodeEvent and
TestUpdateNominatedNodeName.

Upstream's TestUpdateNominatedNodeName drives backoff with a fake clock it steps by two minutes;
the embedded cluster runs on virtual time, so the test sleeps those two minutes. Upstream runs
each case with queueing hints and SchedulerAsyncAPICalls on and off; queueing hints are locked
on in 1.35 and kubesched has one API-call behaviour, so each case runs once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, Resource
from kubesched.scheduler.framework.interface import EnqueueExtensions, FilterPlugin
from kubesched.scheduler.framework.registry import merge
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.plugins.registry import in_tree_registry
from tests.integration.embedded import Cluster, configuration, embedded, run
from tests.integration.wrappers import node, pod


class FooPlugin(FilterPlugin, EnqueueExtensions):
    """Upstream's ``fooPlugin``: a node passes unless the pod does not tolerate its first taint;
    node taint updates requeue the pods it rejected."""

    name = "foo"

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        taints = ((node_info.node or {}).get("spec") or {}).get("taints") or []
        if not taints or _tolerates(pod_info.pod, taints[0]):
            return None
        return Status(Code.Unschedulable)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.UpdateNodeTaint))]


def _tolerates(pod_obj: dict[str, Any], taint: dict[str, Any]) -> bool:
    """``TolerationsTolerateTaint`` for the Equal and Exists operators upstream's pod could use."""
    for t in (pod_obj.get("spec") or {}).get("tolerations") or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t["key"] == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def test_update_node_event() -> None:
    """A pod the only Filter plugin rejects for a node's taint is scheduled once an update
    (labels and taints at once) removes the taint."""
    registry = merge(in_tree_registry(), {FooPlugin.name: lambda args, handle: FooPlugin(args, handle)})
    config = configuration({"schedulerName": "default-scheduler", "plugins": {
        "filter": {"enabled": [{"name": FooPlugin.name}], "disabled": [{"name": "*"}]}}}, registry=registry)
    tainted = node("node-0", {"kubernetes.io/hostname": "node-0"},
                   taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}])

    async def scenario() -> str:
        async with embedded(config, [tainted], registry=registry, kubelet=False, controllers=False) as cluster:
            cluster.create(pod("test-pod"))
            await cluster.unschedulable("test-pod")

            def update(n: dict[str, Any]) -> None:
                n["metadata"]["labels"]["foo"] = "bar"
                n["spec"].pop("taints", None)

            cluster.mutate("Node", "node-0", update)
            return await cluster.scheduled("test-pod")

    assert run(scenario) == "node-0"


# --- TestUpdateNominatedNodeName ---------------------------------------------------------------------
BACKOFF = 60
PRIORITY_CLASSES = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
                    for n, v in (("low", 100), ("medium", 200), ("high", 300))]


def _memory_pod(name: str, priority: str, memory: str) -> dict[str, Any]:
    return pod(name, requests={"memory": memory}, priorityClassName=priority)


async def _preempt_nominated_pod(cluster: Cluster) -> None:
    """A high-priority pod ignores the medium one's nomination and is scheduled."""
    cluster.create(_memory_pod("test-hp-pod", "high", "10"))
    await cluster.scheduled("test-hp-pod")


async def _remove_nominated_pod(cluster: Cluster) -> None:
    cluster.delete("Pod", "test-nominated-pod", "default")


@pytest.mark.parametrize("update", [
    pytest.param(_preempt_nominated_pod, id="Preempt nominated pod"),
    pytest.param(_remove_nominated_pod, id="Remove nominated pod"),
])
def test_update_nominated_node_name(update: Callable[[Cluster], Coroutine[Any, Any, None]]) -> None:
    """A medium pod preempts the low one and is nominated; a new low pod then cannot fit beside
    the nomination (20 + 25 > 32). Once the nominated pod is outranked or removed while it still
    backs off, the low pod, out of its own backoff, is scheduled."""
    gates = {"SchedulerPopFromBackoffQ": False}
    config = configuration(gates=gates, podInitialBackoffSeconds=BACKOFF, podMaxBackoffSeconds=BACKOFF)
    node0 = node("node-0", {"kubernetes.io/hostname": "node-0"}, capacity={"memory": "32"})

    async def scenario() -> str:
        async with embedded(config, [*PRIORITY_CLASSES, node0], gates=gates, kubelet=False, controllers=False) as cluster:
            cluster.create(_memory_pod("test-lp-pod", "low", "20"))
            await cluster.scheduled("test-lp-pod")
            cluster.create(_memory_pod("test-nominated-pod", "medium", "25"))
            await cluster.wait_for("the medium pod's nomination", lambda: bool(
                (cluster.pod("test-nominated-pod").get("status") or {}).get("nominatedNodeName")))
            await cluster.unschedulable("test-nominated-pod")
            cluster.delete("Pod", "test-lp-pod", "default")
            cluster.create(_memory_pod("test-lp-pod", "low", "20"))
            await cluster.unschedulable("test-lp-pod")
            await update(cluster)
            await asyncio.sleep(2 * BACKOFF)
            return await cluster.scheduled("test-lp-pod")

    assert run(scenario) == "node-0"
