"""The structured allocator through the DynamicResources Filter: counts, ``All``, CEL selectors on
attributes and capacity, node-local and network-attached slices, devices taken by other claims,
constraints, prioritized lists and pool bookkeeping."""

from __future__ import annotations

import pytest

from kubesched.api.apierrors import BadRequest
from kubesched.api.types import NodeInfo
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.dynamicresources._allocator import Allocator, Features, SliceInfo, gather_pools
from kubesched.scheduler.plugins.dynamicresources.dynamic_resources import STATE_KEY
from tests.helpers import make_node
from tests.plugins.test_dynamic_resources_support import (
    Env,
    allocation_on,
    claim,
    device,
    device_class,
    exact,
    first_available,
    nodes,
    pod_with_claims,
    resource_slice,
    sub,
)

UAU = Code.UnschedulableAndUnresolvable
CANNOT = Status(UAU, "cannot allocate all claims")


def gpus(node: str, count: int, **attrs) -> dict:
    return resource_slice(f"{node}-gpus", [device(f"gpu-{i}", {"index": i, **attrs}, {"memory": "40Gi"}) for i in range(count)], node=node)


def run(env: Env, *claims: dict, pod_name: str = "my-pod") -> tuple[dict, dict]:
    """Filter a pod using ``claims``; returns (per-node status, per-node allocation results)."""
    for c in claims:
        env.create(c)
    pod = env.pod(pod_with_claims(pod_name, *(c["metadata"]["name"] for c in claims)))
    state, status = env.pre_filter(pod)
    assert status is None, status
    result = env.filter(state, pod)
    return result, state.read(STATE_KEY).node_allocations


def devices_of(allocations: list[dict]) -> list[tuple[str, str]]:
    return [(r["request"], r["device"]) for a in allocations for r in a["devices"]["results"]]


# --- counts ----------------------------------------------------------------------------------------
def test_exact_count_takes_the_first_matching_devices():
    env = Env(nodes("n1"), [device_class(), gpus("n1", 4)])
    result, allocations = run(env, claim("c", exact(count=3)))
    assert result == {"n1": None}
    assert devices_of(allocations["n1"]) == [("req-1", "gpu-0"), ("req-1", "gpu-1"), ("req-1", "gpu-2")]


def test_exact_count_larger_than_the_node_has_fails():
    env = Env(nodes("n1"), [device_class(), gpus("n1", 2)])
    result, _ = run(env, claim("c", exact(count=3)))
    assert result == {"n1": CANNOT}


def test_all_mode_takes_every_matching_device():
    env = Env(nodes("n1"), [device_class(), gpus("n1", 3)])
    result, allocations = run(env, claim("c", exact(mode="All", selectors=['device.attributes["gpu.example.com"].index != 1'])))
    assert result == {"n1": None}
    assert devices_of(allocations["n1"]) == [("req-1", "gpu-0"), ("req-1", "gpu-2")]


def test_all_mode_fails_when_one_matching_device_is_in_use():
    env = Env(nodes("n1"), [device_class(), gpus("n1", 2), claim("taken", allocation=allocation_on("n1", ("req-1", "gpu-1")))])
    result, _ = run(env, claim("c", exact(mode="All")))
    assert result == {"n1": CANNOT}


def test_all_mode_with_an_incomplete_pool_is_an_error():
    partial = resource_slice("n1-a", [device("gpu-0")], node="n1", pool="n1", count=2)
    env = Env(nodes("n1"), [device_class(), partial])
    result, _ = run(env, claim("c", exact(mode="All")))
    assert result["n1"].code == Code.Error
    assert result["n1"].message() == ("claim default/c, request req-1: asks for all devices, but resource pool "
                                      "gpu.example.com/n1 is currently being updated")


def test_too_many_devices_in_one_claim_is_an_error():
    env = Env(nodes("n1"), [device_class(), gpus("n1", 2)])
    result, _ = run(env, claim("c", exact(count=33)))
    assert result["n1"].message() == "claim default/c: number of requested devices 33 exceeds the claim limit of 32"


# --- selectors -----------------------------------------------------------------------------------------
def test_selectors_on_attributes_and_capacity():
    slice_ = resource_slice("n1-gpus", [
        device("small", {"model": "t4", "cores": 4}, {"memory": "16Gi"}),
        device("big", {"model": "a100", "cores": 8, "driverVersion": "v:1.2.3"}, {"memory": "80Gi"}),
    ], node="n1")
    env = Env(nodes("n1"), [device_class(), slice_])
    selectors = [
        'device.attributes["gpu.example.com"].model in ["a100", "h100"]',
        'device.attributes["gpu.example.com"].cores >= 8',
        'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
        'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.0.0"))',
    ]
    result, allocations = run(env, claim("c", exact(selectors=selectors)))
    assert result == {"n1": None}
    assert devices_of(allocations["n1"]) == [("req-1", "big")]


