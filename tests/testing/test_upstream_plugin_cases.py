"""Upstream 1.35 plugin test cases run through ``PluginHarness``, with upstream's literal expected
statuses, for the cases where the harness and the plugins once disagreed with kube-scheduler:
reason strings (VolumeBinding, VolumeRestrictions), generic ephemeral volumes counted by
NodeVolumeLimits, queue sorting of pods built with a bare ``spec.priority``, NodeAffinity's
conflicting ``matchFields``, TaintToleration's comparison operators against a non-integer taint,
and VolumeZone with a class that has no binding mode. Each test id is upstream's case name."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.apierrors import Forbidden
from kubesched.testing import PluginHarness, Status
from tests.helpers import make_node, make_pod
from tests.plugins.test_volume_common import make_csinode, make_pv, make_pvc, make_sc, pod_with, pod_with_claims

UNRESOLVABLE = "UnschedulableAndUnresolvable"
NODE_AFFINITY_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
RWOP_CONFLICT = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
POD_AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
EBS = "ebs.csi.aws.com"


# --- VolumeBinding (volume_binding_test.go TestVolumeBinding) -----------------------------------------
def test_volume_binding_bound_and_unbound_unsatisfied() -> None:
    """Upstream case "bound and unbound unsatisfied": a bound PV whose node affinity the node
    misses and an unbound claim with no PV give both reasons, in upstream's words."""
    harness = PluginHarness("VolumeBinding", nodes=[make_node("node-a", labels={"foo": "barbar"})], objects=[
        make_sc("wait-sc"), make_pvc("pvc-a", "wait-sc", volume="pv-a", bound=True), make_pvc("pvc-b", "wait-sc"),
        make_pv("pv-a", "wait-sc", affinity={"foo": ["bar"]}, phase="Bound"),
    ])
    result = harness.run(pod_with_claims("pod-a", "pvc-a", "pvc-b"))
    assert result.pre_filter.is_success
    assert result.filter == {"node-a": Status(UNRESOLVABLE, [NODE_AFFINITY_CONFLICT, BIND_CONFLICT])}


# --- VolumeRestrictions (volume_restrictions_test.go TestAccessModeConflicts) -------------------------
@pytest.mark.parametrize(("pod", "want"), [
    pytest.param(pod_with_claims("pod-with-one-conflict", "claim-with-rwop-1"), Status("Unschedulable", [RWOP_CONFLICT]),
                 id="access mode conflict, unschedulable"),
    pytest.param(pod_with_claims("pod-with-two-conflicts", "claim-with-rwop-1", "claim-with-rwop-2"),
                 Status("Unschedulable", [RWOP_CONFLICT]), id="two conflicts, unschedulable"),
])
def test_volume_restrictions_access_mode_conflicts(pod: dict, want: Status) -> None:
    rwop = ["ReadWriteOncePod"]
    harness = PluginHarness("VolumeRestrictions", nodes=[make_node("node-1")],
                            objects=[make_pvc("claim-with-rwop-1", modes=rwop), make_pvc("claim-with-rwop-2", modes=rwop)],
                            pods=[pod_with_claims("pod-with-two-pvcs", "claim-with-rwop-1", "claim-with-rwop-2", node="node-1")])
    assert harness.run(pod).filter == {"node-1": want}


