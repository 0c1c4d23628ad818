"""VolumeZone (upstream volume_zone_test.go: TestSingleZone, TestMultiZone, TestWithBinding and the
queueing hint tests)."""

from __future__ import annotations

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import QueueingHint
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.plugins.volumezone.volume_zone import ERR_REASON_CONFLICT, VolumeZone
from tests.helpers import make_node
from tests.plugins.test_volume_common import FakeHandle, make_pv, make_pvc, make_sc, pod_with, pod_with_claims, table_of

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
CONFLICT = Status(Code.UnschedulableAndUnresolvable, ERR_REASON_CONFLICT)
SKIP = Status(Code.Skip)


def unresolvable(message: str) -> Status:
    return Status(Code.UnschedulableAndUnresolvable, message)


OBJECTS = [
    make_pv("Vol_1", labels={BETA_ZONE: "us-west1-a"}, phase="Bound"),
    make_pv("Vol_2", labels={BETA_REGION: "us-west1-b", "uselessLabel": "none"}, phase="Bound"),
    make_pv("Vol_3", labels={BETA_REGION: "us-west1-c"}, phase="Bound"),
    make_pv("Vol_Stable_1", labels={ZONE: "us-west1-a"}, phase="Bound"),
    make_pv("Vol_Stable_2", labels={REGION: "us-west1-b", "uselessLabel": "none"}, phase="Bound"),
    make_pv("Vol_Stable_3", labels={ZONE: "us-west1-a", REGION: "us-west1"}, phase="Bound"),
    make_pv("Vol_Multi_1", labels={BETA_ZONE: "us-west1-a"}, phase="Bound"),
    make_pv("Vol_Multi_2", labels={BETA_ZONE: "us-west1-b"}, phase="Bound"),
    make_pv("Vol_Multi_3", labels={BETA_ZONE: "us-west1-c__us-west1-a"}, phase="Bound"),
    make_pvc("PVC_1", volume="Vol_1"),
    make_pvc("PVC_2", volume="Vol_2"),
    make_pvc("PVC_3", volume="Vol_3"),
    make_pvc("PVC_4", volume="Vol_not_exist"),
    make_pvc("PVC_Stable_1", volume="Vol_Stable_1"),
    make_pvc("PVC_Stable_2", volume="Vol_Stable_2"),
    make_pvc("PVC_Stable_3", volume="Vol_Stable_3"),
    make_pvc("PVC_Multi_1", volume="Vol_Multi_1"),
    make_pvc("PVC_Multi_2", volume="Vol_Multi_2"),
    make_pvc("PVC_Multi_3", volume="Vol_Multi_3"),
    make_pvc("PVC_EmptySC", sc=""),
    make_pvc("PVC_NoSC", sc="Class_0"),
    make_pvc("PVC_EmptySC_Immediate", sc="Class_Immediate"),
    make_pvc("PVC_WaitSC", sc="Class_Wait"),
    make_pvc("PVC_NoModeSC", sc="Class_NoMode"),
    make_sc("Class_Immediate", mode="Immediate"),
    make_sc("Class_Wait"),
    make_sc("Class_NoMode", mode=None),
]


def run(pod: dict, node_labels: dict) -> tuple[Status | None, Status | None]:
    plugin = VolumeZone(None, FakeHandle(*OBJECTS))
    table = table_of([make_node("host1", labels=node_labels)])
    table.get("host1").node["metadata"]["labels"].pop("kubernetes.io/hostname", None)
    state, info = CycleState(), PodInfo(pod)
    _, pre = plugin.pre_filter(state, info, table.all_rows())
    if pre is not None:
        return pre, None
    verdict = plugin.filter_nodes(state, info, table.all_rows())
    return None, None if verdict is None else verdict.status_at(0)