def test_class_selector_limits_the_devices_a_request_may_get():
    slice_ = resource_slice("n1-mixed", [device("a", {"kind": "nic"}), device("b", {"kind": "gpu"})], node="n1")
    klass = device_class("gpu", expression='device.attributes["gpu.example.com"].kind == "gpu"')
    env = Env(nodes("n1"), [klass, slice_])
    _, allocations = run(env, claim("c"))
    assert devices_of(allocations["n1"]) == [("req-1", "b")]


def test_unknown_attribute_domain_reads_as_an_empty_map():
    env = Env(nodes("n1"), [device_class(), gpus("n1", 1)])
    result, _ = run(env, claim("c", exact(selectors=['!("x" in device.attributes["other.example.com"])'])))
    assert result == {"n1": None}


def test_cel_compile_error_is_reported():
    env = Env(nodes("n1"), [device_class(), gpus("n1", 1)])
    result, _ = run(env, claim("c", exact(selectors=["device.driver +"])))
    assert result["n1"].code == Code.Error
    assert result["n1"].message().startswith("claim default/c: selector #0: CEL compile error: compilation failed: ")


# --- node selection ----------------------------------------------------------------------------------
def test_node_local_slices_only_serve_their_node():
    env = Env(nodes("n1", "n2"), [device_class(), gpus("n1", 1)])
    result, allocations = run(env, claim("c"))
    assert result == {"n1": None, "n2": CANNOT}
    assert allocations["n1"][0]["nodeSelector"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}


def test_network_attached_slice_serves_nodes_its_selector_matches():
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    fabric = resource_slice("fabric", [device("nic-0")], pool="fabric", node_selector=selector)
    env = Env(nodes("n1", "n2", n1={"rack": "r1"}, n2={"rack": "r2"}), [device_class(), fabric])
    result, allocations = run(env, claim("c"))
    assert result == {"n1": None, "n2": CANNOT}
    assert allocations["n1"][0]["nodeSelector"] == selector


def test_all_nodes_slice_serves_every_node_without_node_selector():
    shared = resource_slice("shared", [device("dev-0")], pool="shared", all_nodes=True)
    env = Env(nodes("n1", "n2"), [device_class(), shared])
    result, allocations = run(env, claim("c"))
    assert result == {"n1": None, "n2": None}
    assert "nodeSelector" not in allocations["n1"][0]


def test_allocated_network_device_is_taken_on_every_node():
    shared = resource_slice("shared", [device("dev-0")], pool="shared", all_nodes=True)
    taken = claim("taken", allocation={"devices": {"results": [{"request": "r", "driver": "gpu.example.com", "pool": "shared", "device": "dev-0"}]}})
    env = Env(nodes("n1", "n2"), [device_class(), shared, taken])
    result, _ = run(env, claim("c"))
    assert result == {"n1": CANNOT, "n2": CANNOT}


# --- devices in use ---------------------------------------------------------------------------------------
def test_devices_of_other_claims_are_skipped():
    env = Env(nodes("n1"), [device_class(), gpus("n1", 2), claim("taken", allocation=allocation_on("n1", ("req-1", "gpu-0")))])
    _, allocations = run(env, claim("c"))
    assert devices_of(allocations["n1"]) == [("req-1", "gpu-1")]


def test_two_pods_compete_for_the_last_device():
    env = Env(nodes("n1"), [device_class(), gpus("n1", 1)])
    env.create(claim("claim-a"))
    env.create(claim("claim-b"))
    pod_a = env.pod(pod_with_claims("pod-a", "claim-a"))
    pod_b = env.pod(pod_with_claims("pod-b", "claim-b"))
    state_a, _ = env.pre_filter(pod_a)
    assert env.filter(state_a, pod_a) == {"n1": None}
    assert env.plugin.reserve(state_a, pod_a, "n1") is None
    # pod-a's allocation is in flight: pod-b sees the device taken.
    state_b, _ = env.pre_filter(pod_b)
    assert env.filter(state_b, pod_b) == {"n1": CANNOT}
    # Once pod-a lets go (Unreserve), the device is free again.
    env.plugin.unreserve(state_a, pod_a, "n1")
    state_b, _ = env.pre_filter(pod_b)
    assert env.filter(state_b, pod_b) == {"n1": None}


def test_two_claims_of_one_pod_get_different_devices():
    env = Env(nodes("n1"), [device_class(), gpus("n1", 2)])
    result, allocations = run(env, claim("c1"), claim("c2"))
    assert result == {"n1": None}
    assert devices_of(allocations["n1"]) == [("req-1", "gpu-0"), ("req-1", "gpu-1")]


# --- constraints and prioritized lists ------------------------------------------------------------------
def test_match_attribute_constraint_keeps_devices_on_one_numa_node():
    slice_ = resource_slice("n1-gpus", [device("g0", {"numa": 0}), device("g1", {"numa": 1}), device("g2", {"numa": 1})], node="n1")
    env = Env(nodes("n1"), [device_class(), slice_])
    c = claim("c", exact(count=2), constraints=[{"matchAttribute": "gpu.example.com/numa"}])
    result, allocations = run(env, c)
    assert result == {"n1": None}
    assert devices_of(allocations["n1"]) == [("req-1", "g1"), ("req-1", "g2")]


