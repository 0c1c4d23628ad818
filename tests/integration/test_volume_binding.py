"""Upstream's test/integration/volumescheduling/volume_binding_test.go (TestVolumeBinding,
TestVolumeBindingRescheduling), end to end on the embedded cluster with its fake PV controller and
provisioner standing in for kube-controller-manager's. Each upstream case is a parametrized id
named as upstream names it."""

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
