"""Upstream's test/integration/volumescheduling/volume_binding_test.go (TestVolumeBinding,
TestVolumeBindingRescheduling, TestPVAffinityConflict, TestVolumeProvision, TestCapacity), end to
end on the embedded cluster with its fake PV controller and provisioner standing in for
kube-controller-manager's. Each upstream case is a parametrized id named as upstream names it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.embedded import Cluster, embedded, run
from tests.integration.wrappers import node, pod

HOSTNAME = "kubernetes.io/hostname"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
MOCK_PROVISIONER = "kubernetes.io/mock-provisioner"
NODES = [node("node-1", {HOSTNAME: "node-1"}), node("node-2", {HOSTNAME: "node-2"})]


def storage_class(name: str, mode: str, provisioner: str = NO_PROVISIONER) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": provisioner, "volumeBindingMode": mode}


CLASSES = [storage_class("immediate", "Immediate"), storage_class("wait", "WaitForFirstConsumer")]


def local_pv(name: str, sc: str, on: str, prebound_claim: str = "") -> dict[str, Any]:
    """Upstream's ``makePV``: a 5Gi local volume pinned to ``on``, pre-bound to a claim if given."""
    spec: dict[str, Any] = {
        "storageClassName": sc, "capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"],
        "local": {"path": "/test-path"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [on]}]}]}}}
    if prebound_claim:
        spec["claimRef"] = {"name": prebound_claim, "namespace": "default"}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def claim(name: str, sc: str, prebound_volume: str = "") -> dict[str, Any]:
    """Upstream's ``makePVC``: 5Gi ReadWriteOnce of class ``sc``, pre-bound to a volume if given."""
    spec: dict[str, Any] = {"storageClassName": sc, "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "5Gi"}}}
    if prebound_volume:
        spec["volumeName"] = prebound_volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def claim_pod(name: str, *claims: str) -> dict[str, Any]:
    return pod(name, volumes=[{"name": f"vol{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)])


def _phase(cluster: Cluster, kind: str, name: str) -> str:
    obj = cluster.get(kind, name, "default" if kind == "PersistentVolumeClaim" else None)
    return str((obj.get("status") or {}).get("phase", ""))


VOLUME_BINDING_CASES = [
    pytest.param(claim_pod("pod-i-canbind", "pvc-i-canbind"), [local_pv("pv-i-canbind", "immediate", "node-1")],
                 [claim("pvc-i-canbind", "immediate")], [], [], False, id="immediate can bind"),
    pytest.param(claim_pod("pod-i-cannotbind", "pvc-i-cannotbind"), [], [], [claim("pvc-i-cannotbind", "immediate")], [], True,
                 id="immediate cannot bind"),
    pytest.param(claim_pod("pod-i-pvc-prebound", "pvc-i-prebound"), [local_pv("pv-i-pvc-prebound", "immediate", "node-1")],
                 [claim("pvc-i-prebound", "immediate", "pv-i-pvc-prebound")], [], [], False, id="immediate pvc prebound"),
    pytest.param(claim_pod("pod-i-pv-prebound", "pvc-i-pv-prebound"),
                 [local_pv("pv-i-prebound", "immediate", "node-1", "pvc-i-pv-prebound")],
                 [claim("pvc-i-pv-prebound", "immediate")], [], [], False, id="immediate pv prebound"),
    pytest.param(claim_pod("pod-w-canbind", "pvc-w-canbind"), [local_pv("pv-w-canbind", "wait", "node-1")],
                 [claim("pvc-w-canbind", "wait")], [], [], False, id="wait can bind"),
    pytest.param(claim_pod("pod-w-cannotbind", "pvc-w-cannotbind"), [], [], [claim("pvc-w-cannotbind", "wait")], [], True,
                 id="wait cannot bind"),
    pytest.param(claim_pod("pod-w-pvc-prebound", "pvc-w-prebound"), [local_pv("pv-w-pvc-prebound", "wait", "node-1")],
                 [claim("pvc-w-prebound", "wait", "pv-w-pvc-prebound")], [], [], False, id="wait pvc prebound"),
    pytest.param(claim_pod("pod-w-pv-prebound", "pvc-w-pv-prebound"),
                 [local_pv("pv-w-prebound", "wait", "node-1", "pvc-w-pv-prebound")],
                 [claim("pvc-w-pv-prebound", "wait")], [], [], False, id="wait pv prebound"),
    pytest.param(claim_pod("pod-w-canbind-2", "pvc-w-canbind-2", "pvc-w-canbind-3"),
                 [local_pv("pv-w-canbind-2", "wait", "node-2"), local_pv("pv-w-canbind-3", "wait", "node-2")],
                 [claim("pvc-w-canbind-2", "wait"), claim("pvc-w-canbind-3", "wait")], [],
                 [local_pv("pv-w-canbind-5", "wait", "node-1")], False, id="wait can bind two"),
    pytest.param(claim_pod("pod-w-cannotbind-2", "pvc-w-cannotbind-1", "pvc-w-cannotbind-2"), [], [],
                 [claim("pvc-w-cannotbind-1", "wait"), claim("pvc-w-cannotbind-2", "wait")],
                 [local_pv("pv-w-cannotbind-1", "wait", "node-2"), local_pv("pv-w-cannotbind-2", "wait", "node-1")], True,
                 id="wait cannot bind two"),
    pytest.param(claim_pod("pod-mix-bound", "pvc-w-canbind-4", "pvc-i-canbind-2"),
                 [local_pv("pv-w-canbind-4", "wait", "node-1"), local_pv("pv-i-canbind-2", "immediate", "node-1")],
                 [claim("pvc-w-canbind-4", "wait"), claim("pvc-i-canbind-2", "immediate")], [], [], False, id="mix immediate and wait"),
]


@pytest.mark.parametrize(("new", "pvs", "pvcs", "unbound_pvcs", "unbound_pvs", "should_fail"), VOLUME_BINDING_CASES)
def test_volume_binding(new: dict[str, Any], pvs: list[dict[str, Any]], pvcs: list[dict[str, Any]],
                        unbound_pvcs: list[dict[str, Any]], unbound_pvs: list[dict[str, Any]], should_fail: bool) -> None:
    """The pod is scheduled (or reported unschedulable); then the claims meant to bind are Bound and
    their volumes too, the others Pending and Available."""

    async def scenario() -> dict[str, str]:
        async with embedded(None, [*CLASSES, *NODES, *pvs, *unbound_pvs, *pvcs, *unbound_pvcs]) as cluster:
            cluster.create(new)
            name = new["metadata"]["name"]
            if should_fail:
                await cluster.unschedulable(name)
            else:
                await cluster.scheduled(name)
            phases = {c["metadata"]["name"]: _phase(cluster, "PersistentVolumeClaim", c["metadata"]["name"])
                      for c in [*pvcs, *unbound_pvcs]}
            phases |= {v["metadata"]["name"]: _phase(cluster, "PersistentVolume", v["metadata"]["name"]) for v in [*pvs, *unbound_pvs]}
            return phases

    phases = run(scenario)
    want = {**{c["metadata"]["name"]: "Bound" for c in pvcs}, **{c["metadata"]["name"]: "Pending" for c in unbound_pvcs},
            **{v["metadata"]["name"]: "Bound" for v in pvs}, **{v["metadata"]["name"]: "Available" for v in unbound_pvs}}
    assert phases == want


# --- TestVolumeBindingRescheduling ------------------------------------------------------------------------
@pytest.mark.parametrize(("new", "initial", "trigger"), [
    pytest.param(claim_pod("pod-reschedule-onclassadd-dynamic", "pvc-reschedule-onclassadd-dynamic"),
                 [claim("pvc-reschedule-onclassadd-dynamic", "local-storage")],
                 [storage_class("local-storage", "WaitForFirstConsumer", MOCK_PROVISIONER)],
                 id="reschedule on WaitForFirstConsumer dynamic storage class add"),
    pytest.param(claim_pod("pod-reschedule-onclassadd-static", "pvc-reschedule-onclassadd-static"),
                 [claim("pvc-reschedule-onclassadd-static", "local-storage")],
                 [storage_class("local-storage", "WaitForFirstConsumer"),
                  local_pv("pv-reschedule-onclassadd-static", "local-storage", "node-1")],
                 id="reschedule on WaitForFirstConsumer static storage class add"),
    pytest.param(claim_pod("pod-reschedule-onpvcadd", "pvc-reschedule-onpvcadd"),
                 [local_pv("pv-reschedule-onpvcadd", "wait", "node-1")], [claim("pvc-reschedule-onpvcadd", "wait")],
                 id="reschedule on delay binding PVC add"),
])
def test_volume_binding_rescheduling(new: dict[str, Any], initial: list[dict[str, Any]], trigger: list[dict[str, Any]]) -> None:
    """The pod is unschedulable until the missing class, volume or claim appears, then scheduled."""

    async def scenario() -> str:
        async with embedded(None, [*CLASSES, *NODES, *initial]) as cluster:
            cluster.create(new)
            name = new["metadata"]["name"]
            await cluster.unschedulable(name)
            cluster.create(*trigger)
            return await cluster.scheduled(name)

    assert run(scenario) in {"node-1", "node-2"}


# --- TestPVAffinityConflict ----------------------------------------------------------------------------
@pytest.mark.parametrize("marker", [pytest.param("affinity", id="markNodeAffinity"),
                                    pytest.param("selector", id="markNodeSelector")])
def test_pv_affinity_conflict(marker: str) -> None:
    """A pod whose claim is bound to a local volume on node-1 but which is pinned to node-2 (by
    node affinity, or by node selector) is unschedulable, and the message names both causes with
    1.35's reasons: the pod's node affinity/selector and the PersistentVolume's node affinity."""
    nodes = [node(f"node-{i}", {HOSTNAME: f"node-{i}"}) for i in (1, 2, 3)]
    pin: dict[str, Any] = ({"nodeSelector": {HOSTNAME: "node-2"}} if marker == "selector" else {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["node-2"]}]}]}}}})
    local = pod("local-pod-1", volumes=[{"name": "vol0", "persistentVolumeClaim": {"claimName": "local-pvc"}}], **pin)

    async def scenario() -> tuple[str, str]:
        async with embedded(None, [*CLASSES, *nodes, local_pv("local-pv", "immediate", "node-1"),
                                   claim("local-pvc", "immediate")]) as cluster:
            await cluster.wait_for("the claim to bind", lambda: _phase(cluster, "PersistentVolumeClaim", "local-pvc") == "Bound")
            cluster.create(local)
            message = await cluster.unschedulable("local-pod-1")
            return str((cluster.pod("local-pod-1").get("status") or {}).get("phase")), message

    phase, message = run(scenario)
    assert phase == "Pending"
    assert "node(s) didn't match Pod's node affinity/selector" in message
    assert "node(s) didn't match PersistentVolume's node affinity" in message