def test_first_available_falls_back_to_the_next_subrequest():
    env = Env(nodes("n1"), [device_class(), gpus("n1", 1)])
    c = claim("c", first_available("req-1", sub("two", count=2), sub("one", count=1)))
    _, allocations = run(env, c)
    assert devices_of(allocations["n1"]) == [("req-1/one", "gpu-0")]


def test_class_and_claim_configs_are_copied_into_the_allocation():
    klass = device_class(config=[{"opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}}])
    env = Env(nodes("n1"), [klass, gpus("n1", 1)])
    c = claim("c", config=[{"requests": ["req-1"], "opaque": {"driver": "gpu.example.com", "parameters": {"b": 2}}}])
    _, allocations = run(env, c)
    assert allocations["n1"][0]["devices"]["config"] == [
        {"source": "FromClass", "opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}},
        {"source": "FromClaim", "opaque": {"driver": "gpu.example.com", "parameters": {"b": 2}}},
    ]


# --- pools ----------------------------------------------------------------------------------------------
def test_duplicate_device_names_make_a_pool_invalid_for_that_node():
    a = resource_slice("n1-a", [device("gpu-0")], node="n1", pool="n1", count=2)
    b = resource_slice("n1-b", [device("gpu-0")], node="n1", pool="n1", count=2)
    env = Env(nodes("n1"), [device_class(), a, b])
    result, _ = run(env, claim("c"))
    assert result == {"n1": Status(UAU, "invalid resource pools were encountered")}


def test_older_generation_slices_are_ignored():
    old = resource_slice("n1-old", [device("old-0")], node="n1", pool="n1", generation=1)
    new = resource_slice("n1-new", [device("new-0")], node="n1", pool="n1", generation=2)
    pools = gather_pools([SliceInfo(old), SliceInfo(new)], {("gpu.example.com", "n1"): (SliceInfo(old), SliceInfo(new))}, Features())
    assert [[d.name for s in p.slices for d in s.devices] for p in pools] == [["new-0"]]


def test_incomplete_pool_is_not_allocated_from():
    partial = resource_slice("n1-a", [device("gpu-0")], node="n1", pool="n1", count=2)
    env = Env(nodes("n1"), [device_class(), partial])
    result, _ = run(env, claim("c"))
    assert result == {"n1": CANNOT}


def test_filter_on_a_scratch_table_matches_the_snapshot():
    env = Env(nodes("n1", "n2"), [device_class(), gpus("n1", 1)])
    env.create(claim("c"))
    pod = env.pod(pod_with_claims("my-pod", "c"))
    state, _ = env.pre_filter(pod)
    scratch = NodeTable.from_infos([NodeInfo(make_node("n1"))])
    verdict = env.plugin.filter_nodes(state.clone(), pod, scratch.all_rows())
    assert verdict is None
    scratch2 = NodeTable.from_infos([NodeInfo(make_node("n2"))])
    verdict2 = env.plugin.filter_nodes(state.clone(), pod, scratch2.all_rows())
    assert verdict2.status_at(0) == CANNOT


@pytest.mark.parametrize("field_name", ["generation", "resourceSliceCount"])
def test_malformed_pool_field_makes_the_pool_invalid_not_the_cycle_fail(field_name):
    broken = resource_slice("n1-gpus", [device("gpu-0")], node="n1")
    broken["spec"]["pool"][field_name] = "one"
    pools = gather_pools([SliceInfo(broken)], {}, Features())
    assert [(p.invalid, p.invalid_reason) for p in pools] == [
        (True, f"ResourceSlice n1-gpus: invalid pool {field_name} 'one'")]


def test_malformed_request_count_never_reaches_the_allocator():
    """The count is an int64: the API refuses a claim whose count is text, as kube-apiserver does."""
    env = Env(nodes("n1"), [device_class(), gpus("n1", 2)])
    bad = claim("c", exact(count=2))
    bad["spec"]["devices"]["requests"][0]["exactly"]["count"] = "two"
    with pytest.raises(BadRequest) as info:
        env.create(bad)
    assert info.value.message.endswith("json: cannot unmarshal string into Go struct field "
                                       "ExactDeviceRequest.spec.devices.requests.exactly.count of type int64")


def test_allocator_runs_once_per_set_of_slices_reaching_nodes(monkeypatch):
    """The outcome depends only on the slices reaching a node: nodes sharing them share one run."""
    env = Env(nodes("n1", "n2", "n3", "n4"), [device_class(), gpus("n1", 1),
                                              resource_slice("shared", [device("net-0")], all_nodes=True)])
    runs = []
    allocate = Allocator.allocate
    monkeypatch.setattr(Allocator, "allocate", lambda self, pools, claims: runs.append(pools) or allocate(self, pools, claims))
    result, allocations = run(env, claim("c"))
    assert result == {"n1": None, "n2": None, "n3": None, "n4": None}
    assert len(runs) == 2
    assert devices_of(allocations["n1"]) == [("req-1", "gpu-0")]
    assert devices_of(allocations["n2"]) == devices_of(allocations["n4"]) == [("req-1", "net-0")]