@pytest.mark.parametrize(("claims", "node_labels", "want"), [
    pytest.param((), {BETA_ZONE: "us-west1-a"}, None, id="pod without volume"),
    pytest.param(("PVC_1",), {}, None, id="node without labels"),
    pytest.param(("PVC_1",), {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, None, id="beta zone label matched"),
    pytest.param(("PVC_2",), {BETA_REGION: "us-west1-b", "uselessLabel": "none"}, None, id="beta region label matched"),
    pytest.param(("PVC_2",), {BETA_REGION: "no_us-west1-b", "uselessLabel": "none"}, CONFLICT, id="beta region label doesn't match"),
    pytest.param(("PVC_1",), {BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"}, CONFLICT, id="beta zone label doesn't match"),
    pytest.param(("PVC_Stable_1",), {ZONE: "us-west1-a", "uselessLabel": "none"}, None, id="zone label matched"),
    pytest.param(("PVC_Stable_2",), {REGION: "us-west1-b", "uselessLabel": "none"}, None, id="region label matched"),
    pytest.param(("PVC_Stable_2",), {REGION: "no_us-west1-b", "uselessLabel": "none"}, CONFLICT, id="region label doesn't match"),
    pytest.param(("PVC_Stable_1",), {ZONE: "no_us-west1-a", "uselessLabel": "none"}, CONFLICT, id="zone label doesn't match"),
    pytest.param(("PVC_Stable_3",), {ZONE: "us-west1-a"}, CONFLICT, id="pv with zone and region, node with only zone"),
    pytest.param(("PVC_1",), {ZONE: "us-west1-a"}, None, id="pv with beta label, node with ga label, matched"),
    pytest.param(("PVC_1",), {ZONE: "no_us-west1-a"}, CONFLICT, id="pv with beta label, node with ga label, don't match"),
    pytest.param(("PVC_Multi_3",), {BETA_ZONE: "us-west1-a"}, None, id="multi-zone label matched"),
    pytest.param(("PVC_Multi_3",), {BETA_ZONE: "us-west1-b"}, CONFLICT, id="multi-zone label doesn't match"),
    pytest.param(("PVC_Multi_1", "PVC_Multi_2"), {BETA_ZONE: "us-west1-a"}, CONFLICT, id="two volumes in different zones"),
])
def test_zone_and_region_labels(claims, node_labels, want):
    pre, status = run(pod_with_claims("p", *claims), node_labels)
    assert pre in (None, SKIP)
    assert status == want


@pytest.mark.parametrize(("claims", "want_pre"), [
    pytest.param(("PVC_EmptySC",), unresolvable("PersistentVolumeClaim had no pv name and storageClass name"),
                 id="unbound volume empty storage class"),
    pytest.param(("PVC_NoSC",), unresolvable('storageclass.storage.k8s.io "Class_0" not found'), id="unbound volume no storage class"),
    pytest.param(("PVC_EmptySC_Immediate",), unresolvable("PersistentVolume had no name"), id="unbound volume immediate binding mode"),
    pytest.param(("PVC_WaitSC",), SKIP, id="unbound volume wait binding mode"),
    pytest.param(("PVC_NoModeSC",), unresolvable('VolumeBindingMode not set for StorageClass "Class_NoMode"'),
                 id="storage class without binding mode"),
    pytest.param(("PVC_NotExist",), unresolvable('persistentvolumeclaim "PVC_NotExist" not found'), id="pvc not found"),
    pytest.param(("PVC_4",), unresolvable('persistentvolume "Vol_not_exist" not found'), id="pv not found"),
    pytest.param(("",), unresolvable("PersistentVolumeClaim had no name"), id="claim without name"),
])
def test_with_binding(claims, want_pre):
    pre, status = run(pod_with_claims("p", *claims), {BETA_ZONE: "us-west1-a"})
    assert pre == want_pre
    assert status is None


def test_wait_for_first_consumer_claims_are_skipped_beside_bound_ones():
    pre, status = run(pod_with_claims("p", "PVC_WaitSC", "PVC_1"), {BETA_ZONE: "us-west1-b"})
    assert pre is None and status == CONFLICT


def test_a_batch_mixes_unconstrained_matching_and_conflicting_nodes():
    plugin = VolumeZone(None, FakeHandle(*OBJECTS))
    table = table_of([make_node("a", labels={ZONE: "us-west1-a"}), make_node("b", labels={ZONE: "us-west1-b"}),
                      make_node("c"), make_node("d", labels={BETA_ZONE: "us-west1-b", ZONE: "us-west1-a"})])
    state, pod = CycleState(), PodInfo(pod_with_claims("p", "PVC_1"))
    plugin.pre_filter(state, pod, table.all_rows())
    verdict = plugin.filter_nodes(state, pod, table.all_rows())
    assert [verdict.status_at(i) for i in range(4)] == [None, CONFLICT, None, CONFLICT]


def test_filter_without_prefilter_state_computes_the_topologies():
    plugin = VolumeZone(None, FakeHandle(*OBJECTS))
    table = table_of([make_node("a", labels={ZONE: "elsewhere"})])
    verdict = plugin.filter_nodes(CycleState(), PodInfo(pod_with_claims("p", "PVC_1")), table.all_rows())
    assert verdict.status_at(0) == CONFLICT
    verdict = plugin.filter_nodes(CycleState(), PodInfo(pod_with_claims("p", "PVC_4")), table.all_rows())
    assert verdict.status_at(0) == unresolvable('persistentvolume "Vol_not_exist" not found')


@pytest.mark.parametrize(("pod", "pvc", "want"), [
    (pod_with_claims("p", "PVC_1"), make_pvc("PVC_1"), QueueingHint.Queue),
    (pod_with_claims("p", "PVC_1"), make_pvc("PVC_2"), QueueingHint.QueueSkip),
    (pod_with_claims("p", "PVC_1", namespace="ns"), make_pvc("PVC_1"), QueueingHint.QueueSkip),
    (pod_with("p", {"name": "e", "ephemeral": {}}), make_pvc("p-e"), QueueingHint.QueueSkip),
], ids=["pvc-referred-from-pod", "pvc-irrelevant", "pvc-other-namespace", "ephemeral-claims-are-not-looked-at"])
def test_hint_after_pvc_change(pod, pvc, want):
    assert VolumeZone.is_schedulable_after_pvc_change(pod, None, pvc) == want


@pytest.mark.parametrize(("sc", "want"), [
    (make_sc("wait"), QueueingHint.Queue),
    (make_sc("immediate", mode="Immediate"), QueueingHint.QueueSkip),
    (make_sc("nil", mode=None), QueueingHint.QueueSkip),
])
def test_hint_after_storage_class_added(sc, want):
    assert VolumeZone.is_schedulable_after_storage_class_added(pod_with_claims("p", "c"), None, sc) == want


def test_hint_after_pv_change_looks_at_topology_labels_only():
    pod = pod_with_claims("p", "c")
    old = make_pv("v", labels={ZONE: "a"})
    assert VolumeZone.is_schedulable_after_pv_change(pod, None, old) == QueueingHint.Queue
    assert VolumeZone.is_schedulable_after_pv_change(pod, old, make_pv("v", labels={ZONE: "b"})) == QueueingHint.Queue
    assert VolumeZone.is_schedulable_after_pv_change(pod, old, make_pv("v", labels={ZONE: "a", "x": "y"})) == QueueingHint.QueueSkip
