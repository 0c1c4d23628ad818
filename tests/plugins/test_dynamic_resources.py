"""DynamicResources: statuses and messages of each extension point, as upstream's plugin tests
expect them (``dynamicresources_test.go``)."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.api.kinds import kind_named
from kubesched.api.types import PodInfo
from kubesched.scheduler.config.args import DynamicResourcesArgs
from kubesched.scheduler.features import FeatureGates
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.diagnosis import NodeToStatus
from kubesched.scheduler.framework.events import ActionType, QueueingHint, Resource
from kubesched.scheduler.framework.status import Code, Status, StatusError
from kubesched.scheduler.plugins.dynamicresources._allocator import FINALIZER
from kubesched.scheduler.plugins.dynamicresources.dynamic_resources import STATE_KEY
from tests.helpers import make_pod
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
CLAIM_KIND = kind_named("ResourceClaim")
WORKER_SLICE = resource_slice("worker-slice", [device("instance-1")], node="worker")


def env_with(*objects: dict, node_names: tuple[str, ...] = ("worker",), gates: FeatureGates | None = None, **kw) -> Env:
    return Env(nodes(*node_names), objects, gates=gates, **kw)


def owned_claim(env: Env, pod: PodInfo, name: str, *requests: dict, **kw) -> dict:
    return env.create(claim(name, *requests, owner=pod.pod, **kw))


def post_filter(env: Env, state: CycleState, pod: PodInfo, statuses: dict[str, Status]) -> Status:
    node_to_status = NodeToStatus(env.table.names[: env.table.n])
    for name, status in statuses.items():
        if status is not None:
            node_to_status.set(name, status.copy().with_plugin("DynamicResources"))
    _, status = env.plugin.post_filter(state, pod, node_to_status)
    return status


# --- pods without claims ----------------------------------------------------------------------------
def test_pod_without_claims_is_skipped_at_prefilter_and_never_reaches_dra_code():
    env = env_with()
    pod = PodInfo(make_pod("foo", uid="u-foo"))
    state, status = env.pre_filter(pod)
    assert status == Status(Code.Skip)
    assert env.plugin.pre_enqueue(pod) is None
    assert env.plugin.pre_bind_pre_flight(state, pod, "worker") == Status(Code.Skip)
    assert post_filter(env, state, pod, {}) == Status(Code.Unschedulable, "no new claims to deallocate")
    assert env.plugin.reserve(state, pod, "worker") is None
    assert not env.plugin.score_nodes(state, pod, env.table.all_rows()).any()


def test_pod_without_claims_prefilter_does_not_read_claims(monkeypatch):
    env = env_with()
    monkeypatch.setattr(env.plugin.manager.claims, "get", lambda *a: pytest.fail("claims read for a pod without claims"))
    _, status = env.pre_filter(PodInfo(make_pod("foo")))
    assert status.code == Code.Skip


# --- claim lookup ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "want"), [
    ("missing-claim", 'pod "default/my-pod": ResourceClaim not created yet'),
    ("claim-not-found", 'could not find ResourceClaim "default/my-claim"'),
    ("deleted-claim", 'resourceclaim "my-pod-my-resource" is being deleted'),
    ("wrong-claim", "ResourceClaim default/my-pod-my-resource was not created for pod default/my-pod (pod is not owner)"),
])
def test_claim_lookup_failures_make_the_pod_unresolvable_at_preenqueue_and_prefilter(case, want):
    env = env_with(device_class())
    if case == "missing-claim":
        pod = env.pod(pod_with_claims("my-pod", templates={"my-resource": "tpl"}))
    elif case == "claim-not-found":
        pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    else:
        raw = pod_with_claims("my-pod", templates={"my-resource": "tpl"})
        raw["status"] = {"resourceClaimStatuses": [{"name": "my-resource", "resourceClaimName": "my-pod-my-resource"}]}
        pod = env.pod(raw)
        owner = pod.pod if case == "deleted-claim" else {"metadata": {"name": "my-pod", "uid": "someone-else"}}
        c = claim("my-pod-my-resource", owner=owner)
        if case == "deleted-claim":
            c["metadata"]["finalizers"] = ["keep"]
        env.create(c)
        if case == "deleted-claim":
            env.store.delete(CLAIM_KIND, "default", "my-pod-my-resource")
    assert env.plugin.pre_enqueue(pod) == Status(UAU, want)
    _, status = env.pre_filter(pod)
    assert status == Status(UAU, want)


def test_template_claim_resolved_through_pod_status():
    env = env_with(device_class(), WORKER_SLICE)
    raw = pod_with_claims("my-pod", templates={"my-resource": "tpl"})
    raw["status"] = {"resourceClaimStatuses": [{"name": "my-resource", "resourceClaimName": "generated-x"}]}
    pod = env.pod(raw)
    owned_claim(env, pod, "generated-x")
    state, status = env.pre_filter(pod)
    assert status is None
    assert env.filter(state, pod) == {"worker": None}


def test_claim_status_entry_without_name_is_ignored():
    env = env_with()
    raw = pod_with_claims("my-pod", templates={"my-resource": "tpl"})
    raw["status"] = {"resourceClaimStatuses": [{"name": "my-resource"}]}
    pod = env.pod(raw)
    _, status = env.pre_filter(pod)
    assert status == Status(Code.Skip)


# --- PreFilter checks -----------------------------------------------------------------------------------
def test_missing_class_is_unresolvable_and_postfilter_has_nothing_to_deallocate():
    env = env_with()
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim"))
    state, status = env.pre_filter(pod)
    assert status == Status(UAU, "request req-1: device class gpu does not exist")
    assert post_filter(env, state, pod, {}) == Status(Code.Unschedulable, "no new claims to deallocate")


def test_prioritized_list_subrequest_with_unknown_class():
    env = env_with(device_class())
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", first_available("req-1", sub("subreq-1", "does-not-exist"))))
    _, status = env.pre_filter(pod)
    assert status == Status(UAU, "request req-1/subreq-1: device class does-not-exist does not exist")


def test_prioritized_list_with_feature_disabled():
    env = env_with(device_class(), gates=FeatureGates({"DRAPrioritizedList": False}))
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", first_available("req-1", sub("subreq-1"))))
    _, status = env.pre_filter(pod)
    assert status == Status(UAU, "resource claim default/my-claim, request req-1: has subrequests, but the DRAPrioritizedList feature is disabled")


def test_request_without_exactly_or_first_available_is_an_unknown_request_type():
    env = env_with(device_class())
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", {"name": "req-1"}))
    _, status = env.pre_filter(pod)
    assert status == Status(UAU, "resource claim default/my-claim, request req-1: unknown request type")


def test_exact_request_without_class_name_is_an_error():
    env = env_with(device_class())
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", {"name": "req-1", "exactly": {}}))
    _, status = env.pre_filter(pod)
    assert status.code == Code.Error
    assert status.message() == "request req-1: unsupported request type"


def test_claim_with_allocation_in_flight_waits():
    env = env_with(device_class(), WORKER_SLICE)
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    other = env.pod(pod_with_claims("other", "my-claim"))
    env.create(claim("my-claim"))
    state, _ = env.pre_filter(pod)
    env.filter(state, pod)
    assert env.plugin.reserve(state, pod, "worker") is None
    _, status = env.pre_filter(other)
    assert status == Status(UAU, "resource claim default/my-claim is in the process of being allocated")


# --- Filter ----------------------------------------------------------------------------------------------
def test_no_resources_cannot_allocate_and_postfilter_is_still_not_schedulable():
    env = env_with(device_class())
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim"))
    state, status = env.pre_filter(pod)
    assert status is None
    result = env.filter(state, pod)
    assert result == {"worker": Status(UAU, "cannot allocate all claims")}
    assert post_filter(env, state, pod, result) == Status(Code.Unschedulable, "still not schedulable")


def test_exhausted_resources_cannot_allocate():
    env = env_with(device_class(), WORKER_SLICE,
                   claim("not-my-claim", allocation=allocation_on("worker", ("req-1", "instance-1"))))
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim"))
    state, _ = env.pre_filter(pod)
    assert env.filter(state, pod) == {"worker": Status(UAU, "cannot allocate all claims")}


def test_admin_access_allocates_a_device_in_use():
    env = env_with(device_class(), WORKER_SLICE,
                   claim("not-my-claim", allocation=allocation_on("worker", ("req-1", "instance-1"))))
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", exact(admin=True)))
    state, _ = env.pre_filter(pod)
    assert env.filter(state, pod) == {"worker": None}
    assert state.read(STATE_KEY).node_allocations["worker"][0]["devices"]["results"][0]["adminAccess"] is True


def test_admin_access_requested_with_the_gate_off_is_an_error():
    env = env_with(device_class(), WORKER_SLICE, gates=FeatureGates({"DRAAdminAccess": False}))
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", exact(admin=True)))
    state, _ = env.pre_filter(pod)
    status = env.filter(state, pod)["worker"]
    assert status.code == Code.Error
    assert status.message() == "claim default/my-claim, request req-1: admin access is requested, but the feature is disabled"


def test_devices_allocated_with_admin_access_stay_available():
    admin_allocation = allocation_on("worker", ("req-1", "instance-1"))
    admin_allocation["devices"]["results"][0]["adminAccess"] = True
    env = env_with(device_class(), WORKER_SLICE, claim("not-my-claim", exact(admin=True), allocation=admin_allocation))
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim"))
    state, _ = env.pre_filter(pod)
    assert env.filter(state, pod) == {"worker": None}


@pytest.mark.parametrize(("broken", "want"), [
    ("claim", "claim default/my-claim: selector #0: CEL runtime error: no such key: healthy"),
    ("class", "class gpu: selector #0: CEL runtime error: no such key: healthy"),
])
def test_cel_runtime_errors_abort_filtering(broken, want):
    expression = 'device.attributes["gpu.example.com"].healthy'
    klass = device_class(expression=expression) if broken == "class" else device_class()
    env = env_with(klass, WORKER_SLICE)
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", exact(selectors=[expression]) if broken == "claim" else exact()))
    state, _ = env.pre_filter(pod)
    status = env.filter(state, pod)["worker"]
    assert status.code == Code.Error
    assert status.message() == want


def test_cel_runtime_error_on_one_of_two_nodes_is_reported_for_that_node():
    healthy = resource_slice("w2", [device("instance-1", {"healthy": True})], node="worker-2")
    env = env_with(device_class(), WORKER_SLICE, healthy, node_names=("worker", "worker-2"))
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", exact(selectors=['device.attributes["gpu.example.com"].healthy'])))
    state, _ = env.pre_filter(pod)
    result = env.filter(state, pod)
    assert result["worker"].code == Code.Error
    assert result["worker-2"] is None


def test_wrong_topology_is_unavailable_and_postfilter_deallocates_the_claim():
    wrong = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "no-such-label", "operator": "In", "values": ["no-such-value"]}]}]}
    env = env_with(device_class())
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", owner=pod.pod, allocation={"devices": {"results": []}, "nodeSelector": wrong}))
    state, status = env.pre_filter(pod)
    assert status is None
    result = env.filter(state, pod)
    assert result == {"worker": Status(UAU, "resourceclaim not available on the node")}
    assert post_filter(env, state, pod, result) == Status(Code.Unschedulable, "deallocation of ResourceClaim completed")
    assert "allocation" not in env.get("ResourceClaim", "my-claim").get("status", {})


def test_an_allocation_with_an_invalid_node_selector_is_an_error_naming_the_field():
    invalid = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]}
    env = env_with(device_class())
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", owner=pod.pod, allocation={"devices": {"results": []}, "nodeSelector": invalid}))
    _, status = env.pre_filter(pod)
    assert status is not None and status.code == Code.Error
    assert status.message() == ('nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "Near": '
                                'supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"')


def test_postfilter_ignores_nodes_where_another_plugin_failed_first():
    wrong = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "no-such-label", "operator": "In", "values": ["x"]}]}]}
    env = env_with(device_class())
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", allocation={"devices": {"results": []}, "nodeSelector": wrong}))
    state, _ = env.pre_filter(pod)
    env.filter(state, pod)
    node_to_status = NodeToStatus(["worker"])
    node_to_status.set("worker", Status(Code.Unschedulable, "Insufficient cpu", plugin="NodeResourcesFit"))
    _, status = env.plugin.post_filter(state, pod, node_to_status)
    assert status == Status(Code.Unschedulable, "still not schedulable")
    assert env.get("ResourceClaim", "my-claim")["status"]["allocation"]


def test_postfilter_keeps_claims_reserved_for_other_pods():
    wrong = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "no-such-label", "operator": "In", "values": ["x"]}]}]}
    env = env_with(device_class())
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", allocation={"devices": {"results": []}, "nodeSelector": wrong},
                     reserved_for=[{"resource": "pods", "name": "other", "uid": "other-uid"}]))
    state, _ = env.pre_filter(pod)
    result = env.filter(state, pod)
    assert post_filter(env, state, pod, result) == Status(Code.Unschedulable, "still not schedulable")


def test_good_topology_passes_and_prebind_only_reserves():
    good = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["worker"]}]}]}
    env = env_with(device_class(), node_names=("worker", "worker-2"))
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", allocation={"devices": {"results": []}, "nodeSelector": good}))
    state, _ = env.pre_filter(pod)
    result = env.filter(state, pod)
    assert result == {"worker": None, "worker-2": Status(UAU, "resourceclaim not available on the node")}
    assert env.plugin.reserve(state, pod, "worker") is None
    assert asyncio.run(env.plugin.pre_bind(state, pod, "worker")) is None
    stored = env.get("ResourceClaim", "my-claim")
    assert stored["status"]["reservedFor"] == [{"resource": "pods", "name": "my-pod", "uid": pod.uid}]
    assert FINALIZER not in (stored["metadata"].get("finalizers") or [])


def test_claim_reserved_for_the_pod_needs_no_prebind_write():
    env = env_with(device_class())
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", allocation=allocation_on("worker", ("req-1", "instance-1")),
                     reserved_for=[{"resource": "pods", "name": "my-pod", "uid": pod.uid}]))
    before = env.get("ResourceClaim", "my-claim")["metadata"]["resourceVersion"]
    state, _ = env.pre_filter(pod)
    assert env.filter(state, pod) == {"worker": None}
    assert asyncio.run(env.plugin.pre_bind(state, pod, "worker")) is None
    assert env.get("ResourceClaim", "my-claim")["metadata"]["resourceVersion"] == before


@pytest.mark.parametrize(("consumers", "includes_pod", "want"), [
    (255, False, None),                                # room for one more consumer
    (256, False, Status(UAU, "resourceclaim in use")),  # full, and the pod is not one of them
    (256, True, None),                                 # full, but already reserved for the pod
])
def test_allocated_claim_with_full_reserved_for_is_in_use(consumers, includes_pod, want):
    env = env_with(device_class())
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    reserved = [{"resource": "pods", "name": f"other-{i}", "uid": f"other-{i}"} for i in range(consumers)]
    if includes_pod:
        reserved[-1] = {"resource": "pods", "name": "my-pod", "uid": pod.uid}
    env.create(claim("my-claim", allocation=allocation_on("worker", ("req-1", "instance-1")), reserved_for=reserved))
    _, status = env.pre_filter(pod)
    assert status == want


# --- Reserve, PreBind, Unreserve -----------------------------------------------------------------------
def test_with_resources_reserve_marks_in_flight_and_prebind_writes_allocation_and_reservation():
    env = env_with(device_class(), WORKER_SLICE)
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    stored = env.create(claim("my-claim"))
    state, _ = env.pre_filter(pod)
    assert env.filter(state, pod) == {"worker": None}
    assert env.plugin.reserve(state, pod, "worker") is None
    in_flight = env.plugin.manager.claims.pending_allocations()
    assert list(in_flight) == [stored["metadata"]["uid"]]
    assert in_flight[stored["metadata"]["uid"]]["metadata"]["finalizers"] == [FINALIZER]
    assert env.plugin.pre_bind_pre_flight(state, pod, "worker") is None
    assert asyncio.run(env.plugin.pre_bind(state, pod, "worker")) is None
    written = env.get("ResourceClaim", "my-claim")
    assert written["metadata"]["finalizers"] == [FINALIZER]
    assert written["status"] == {
        "allocation": allocation_on("worker", ("req-1", "instance-1")),
        "reservedFor": [{"resource": "pods", "name": "my-pod", "uid": pod.uid}],
    }
    assert env.plugin.manager.claims.pending_allocations() == {}
    assert env.plugin.manager.claims.get("default", "my-claim")["status"]["reservedFor"]


def test_unreserve_before_prebind_forgets_the_in_flight_allocation():
    env = env_with(device_class(), WORKER_SLICE)
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim"))
    state, _ = env.pre_filter(pod)
    env.filter(state, pod)
    env.plugin.reserve(state, pod, "worker")
    env.plugin.unreserve(state, pod, "worker")
    assert env.plugin.manager.claims.pending_allocations() == {}
    assert "status" not in env.get("ResourceClaim", "my-claim")


def test_unreserve_after_bind_failure_removes_the_reservation():
    good = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["worker"]}]}]}
    env = env_with(device_class())
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", allocation={"devices": {"results": []}, "nodeSelector": good}))
    state, _ = env.pre_filter(pod)
    env.filter(state, pod)
    assert asyncio.run(env.plugin.pre_bind(state, pod, "worker")) is None
    env.plugin.unreserve(state, pod, "worker")
    assert env.get("ResourceClaim", "my-claim")["status"]["reservedFor"] == []


def test_prebind_fails_when_the_claim_got_allocated_elsewhere():
    env = env_with(device_class(), WORKER_SLICE)
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim"))
    state, _ = env.pre_filter(pod)
    env.filter(state, pod)
    env.plugin.reserve(state, pod, "worker")
    env.store.mutate(CLAIM_KIND, "default", "my-claim",
                     lambda c: c.setdefault("status", {}).update(allocation=allocation_on("worker", ("req-1", "instance-1"))))
    status = asyncio.run(env.plugin.pre_bind(state, pod, "worker"))
    assert status.code == Code.Error
    assert status.message() == "claim default/my-claim got allocated elsewhere in the meantime"
    assert env.plugin.manager.claims.pending_allocations() == {}


def test_reserve_without_filter_result_for_the_node_is_an_error():
    env = env_with(device_class(), WORKER_SLICE)
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim"))
    state, _ = env.pre_filter(pod)
    status = env.plugin.reserve(state, pod, "worker")
    assert status.code == Code.Error
    assert status.message() == "claim allocation not found for node"


# --- Score ------------------------------------------------------------------------------------------
def test_score_prefers_the_node_satisfying_the_best_ranked_subrequest():
    healthy = resource_slice("w2", [device("instance-1", {"healthy": True})], node="worker-2")
    env = env_with(device_class(), WORKER_SLICE, healthy, node_names=("worker", "worker-2"))
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim", first_available("req-1", sub("subreq-1", selectors=['"healthy" in device.attributes["gpu.example.com"]']),
                                                 sub("subreq-2"))))
    state, _ = env.pre_filter(pod)
    assert env.filter(state, pod) == {"worker": None, "worker-2": None}
    batch = env.table.all_rows()
    raw = env.plugin.score_nodes(state, pod, batch)
    assert raw.tolist() == [7, 8]
    assert env.plugin.normalize_scores(state, pod, batch, raw).tolist() == [87, 100]


def test_score_of_pod_mixing_allocated_and_unallocated_claims_fails_as_in_1_35():
    shared = resource_slice("shared", [device("s-1")], pool="shared", all_nodes=True)
    env = env_with(device_class(), WORKER_SLICE, shared, node_names=("worker", "worker-2"))
    alloc = {"devices": {"results": [{"request": "req-1", "driver": "gpu.example.com", "pool": "shared", "device": "s-1"}]}}
    env.create(claim("shared-claim", allocation=alloc))
    pod = env.pod(pod_with_claims("my-pod", "shared-claim", "my-claim"))
    env.create(claim("my-claim"))
    state, _ = env.pre_filter(pod)
    assert env.filter(state, pod)["worker"] is None
    with pytest.raises(StatusError) as err:
        env.plugin.score_nodes(state, pod, env.table.all_rows())
    assert err.value.status.message() == "number of allocations 1 is smaller than number of claims"


# --- queueing -----------------------------------------------------------------------------------------
def test_events_to_register():
    events = {(e.event.resource, e.event.action): e.hint is not None for e in env_with().plugin.events_to_register()}
    assert events == {
        (Resource.Node, ActionType.Add | ActionType.UpdateNodeLabel | ActionType.UpdateNodeAllocatable): False,
        (Resource.ResourceClaim, ActionType.Add | ActionType.Update): True,
        (Resource.Pod, ActionType.UpdatePodGeneratedResourceClaim): True,
        (Resource.DeviceClass, ActionType.Add | ActionType.Update): False,
        (Resource.ResourceSlice, ActionType.Add | ActionType.Update): False,
    }


def test_claim_change_hints():
    env = env_with(device_class())
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    hint = env.plugin.is_schedulable_after_claim_change
    unrelated = env.create(claim("other"))
    # The pod's claim does not exist yet: nothing can help.
    assert hint(pod.pod, None, unrelated) == QueueingHint.QueueSkip
    mine = env.create(claim("my-claim"))
    assert hint(pod.pod, None, mine) == QueueingHint.Queue
    assert hint(pod.pod, None, unrelated) == QueueingHint.QueueSkip
    relabelled = {**mine, "metadata": {**mine["metadata"], "labels": {"a": "b"}}}
    assert hint(pod.pod, mine, relabelled) == QueueingHint.QueueSkip
    allocated = {**mine, "status": {"allocation": allocation_on("worker", ("req-1", "instance-1"))}}
    assert hint(pod.pod, mine, allocated) == QueueingHint.Queue
    other_allocated = {**unrelated, "status": {"allocation": allocation_on("worker", ("req-1", "instance-1"))}}
    assert hint(pod.pod, other_allocated, unrelated) == QueueingHint.Queue  # deallocation frees devices


def test_pod_change_hint_queues_when_the_generated_claim_appears():
    env = env_with(device_class())
    raw = pod_with_claims("my-pod", templates={"my-resource": "tpl"})
    pod = env.pod(raw)
    hint = env.plugin.is_schedulable_after_pod_change
    assert hint(pod.pod, pod.pod, pod.pod) == QueueingHint.QueueSkip
    generated = env.create(claim("my-pod-my-resource-abcde", owner=pod.pod))
    updated = {**pod.pod, "status": {"resourceClaimStatuses": [{"name": "my-resource", "resourceClaimName": generated["metadata"]["name"]}]}}
    assert hint(pod.pod, pod.pod, updated) == QueueingHint.Queue
    other = {**updated, "metadata": {**updated["metadata"], "uid": "other"}}
    assert hint(pod.pod, other, other) == QueueingHint.QueueSkip


# --- args -------------------------------------------------------------------------------------------
def test_filter_timeout_from_args():
    args = DynamicResourcesArgs(filter_timeout=2.5)
    assert env_with(args=args).plugin.filter_timeout == 2.5
    assert env_with().plugin.filter_timeout == 10.0
    assert env_with(args=DynamicResourcesArgs(filter_timeout=0.0)).plugin.filter_timeout is None


def test_filter_timeout_expiry_is_unresolvable(monkeypatch):
    import kubesched.scheduler.plugins.dynamicresources._allocator as allocator

    env = env_with(device_class(), WORKER_SLICE, args=DynamicResourcesArgs(filter_timeout=1.0))
    pod = env.pod(pod_with_claims("my-pod", "my-claim"))
    env.create(claim("my-claim"))
    state, _ = env.pre_filter(pod)
    clock = iter([0.0, 5.0, 5.0, 5.0, 5.0])
    monkeypatch.setattr(allocator.time, "perf_counter", lambda: next(clock))
    assert env.filter(state, pod) == {"worker": Status(UAU, "timed out trying to allocate devices")}


@pytest.mark.parametrize("gate", ["DRAConsumableCapacity", "DRADeviceBindingConditions", "DRADeviceTaintRules",
                                  "DRAExtendedResource", "DRAPartitionableDevices"])
def test_plugin_refuses_to_start_with_an_unimplemented_alpha_gate(gate):
    with pytest.raises(ValueError, match=f"initializing plugin \"DynamicResources\": kubesched does not implement feature gate {gate}$"):
        env_with(gates=FeatureGates({gate: True}))