# --- TestVolumeProvision, TestCapacity -----------------------------------------------------------------
#: Upstream's ``provisionerPluginName``: its dynamic classes' provisioner, and the CSIDriver's name.
PROVISIONER = "mock-provisioner.kubernetes.io"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


def dynamic_classes() -> list[dict[str, Any]]:
    """``makeDynamicProvisionerStorageClass`` for "immediate", "wait" and "topomismatch" (wait,
    allowed only on node-2's hostname)."""
    mismatch = storage_class("topomismatch", "WaitForFirstConsumer", PROVISIONER)
    mismatch["allowedTopologies"] = [{"matchLabelExpressions": [{"key": HOSTNAME, "values": ["node-2"]}]}]
    return [storage_class("immediate", "Immediate", PROVISIONER), storage_class("wait", "WaitForFirstConsumer", PROVISIONER),
            mismatch]


def _provisioned(cluster: Cluster, name: str) -> bool:
    pvc = cluster.get("PersistentVolumeClaim", name, "default")
    return SELECTED_NODE in ((pvc.get("metadata") or {}).get("annotations") or {})


@pytest.mark.parametrize(("new", "pvs", "bound", "provisioned", "unbound", "should_fail"), [
    pytest.param(claim_pod("pod-pvc-canprovision", "pvc-canprovision"), [], [], [claim("pvc-canprovision", "wait")], [], False,
                 id="wait provisioned"),
    pytest.param(claim_pod("pod-pvc-topomismatch", "pvc-topomismatch"), [], [], [], [claim("pvc-topomismatch", "topomismatch")],
                 True, id="topolgy unsatisfied"),
    pytest.param(claim_pod("pod-pvc-canbind-or-provision", "pvc-w-canbind", "pvc-canprovision"),
                 [local_pv("pv-w-canbind", "wait", "node-1")], [claim("pvc-w-canbind", "wait")],
                 [claim("pvc-canprovision", "wait")], [], False, id="wait one bound, one provisioned"),
    pytest.param(claim_pod("pod-i-pv-prebound-w-provisioned", "pvc-i-pv-prebound", "pvc-canprovision"),
                 [local_pv("pv-i-prebound", "immediate", "node-1", "pvc-i-pv-prebound")], [claim("pvc-i-pv-prebound", "immediate")],
                 [claim("pvc-canprovision", "wait")], [], False, id="one immediate pv prebound, one wait provisioned"),
    pytest.param(claim_pod("pod-w-pv-prebound-w-provisioned", "pvc-w-pv-prebound", "pvc-canprovision"),
                 [local_pv("pv-w-prebound", "wait", "node-1", "pvc-w-pv-prebound")], [claim("pvc-w-pv-prebound", "wait")],
                 [claim("pvc-canprovision", "wait")], [], False, id="wait one pv prebound, one provisioned"),
    pytest.param(claim_pod("pod-i-unbound", "pvc-controller-provisioned"), [], [claim("pvc-controller-provisioned", "immediate")],
                 [], [], False, id="immediate provisioned by controller"),
])
def test_volume_provision(new: dict[str, Any], pvs: list[dict[str, Any]], bound: list[dict[str, Any]],
                          provisioned: list[dict[str, Any]], unbound: list[dict[str, Any]], should_fail: bool) -> None:
    """On one node, with dynamically provisioning classes: claims bind to matching volumes or get
    volumes provisioned for the chosen node (``volume.kubernetes.io/selected-node``); a class whose
    topology excludes the node leaves the pod unschedulable and its claim Pending. (Upstream also
    ran these with CSIStorageCapacity off; the gate is gone in 1.35.)"""

    async def scenario() -> tuple[dict[str, str], dict[str, bool], dict[str, str]]:
        async with embedded(None, [*dynamic_classes(), NODES[0], *pvs, *bound, *provisioned, *unbound]) as cluster:
            cluster.create(new)
            name = new["metadata"]["name"]
            await (cluster.unschedulable(name) if should_fail else cluster.scheduled(name))
            claims = [c["metadata"]["name"] for c in [*bound, *provisioned, *unbound]]
            phases = {c: _phase(cluster, "PersistentVolumeClaim", c) for c in claims}
            selected = {c["metadata"]["name"]: _provisioned(cluster, c["metadata"]["name"]) for c in provisioned}
            return phases, selected, {v["metadata"]["name"]: _phase(cluster, "PersistentVolume", v["metadata"]["name"]) for v in pvs}

    phases, selected, volumes = run(scenario)
    assert phases == {**{c["metadata"]["name"]: "Bound" for c in [*bound, *provisioned]},
                      **{c["metadata"]["name"]: "Pending" for c in unbound}}
    assert all(selected.values())
    assert set(volumes.values()) <= {"Bound"}


