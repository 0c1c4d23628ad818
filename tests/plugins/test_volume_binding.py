"""VolumeBinding (upstream volume_binding_test.go TestVolumeBinding, binder_test.go's FindPodVolumes /
AssumePodVolumes / BindPodVolumes / checkBindings cases, storage capacity, and the queueing hints)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from kubesched.api.kinds import kind_named, object_key
from kubesched.api.types import NodeInfo, PodInfo
from kubesched.api.volume import ANN_BIND_COMPLETED, ANN_SELECTED_NODE, bind_volume_to_claim
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config.args import UtilizationShapePoint, VolumeBindingArgs
from kubesched.scheduler.features import FeatureGates
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import QueueingHint
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.volumebinding._binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    Binding,
    PodVolumes,
    Provision,
)
from kubesched.scheduler.plugins.volumebinding.volume_binding import BindingError, VolumeBinding
from kubesched.simulator.virtualtime import run_virtual
from kubesched.simulator.volumes import FakeVolumeController
from tests.helpers import make_node
from tests.plugins.test_volume_common import (
    HOSTNAME,
    ZONE,
    FakeHandle,
    make_capacity,
    make_csidriver,
    make_csinode,
    make_pv,
    make_pvc,
    make_sc,
    pod_with,
    pod_with_claims,
    table_of,
)

REGION = "topology.kubernetes.io/region"
IMMEDIATE_SC = make_sc("immediate-sc", mode="Immediate")
WAIT_SC = make_sc("wait-sc")
WAIT_HDD_SC = make_sc("wait-hdd-sc")
PROVISIONER = "csi.example.com"
SKIP = Status(Code.Skip)
CAPACITY_GATES = FeatureGates({"StorageCapacityScoring": True})
PREFER_FULL = [UtilizationShapePoint(0, 0), UtilizationShapePoint(100, 10)]


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UnschedulableAndUnresolvable, *reasons)


def plugin_with(*objects: dict, gates: FeatureGates | None = None, shape: list | None = None, client=None,
                timeout: int = 300) -> VolumeBinding:
    handle = FakeHandle(IMMEDIATE_SC, WAIT_SC, WAIT_HDD_SC, *objects, gates=gates, client=client)
    args = VolumeBindingArgs(bind_timeout_seconds=timeout, shape=shape)
    if shape is None:
        args.set_defaults(handle.feature_gates)
    return VolumeBinding(args, handle)


def run(plugin: VolumeBinding, pod: dict, node_list: list[dict]) -> tuple[Status | None, list, list[int], CycleState]:
    """PreFilter, Filter on every node, PreScore and Score on the feasible ones (0 elsewhere)."""
    table = table_of(node_list)
    state, info = CycleState(), PodInfo(pod)
    _, pre = plugin.pre_filter(state, info, table.all_rows())
    if pre is not None:
        return pre, [None] * len(node_list), [0] * len(node_list), state
    verdict = plugin.filter_nodes(state, info, table.all_rows())
    statuses = [None if verdict is None else verdict.status_at(i) for i in range(len(node_list))]
    scores = [0] * len(node_list)
    feasible = np.array([i for i, s in enumerate(statuses) if s is None], dtype=np.int64)
    batch = table.batch(feasible)
    if len(feasible) and plugin.pre_score(state, info, batch) is None:
        for i, score in zip(feasible, plugin.score_nodes(state, info, batch)):
            scores[int(i)] = int(score)
    return None, statuses, scores, state


LOCAL_PVS = [
    make_pv("pv-a-0", "wait-sc", "200Gi", affinity={HOSTNAME: ["node-a"]}),
    make_pv("pv-a-1", "wait-sc", "200Gi", affinity={HOSTNAME: ["node-a"]}),
    make_pv("pv-b-0", "wait-sc", "100Gi", affinity={HOSTNAME: ["node-b"]}),
    make_pv("pv-b-1", "wait-sc", "100Gi", affinity={HOSTNAME: ["node-b"]}),
]
HDD_PVS = [
    make_pv("pv-a-2", "wait-hdd-sc", "200Gi", affinity={HOSTNAME: ["node-a"]}),
    make_pv("pv-a-3", "wait-hdd-sc", "200Gi", affinity={HOSTNAME: ["node-a"]}),
    make_pv("pv-b-2", "wait-hdd-sc", "100Gi", affinity={HOSTNAME: ["node-b"]}),
    make_pv("pv-b-3", "wait-hdd-sc", "100Gi", affinity={HOSTNAME: ["node-b"]}),
]


def zonal(name: str, capacity: str, zone: str) -> dict:
    return make_pv(name, "wait-sc", capacity, affinity={REGION: [f"region-{zone}"], ZONE: [f"zone-{zone}"]})


ZONAL_NODES = [make_node(f"zone-{z}-node-{n}", labels={REGION: f"region-{z}", ZONE: f"zone-{z}"}) for z in "abc" for n in "ab"]
ZONAL_PVS = [zonal("pv-a-0", "200Gi", "a"), zonal("pv-a-1", "200Gi", "a"), zonal("pv-b-0", "100Gi", "b"), zonal("pv-b-1", "100Gi", "b")]
ABC = [make_node("node-a"), make_node("node-b"), make_node("node-c")]
BIND = unresolvable(ERR_REASON_BIND_CONFLICT)


@pytest.mark.parametrize(("pod", "node_list", "objects", "want_pre", "want_filter", "want_scores", "gates", "shape"), [
    pytest.param(pod_with("pod-a"), [make_node("node-a")], [], SKIP, [None], [0], None, None, id="pod has not pvcs"),
    pytest.param(pod_with_claims("pod-a", "pvc-a"), [make_node("node-a")],
                 [make_pvc("pvc-a", "wait-sc", volume="pv-a", bound=True), make_pv("pv-a", "wait-sc")],
                 None, [None], [0], None, None, id="all bound"),
    pytest.param(pod_with_claims("pod-a", "pvc-a"), [make_node("node-a")], [],
                 unresolvable('persistentvolumeclaim "pvc-a" not found'), [None], [0], None, None, id="PVC does not exist"),
    pytest.param(pod_with_claims("pod-a", "pvc-a", "pvc-b"), [make_node("node-a")],
                 [make_pvc("pvc-a", "wait-sc", volume="pv-a", bound=True)],
                 unresolvable('persistentvolumeclaim "pvc-b" not found'), [None], [0], None, None, id="Part of PVCs do not exist"),
    pytest.param(pod_with_claims("pod-a", "pvc-a"), [make_node("node-a")], [make_pvc("pvc-a", "immediate-sc")],
                 unresolvable("pod has unbound immediate PersistentVolumeClaims"), [None], [0], None, None,
                 id="immediate claims not bound"),
    pytest.param(pod_with_claims("pod-a", "pvc-a"), [make_node("node-a")], [make_pvc("pvc-a", "wait-sc")],
                 None, [BIND], [0], None, None, id="unbound claims no matches"),
    pytest.param(pod_with_claims("pod-a", "pvc-a", "pvc-b"), [make_node("node-a", labels={"foo": "barbar"})],
                 [make_pvc("pvc-a", "wait-sc", volume="pv-a", bound=True), make_pvc("pvc-b", "wait-sc"),
                  make_pv("pv-a", "wait-sc", affinity={"foo": ["bar"]})],
                 None, [unresolvable(ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT)], [0], None, None,
                 id="bound and unbound unsatisfied"),
    pytest.param(pod_with_claims("pod-a", "pvc-a"), [make_node("node-a")], [make_pvc("pvc-a", "wait-sc", volume="pv-a", bound=True)],
                 None, [unresolvable(ERR_REASON_PV_NOT_EXIST)], [0], None, None, id="pv not found"),
    pytest.param(pod_with_claims("pod-a", "pvc-a"), [make_node("node-a")],
                 [make_pvc("pvc-a", "wait-sc", volume="pv-a", bound=True, phase="Lost")],
                 unresolvable('persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"'), [None], [0], None, None,
                 id="pv not found claim lost"),
    pytest.param(pod_with_claims("pod-a", "pvc-a"), [make_node("node-a")], [make_pvc("pvc-a", "wait-sc", deleting=True)],
                 unresolvable('persistentvolumeclaim "pvc-a" is being deleted'), [None], [0], None, None, id="pvc being deleted"),
    pytest.param(pod_with_claims("pod-a", "pvc-a"), ABC, [make_pvc("pvc-a", "wait-sc", request="50Gi"), *LOCAL_PVS],
                 None, [None, None, BIND], [25, 50, 0], CAPACITY_GATES, PREFER_FULL, id="local volumes with close capacity are preferred"),
    pytest.param(pod_with_claims("pod-a", "pvc-0", "pvc-1"), ABC,
                 [make_pvc("pvc-0", "wait-sc", request="50Gi"), make_pvc("pvc-1", "wait-hdd-sc", request="100Gi"), *LOCAL_PVS, *HDD_PVS],
                 None, [None, None, BIND], [38, 75, 0], CAPACITY_GATES, PREFER_FULL,
                 id="local volumes with close capacity are preferred (multiple pvcs)"),
    pytest.param(pod_with_claims("pod-a", "pvc-a"), ZONAL_NODES, [make_pvc("pvc-a", "wait-sc", request="50Gi"), *ZONAL_PVS],
                 None, [None, None, None, None, BIND, BIND], [25, 25, 50, 50, 0, 0], CAPACITY_GATES, PREFER_FULL,
                 id="zonal volumes with close capacity are preferred"),
    pytest.param(pod_with_claims("pod-a", "pvc-a"), ZONAL_NODES, [make_pvc("pvc-a", "wait-sc", request="50Gi"), *ZONAL_PVS],
                 None, [None, None, None, None, BIND, BIND], [15, 15, 30, 30, 0, 0], CAPACITY_GATES,
                 [UtilizationShapePoint(0, 0), UtilizationShapePoint(50, 3), UtilizationShapePoint(100, 5)],
                 id="zonal volumes with close capacity are preferred (custom shape)"),
    pytest.param(pod_with_claims("pod-a", "pvc-a"), ABC, [make_pvc("pvc-a", "wait-sc", request="50Gi"), *LOCAL_PVS],
                 None, [None, None, BIND], [0, 0, 0], None, None, id="no scores without the StorageCapacityScoring gate"),
])
def test_volume_binding(pod, node_list, objects, want_pre, want_filter, want_scores, gates, shape):
    pre, statuses, scores, _ = run(plugin_with(*objects, gates=gates, shape=shape), pod, node_list)
    assert pre == want_pre
    assert statuses == want_filter
    assert scores == want_scores


def test_default_capacity_scoring_shape_prefers_the_emptiest_volume():
    plugin = plugin_with(make_pvc("pvc-a", "wait-sc", request="50Gi"), *LOCAL_PVS, gates=CAPACITY_GATES)
    _, _, scores, _ = run(plugin, pod_with_claims("pod-a", "pvc-a"), ABC)
    assert scores == [75, 50, 0]


def test_ephemeral_volume_claims_must_exist_and_belong_to_the_pod():
    pod = pod_with("pod-a", {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}, uid="uid-pod-a")
    pre, *_ = run(plugin_with(), pod, [make_node("n")])
    assert pre == unresolvable('waiting for ephemeral volume controller to create the persistentvolumeclaim "pod-a-scratch"')
    pre, *_ = run(plugin_with(make_pvc("pod-a-scratch", "wait-sc", owner_uid="someone-else")), pod, [make_node("n")])
    assert pre == unresolvable("PVC default/pod-a-scratch was not created for pod default/pod-a (pod is not owner)")
    pre, statuses, *_ = run(plugin_with(make_pvc("pod-a-scratch", "wait-sc", owner_uid="uid-pod-a")), pod, [make_node("n")])
    assert pre is None and statuses == [BIND]


def test_storage_class_without_binding_mode_is_an_error():
    plugin = plugin_with(make_pvc("pvc-a", "odd"), make_sc("odd", mode=None))
    pre, *_ = run(plugin, pod_with_claims("pod-a", "pvc-a"), [make_node("n")])
    assert pre.code == Code.Error and pre.message() == 'VolumeBindingMode not set for StorageClass "odd"'


def test_pv_node_affinity_of_bound_claims_is_checked_per_node():
    plugin = plugin_with(make_pvc("pvc-a", "wait-sc", volume="pv-a", bound=True),
                         make_pv("pv-a", "wait-sc", affinity={ZONE: ["z1"]}, phase="Bound"))
    _, statuses, *_ = run(plugin, pod_with_claims("pod-a", "pvc-a"),
                          [make_node("a", labels={ZONE: "z1"}), make_node("b", labels={ZONE: "z2"}), make_node("c")])
    conflict = unresolvable(ERR_REASON_NODE_CONFLICT)
    assert statuses == [None, conflict, conflict]


def test_migrated_in_tree_pvs_are_checked_with_csi_topology_on_migrated_nodes():
    pv = make_pv("pd", "wait-sc", source={"gcePersistentDisk": {"pdName": "d"}}, affinity={ZONE: ["z1"]}, phase="Bound")
    plugin = plugin_with(make_pvc("pvc-a", "wait-sc", volume="pd", bound=True), pv,
                         make_csinode("migrated", migrated=["kubernetes.io/gce-pd"]))
    plugin.handle.put(make_csinode("plain"))
    node_list = [make_node("migrated", labels={ZONE: "z1"}), make_node("csi", labels={"topology.gke.io/zone": "z1"}),
                 make_node("plain", labels={ZONE: "z1"})]
    plugin.handle.put(make_csinode("csi", migrated=["kubernetes.io/gce-pd"]))
    _, statuses, *_ = run(plugin, pod_with_claims("pod-a", "pvc-a"), node_list)
    assert statuses == [unresolvable(ERR_REASON_NODE_CONFLICT), None, None]


def test_claims_take_distinct_volumes_smallest_claim_first():
    objects = [make_pvc("big", "wait-sc", request="5Gi"), make_pvc("small", "wait-sc", request="1Gi"),
               make_pv("pv-1", "wait-sc", "1Gi", affinity={HOSTNAME: ["n1"]}), make_pv("pv-5", "wait-sc", "5Gi", affinity={HOSTNAME: ["n1"]}),
               make_pv("pv-only-5", "wait-sc", "5Gi", affinity={HOSTNAME: ["n2"]})]
    plugin = plugin_with(*objects)
    _, statuses, _, state = run(plugin, pod_with_claims("p", "big", "small"), [make_node("n1"), make_node("n2")])
    assert statuses == [None, BIND]
    plan = state.get("VolumeBinding").pod_volumes("n1")
    assert [(b.pvc["metadata"]["name"], b.pv["metadata"]["name"]) for b in plan.static_bindings] == [("small", "pv-1"), ("big", "pv-5")]


def test_local_volumes_at_scale_take_the_fast_path_and_agree_with_the_general_one():
    node_list = [make_node(f"n{i}") for i in range(40)]
    pvs = [make_pv(f"pv-{i}-{j}", "wait-sc", f"{1 + (i + j) % 3}Gi", affinity={HOSTNAME: [f"n{i}"]}) for i in range(0, 40, 2) for j in range(2)]
    claims = [make_pvc("c1", "wait-sc", request="1Gi"), make_pvc("c2", "wait-sc", request="1Gi")]
    plugin = plugin_with(*claims, *pvs)
    _, statuses, _, state = run(plugin, pod_with_claims("p", "c1", "c2"), node_list)
    assert [s is None for s in statuses] == [i % 2 == 0 for i in range(40)]
    s = state.get("VolumeBinding")
    for i in range(0, 40, 2):
        chosen = sorted(b.pv["metadata"]["name"] for b in s.pod_volumes(f"n{i}").static_bindings)
        assert chosen == [f"pv-{i}-0", f"pv-{i}-1"]


# --- dynamic provisioning ---------------------------------------------------------------------------------
PROV_SC = make_sc("fast", provisioner=PROVISIONER, allowed=[{"matchLabelExpressions": [{"key": ZONE, "values": ["z1", "z2"]}]}])
Z_NODES = [make_node("n1", labels={ZONE: "z1"}), make_node("n2", labels={ZONE: "z2"}), make_node("n3", labels={ZONE: "z3"})]


def test_provisioning_follows_the_class_allowed_topologies():
    plugin = plugin_with(PROV_SC, make_pvc("c", "fast", request="10Gi"))
    _, statuses, _, state = run(plugin, pod_with_claims("p", "c"), Z_NODES)
    assert statuses == [None, None, BIND]
    plan = state.get("VolumeBinding").pod_volumes("n1")
    assert plan.static_bindings == [] and [p.pvc["metadata"]["name"] for p in plan.dynamic_provisions] == ["c"]


def test_no_provisioner_means_no_dynamic_provisioning():
    plugin = plugin_with(make_pvc("c", "wait-sc"))
    _, statuses, *_ = run(plugin, pod_with_claims("p", "c"), [make_node("n1")])
    assert statuses == [BIND]


@pytest.mark.parametrize(("tracked", "capacities", "want"), [
    pytest.param(False, [], [None, None, BIND], id="driver without capacity tracking"),
    pytest.param(True, [], [unresolvable(ERR_REASON_NOT_ENOUGH_SPACE)] * 2 + [BIND], id="no capacity objects"),
    pytest.param(True, [make_capacity("c1", "fast", "100Gi", {ZONE: "z1"}), make_capacity("c2", "fast", "5Gi", {ZONE: "z2"})],
                 [None, unresolvable(ERR_REASON_NOT_ENOUGH_SPACE), BIND], id="capacity per zone"),
    pytest.param(True, [make_capacity("c1", "fast", "100Gi", {ZONE: "z1"}, max_size="5Gi"), make_capacity("c2", "fast", "10Gi", {ZONE: "z2"})],
                 [unresolvable(ERR_REASON_NOT_ENOUGH_SPACE), None, BIND], id="maximum volume size wins over capacity"),
    pytest.param(True, [make_capacity("other", "slow", "100Gi", {ZONE: "z1"}), make_capacity("nowhere", "fast", "100Gi", None)],
                 [unresolvable(ERR_REASON_NOT_ENOUGH_SPACE)] * 2 + [BIND], id="other class or no topology"),
])
def test_storage_capacity(tracked, capacities, want):
    plugin = plugin_with(PROV_SC, make_csidriver(PROVISIONER, tracked), make_pvc("c", "fast", request="10Gi"), *capacities)
    _, statuses, *_ = run(plugin, pod_with_claims("p", "c"), Z_NODES)
    assert statuses == want


def test_capacity_scoring_of_provisioned_claims_uses_the_pool_capacity():
    objects = [PROV_SC, make_csidriver(PROVISIONER, True), make_pvc("c", "fast", request="10Gi"),
               make_capacity("c1", "fast", "100Gi", {ZONE: "z1"}), make_capacity("c2", "fast", "20Gi", {ZONE: "z2"})]
    _, statuses, scores, _ = run(plugin_with(*objects, gates=CAPACITY_GATES), pod_with_claims("p", "c"), Z_NODES)
    assert statuses == [None, None, BIND]
    assert scores == [90, 50, 0]


def test_more_than_63_claims_to_provision_are_each_checked():
    """Nodes are grouped by the set of claims left to provision: with 70 claims every one still
    counts, here the largest (last in matching order), which may only be provisioned in z1, while
    claim 63 takes a static volume."""
    z1_only = make_sc("z1-only", provisioner=PROVISIONER, allowed=[{"matchLabelExpressions": [{"key": ZONE, "values": ["z1"]}]}])
    claims = [make_pvc(f"c{i}", "mid" if i == 63 else "fast", request="1Gi") for i in range(69)]
    claims.append(make_pvc("big", "z1-only", request="100Gi"))
    plugin = plugin_with(PROV_SC, z1_only, make_sc("mid"), make_pv("pv-mid", "mid"), *claims)
    _, statuses, _, state = run(plugin, pod_with_claims("p", *(c["metadata"]["name"] for c in claims)), Z_NODES)
    assert statuses == [None, BIND, BIND]
    plan = state.get("VolumeBinding").pod_volumes("n1")
    assert [b.pv["metadata"]["name"] for b in plan.static_bindings] == ["pv-mid"]
    assert len(plan.dynamic_provisions) == 69 and plan.dynamic_provisions[-1].pvc["metadata"]["name"] == "big"


def test_claims_see_the_volumes_of_their_class_as_volumes_come_and_go():
    """PreFilter lists a class's PVs from an index the informer events keep up to date."""
    plugin = VolumeBinding(None, FakeHandle(WAIT_SC, WAIT_HDD_SC, make_pvc("c", "wait-sc"), live=True))
    pod = PodInfo(pod_with_claims("p", "c"))

    def listed() -> list[str]:
        return [pv["metadata"]["name"] for pv in plugin.pod_volume_claims(pod).unbound_volumes["wait-sc"]]

    assert listed() == []
    for pv in (make_pv("a", "wait-sc"), make_pv("b", "wait-hdd-sc"), make_pv("c", "wait-sc")):
        plugin.handle.put(pv)
    assert listed() == ["a", "c"]
    plugin.handle.put(make_pv("b", "wait-sc", rv="2"))
    plugin.handle.put(make_pv("a", "wait-hdd-sc", rv="2"))
    plugin.handle.remove("PersistentVolume", "c")
    assert listed() == ["b"]
    claim = make_pvc("c", "wait-sc")
    assumed, _ = bind_volume_to_claim(make_pv("b", "wait-sc", rv="2"), claim)
    plugin.pv_cache.assume("b", assumed)
    assert plugin.pod_volume_claims(pod).unbound_volumes["wait-sc"] == [assumed]


