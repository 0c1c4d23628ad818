"""Upstream's test/integration/scheduler/gang/gang_test.go (1.35, TestGangScheduling), end to end on
the embedded cluster with the GenericWorkload and GangScheduling gates on, and the all-or-nothing
cases the docs show: a gang of four where three fit binds none of them, and binds all four once
there is room.

Upstream shortens the five-minute Permit timeout to five seconds and turns backoff off; here the
clock is virtual, so the scenarios wait the real five minutes at no cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from kubesched.scheduler.backend.workloadmanager import DEFAULT_SCHEDULING_TIMEOUT
from tests.integration.embedded import FOREVER, Cluster, embedded, run
from tests.integration.wrappers import node, pod, pod_group, workload, workload_ref

GATES = {"GenericWorkload": True, "GangScheduling": True}
#: Long enough for a gang's Permit wait to time out, then for the pods to be retried.
AFTER_PERMIT_TIMEOUT = DEFAULT_SCHEDULING_TIMEOUT + FOREVER


def gang_pod(name: str, cpu: str = "1", workload_name: str = "workload", group: str = "pg") -> dict[str, Any]:
    return pod(name, requests={"cpu": cpu}, **workload_ref(workload_name, group))


@dataclass
class Step:
    """One step of upstream's scenarios: exactly one field is set."""

    create_workload: dict[str, Any] | None = None
    create_pods: Sequence[dict[str, Any]] = ()
    delete_pods: Sequence[str] = ()
    gated_on_pre_enqueue: Sequence[str] = ()
    unschedulable: Sequence[str] = ()
    scheduled: Sequence[str] = ()
    timeout: float = FOREVER


async def run_step(cluster: Cluster, step: Step) -> None:
    if step.create_workload is not None:
        cluster.create(step.create_workload)
    cluster.create(*step.create_pods)
    for name in step.delete_pods:
        cluster.delete("Pod", name, "default")
    for name in step.gated_on_pre_enqueue:
        await cluster.wait_for(f"pod {name} to wait in PreEnqueue",
                               lambda name=name: name in {p.name for p in cluster.scheduler.queue.unschedulable_pods()})
    for name in step.unschedulable:
        await cluster.unschedulable(name, timeout=step.timeout)
    for name in step.scheduled:
        await cluster.scheduled(name, timeout=step.timeout)


WORKLOAD = workload("workload", pod_group("pg", min_count=3))
P1, P2, P3 = (gang_pod(f"p{i}") for i in (1, 2, 3))
BLOCKER = pod("blocker", requests={"cpu": "2"}, terminationGracePeriodSeconds=0)


# --- TestGangScheduling -----------------------------------------------------------------------------
@pytest.mark.parametrize("steps", [
    pytest.param([Step(create_workload=WORKLOAD), Step(create_pods=[P1, P2, P3]), Step(scheduled=["p1", "p2", "p3"])],
                 id="gang schedules when workload and resources are available"),
    pytest.param([Step(create_workload=WORKLOAD), Step(create_pods=[P1, P2]), Step(gated_on_pre_enqueue=["p1", "p2"]),
                  Step(create_pods=[P3]), Step(scheduled=["p1", "p2", "p3"])],
                 id="gang waits for quorum to start, then schedules"),
    pytest.param([Step(create_pods=[BLOCKER]), Step(scheduled=["blocker"]), Step(create_pods=[P1, P2, P3]),
                  Step(gated_on_pre_enqueue=["p1", "p2", "p3"]), Step(create_workload=WORKLOAD),
                  Step(unschedulable=["p1", "p2", "p3"], timeout=AFTER_PERMIT_TIMEOUT), Step(delete_pods=["blocker"]),
                  Step(scheduled=["p1", "p2", "p3"], timeout=AFTER_PERMIT_TIMEOUT)],
                 id="gang waits for workload, then for resources, then schedules"),
])
def test_gang_scheduling(steps: list[Step]) -> None:
    async def scenario() -> None:
        async with embedded(None, [node("node", capacity={"cpu": "4"})], gates=GATES) as cluster:
            for step in steps:
                await run_step(cluster, step)

    run(scenario)


# --- all or nothing --------------------------------------------------------------------------------
WORKERS = workload("training", pod_group("workers", min_count=4))
WORKER_NAMES = [f"worker-{i}" for i in range(4)]
WORKER_PODS = [gang_pod(name, workload_name="training", group="workers") for name in WORKER_NAMES]
TIMED_OUT = "0/1 nodes are available: 1 rejected due to timeout after waiting 5m0s at plugin GangScheduling."


def test_gang_of_four_where_only_three_fit_binds_none_and_says_why() -> None:
    """Three pods reserve the three nodes and wait at Permit; the fourth fits nowhere. After five
    minutes the three are rejected and their nodes freed: no pod of the gang is bound."""
    async def scenario() -> None:
        nodes = [node(f"node-{i}", capacity={"cpu": "1"}) for i in range(3)]
        async with embedded(None, nodes, gates=GATES) as cluster:
            cluster.create(WORKERS, *WORKER_PODS)
            messages = {name: await cluster.unschedulable(name, timeout=AFTER_PERMIT_TIMEOUT) for name in WORKER_NAMES}
            assert not any(cluster.node_of(name) for name in WORKER_NAMES)
            # The gang keeps trying: each pod was last either timed out at Permit or out of room.
            timed_out = {n for n, m in messages.items() if m == TIMED_OUT}
            no_room = {n for n, m in messages.items() if m.startswith("0/3 nodes are available: 3 Insufficient cpu.")}
            assert timed_out and no_room and timed_out | no_room == set(WORKER_NAMES), messages

    run(scenario)


@pytest.mark.parametrize("steps", [
    pytest.param([Step(create_workload=WORKERS, create_pods=WORKER_PODS), Step(scheduled=WORKER_NAMES)],
                 id="a gang of minCount 4 with room for 4 binds them all"),
    pytest.param([Step(create_pods=WORKER_PODS), Step(gated_on_pre_enqueue=WORKER_NAMES),
                  Step(create_workload=WORKERS), Step(scheduled=WORKER_NAMES)],
                 id="a gang whose Workload does not exist yet waits, then schedules once it is created"),
])
def test_gang_of_four_with_room_for_four(steps: list[Step]) -> None:
    async def scenario() -> None:
        async with embedded(None, [node(f"node-{i}", capacity={"cpu": "1"}) for i in range(4)], gates=GATES) as cluster:
            for step in steps:
                await run_step(cluster, step)

    run(scenario)


def test_pod_without_a_gang_is_not_held_back() -> None:
    """A pod of a basic pod group schedules on its own, and so does a pod of no Workload."""
    async def scenario() -> None:
        basic = workload("services", pod_group("web"))
        async with embedded(None, [node("node", capacity={"cpu": "4"})], gates=GATES) as cluster:
            cluster.create(basic, gang_pod("web-0", workload_name="services", group="web"), pod("plain"))
            await cluster.scheduled("web-0")
            await cluster.scheduled("plain")

    run(scenario)