# --- NodeVolumeLimits (csi_test.go TestCSILimits) -----------------------------------------------------
def _ephemeral_pod(name: str, uid: str, *volumes: str, node: str | None = None) -> dict:
    """Upstream's ephemeral volume pods: namespace "test", a fixed uid the claims' owner
    references name."""
    vols = [{"name": v, "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}} for v in volumes]
    return pod_with(name, *vols, namespace="test", uid=uid, node=node)


def _ephemeral_claim(name: str, owner: str) -> dict:
    return make_pvc(name, "csi-sc", namespace="test", owner_uid=owner)


def _ebs_claims(*indexes: int) -> list[dict]:
    out: list[dict] = []
    for i in indexes:
        out += [make_pv(f"csi-ebs-{i}", csi=(EBS, f"csi-ebs-{i}"), phase="Bound"),
                make_pvc(f"csi-ebs-{i}", volume=f"csi-ebs-{i}", bound=True)]
    return out


RUNNING = pod_with_claims("running", "csi-ebs-3", node="node-1")
EBS_TWO = pod_with_claims("ebs-two", "csi-ebs-1", "csi-ebs-2", node="node-1")
EPHEMERAL_ON_NODE = _ephemeral_pod("abc", "12345", "xyz", node="node-1")


@pytest.mark.parametrize(("pod", "existing", "claims", "limit", "want"), [
    pytest.param(_ephemeral_pod("abc", "12345", "xyz"), [], [_ephemeral_claim("abc-xyz", "12345")], None,
                 Status(), id="ephemeral volume unbound"),
    pytest.param(_ephemeral_pod("abc", "12345", "xyz"), [RUNNING, EBS_TWO], [_ephemeral_claim("abc-xyz", "12345")], 2,
                 Status("Unschedulable", [MAX_VOLUME_COUNT]), id="ephemeral doesn't when node volume limit <= pods CSI volume"),
    pytest.param(pod_with_claims("p", "csi-ebs-0"), [RUNNING, _ephemeral_pod("abc", "12345II", "x", "y", node="node-1")],
                 [_ephemeral_claim("abc-x", "12345II"), _ephemeral_claim("abc-y", "12345II")], 2,
                 Status("Unschedulable", [MAX_VOLUME_COUNT]), id="ephemeral doesn't when node volume limit <= pods ephemeral CSI volume"),
    pytest.param(pod_with_claims("p", "csi-ebs-0"), [RUNNING, EPHEMERAL_ON_NODE, EBS_TWO], [_ephemeral_claim("abc-xyz", "12345")], 3,
                 Status("Unschedulable", [MAX_VOLUME_COUNT]),
                 id="persistent doesn't when node volume limit <= pods ephemeral CSI volume + persistent volume"),
    pytest.param(pod_with_claims("p", "csi-ebs-0"), [RUNNING, EPHEMERAL_ON_NODE, EBS_TWO], [_ephemeral_claim("abc-xyz", "12345")], 5,
                 Status(), id="persistent okay when node volume limit > pods ephemeral CSI volume + persistent volume"),
])
def test_node_volume_limits_generic_ephemeral_volumes(pod: dict, existing: list[dict], claims: list[dict],
                                                      limit: int | None, want: Status) -> None:
    """The claims of generic ephemeral volumes belong to their pod by uid: the harness keeps the
    uids the test gives, so the volumes count (or fit) instead of failing ownership."""
    objects = [make_sc("csi-sc", mode="Immediate", provisioner=EBS), *_ebs_claims(0, 1, 2, 3), *claims,
               make_csinode("node-1", {EBS: limit})]
    harness = PluginHarness("NodeVolumeLimits", nodes=[make_node("node-1")], objects=objects, pods=existing)
    assert harness.run(pod).filter == {"node-1": want}


# --- PrioritySort (priority_sort_test.go TestLess) ----------------------------------------------------
def _with_priority(name: str, priority: int) -> dict:
    pod = make_pod(name)
    pod["spec"]["priority"] = priority
    return pod


@pytest.mark.parametrize(("p1", "p2", "queued", "expected"), [
    pytest.param(10, 100, (None, None), False, id="p1.priority less than p2.priority"),
    pytest.param(100, 10, (None, None), True, id="p1.priority greater than p2.priority"),
    pytest.param(100, 100, (1.0, 2.0), True, id="equal priority. p1 is added to schedulingQ earlier than p2"),
    pytest.param(100, 100, (2.0, 1.0), False, id="equal priority. p2 is added to schedulingQ earlier than p1"),
])
def test_priority_sort_less_with_bare_priorities(p1: int, p2: int, queued: tuple[Any, Any], expected: bool) -> None:
    """Upstream builds these pods with ``spec.priority`` and no PriorityClass; the harness judges
    the sort, as upstream does, instead of refusing the pods as admission would."""
    harness = PluginHarness("PrioritySort")
    assert harness.less(_with_priority("p1", p1), _with_priority("p2", p2), *queued) is expected


def test_bare_priority_is_ignored_by_admission_but_a_class_still_resolves() -> None:
    """A PriorityClass name still resolves through admission; a priority contradicting its class is
    refused, as kube-apiserver refuses it."""
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100}
    harness = PluginHarness("PrioritySort", objects=[high])
    assert harness.less(make_pod("h", priorityClassName="high"), _with_priority("l", 10))
    contradicting = make_pod("x", priorityClassName="high")
    contradicting["spec"]["priority"] = 5
    with pytest.raises(Forbidden, match="the integer value of priority"):
        harness.less(contradicting, make_pod("y"))


# --- NodeAffinity (node_affinity_test.go TestNodeAffinity) --------------------------------------------
def test_node_affinity_pod_with_two_conflicting_match_field_requirements() -> None:
    """Upstream case "Pod with two conflicting mach field requirements" (sic): PreFilter reports
    the conflict, Filter on the node the pod's node affinity mismatch."""
    names = [{"key": "metadata.name", "operator": "In", "values": [n]} for n in ("node1", "node2")]
    pod = make_pod("p", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": names}]}}})
    result = PluginHarness("NodeAffinity", nodes=[make_node("node2", labels={"foo": "bar"})]).run(pod)
    assert result.pre_filter == Status(UNRESOLVABLE, ["pod affinity terms conflict"])
    assert result.filter == {"node2": Status(UNRESOLVABLE, [POD_AFFINITY_MISMATCH])}
    assert result.scheduler_view() == {"node2": result.pre_filter}


# --- TaintToleration (taint_toleration_test.go TestTaintTolerationFilter) ------------------------------
def test_taint_toleration_gt_against_a_non_numeric_taint_value() -> None:
    """Upstream case "Pod with Gt toleration cannot be scheduled on node with non-numeric taint
    value": the status carries the parse error as its message."""
    node = make_node("node-a", taints=[{"key": "node.kubernetes.io/sla", "value": "high", "effect": "NoSchedule"}])
    pod = make_pod("pod1", tolerations=[{"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "950", "effect": "NoSchedule"}])
    harness = PluginHarness("TaintToleration", nodes=[node], feature_gates={"TaintTolerationComparisonOperators": True})
    want = 'failed to parse taint value "high" as int64: must be a valid decimal integer in canonical form'
    assert harness.run(pod).filter == {"node-a": Status(UNRESOLVABLE, [want])}


# --- VolumeZone (volume_zone_test.go TestWithBinding) -------------------------------------------------
@pytest.mark.parametrize(("admission", "want"), [
    pytest.param(False, 'VolumeBindingMode not set for StorageClass "class-immediate"', id="unbound volume immediate binding mode"),
    pytest.param(True, "PersistentVolume had no name", id="unbound volume immediate binding mode, class defaulted by the API server"),
])
def test_volume_zone_unbound_claim_of_a_class_without_binding_mode(admission: bool, want: str) -> None:
    """Upstream's fake lister holds a class without ``volumeBindingMode``; ``admission=False`` keeps
    it so, while a cluster defaults the mode to Immediate and the unbound claim's PV is missing."""
    sc = make_sc("class-immediate", unset_mode=True)
    pvc = make_pvc("pvc-immediate-sc", "class-immediate")
    pod = pod_with_claims("pod-1", "pvc-immediate-sc")
    node = make_node("host1", labels={"failure-domain.beta.kubernetes.io/zone": "us-west1-a", "uselessLabel": "none"})
    result = PluginHarness("VolumeZone", nodes=[node], objects=[sc, pvc], admission=admission).run(pod)
    assert result.pre_filter == Status(UNRESOLVABLE, [want])
    assert result.filter == {"host1": Status(UNRESOLVABLE, [want])}