def test_selected_node_claims_only_fit_their_node():
    claim = make_pvc("c", "fast", request="1Gi", annotations={ANN_SELECTED_NODE: "n2"})
    _, statuses, *_ = run(plugin_with(PROV_SC, claim), pod_with_claims("p", "c"), Z_NODES)
    assert statuses == [BIND, None, BIND]


def test_missing_storage_class_of_a_claim_to_provision_is_an_error():
    claim = make_pvc("c", "gone", request="1Gi", annotations={ANN_SELECTED_NODE: "n1"})
    plugin = plugin_with(claim)
    plugin.handle.put(make_sc("gone"))
    table = table_of(Z_NODES)
    state, pod = CycleState(), PodInfo(pod_with_claims("p", "c"))
    assert plugin.pre_filter(state, pod, table.all_rows()) == (None, None)
    plugin.handle.remove("StorageClass", "gone")
    status = plugin.filter_nodes(state, pod, table.all_rows()).status_at(0)
    assert status.code == Code.Error and status.message() == 'failed to find storage class "gone"'


# --- Reserve / Unreserve / PreBind --------------------------------------------------------------------------
def test_reserve_assumes_bindings_so_the_next_pod_cannot_take_the_same_volume():
    objects = [make_pvc("c1", "wait-sc"), make_pvc("c2", "wait-sc"), make_pv("pv", "wait-sc", affinity={HOSTNAME: ["n1"]})]
    plugin = plugin_with(*objects)
    _, statuses, _, state = run(plugin, pod_with_claims("p1", "c1"), [make_node("n1")])
    assert statuses == [None]
    assert plugin.reserve(state, PodInfo(pod_with_claims("p1", "c1", node="n1")), "n1") is None
    assumed = plugin.pv_cache.get("pv")
    assert assumed["spec"]["claimRef"]["name"] == "c1"
    _, statuses, *_ = run(plugin, pod_with_claims("p2", "c2"), [make_node("n1")])
    assert statuses == [BIND]
    plugin.unreserve(state, PodInfo(pod_with_claims("p1", "c1", node="n1")), "n1")
    assert "claimRef" not in plugin.pv_cache.get("pv")["spec"]
    _, statuses, *_ = run(plugin, pod_with_claims("p2", "c2"), [make_node("n1")])
    assert statuses == [None]


