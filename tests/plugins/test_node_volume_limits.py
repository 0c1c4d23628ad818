"""NodeVolumeLimits (upstream nodevolumelimits/csi_test.go: TestCSILimits, TestCSILimitsQHint,
TestCSILimitsAddedPVCQHint, TestCSILimitsDeletedVolumeAttachmentQHint), plus the incremental per-node
index: changes of claims, PVs, CSINodes and VolumeAttachments, and preemption's scratch tables."""

from __future__ import annotations

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import QueueingHint
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.nodevolumelimits.node_volume_limits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, NodeVolumeLimits
from tests.helpers import make_node
from tests.plugins.test_volume_common import (
    FakeHandle,
    make_csinode,
    make_pv,
    make_pvc,
    make_sc,
    pod_with,
    pod_with_claims,
    pvc_volume,
    table_of,
)

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
EBS_IN_TREE = "kubernetes.io/aws-ebs"
HOSTPATH = "kubernetes.io/hostpath"
NODE = "node-1"
EXCEEDED = Status(Code.Unschedulable, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
SKIP = Status(Code.Skip)


def fixtures(*drivers: str) -> list[dict]:
    """Upstream's fake listers: per driver four bound claims ``csi-<driver>-<j>`` (CSI PVs, AWS EBS or
    host path ones for the in-tree names), an unbound claim with a class (csi-4), one without (csi-5),
    one bound to a missing PV (csi-6), and the class ``csi-sc`` provisioned by the first driver."""
    objects: list[dict] = [make_sc("csi-sc", mode="Immediate", provisioner=drivers[0])]
    for driver in drivers:
        for j in range(4):
            name = f"csi-{driver}-{j}"
            if driver == EBS_IN_TREE:
                pv = make_pv(name, source={"awsElasticBlockStore": {"volumeID": name}})
            elif driver == HOSTPATH:
                pv = make_pv(name, source={"hostPath": {"path": "/tmp"}})
            else:
                pv = make_pv(name, csi=(driver, name))
            objects += [pv, make_pvc(name, volume=name, bound=True)]
    objects += [make_pvc("csi-4", "csi-sc"), make_pvc("csi-5"), make_pvc("csi-6", "csi-sc", volume="missing in action")]
    return objects


def csinode(source: str | None, drivers: tuple[str, ...], limit: int) -> list[dict]:
    if source is None:
        return []
    limits = {d: (limit if source == "csinode" else None) for d in drivers}
    return [make_csinode(NODE, limits, migrated=[EBS_IN_TREE])]


def attachments(count: int, driver: str) -> list[dict]:
    out = []
    for i in range(count):
        out.append(make_pv(f"va-pv-{i}", csi=(driver, f"va-handle-{i}")))
        out.append({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": f"va-{i}"},
                    "spec": {"attacher": driver, "nodeName": NODE, "source": {"persistentVolumeName": f"va-pv-{i}"}}})
    return out


def on_node(pod: dict) -> dict:
    pod = dict(pod, spec=dict(pod["spec"], nodeName=NODE))
    uid = pod["metadata"]["uid"]
    if uid.startswith("uid-"):  # builders' default uid: make each placed copy distinct
        pod["metadata"] = dict(pod["metadata"], uid=f"{uid}-{id(pod)}")
    return pod


def claims_pod(*claims: str) -> dict:
    return pod_with_claims("p", *claims)


RUNNING = claims_pod("csi-ebs.csi.aws.com-3")
PENDING = claims_pod("csi-4")
UNBOUND_2 = claims_pod("csi-4")
MISSING_PV = claims_pod("csi-6")
NO_SC = claims_pod("csi-5")
GCE_TWO = claims_pod(f"csi-{GCE}-1", f"csi-{GCE}-2")
IN_TREE_ONE = claims_pod("csi-kubernetes.io/aws-ebs-0")
IN_TREE_TWO = claims_pod("csi-kubernetes.io/aws-ebs-1", "csi-kubernetes.io/aws-ebs-2")
EBS_ONE = claims_pod("csi-ebs.csi.aws.com-0")
EBS_TWO = claims_pod("csi-ebs.csi.aws.com-1", "csi-ebs.csi.aws.com-2")
NON_MIGRATABLE = claims_pod("csi-kubernetes.io/hostpath-0")
INLINE = pod_with("p", {"name": "v", "awsElasticBlockStore": {"volumeID": "aws-inline1"}})
INLINE_SAME_ID = pod_with("p", {"name": "v", "awsElasticBlockStore": {"volumeID": "csi-ebs.csi.aws.com-1"}})
CM_SECRET = [{"name": "cm", "configMap": {}}, {"name": "s", "secret": {}}]
ONLY_CM_SECRET = pod_with("p", *CM_SECRET)
PVC_WITH_CM_SECRET = pod_with("p", *CM_SECRET, pvc_volume("csi-ebs.csi.aws.com-0"))
EPHEMERAL = pod_with("abc", {"name": "xyz", "ephemeral": {}}, namespace="test", uid="12345")
EPHEMERAL_TWO = pod_with("abc", {"name": "x", "ephemeral": {}}, {"name": "y", "ephemeral": {}}, namespace="test", uid="12345II")
EPHEMERAL_WITH_CM_SECRET = pod_with("abc", *CM_SECRET, {"name": "xyz", "ephemeral": {}}, namespace="test", uid="12345")
INLINE_WITH_CM_SECRET = pod_with("p", *CM_SECRET, {"name": "v", "awsElasticBlockStore": {"volumeID": "aws-inline1"}})
EPHEMERAL_CLAIM = make_pvc("abc-xyz", "csi-sc", namespace="test", owner_uid="12345")
CONFLICTING_CLAIM = make_pvc("abc-xyz", "csi-sc", namespace="test")
CLAIM_X = make_pvc("abc-x", "csi-sc", namespace="test", owner_uid="12345II")
CLAIM_Y = make_pvc("abc-y", "csi-sc", namespace="test", owner_uid="12345II")
BOTH = (EBS_IN_TREE, EBS)


@pytest.mark.parametrize(("new", "existing", "extra", "max_vols", "drivers", "source", "va", "want", "want_pre"), [
    pytest.param(EBS_ONE, [], [], 2, (EBS,), "csinode", 2, EXCEEDED, None,
                 id="should count VolumeAttachments towards volume limit when no pods exist"),
    pytest.param(EBS_ONE, [], [], 2, (EBS,), "csinode", 1, None, None,
                 id="should schedule pod when VolumeAttachments count does not exceed limit"),
    pytest.param(EBS_ONE, [RUNNING, EBS_TWO], [], 4, (EBS,), "csinode", 0, None, None, id="fits when node volume limit >= new pods CSI volume"),
    pytest.param(EBS_ONE, [RUNNING, EBS_TWO], [], 2, (EBS,), "csinode", 0, EXCEEDED, None, id="doesn't when node volume limit <= pods CSI volume"),
    pytest.param(EBS_ONE, [RUNNING, EBS_TWO], [], 2, (EBS,), "csinode-with-no-limit", 0, None, None,
                 id="should when driver does not support volume limits"),
    pytest.param(EBS_ONE, [PENDING, EBS_TWO], [], 2, (EBS,), "csinode", 0, EXCEEDED, None,
                 id="count pending PVCs towards volume limit <= pods CSI volume"),
    pytest.param(EBS_ONE, [PENDING, UNBOUND_2, EBS_TWO], [], 4, (EBS,), "csinode", 0, None, None,
                 id="count multiple pending pvcs towards volume limit >= pods CSI volume"),
    pytest.param(EBS_ONE, [MISSING_PV, EBS_TWO], [], 2, (EBS,), "csinode", 0, EXCEEDED, None,
                 id="should count PVCs with invalid PV name but valid SC"),
    pytest.param(EBS_ONE, [RUNNING, NO_SC], [], 2, (EBS,), "csinode", 0, None, None, id="don't count pvcs with missing SC towards volume limit"),
    pytest.param(EBS_ONE, [GCE_TWO, EBS_TWO], [], 2, (EBS, GCE), "csinode", 0, EXCEEDED, None,
                 id="count pvcs with the same type towards volume limit"),
    pytest.param(GCE_TWO, [EBS_TWO, RUNNING], [], 2, (EBS, GCE), "csinode", 0, None, None,
                 id="don't count pvcs with different type towards volume limit"),
    pytest.param(IN_TREE_ONE, [IN_TREE_TWO], [], 2, BOTH, "csinode", 0, EXCEEDED, None, id="should count in-tree volumes if migration is enabled"),
    pytest.param(INLINE, [IN_TREE_TWO], [], 0, BOTH, None, 0, None, None, id="nil csi node"),
    pytest.param(PENDING, [IN_TREE_TWO], [], 2, BOTH, "csinode", 0, EXCEEDED, None,
                 id="should count unbound in-tree volumes if migration is enabled"),
    pytest.param(IN_TREE_ONE, [IN_TREE_TWO], [], 2, BOTH, "csinode-with-no-limit", 0, None, None,
                 id="should not limit pod if volume used does not report limits"),
    pytest.param(NON_MIGRATABLE, [EBS_TWO], [], 2, (HOSTPATH, EBS), "csinode", 0, None, None, id="should not count non-migratable in-tree volumes"),
    pytest.param(INLINE, [IN_TREE_TWO], [], 2, BOTH, "csinode", 0, EXCEEDED, None, id="should count in-tree inline volumes if migration is enabled"),
    pytest.param(IN_TREE_ONE, [EBS_TWO], [], 2, BOTH, "csinode", 0, EXCEEDED, None,
                 id="should count in-tree and csi volumes if migration is enabled (when scheduling in-tree volumes)"),
    pytest.param(INLINE, [EBS_TWO, IN_TREE_ONE], [], 3, BOTH, "csinode", 0, EXCEEDED, None,
                 id="should count in-tree, inline and csi volumes if migration is enabled (when scheduling in-tree volumes)"),
    pytest.param(INLINE_SAME_ID, [EBS_TWO, IN_TREE_ONE], [], 3, BOTH, "csinode", 0, None, None,
                 id="should not count in-tree, inline and csi volumes if migration is enabled (when scheduling in-tree volumes)"),
    pytest.param(EBS_ONE, [IN_TREE_TWO], [], 2, BOTH, "csinode", 0, EXCEEDED, None,
                 id="should count in-tree and csi volumes if migration is enabled (when scheduling csi volumes)"),
    pytest.param(EPHEMERAL, [], [], 0, (EBS,), "csinode-with-no-limit", 0,
                 Status(Code.UnschedulableAndUnresolvable, 'looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found'), None,
                 id="ephemeral volume missing"),
    pytest.param(EPHEMERAL, [], [CONFLICTING_CLAIM], 0, (EBS,), "csinode-with-no-limit", 0,
                 Status(Code.Error, "PVC test/abc-xyz was not created for pod test/abc (pod is not owner)"), None,
                 id="ephemeral volume not owned"),
    pytest.param(EPHEMERAL, [], [EPHEMERAL_CLAIM], 0, (EBS,), "csinode-with-no-limit", 0, None, None, id="ephemeral volume unbound"),
    pytest.param(EPHEMERAL, [RUNNING, EBS_TWO], [EPHEMERAL_CLAIM], 2, (EBS,), "csinode", 0, EXCEEDED, None,
                 id="ephemeral doesn't when node volume limit <= pods CSI volume"),
    pytest.param(EBS_ONE, [RUNNING, EPHEMERAL_TWO], [CLAIM_X, CLAIM_Y], 2, (EBS,), "csinode", 0, EXCEEDED, None,
                 id="ephemeral doesn't when node volume limit <= pods ephemeral CSI volume"),
    pytest.param(EBS_ONE, [RUNNING, EPHEMERAL, EBS_TWO], [EPHEMERAL_CLAIM], 3, (EBS,), "csinode", 0, EXCEEDED, None,
                 id="persistent doesn't when node volume limit <= pods ephemeral CSI volume + persistent volume"),
    pytest.param(EBS_ONE, [RUNNING, EPHEMERAL, EBS_TWO], [EPHEMERAL_CLAIM], 5, (EBS,), "csinode", 0, None, None,
                 id="persistent okay when node volume limit > pods ephemeral CSI volume + persistent volume"),
    pytest.param(ONLY_CM_SECRET, [], [], 2, (EBS,), "csinode", 0, None, SKIP, id="skip Filter when the pod only uses secrets and configmaps"),
    pytest.param(PVC_WITH_CM_SECRET, [], [], 2, (EBS,), "csinode", 0, None, None, id="don't skip Filter when the pod has pvcs"),
    pytest.param(EPHEMERAL_WITH_CM_SECRET, [], [], 0, (EBS,), "csinode-with-no-limit", 0,
                 Status(Code.UnschedulableAndUnresolvable, 'looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found'), None,
                 id="don't skip Filter when the pod has ephemeral volumes"),
    pytest.param(INLINE_WITH_CM_SECRET, [IN_TREE_TWO], [], 2, BOTH, "csinode", 0, EXCEEDED, None,
                 id="don't skip Filter when the pod has inline migratable volumes"),
])
def test_csi_limits(new, existing, extra, max_vols, drivers, source, va, want, want_pre):
    handle = FakeHandle(*fixtures(*drivers), *extra, *csinode(source, drivers, max_vols), *attachments(va, drivers[0]))
    plugin = NodeVolumeLimits(None, handle)
    table = table_of([make_node(NODE)], [on_node(p) for p in existing])
    state, pod = CycleState(), PodInfo(new)
    _, pre = plugin.pre_filter(state, pod, table.all_rows())
    assert pre == want_pre
    if pre is not None:
        return
    verdict = plugin.filter_nodes(state, pod, table.all_rows())
    status = None if verdict is None else verdict.status_at(0)
    if want is not None and want.code == Code.Error:
        assert status.code == Code.Error and status.message() == want.message()
    else:
        assert status == want


def _live(*objects: dict) -> tuple[FakeHandle, NodeVolumeLimits]:
    handle = FakeHandle(*objects, live=True)
    return handle, NodeVolumeLimits(None, handle)


def _filter(plugin: NodeVolumeLimits, table: NodeTable, pod: dict) -> list[Status | None]:
    state, info = CycleState(), PodInfo(pod)
    plugin.pre_filter(state, info, table.all_rows())
    verdict = plugin.filter_nodes(state, info, table.all_rows())
    return [None if verdict is None else verdict.status_at(i) for i in range(len(table))]


def test_counts_per_node_follow_pods_claims_csinodes_and_attachments():
    objects = [*fixtures(EBS), make_csinode("a", {EBS: 2}), make_csinode("b", {EBS: 2}), make_csinode("c", {EBS: 1})]
    handle, plugin = _live(*objects)
    table = table_of([make_node("a"), make_node("b"), make_node("c")],
                     [pod_with_claims("x", "csi-ebs.csi.aws.com-1", "csi-ebs.csi.aws.com-2", node="a"),
                      pod_with_claims("y", "csi-4", node="b")])
    new = pod_with_claims("p", "csi-ebs.csi.aws.com-0")
    assert _filter(plugin, table, new) == [EXCEEDED, None, None]
    # the pending claim of b binds to a volume the new pod also uses: b now shares it
    handle.put(make_pvc("csi-4", "csi-sc", volume="csi-ebs.csi.aws.com-0", bound=True, rv="2"))
    assert _filter(plugin, table, new) == [EXCEEDED, None, None]
    handle.put(make_csinode("b", {EBS: 0}))
    assert _filter(plugin, table, new) == [EXCEEDED, None, None]
    handle.put(make_pvc("csi-4", "csi-sc", rv="3"))
    assert _filter(plugin, table, new) == [EXCEEDED, EXCEEDED, None]
    # a VolumeAttachment fills c
    for obj in attachments(1, EBS):
        obj = dict(obj, spec=dict(obj["spec"], nodeName="c")) if obj["kind"] == "VolumeAttachment" else obj
        handle.put(obj)
    assert _filter(plugin, table, new) == [EXCEEDED, EXCEEDED, EXCEEDED]
    handle.remove("VolumeAttachment", "va-0")
    info = table.get("a")
    gone = info.remove_pod("uid-default-x")
    table.pod_removed(info, gone)
    assert _filter(plugin, table, new) == [None, EXCEEDED, None]


def test_scratch_tables_for_preemption_count_the_remaining_pods():
    _, plugin = _live(*fixtures(EBS), make_csinode(NODE, {EBS: 2}))
    table = table_of([make_node(NODE)], [on_node(RUNNING), on_node(EBS_TWO)])
    new = pod_with_claims("p", "csi-ebs.csi.aws.com-0")
    assert _filter(plugin, table, new) == [EXCEEDED]
    node = table.get(NODE).clone()
    victim = next(p for p in node.pods.values() if len(p.spec.get("volumes", [])) == 2)
    node.remove_pod(victim.uid)
    scratch = NodeTable.from_infos([node])
    assert _filter(plugin, scratch, new) == [None]
    assert _filter(plugin, table, new) == [EXCEEDED]


def test_error_resolving_an_existing_pod_fails_the_cycle_only_where_limits_apply():
    bad = pod_with("bad", {"name": "e", "ephemeral": {}}, node=NODE)
    handle, plugin = _live(*fixtures(EBS), make_pvc("bad-e", "csi-sc"), make_csinode(NODE, {EBS: 5}))
    table = table_of([make_node(NODE)], [bad])
    status = _filter(plugin, table, pod_with_claims("p", "csi-ebs.csi.aws.com-0"))[0]
    assert status.code == Code.Error and "was not created for pod default/bad" in status.message()
    handle.put(make_csinode(NODE, {GCE: 5}))  # any limit on the node: upstream counts the existing pods
    assert _filter(plugin, table, pod_with_claims("p", "csi-ebs.csi.aws.com-0"))[0].code == Code.Error
    handle.put(make_csinode(NODE, {EBS: None}))
    assert _filter(plugin, table, pod_with_claims("p", "csi-ebs.csi.aws.com-0")) == [None]


@pytest.mark.parametrize(("deleted", "scheduled", "want"), [
    (pod_with_claims("d", "placeholder"), True, QueueingHint.Queue),
    (pod_with("d", {"name": "v", "awsElasticBlockStore": {}}), True, QueueingHint.Queue),
    (pod_with("d"), True, QueueingHint.QueueSkip),
    (pod_with_claims("d", "csi-ebs.csi.aws.com-0"), False, QueueingHint.QueueSkip),
], ids=["deleted pod has a PVC", "deleted pod has an inline migratable volume", "deleted pod has no volume", "deleted pod not scheduled"])
def test_hint_after_pod_deleted(deleted, scheduled, want):
    if scheduled:
        deleted["spec"]["nodeName"] = NODE
    assert NodeVolumeLimits.is_schedulable_after_pod_deleted(pod_with_claims("p", "csi-ebs.csi.aws.com-2"), deleted, None) == want


@pytest.mark.parametrize(("pod", "pvc", "want"), [
    (pod_with("p", namespace="ns1"), make_pvc("pvc", namespace="ns2"), QueueingHint.QueueSkip),
    (pod_with_claims("p", "pvc1", namespace="ns1"), make_pvc("pvc1", namespace="ns1"), QueueingHint.Queue),
    (pod_with("pod1", {"name": "ephemeral", "ephemeral": {}}, namespace="ns1"), make_pvc("pod1-ephemeral", namespace="ns1"), QueueingHint.Queue),
    (pod_with_claims("p", "pvc1", namespace="ns1"), make_pvc("pvc2", namespace="ns1"), QueueingHint.QueueSkip),
    (pod_with("p", namespace="ns1"), make_pvc("pvc2", namespace="ns1"), QueueingHint.QueueSkip),
], ids=["other namespace", "same claim", "ephemeral claim", "other claim", "no claims"])
def test_hint_after_pvc_added(pod, pvc, want):
    assert NodeVolumeLimits.is_schedulable_after_pvc_added(pod, None, pvc) == want


def _va(source: dict, attacher: str) -> dict:
    return {"kind": "VolumeAttachment", "metadata": {"name": "volumeattachment1"},
            "spec": {"nodeName": "fake-node", "attacher": attacher, "source": source}}


PV_DETACHED = _va({"persistentVolumeName": "pv1"}, "test.storage.gke.io")
EBS_DETACHED = _va({"inlineVolumeSpec": {"csi": {"driver": EBS}}}, EBS)
INLINE_EBS = {"name": "v", "awsElasticBlockStore": {"volumeID": "test"}}


@pytest.mark.parametrize(("pod", "va", "want"), [
    (pod_with_claims("p", "pvc1", namespace="ns1"), PV_DETACHED, QueueingHint.Queue),
    (pod_with("p", INLINE_EBS, namespace="ns1"), EBS_DETACHED, QueueingHint.Queue),
    (pod_with("p", {"name": "v", "gcePersistentDisk": {"pdName": "test"}}, namespace="ns1"), EBS_DETACHED, QueueingHint.QueueSkip),
    (pod_with("p", INLINE_EBS, pvc_volume("pvc1"), namespace="ns1"), EBS_DETACHED, QueueingHint.Queue),
    (pod_with("p", INLINE_EBS, pvc_volume("pvc1"), namespace="ns1"), PV_DETACHED, QueueingHint.Queue),
    (pod_with_claims("p", "pvc2", namespace="ns1"), PV_DETACHED, QueueingHint.Queue),
    (pod_with_claims("p", "not-yet-created", namespace="ns1"), EBS_DETACHED, QueueingHint.Queue),
    (pod_with("p", INLINE_EBS, namespace="ns1"), PV_DETACHED, QueueingHint.QueueSkip),
    (pod_with("p", namespace="ns1"), PV_DETACHED, QueueingHint.QueueSkip),
    (pod_with("p", INLINE_EBS, namespace="ns1"), _va({"persistentVolumeName": "pv1"}, EBS), QueueingHint.Queue),
], ids=["claim of the detached PV", "inline volume of the detached driver", "inline volume of another driver",
        "inline and claim volumes, inline detached", "inline and claim volumes, PV detached",
        "claim bound to another PV: the slot is the driver's", "claim not created yet",
        "inline volume, PV detached", "no volumes", "inline volume, a PV of its driver detached"])
def test_hint_after_volume_attachment_deleted_queues_pods_with_claims_or_the_detached_inline_driver(pod, va, want):
    assert NodeVolumeLimits.is_schedulable_after_volume_attachment_deleted(pod, va, None) == want


def test_hint_after_csinode_updated_wants_more_room():
    pod = pod_with_claims("p", "c")
    old = make_csinode(NODE, {EBS: 2})
    assert NodeVolumeLimits.is_schedulable_after_csinode_updated(pod, old, make_csinode(NODE, {EBS: 3})) == QueueingHint.Queue
    assert NodeVolumeLimits.is_schedulable_after_csinode_updated(pod, old, make_csinode(NODE, {EBS: None})) == QueueingHint.Queue
    assert NodeVolumeLimits.is_schedulable_after_csinode_updated(pod, old, make_csinode(NODE, {EBS: 1})) == QueueingHint.QueueSkip


def test_untranslatable_inline_volume_fails_only_nodes_where_its_migration_is_on():
    """An inline EBS volume counts (and must translate) only on nodes with a CSINode."""
    bad = pod_with("p", {"name": "v", "awsElasticBlockStore": {"volumeID": "aws://z1/bad"}})
    _, plugin = _live(*fixtures(EBS), make_csinode("a", {EBS: 5}))
    table = table_of([make_node("a"), make_node("b")])
    status_a, status_b = _filter(plugin, table, bad)
    assert status_a.code == Code.Error and status_a.message() == (
        "converting volume(v) from inline to csi: failed to translate Kubernetes ID to EBS Volume ID "
        "Invalid format for AWS volume (aws://z1/bad)")
    assert status_b is None
    # the same volume on a pod already there only matters where it counts
    table = table_of([make_node("a"), make_node("b")], [dict(bad, spec=dict(bad["spec"], nodeName="b"))])
    assert _filter(plugin, table, pod_with_claims("q", "csi-ebs.csi.aws.com-0")) == [None, None]


def test_error_resolving_an_existing_pod_fails_only_its_node():
    bad = pod_with("bad", {"name": "e", "ephemeral": {}}, node="a")
    _, plugin = _live(*fixtures(EBS), make_pvc("bad-e", "csi-sc"), make_csinode("a", {EBS: 5}), make_csinode("b", {EBS: 5}))
    table = table_of([make_node("a"), make_node("b")], [bad])
    status_a, status_b = _filter(plugin, table, pod_with_claims("p", "csi-ebs.csi.aws.com-0"))
    assert status_a.code == Code.Error and status_b is None


def test_profiles_sharing_a_table_count_an_unbound_claim_once():
    """Unbound claims are named by a handle that must be the same for every plugin instance: the
    table's index is built by whichever instance filters first."""
    handle = FakeHandle(*fixtures(EBS), make_csinode(NODE, {EBS: 1}), live=True)
    first, second = NodeVolumeLimits(None, handle), NodeVolumeLimits(None, handle)
    table = table_of([make_node(NODE)], [on_node(PENDING)])
    assert _filter(first, table, PENDING) == [None]
    assert _filter(second, table, PENDING) == [None]
    assert _filter(second, table, EBS_ONE) == [EXCEEDED]


def test_malformed_attach_limit_is_no_limit():
    _, plugin = _live(*fixtures(EBS), make_csinode(NODE, {EBS: "many"}))
    table = table_of([make_node(NODE)], [on_node(RUNNING), on_node(EBS_TWO)])
    assert _filter(plugin, table, EBS_ONE) == [None]
    old = make_csinode(NODE, {EBS: "many"})
    assert NodeVolumeLimits.is_schedulable_after_csinode_updated(EBS_ONE, old, make_csinode(NODE, {EBS: 3})) == QueueingHint.QueueSkip
