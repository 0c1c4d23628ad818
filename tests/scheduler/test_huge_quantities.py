"""Quantities past int64 (which kube-apiserver accepts) read as apimachinery reads them: saturated,
so a pod asking for them is Unschedulable with upstream's reasons, the pods around it schedule,
and nothing in the node table or the plugins overflows."""

from __future__ import annotations

import pytest

from kubesched.scheduler.config import default_configuration
from kubesched.simulator.simulate import simulate
from tests.helpers import make_node, make_pod

INSUFFICIENT_CPU = ("0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: "
                    "0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
INSUFFICIENT_CPU_AND_MEMORY = ("0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory. no new claims to "
                               "deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")


def _big_pod(cpu: object, memory: object | None) -> dict:
    pod = make_pod("big", cpu="1")
    requests = pod["spec"]["containers"][0]["resources"]["requests"]
    requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    return pod


@pytest.mark.parametrize(("cpu", "memory", "message"), [
    pytest.param("1e17", None, INSUFFICIENT_CPU, id="cpu-1e17-saturates-millicores"),
    pytest.param(1e17, None, INSUFFICIENT_CPU, id="cpu-1e17-as-a-json-number"),
    pytest.param("1e400", None, INSUFFICIENT_CPU, id="cpu-1e400-beyond-any-float"),
    pytest.param("9223372036854775807", "16Ei", INSUFFICIENT_CPU_AND_MEMORY, id="int64-max-cpu-and-16Ei-memory"),
])
def test_a_pod_asking_for_more_than_int64_is_unschedulable_and_its_neighbours_schedule(cpu, memory, message):
    objs = [make_node("n1", cpu="4"), make_node("n2", cpu="4"), make_pod("a", cpu="1"), _big_pod(cpu, memory),
            make_pod("b", cpu="1")]
    result = simulate(objs, default_configuration(), seed=1)
    pods = {p["metadata"]["name"]: p for p in result.pods()}
    assert pods["a"]["spec"].get("nodeName") and pods["b"]["spec"].get("nodeName")
    assert "nodeName" not in pods["big"]["spec"]
    condition = next(c for c in pods["big"]["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (condition["reason"], condition["message"]) == ("Unschedulable", message)


def test_a_node_with_more_than_int64_allocatable_takes_pods_without_overflow():
    objs = [make_node("huge", cpu="1e400", memory="16Ei"), *(make_pod(f"p{i}", cpu="1e17", memory="1Ei") for i in range(3))]
    result = simulate(objs, default_configuration(), seed=1)
    placed = sorted(p["spec"].get("nodeName") or "" for p in result.pods())
    assert placed == ["", "", "huge"]  # the first takes all int64 millicores: the others find none left