def test_unreserve_after_reserve_found_no_plan_leaves_other_assumptions_alone():
    """Reserve's plan (here: none, the node was unknown at Filter) is kept for Unreserve, which must
    not derive one again from Filter's row numbers once another node has taken the row."""
    claim = make_pvc("c", "wait-sc")
    pv = make_pv("pv-1", "wait-sc", affinity={HOSTNAME: ["n1"]})
    plugin = plugin_with(claim, pv)
    table = table_of([make_node("n1"), make_node("n2")])
    state, pod = CycleState(), PodInfo(pod_with_claims("p", "c"))
    plugin.pre_filter(state, pod, table.all_rows())
    plugin.filter_nodes(state, pod, table.all_rows())
    assert plugin.reserve(state, pod.bound_to("n3"), "n3") is None
    table.remove_node("n1")
    table.remove_node("n2")
    table.set_node(NodeInfo(make_node("n3")))  # takes n1's row of Filter's evaluation
    other, _ = bind_volume_to_claim(pv, make_pvc("other", "wait-sc"))
    plugin.pv_cache.assume("pv-1", other)
    plugin.unreserve(state, pod.bound_to("n3"), "n3")
    assert plugin.pv_cache.get("pv-1") is other


def test_check_bindings_errors_are_upstream_s():
    ebs = make_pv("ebs", "wait-sc", source={"awsElasticBlockStore": {"volumeID": "aws://z1/bad"}}, phase="Bound",
                  claim={"namespace": "default", "name": "c", "uid": "uid-pvc-c"})
    pvc = make_pvc("c", "wait-sc", volume="ebs", bound=True)
    pod = pod_with_claims("p", "c", node="n1")
    plugin = plugin_with(make_node("n1"), make_csinode("n1", migrated=["kubernetes.io/aws-ebs"]), pod, pvc, ebs)
    untranslatable = "could not translate pv: failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume (aws://z1/bad)"
    cases = [
        (PodVolumes([Binding(pvc, ebs)]), f"failed to translate pv to csi: {untranslatable}"),
        (PodVolumes([], [Provision(make_pvc("c", "wait-sc", volume="ebs", bound=True, annotations={ANN_SELECTED_NODE: "n1"}))]),
         untranslatable),
        (PodVolumes([Binding(make_pvc("gone", "wait-sc"), ebs)]), 'failed to check binding: could not find v1.PersistentVolumeClaim "default/gone"'),
        (PodVolumes([Binding(pvc, make_pv("gone", "wait-sc"))]), 'failed to check binding: could not find v1.PersistentVolume "gone"'),
        (PodVolumes([], [Provision(make_pvc("gone", "wait-sc"))]),
         'failed to check provisioning pvc: could not find v1.PersistentVolumeClaim "default/gone"'),
    ]
    plugin.handle.put(make_pvc("c", "wait-sc", volume="ebs", bound=True, annotations={ANN_SELECTED_NODE: "n1"}))
    for plan, message in cases:
        with pytest.raises(BindingError) as err:
            plugin.check_bindings(PodInfo(pod), "n1", plan)
        assert str(err.value) == message


