"""Upstream's test/integration/scheduler/scheduler_test.go, end to end on the embedded cluster:
TestUnschedulableNodes, TestMultipleSchedulers, TestMultipleSchedulingProfiles and TestAllocatable."""

from __future__ import annotations

import asyncio

from kubesched.apiserver.memory_client import MemoryClient
from kubesched.scheduler.scheduler import Scheduler
from tests.integration.embedded import configuration, embedded, run
from tests.integration.wrappers import node, pod


def test_unschedulable_nodes() -> None:
    """A pod created while the only node is cordoned stays pending, and is scheduled once the node
    is uncordoned (``spec.unschedulable`` true, then false)."""

    async def scenario() -> str:
        async with embedded(None, [node("node-scheduling-test-node")]) as cluster:
            cluster.mutate("Node", "node-scheduling-test-node", lambda n: n["spec"].update(unschedulable=True))
            cluster.create(pod("node-scheduling-test-pod"))
            await cluster.stays_pending("node-scheduling-test-pod", seconds=2)
            cluster.mutate("Node", "node-scheduling-test-node", lambda n: n["spec"].update(unschedulable=False))
            return await cluster.scheduled("node-scheduling-test-pod")

    assert run(scenario) == "node-scheduling-test-node"


def test_multiple_schedulers() -> None:
    """Pods naming no scheduler or the default one are scheduled by default-scheduler; the pod
    naming foo-scheduler waits until a second scheduler with that profile starts."""

    async def scenario() -> str:
        async with embedded(None, [node("node-multi-scheduler-test-node")]) as cluster:
            cluster.create(pod("pod-without-scheduler-name"), pod("pod-fits-default", schedulerName="default-scheduler"),
                           pod("pod-fits-foo", schedulerName="foo-scheduler"))
            await cluster.scheduled("pod-without-scheduler-name")
            await cluster.scheduled("pod-fits-default")
            await cluster.stays_pending("pod-fits-foo", seconds=5)
            foo = configuration({"schedulerName": "foo-scheduler",
                                 "pluginConfig": [{"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 30}}]})
            second = Scheduler(MemoryClient(cluster.store), foo, clock=cluster.scheduler.clock, seed=2)
            await second.start()
            runner = asyncio.get_running_loop().create_task(second.run())
            try:
                return await cluster.scheduled("pod-fits-foo")
            finally:
                await second.stop()
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)

    assert run(scenario) == "node-multi-scheduler-test-node"


def test_multiple_scheduling_profiles() -> None:
    """Each pod is scheduled by the profile it names (the Scheduled event's reporting controller);
    a pod naming an unknown scheduler is left alone."""
    config = configuration({"schedulerName": "default-scheduler"}, {"schedulerName": "custom-scheduler"})

    async def scenario() -> tuple[dict[str, str], str]:
        async with embedded(config, [node("node-multi-scheduler-test-node")]) as cluster:
            cluster.create(pod("foo"), pod("bar", schedulerName="unknown-scheduler"),
                           pod("baz", schedulerName="default-scheduler"), pod("zet", schedulerName="custom-scheduler"))
            for name in ("foo", "baz", "zet"):
                await cluster.scheduled(name)
            await cluster.stays_pending("bar", seconds=5)
            events = cluster.events("Scheduled")
            return {e["involvedObject"]["name"]: e.get("reportingComponent", "") for e in events}, cluster.node_of("bar")

    profiles, bar_node = run(scenario)
    assert profiles == {"foo": "default-scheduler", "baz": "default-scheduler", "zet": "custom-scheduler"}
    assert bar_node == ""


def test_allocatable() -> None:
    """A node reporting only capacity is scheduled against its capacity (the API server copies it
    into allocatable); once its allocatable drops below the pod's request, an identical pod no
    longer fits."""
    resources = {"pods": "32", "cpu": "30m", "memory": "30"}
    bare = node("node-allocatable-scheduler-test-node")
    bare["status"] = {"capacity": dict(resources)}
    request = {"cpu": "20m", "memory": "20"}

    async def scenario() -> tuple[str, str]:
        async with embedded(None, [bare]) as cluster:
            cluster.create(pod("pod-test-allocatable", requests=request))
            first = await cluster.scheduled("pod-test-allocatable", timeout=5)
            allocatable = {"pods": "32", "cpu": "10m", "memory": "10"}
            cluster.mutate("Node", bare["metadata"]["name"], lambda n: n["status"].update(capacity=dict(resources),
                                                                                         allocatable=allocatable))
            cluster.delete("Pod", "pod-test-allocatable", "default")
            cluster.create(pod("pod-test-allocatable2", requests=request))
            await cluster.stays_pending("pod-test-allocatable2", seconds=5)
            return first, cluster.node_of("pod-test-allocatable2")

    assert run(scenario) == ("node-allocatable-scheduler-test-node", "")
