"""VolumeRestrictions (upstream volume_restrictions_test.go: TestGCEDiskConflicts, TestAWSDiskConflicts,
TestRBDDiskConflicts, TestISCSIDiskConflicts, TestAccessModeConflicts, Test_isSchedulableAfterPodDeleted,
Test_isSchedulableAfterPersistentVolumeClaimChange), plus preemption's AddPod/RemovePod on a scratch table."""

from __future__ import annotations

import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import QueueingHint
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.volumerestrictions.volume_restrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_RWOP_CONFLICT,
    VolumeRestrictions,
)
from tests.plugins.test_volume_common import FakeHandle, make_pvc, nodes, pod_with, pod_with_claims, table_of

DISK = Status(Code.Unschedulable, ERR_REASON_DISK_CONFLICT)
RWOP = Status(Code.Unschedulable, ERR_REASON_RWOP_CONFLICT)
SKIP = Status(Code.Skip)

GCE = {"name": "v", "gcePersistentDisk": {"pdName": "foo"}}
GCE2 = {"name": "v", "gcePersistentDisk": {"pdName": "bar"}}
AWS = {"name": "v", "awsElasticBlockStore": {"volumeID": "foo"}}
AWS2 = {"name": "v", "awsElasticBlockStore": {"volumeID": "bar"}}
RBD = {"name": "v", "rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
RBD2 = {"name": "v", "rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
ISCSI = {"name": "v", "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01", "lun": 0}}
ISCSI2 = {"name": "v", "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2017-12.server:storage.target01", "lun": 0}}
NO_RESTRICTION = {"name": "volume with no restriction", "emptyDir": {}}


def run(plugin: VolumeRestrictions, pod: dict, table: NodeTable) -> tuple[Status | None, Status | None]:
    """PreFilter then (when it succeeded) Filter on the table's only node."""
    state = CycleState()
    info = PodInfo(pod)
    _, pre = plugin.pre_filter(state, info, table.all_rows())
    if pre is not None:
        return pre, None
    verdict = plugin.filter_nodes(state, info, table.all_rows())
    return None, None if verdict is None else verdict.status_at(0)


def disk_cases(vol: dict, other: dict) -> list:
    return [
        pytest.param(pod_with("p"), [], SKIP, None, id="nothing"),
        pytest.param(pod_with("p"), [vol], SKIP, None, id="one state"),
        pytest.param(pod_with("p", vol), [vol], None, DISK, id="same state"),
        pytest.param(pod_with("p", other), [vol], None, None, id="different state"),
        pytest.param(pod_with("p", NO_RESTRICTION), [], SKIP, None, id="pod with a volume that doesn't have restrictions"),
    ]


@pytest.mark.parametrize(("pod", "existing", "want_pre", "want"),
                         disk_cases(GCE, GCE2) + disk_cases(AWS, AWS2) + disk_cases(RBD, RBD2) + disk_cases(ISCSI, ISCSI2))
def test_inline_disk_conflicts(pod, existing, want_pre, want):
    table = table_of(nodes("n1"), [pod_with(f"e{i}", v, node="n1") for i, v in enumerate(existing)])
    pre, status = run(VolumeRestrictions(None, FakeHandle()), pod, table)
    assert pre == want_pre
    assert status == want


@pytest.mark.parametrize(("vol", "existing", "conflict"), [
    pytest.param({"gcePersistentDisk": {"pdName": "foo", "readOnly": True}}, {"gcePersistentDisk": {"pdName": "foo", "readOnly": True}},
                 False, id="gce read-only on both sides shares the disk"),
    pytest.param({"gcePersistentDisk": {"pdName": "foo", "readOnly": True}}, {"gcePersistentDisk": {"pdName": "foo"}},
                 True, id="gce read-only beside read-write conflicts"),
    pytest.param({"awsElasticBlockStore": {"volumeID": "foo", "readOnly": True}}, {"awsElasticBlockStore": {"volumeID": "foo", "readOnly": True}},
                 True, id="ebs never shares"),
    pytest.param({"rbd": {"monitors": ["a"], "pool": "p", "image": "i", "readOnly": True}},
                 {"rbd": {"monitors": ["a", "b"], "pool": "p", "image": "i", "readOnly": True}}, False, id="rbd read-only shares"),
    pytest.param({"rbd": {"monitors": ["a"], "image": "i"}}, {"rbd": {"monitors": ["a"], "pool": "rbd", "image": "i"}},
                 True, id="rbd pool defaults to rbd"),
    pytest.param({"iscsi": {"iqn": "x", "readOnly": True}}, {"iscsi": {"iqn": "x", "readOnly": True}}, False, id="iscsi read-only shares"),
])
def test_read_only_rules_per_disk_kind(vol, existing, conflict):
    table = table_of(nodes("n1"), [pod_with("e", {"name": "x", **existing}, node="n1")])
    _, status = run(VolumeRestrictions(None, FakeHandle()), pod_with("p", {"name": "x", **vol}), table)
    assert status == (DISK if conflict else None)