def test_prebind_is_skipped_when_everything_is_bound():
    plugin = plugin_with(make_pvc("pvc-a", "wait-sc", volume="pv-a", bound=True), make_pv("pv-a", "wait-sc"))
    _, _, _, state = run(plugin, pod_with_claims("pod-a", "pvc-a"), [make_node("n")])
    assert plugin.reserve(state, PodInfo(pod_with_claims("pod-a", "pvc-a", node="n")), "n") is None
    assert plugin.pre_bind_pre_flight(state, PodInfo(pod_with_claims("pod-a", "pvc-a", node="n")), "n") == SKIP


def test_assumed_claims_are_dropped_once_the_informer_has_a_newer_version():
    plugin = plugin_with(PROV_SC, make_pvc("c", "fast", request="1Gi"))
    _, _, _, state = run(plugin, pod_with_claims("p", "c"), Z_NODES)
    pod = PodInfo(pod_with_claims("p", "c", node="n1"))
    assert plugin.reserve(state, pod, "n1") is None
    assert plugin.pvc_cache.get("default/c")["metadata"]["annotations"][ANN_SELECTED_NODE] == "n1"
    plugin.handle.put(make_pvc("c", "fast", request="1Gi", rv="2"))
    assert ANN_SELECTED_NODE not in (plugin.pvc_cache.get("default/c")["metadata"].get("annotations") or {})


