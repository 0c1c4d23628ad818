"""Upstream's test/integration/scheduler/queueing/queue_test.go, end to end on the embedded
cluster: TestSchedulingGates and the node, taint, toleration, resource and pod-deletion cases of
TestCoreResourceEnqueue.

Upstream drives these with the queue stopped, popping pods by hand (``ScheduleOne``) and reading
activeQ; here the scheduler runs and the test reads outcomes: a gated pod stays pending and out of
the active queue, and a pod counts as requeued when it is attempted again (or scheduled) after the
triggering event, well within backoff and far from the five-minute unschedulable flush."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.embedded import Cluster, embedded, run
from tests.integration.wrappers import node, pod

NOT_READY = "node.kubernetes.io/not-ready"
#: Longer than the 10 s maximum backoff, far below the 5-minute flush.
REQUEUE_WINDOW = 15.0


# --- TestSchedulingGates ----------------------------------------------------------------------------
def gated(name: str, *gates: str) -> dict[str, Any]:
    return pod(name, schedulingGates=[{"name": g} for g in gates]) if gates else pod(name)


@pytest.mark.parametrize(("pods", "schedule", "delete", "remove_gates"), [
    pytest.param([gated("p1"), gated("p2")], ["p1", "p2"], [], [], id="regular pods"),
    pytest.param([gated("p1", "foo"), gated("p2")], ["p2"], [], [], id="one pod carrying scheduling gates"),
    pytest.param([gated("p1", "foo"), gated("p2", "bar"), gated("p3")], ["p3"], [], ["p2"],
                 id="two pod carrying scheduling gates, and remove gates of one pod"),
    pytest.param([gated("p1", "foo"), gated("p2")], ["p2"], ["p2"], ["p1"],
                 id="gated pod schedulable after deleting the scheduled pod and removing gate"),
])
def test_scheduling_gates(pods: list[dict[str, Any]], schedule: list[str], delete: list[str], remove_gates: list[str]) -> None:
    async def scenario() -> None:
        async with embedded(None, [node("node")]) as cluster:
            cluster.create(*pods)
            for name in schedule:
                await cluster.scheduled(name)
            for name in delete:
                cluster.delete("Pod", name, "default")
            held = [p["metadata"]["name"] for p in pods if p["spec"].get("schedulingGates")]
            for name in held:
                await cluster.stays_pending(name, seconds=1)
                assert cluster.condition(name).get("reason") == "SchedulingGated"
            assert cluster.scheduler.queue.counts()["active"] == 0
            for name in remove_gates:
                cluster.mutate("Pod", name, lambda p: p["spec"].pop("schedulingGates", None), "default")
            for name in remove_gates:
                await cluster.scheduled(name)
            for name in set(held) - set(remove_gates):
                assert not cluster.node_of(name)

    run(scenario)


# --- TestCoreResourceEnqueue --------------------------------------------------------------------------
def _attempts(cluster: Cluster, name: str) -> int:
    qpi = cluster.scheduler.queue.get(f"default/{name}")
    return -1 if qpi is None else qpi.attempts


async def _requeued(cluster: Cluster, pods: list[str], trigger: Callable[[Cluster], None]) -> set[str]:
    """Wait until every pod was found unschedulable once, fire ``trigger``, and report the pods
    attempted again (or scheduled) within the requeue window."""
    for name in pods:
        await cluster.unschedulable(name)
    await asyncio.sleep(1)
    before = {name: _attempts(cluster, name) for name in pods}
    trigger(cluster)
    await asyncio.sleep(REQUEUE_WINDOW)
    return {name for name in pods if cluster.node_of(name) or _attempts(cluster, name) > before[name]}


def _set_node(name: str, **fields: Any) -> Callable[[Cluster], None]:
    """Replace the node's labels, capacity or taints, as upstream's Update/UpdateStatus with a
    freshly built node does."""

    def trigger(cluster: Cluster) -> None:
        def change(n: dict[str, Any]) -> None:
            if "labels" in fields:
                n["metadata"]["labels"] = dict(fields["labels"])
            if "capacity" in fields:
                n["status"]["capacity"] = n["status"]["allocatable"] = {"pods": "32", **fields["capacity"]}
            if "taints" in fields:
                n["spec"]["taints"] = fields["taints"]

        cluster.mutate("Node", name, change)

    return trigger


def _add_node(obj: dict[str, Any], then_untaint: bool = False) -> Callable[[Cluster], None]:
    def trigger(cluster: Cluster) -> None:
        cluster.create(obj)
        if then_untaint:
            cluster.mutate("Node", obj["metadata"]["name"], lambda n: n["spec"].pop("taints", None))

    return trigger


def _add_toleration(pod_name: str, key: str) -> Callable[[Cluster], None]:
    def trigger(cluster: Cluster) -> None:
        cluster.mutate("Pod", pod_name, lambda p: p["spec"].setdefault("tolerations", []).append(
            {"key": key, "operator": "Exists"}), "default")

    return trigger


def _affinity_in(key: str, value: str) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}}}


def _anti_exists(key: str, topology: str) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"}]}, "topologyKey": topology}]}}


NOT_READY_TAINT = [{"key": NOT_READY, "effect": "NoSchedule"}]
CPU4 = {"cpu": "4"}
TOLERATE_KEY = {"key": "taint-key", "operator": "Exists"}

ENQUEUE_CASES = [
    pytest.param([node("fake-node", capacity={"cpu": "2"}, taints=NOT_READY_TAINT)], [],
                 [pod("pod1", requests=CPU4),
                  pod("pod2", requests=CPU4, tolerations=[{"key": NOT_READY, "operator": "Exists"}])],
                 _set_node("fake-node", capacity=CPU4, taints=NOT_READY_TAINT), {"pod2"},
                 id="Pod without a required toleration to a node isn't requeued to activeQ"),
    pytest.param([node("fake-node", {"node": "fake-node"}, capacity={"cpu": "2"})],
                 [pod("pod1", labels={"anti": "anti"}, node_name="fake-node", affinity=_anti_exists("anti", "node"))],
                 [pod("pod2", labels={"anti": "anti"}, affinity=_anti_exists("anti", "node"))],
                 _add_node(node("fake-node2", {"node": "fake-node2"}, capacity={"cpu": "2"}, taints=NOT_READY_TAINT),
                           then_untaint=True), {"pod2"},
                 id="Pod rejected by the PodAffinity plugin is requeued when a new Node is created and turned to ready"),
    pytest.param([node("fake-node1", {"group": "a"})], [],
                 [pod("pod1", affinity=_affinity_in("group", "b")), pod("pod2", affinity=_affinity_in("group", "c"))],
                 _set_node("fake-node1", labels={"group": "b"}), {"pod1"},
                 id="Pod rejected by the NodeAffinity plugin is requeued when a Node's label is updated"),
    pytest.param([node("node1", {"group": "a"}, capacity={"cpu": "2"}), node("node2", {"group": "b"})], [],
                 [pod("pod1", requests=CPU4, affinity=_affinity_in("group", "a"))],
                 _set_node("node1", labels={"group": "a", "node": "fake-node"}), set(),
                 id="Pod rejected by the NodeAffinity plugin is not requeued when an updated Node haven't changed the 'match' verdict"),
    pytest.param([node("fake-node1", {"group": "a"})], [],
                 [pod("pod1", affinity=_affinity_in("group", "b")), pod("pod2", affinity=_affinity_in("group", "c"))],
                 _add_node(node("fake-node2", {"group": "b"})), {"pod1"},
                 id="Pod rejected by the NodeAffinity plugin is requeued when a Node is added"),
    pytest.param([node("fake-node", taints=[{"key": "taint-key", "effect": "NoSchedule"}])], [],
                 [pod("pod1"), pod("pod2")], _add_toleration("pod1", "taint-key"), {"pod1"},
                 id="Pod updated with toleration requeued to activeQ"),
    pytest.param([node("fake-node", taints=NOT_READY_TAINT)], [],
                 [pod("pod1", tolerations=[TOLERATE_KEY]), pod("pod2", tolerations=[{"key": "taint-key2", "operator": "Exists"}]),
                  pod("pod3")],
                 _set_node("fake-node", taints=[{"key": "taint-key", "effect": "NoSchedule"}]), {"pod1"},
                 id="Pod rejected by the TaintToleration plugin is requeued when the Node's taint is updated"),
    pytest.param([node("fake-node1", taints=NOT_READY_TAINT)], [], [pod("pod1", tolerations=[TOLERATE_KEY]), pod("pod2")],
                 _add_node(node("fake-node2", taints=[{"key": "taint-key", "effect": "NoSchedule"}])), {"pod1"},
                 id="Pod rejected by the TaintToleration plugin is requeued when a Node that has the correspoding taint is added"),
    pytest.param([node("fake-node", capacity={"cpu": "2"})], [pod("pod1", requests={"cpu": "2"}, node_name="fake-node")],
                 [pod("pod2", requests={"cpu": "2"})], lambda c: c.delete("Pod", "pod1", "default"), {"pod2"},
                 id="Pod rejected by the NodeResourcesFit plugin is requeued when a Pod is deleted"),
    pytest.param([node("fake-node1", capacity={"cpu": "2"})], [], [pod("pod1", requests=CPU4), pod("pod2", requests={"cpu": "5"})],
                 _add_node(node("fake-node2", capacity=CPU4)), {"pod1"},
                 id="Pod rejected by the NodeResourcesFit plugin is requeued when a Node is created"),
    pytest.param([node("fake-node", capacity={"cpu": "2"})], [], [pod("pod1", requests=CPU4), pod("pod2", requests={"cpu": "5"})],
                 _set_node("fake-node", capacity=CPU4), {"pod1"},
                 id="Pod rejected by the NodeResourcesFit plugin is requeued when a Node is updated"),
    pytest.param([node("fake-node1", capacity=CPU4), node("fake-node2", {"group": "b"}, capacity={"cpu": "2"})], [],
                 [pod("pod1", requests=CPU4, affinity=_affinity_in("group", "b"))],
                 _set_node("fake-node1", capacity={"cpu": "4", "memory": "4000"}), set(),
                 id="Pod rejected by the NodeResourcesFit plugin isn't requeued when a Node is updated without increase in "
                    "the requested resources"),
    pytest.param([node("fake-node1", capacity=CPU4), node("fake-node2", {"group": "b"}, capacity={"cpu": "2"})], [],
                 [pod("pod1", requests=CPU4, affinity=_affinity_in("group", "b"))],
                 _set_node("fake-node1", capacity={"cpu": "5"}), {"pod1"},
                 id="Pod rejected by the NodeResourcesFit plugin is requeued when a Node is updated with increase in the "
                    "requested resources"),
    pytest.param([node("fake-node1", capacity={"pods": "2"}), node("fake-node2", {"group": "b"}, capacity={"pods": "1"})],
                 [pod("pod1", node_name="fake-node2", affinity=_affinity_in("group", "b"))],
                 [pod("pod2", affinity=_affinity_in("group", "b"))], _set_node("fake-node1", capacity={"pods": "3"}), {"pod2"},
                 id="Pod rejected by the NodeResourcesFit plugin is requeued when a Node is updated with increase in the "
                    "allowed pods number"),
    pytest.param([node("fake-node", taints=NOT_READY_TAINT)], [], [pod("pod1")],
                 lambda c: c.mutate("Pod", "pod1", lambda p: p["metadata"].update(labels={"key": "val"}), "default"), set(),
                 id="Updating pod label doesn't retry scheduling if the Pod was rejected by TaintToleration"),
]


@pytest.mark.parametrize(("nodes", "bound", "pods", "trigger", "want"), ENQUEUE_CASES)
def test_core_resource_enqueue(nodes: list[dict[str, Any]], bound: list[dict[str, Any]], pods: list[dict[str, Any]],
                               trigger: Callable[[Cluster], None], want: set[str]) -> None:
    """SchedulerQueueingHints is on in 1.35 (upstream runs most cases with it on and off; the
    cases here give the same answer either way, or run with hints only, as upstream's do)."""

    async def scenario() -> set[str]:
        async with embedded(None, [*nodes, *bound]) as cluster:
            cluster.create(*pods)
            return await _requeued(cluster, [p["metadata"]["name"] for p in pods], trigger)

    assert run(scenario) == want