def test_disk_conflicts_are_found_per_node_across_a_batch():
    table = table_of(nodes("n1", "n2", "n3"), [pod_with("a", GCE, node="n1"), pod_with("b", GCE2, node="n2"),
                                              pod_with("c", GCE, node="n3")])
    plugin = VolumeRestrictions(None, FakeHandle())
    state, pod = CycleState(), PodInfo(pod_with("p", GCE))
    plugin.pre_filter(state, pod, table.all_rows())
    verdict = plugin.filter_nodes(state, pod, table.all_rows())
    assert [verdict.status_at(i) for i in range(3)] == [DISK, None, DISK]
    info = table.get("n1")
    removed = info.remove_pod("uid-default-a")
    table.pod_removed(info, removed)
    verdict = plugin.filter_nodes(state, pod, table.all_rows())
    assert [verdict.status_at(i) for i in range(3)] == [None, None, DISK]


RWOP_1 = make_pvc("claim-with-rwop-1", modes=["ReadWriteOncePod"])
RWOP_2 = make_pvc("claim-with-rwop-2", modes=["ReadWriteOncePod"])
RWX = make_pvc("claim-with-rwx", modes=["ReadWriteMany"])
WITH_ONE_PVC = pod_with_claims("pod-with-one-pvc", "claim-with-rwop-1", node="node-1")
WITH_TWO_PVCS = pod_with_claims("pod-with-two-pvcs", "claim-with-rwop-1", "claim-with-rwop-2", node="node-1")
WITH_RWX = pod_with_claims("pod-with-rwx", "claim-with-rwx", node="node-1")


@pytest.mark.parametrize(("pod", "existing", "pvcs", "want_pre", "want"), [
    pytest.param(pod_with("p"), [], [], SKIP, None, id="nothing"),
    pytest.param(WITH_ONE_PVC, [], [], Status(Code.UnschedulableAndUnresolvable, 'persistentvolumeclaim "claim-with-rwop-1" not found'),
                 None, id="failed to get PVC"),
    pytest.param(WITH_ONE_PVC, [WITH_RWX], [RWOP_1, RWX], SKIP, None, id="no access mode conflict"),
    pytest.param(pod_with_claims("pod-with-one-conflict", "claim-with-rwop-1"), [WITH_ONE_PVC, WITH_RWX], [RWOP_1, RWX], None, RWOP,
                 id="access mode conflict, unschedulable"),
    pytest.param(pod_with_claims("pod-with-two-conflicts", "claim-with-rwop-1", "claim-with-rwop-2"), [WITH_TWO_PVCS, WITH_RWX],
                 [RWOP_1, RWOP_2, RWX], None, RWOP, id="two conflicts, unschedulable"),
])
def test_read_write_once_pod_conflicts(pod, existing, pvcs, want_pre, want):
    table = table_of(nodes("node-1"), existing)
    pre, status = run(VolumeRestrictions(None, FakeHandle(*pvcs)), pod, table)
    assert pre == want_pre
    assert status == want