class StoreHandle(FakeHandle):
    """A handle whose informer caches are the object store itself."""

    def __init__(self, store: ObjectStore, gates: FeatureGates | None = None, stale: dict | None = None) -> None:
        super().__init__(gates=gates, client=MemoryClient(store))
        self.object_store = store
        self.stale = stale or {}

    def objects(self, kind: str) -> dict[str, dict]:
        if kind in self.stale:
            return self.stale[kind]
        return {object_key(o): o for o in self.object_store.iter_all(kind_named(kind))}


def _seed(store: ObjectStore, *objects: dict) -> None:
    for obj in objects:
        obj = {k: v for k, v in obj.items()}
        obj["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "uid")}
        kind = kind_named(obj["kind"]) if obj["kind"] != "StorageClass" else kind_named("StorageClass")
        store.create(kind, obj)


async def _schedule_one(store: ObjectStore, plugin: VolumeBinding, pod: dict, node_names: list[str]) -> tuple[str, Status | None]:
    table = NodeTable.from_infos([])
    for name in node_names:
        from kubesched.api.types import NodeInfo

        table.set_node(NodeInfo(store.get(kind_named("Node"), None, name)))
    state, info = CycleState(), PodInfo(pod)
    assert plugin.pre_filter(state, info, table.all_rows())[1] is None
    verdict = plugin.filter_nodes(state, info, table.all_rows())
    fits = [n for i, n in enumerate(node_names) if verdict is None or verdict.status_at(i) is None]
    host = fits[0]
    assumed = info.bound_to(host)
    assert plugin.reserve(state, assumed, host) is None
    assert plugin.pre_bind_pre_flight(state, assumed, host) is None
    return host, await plugin.pre_bind(state, assumed, host)


def test_prebind_provisions_through_the_api_and_waits_for_the_controller():
    async def main():
        store = ObjectStore(seed=1)
        _seed(store, make_node("n1", labels={ZONE: "z1"}), PROV_SC, make_pvc("c", "fast", request="1Gi"))
        pod = store.create(kind_named("Pod"), pod_with_claims("p", "c"))
        controller = FakeVolumeController(store)
        controller.start()
        plugin = VolumeBinding(VolumeBindingArgs(bind_timeout_seconds=30), StoreHandle(store))
        start = asyncio.get_running_loop().time()
        host, status = await _schedule_one(store, plugin, pod, ["n1"])
        elapsed = asyncio.get_running_loop().time() - start
        await controller.stop()
        pvc = store.get(kind_named("PersistentVolumeClaim"), "default", "c")
        return host, status, pvc, elapsed

    host, status, pvc, elapsed = run_virtual(main())
    assert host == "n1" and status is None
    assert pvc["metadata"]["annotations"][ANN_SELECTED_NODE] == "n1"
    assert pvc["metadata"]["annotations"][ANN_BIND_COMPLETED] == "yes" and pvc["spec"]["volumeName"]
    assert elapsed == pytest.approx(1.0)


def test_prebind_binds_a_static_volume_through_the_api():
    async def main():
        store = ObjectStore(seed=2)
        _seed(store, make_node("n1"), make_pvc("c", "wait-sc"), make_pv("local", "wait-sc", affinity={HOSTNAME: ["n1"]}),
              WAIT_SC)
        pod = store.create(kind_named("Pod"), pod_with_claims("p", "c"))
        controller = FakeVolumeController(store)
        controller.start()
        plugin = VolumeBinding(VolumeBindingArgs(bind_timeout_seconds=30), StoreHandle(store))
        _, status = await _schedule_one(store, plugin, pod, ["n1"])
        await controller.stop()
        return status, store.get(kind_named("PersistentVolumeClaim"), "default", "c"), store.get(kind_named("PersistentVolume"), None, "local")

    status, pvc, pv = run_virtual(main())
    assert status is None
    assert pvc["spec"]["volumeName"] == "local" and pv["status"]["phase"] == "Bound"
    assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]