@pytest.mark.parametrize(("capacity_supported", "have_capacity"), [
    pytest.param(False, False, id="baseline"),
    pytest.param(True, False, id="out of space"),
    pytest.param(True, True, id="with space"),
    pytest.param(False, True, id="ignored"),
])
def test_capacity(capacity_supported: bool, have_capacity: bool) -> None:
    """With a CSIDriver that publishes storage capacity, a WaitForFirstConsumer claim is
    provisioned only where a CSIStorageCapacity has room (6Gi for the 5Gi claim): without one the
    pod is unschedulable and the claim Pending. Capacity objects of a driver that does not publish
    capacity are ignored."""
    objects: list[dict[str, Any]] = [*dynamic_classes(), NODES[0], claim("pvc-canprovision", "wait")]
    if capacity_supported:
        objects.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": PROVISIONER},
                        "spec": {"storageCapacity": True}})
    if have_capacity:
        objects.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                        "metadata": {"name": "foo-capacity", "namespace": "default"}, "storageClassName": "wait",
                        "nodeTopology": {}, "capacity": "6Gi"})
    should_fail = capacity_supported and not have_capacity

    async def scenario() -> tuple[str, bool]:
        async with embedded(None, objects) as cluster:
            cluster.create(claim_pod("pod-pvc-canprovision", "pvc-canprovision"))
            if should_fail:
                await cluster.unschedulable("pod-pvc-canprovision")
            else:
                await cluster.scheduled("pod-pvc-canprovision")
            return _phase(cluster, "PersistentVolumeClaim", "pvc-canprovision"), _provisioned(cluster, "pvc-canprovision")

    phase, selected = run(scenario)
    assert (phase, selected) == (("Pending", False) if should_fail else ("Bound", True))