def test_read_write_once_pod_conflict_rejects_every_node_and_preemption_can_remove_the_user():
    table = table_of(nodes("node-1", "node-2"), [WITH_ONE_PVC])
    plugin = VolumeRestrictions(None, FakeHandle(RWOP_1))
    state, pod = CycleState(), PodInfo(pod_with_claims("new", "claim-with-rwop-1"))
    assert plugin.pre_filter(state, pod, table.all_rows()) == (None, None)
    verdict = plugin.filter_nodes(state, pod, table.all_rows())
    assert [verdict.status_at(i) for i in range(2)] == [RWOP, RWOP]
    # preemption: the user of the claim is a victim on node-1
    victim = PodInfo(WITH_ONE_PVC)
    scratch_state = state.clone()
    node = table.get("node-1").clone()
    node.remove_pod(victim.uid)
    assert plugin.pre_filter_extensions().remove_pod(scratch_state, pod, victim, node) is None
    scratch = NodeTable.from_infos([node])
    assert plugin.filter_nodes(scratch_state, pod, scratch.all_rows()) is None
    assert plugin.filter_nodes(state, pod, table.all_rows()).status_at(0) == RWOP
    assert plugin.pre_filter_extensions().add_pod(scratch_state, pod, victim, node) is None
    assert plugin.filter_nodes(scratch_state, pod, scratch.all_rows()).status_at(0) == RWOP


def test_claim_use_counts_follow_node_removal_and_row_moves():
    table = table_of(nodes("a", "b", "c"), [pod_with_claims("u", "claim-with-rwop-1", node="a")])
    plugin = VolumeRestrictions(None, FakeHandle(RWOP_1))
    pod = PodInfo(pod_with_claims("new", "claim-with-rwop-1"))
    assert plugin.pre_filter(CycleState(), pod, table.all_rows())[1] is None
    table.remove_node("a")
    assert plugin.pre_filter(CycleState(), pod, table.all_rows())[1] == SKIP
    table.set_node(NodeInfo(nodes("a")[0]))
    info = table.get("c")
    user = PodInfo(pod_with_claims("u2", "claim-with-rwop-1", node="c"))
    info.add_pod(user)
    table.pod_added(info, user)
    table.remove_node("b")
    assert plugin.pre_filter(CycleState(), pod, table.all_rows())[1] is None


@pytest.mark.parametrize(("pod", "deleted", "want"), [
    (pod_with("p", GCE), pod_with("d", GCE), QueueingHint.Queue),
    (pod_with("p", GCE), pod_with("d", GCE2), QueueingHint.QueueSkip),
    (pod_with("p", AWS), pod_with("d", AWS), QueueingHint.Queue),
    (pod_with("p", AWS), pod_with("d", AWS2), QueueingHint.QueueSkip),
    (pod_with("p", RBD), pod_with("d", RBD), QueueingHint.Queue),
    (pod_with("p", RBD), pod_with("d", RBD2), QueueingHint.QueueSkip),
    (pod_with("p", ISCSI), pod_with("d", ISCSI), QueueingHint.Queue),
    (pod_with("p", ISCSI), pod_with("d", ISCSI2), QueueingHint.QueueSkip),
    (pod_with_claims("pod1", "claim-rwop"), pod_with_claims("pod2", "claim-rwop"), QueueingHint.Queue),
    (pod_with_claims("pod1", "claim-1-rwop"), pod_with_claims("pod2", "claim-2-rwop"), QueueingHint.QueueSkip),
    (pod_with_claims("pod1", "claim-rwop"), pod_with_claims("pod2", "claim-rwop", namespace="other"), QueueingHint.QueueSkip),
], ids=["queue-gce-conflict", "skip-gce-no-conflict", "queue-aws-conflict", "skip-aws-no-conflict", "queue-rbd-conflict",
        "skip-rbd-no-conflict", "queue-iscsi-conflict", "skip-iscsi-no-conflict", "queue-has-same-claim", "skip-no-same-claim",
        "skip-other-namespace"])
def test_hint_after_pod_deleted(pod, deleted, want):
    assert VolumeRestrictions.is_schedulable_after_pod_deleted(pod, deleted, None) == want


@pytest.mark.parametrize(("pod", "pvc", "want"), [
    (pod_with_claims("p", "claim-with-rwx-1", "claim-with-rwx-2"), make_pvc("claim-with-rwx-1"), QueueingHint.Queue),
    (pod_with_claims("p", "claim-with-rwx-1"), make_pvc("claim-with-rwx-2"), QueueingHint.QueueSkip),
    (pod_with_claims("p", "claim-with-rwx-1", namespace="kube-system"), make_pvc("claim-with-rwx-1"), QueueingHint.QueueSkip),
], ids=["queue-new-object-pvc-belong-pod", "skip-new-object-unused", "skip-new-object-namespace-not-equal-pod"])
def test_hint_after_pvc_added(pod, pvc, want):
    assert VolumeRestrictions.is_schedulable_after_pvc_added(pod, None, pvc) == want