def test_prebind_times_out_without_a_pv_controller():
    async def main():
        store = ObjectStore(seed=3)
        _seed(store, make_node("n1", labels={ZONE: "z1"}), PROV_SC, make_pvc("c", "fast", request="1Gi"))
        pod = store.create(kind_named("Pod"), pod_with_claims("p", "c"))
        plugin = VolumeBinding(VolumeBindingArgs(bind_timeout_seconds=5), StoreHandle(store))
        start = asyncio.get_running_loop().time()
        _, status = await _schedule_one(store, plugin, pod, ["n1"])
        return status, asyncio.get_running_loop().time() - start

    status, elapsed = run_virtual(main())
    assert status.code == Code.Error and status.message() == "binding volumes: context deadline exceeded"
    assert elapsed == pytest.approx(5.0)


def test_prebind_fails_when_the_provisioner_gives_up():
    async def main():
        store = ObjectStore(seed=4)
        _seed(store, make_node("n1", labels={ZONE: "z1"}), PROV_SC, make_csidriver(PROVISIONER, True),
              make_pvc("c", "fast", request="10Gi"), make_capacity("pool", "fast", "50Gi", {ZONE: "z1"}))
        pod = store.create(kind_named("Pod"), pod_with_claims("p", "c"))
        # the scheduler still sees the pool as it was; it has shrunk since
        seen = {"kube-system/pool": make_capacity("pool", "fast", "50Gi", {ZONE: "z1"})}
        store.mutate(kind_named("CSIStorageCapacity"), "kube-system", "pool", lambda c: c.update(capacity="1Gi"))
        plugin = VolumeBinding(VolumeBindingArgs(bind_timeout_seconds=30), StoreHandle(store, stale={"CSIStorageCapacity": seen}))
        controller = FakeVolumeController(store)
        controller.start()
        _, status = await _schedule_one(store, plugin, pod, ["n1"])
        await controller.stop()
        return status

    status = run_virtual(main())
    assert status.code == Code.Error and status.message() == 'binding volumes: provisioning failed for PVC "c"'


