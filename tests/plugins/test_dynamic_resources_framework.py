"""DynamicResources run by the Framework on a small node table, from PreFilter to Bind, beside
NodeResourcesFit, without the scheduler loop."""

from __future__ import annotations

import random

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.diagnosis import FitError
from kubesched.scheduler.framework.status import Code
from kubesched.scheduler.schedule_one import Algorithm
from tests.helpers import make_node, make_pod
from tests.plugins.test_dynamic_resources_support import (
    Env,
    claim,
    device,
    device_class,
    exact,
    first_available,
    pod_with_claims,
    resource_slice,
    sub,
)

PLUGINS = ("PrioritySort", "NodeResourcesFit", "DynamicResources", "DefaultBinder")


def cluster() -> Env:
    nodes = [make_node("small", cpu="1"), make_node("gpu-1"), make_node("gpu-2"), make_node("plain")]
    objects = [
        device_class(),
        resource_slice("gpu-1-slice", [device("gpu-0", {"model": "t4"})], node="gpu-1"),
        resource_slice("gpu-2-slice", [device("gpu-0", {"model": "a100"}), device("gpu-1", {"model": "a100"})], node="gpu-2"),
        resource_slice("small-slice", [device("gpu-0", {"model": "a100"})], node="small"),
    ]
    return Env(nodes, objects, plugins=PLUGINS)


async def schedule(env: Env, pod: PodInfo) -> str:
    """One scheduling and binding cycle through the Framework, as the scheduler runs them."""
    fw = env.fw
    state = CycleState()
    result = await Algorithm(0, random.Random(1)).schedule_pod(fw, state, pod, env.table)
    host = result.suggested_host
    assert fw.run_reserve(state, pod, host) is None
    assert fw.run_permit(state, pod, host) is None
    assert fw.run_pre_bind_pre_flights(state, pod, host) is None
    assert await fw.run_pre_bind(state, pod, host) is None
    assert await fw.run_bind(state, pod, host) is None
    return host


async def test_pods_get_devices_end_to_end_and_fill_the_nodes_that_have_them():
    env = cluster()
    placed = []
    for i in range(2):
        env.create(claim(f"claim-{i}", exact(selectors=['device.attributes["gpu.example.com"].model == "a100"'])))
        pod = env.pod(pod_with_claims(f"pod-{i}", f"claim-{i}", cpu="2"))
        placed.append(await schedule(env, pod))
    assert placed == ["gpu-2", "gpu-2"]
    devices = sorted(env.get("ResourceClaim", f"claim-{i}")["status"]["allocation"]["devices"]["results"][0]["device"] for i in range(2))
    assert devices == ["gpu-0", "gpu-1"]


async def test_third_pod_is_unschedulable_with_each_node_s_reason():
    """gpu-2 is used up, "small" has an a100 but not the cpu, gpu-1 only a t4."""
    env = cluster()
    for i in range(2):
        env.create(claim(f"claim-{i}", exact(selectors=['device.attributes["gpu.example.com"].model == "a100"'])))
        await schedule(env, env.pod(pod_with_claims(f"pod-{i}", f"claim-{i}", cpu="2")))
    env.create(claim("claim-x", exact(selectors=['device.attributes["gpu.example.com"].model == "a100"'])))
    pod = env.pod(pod_with_claims("pod-x", "claim-x", cpu="2"))
    with pytest.raises(FitError) as err:
        await Algorithm(0, random.Random(1)).schedule_pod(env.fw, CycleState(), pod, env.table)
    statuses = dict(err.value.diagnosis.node_to_status.items())
    assert statuses["small"].reasons == ["Insufficient cpu"]
    assert statuses["small"].plugin == "NodeResourcesFit"
    for name in ("gpu-1", "gpu-2", "plain"):
        assert statuses[name].reasons == ["cannot allocate all claims"]
        assert statuses[name].plugin == "DynamicResources"
        assert statuses[name].code == Code.UnschedulableAndUnresolvable


async def test_prioritized_list_score_steers_the_choice():
    env = cluster()
    env.create(claim("c", first_available("req", sub("a100", selectors=['device.attributes["gpu.example.com"].model == "a100"']),
                                          sub("any"))))
    pod = env.pod(pod_with_claims("pod", "c"))
    assert await schedule(env, pod) in ("gpu-2", "small")
    result = env.get("ResourceClaim", "c")["status"]["allocation"]["devices"]["results"]
    assert result[0]["request"] == "req/a100"


async def test_pod_without_claims_schedules_with_dra_skipped():
    env = cluster()
    pod = PodInfo(make_pod("plain-pod", cpu="100m", uid="u1"))
    state = CycleState()
    await Algorithm(0, random.Random(1)).schedule_pod(env.fw, state, pod, env.table)
    assert "DynamicResources" in state.skip_filter_plugins
    assert env.fw.run_pre_bind_pre_flights(state, pod, "plain") is not None  # Skip: nothing to pre-bind