# --- queueing hints ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("pod", "pvc", "want"), [
    (pod_with_claims("p", "pvc1"), make_pvc("pvc1"), QueueingHint.Queue),
    (pod_with_claims("p", "pvc1"), make_pvc("pvc2"), QueueingHint.QueueSkip),
    (pod_with_claims("p", "pvc1", namespace="ns"), make_pvc("pvc1"), QueueingHint.QueueSkip),
    (pod_with("p", {"name": "e", "ephemeral": {}}), make_pvc("p-e"), QueueingHint.Queue),
], ids=["claim-of-the-pod", "unrelated-claim", "other-namespace", "ephemeral-claim-of-the-pod"])
def test_hint_after_pvc_change(pod, pvc, want):
    assert VolumeBinding.is_schedulable_after_pvc_change(pod, None, pvc) == want


def test_hints_for_storage_classes_csinodes_capacities_and_drivers():
    pod = pod_with_claims("p", "c")
    terms = [{"matchLabelExpressions": [{"key": ZONE, "values": ["z1"]}]}]
    assert VolumeBinding.is_schedulable_after_storage_class_change(pod, None, WAIT_SC) == QueueingHint.Queue
    assert VolumeBinding.is_schedulable_after_storage_class_change(pod, WAIT_SC, make_sc("wait-sc", allowed=terms)) == QueueingHint.Queue
    assert VolumeBinding.is_schedulable_after_storage_class_change(pod, WAIT_SC, dict(WAIT_SC, parameters={"a": "b"})) == QueueingHint.QueueSkip
    old = make_csinode("n")
    assert VolumeBinding.is_schedulable_after_csinode_change(pod, None, old) == QueueingHint.Queue
    assert VolumeBinding.is_schedulable_after_csinode_change(pod, old, make_csinode("n", migrated=["kubernetes.io/gce-pd"])) == QueueingHint.Queue
    assert VolumeBinding.is_schedulable_after_csinode_change(pod, old, make_csinode("n", {"d": 3})) == QueueingHint.QueueSkip
    cap = make_capacity("c", "fast", "10Gi")
    assert VolumeBinding.is_schedulable_after_capacity_change(pod, None, cap) == QueueingHint.Queue
    assert VolumeBinding.is_schedulable_after_capacity_change(pod, cap, make_capacity("c", "fast", "20Gi")) == QueueingHint.Queue
    assert VolumeBinding.is_schedulable_after_capacity_change(pod, cap, make_capacity("c", "fast", "20Gi", max_size="5Gi")) == QueueingHint.QueueSkip
    inline = pod_with("p", {"name": "v", "csi": {"driver": PROVISIONER}})
    assert VolumeBinding.is_schedulable_after_csidriver_change(inline, make_csidriver(PROVISIONER, True),
                                                               make_csidriver(PROVISIONER, False)) == QueueingHint.Queue
    assert VolumeBinding.is_schedulable_after_csidriver_change(pod, make_csidriver(PROVISIONER, True),
                                                               make_csidriver(PROVISIONER, False)) == QueueingHint.QueueSkip
