"""The embedded cluster's fake PV controller / provisioner, and WaitForFirstConsumer claims scheduled
end to end (scheduler, kubelet and volume controller on virtual time)."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.api.kinds import POD, kind_named
from kubesched.api.volume import ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config import load_dict
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.components import Components
from kubesched.simulator.kubelet import FakeKubelet
from kubesched.simulator.simulate import settle
from kubesched.simulator.virtualtime import run_virtual
from kubesched.simulator.volumes import FakeVolumeController
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock
from tests.helpers import make_node
from tests.plugins.test_volume_common import (
    HOSTNAME,
    ZONE,
    make_capacity,
    make_csidriver,
    make_csinode,
    make_pv,
    make_pvc,
    make_sc,
    pod_with_claims,
)

PV = kind_named("PersistentVolume")
PVC = kind_named("PersistentVolumeClaim")
CAPACITY = kind_named("CSIStorageCapacity")
PROVISIONER = "csi.example.com"


def fresh(obj: dict) -> dict:
    """A builder's object as a client would create it (no uid or resourceVersion)."""
    out = dict(obj)
    out["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in ("uid", "resourceVersion")}
    return out


def cluster(*objects: dict) -> ObjectStore:
    store = ObjectStore(seed=7, auto_create_namespaces=True)
    for obj in objects:
        store.create(kind_named(obj["kind"]), fresh(obj))
    return store


def drive(store: ObjectStore, action=None):
    """Run the controller until its watches are drained (and ``action`` in between)."""
    async def main():
        controller = FakeVolumeController(store)
        controller.start()
        await _drain(controller)
        if action is not None:
            action(store)
            await _drain(controller)
        await controller.stop()
        return controller

    return run_virtual(main())


async def _drain(controller: FakeVolumeController) -> None:
    for _ in range(50):
        await asyncio.sleep(0)
        if controller.idle():
            await asyncio.sleep(0)
            if controller.idle():
                return


def claim(store: ObjectStore, name: str, namespace: str = "default") -> dict:
    return store.get(PVC, namespace, name)


def test_unclaimed_volumes_become_available():
    store = cluster(make_pv("pv", phase=None))
    drive(store)
    assert store.get(PV, None, "pv")["status"]["phase"] == "Available"


def test_immediate_claims_bind_to_the_smallest_matching_volume():
    store = cluster(make_sc("std", mode="Immediate"), make_pv("big", "std", "10Gi"), make_pv("small", "std", "2Gi"),
                    make_pv("tiny", "std", "1Gi"), make_pvc("c", "std", request="2Gi"))
    drive(store)
    pvc, pv = claim(store, "c"), store.get(PV, None, "small")
    assert pvc["spec"]["volumeName"] == "small" and pvc["status"]["phase"] == "Bound"
    assert pvc["metadata"]["annotations"][ANN_BIND_COMPLETED] == "yes"
    assert pvc["metadata"]["annotations"][ANN_BOUND_BY_CONTROLLER] == "yes"
    assert pvc["status"]["capacity"] == {"storage": "2Gi"}
    assert pv["status"]["phase"] == "Bound" and pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
    assert store.get(PV, None, "big")["status"]["phase"] == "Available"


def test_immediate_claims_without_a_volume_are_provisioned_in_the_allowed_topology():
    allowed = [{"matchLabelExpressions": [{"key": ZONE, "values": ["z1"]}]}]
    store = cluster(make_sc("fast", mode="Immediate", provisioner=PROVISIONER, allowed=allowed), make_pvc("c", "fast", request="3Gi"))
    controller = drive(store)
    pvc = claim(store, "c")
    pv = store.get(PV, None, pvc["spec"]["volumeName"])
    assert controller.provisioned == 1 and pv["metadata"]["name"] == f"pvc-{pvc['metadata']['uid']}"
    assert pv["spec"]["csi"]["driver"] == PROVISIONER and pv["spec"]["capacity"] == {"storage": "3Gi"}
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z1"]}]}]
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == PROVISIONER


def test_wait_for_first_consumer_claims_wait_for_the_scheduler():
    store = cluster(make_node("n1", labels={ZONE: "z1"}), make_sc("fast", provisioner=PROVISIONER),
                    make_pv("free", "fast", "5Gi"), make_pvc("c", "fast", request="1Gi"))
    drive(store)
    assert not claim(store, "c")["spec"].get("volumeName")

    def select(s: ObjectStore) -> None:
        s.mutate(PVC, "default", "c", lambda o: o["metadata"].setdefault("annotations", {}).update({ANN_SELECTED_NODE: "n1"}))

    drive(store, select)
    pvc = claim(store, "c")
    pv = store.get(PV, None, pvc["spec"]["volumeName"])
    assert pv["metadata"]["name"].startswith("pvc-")
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z1"]}]}]


@pytest.mark.parametrize(("labels", "csinode", "want"), [
    ({ZONE: "z1"}, None, [{"key": ZONE, "operator": "In", "values": ["z1"]}]),
    ({}, None, [{"key": HOSTNAME, "operator": "In", "values": ["n1"]}]),
    ({ZONE: "z1", "rack": "r7"}, ["rack"], [{"key": "rack", "operator": "In", "values": ["r7"]}]),
], ids=["zone", "hostname without a zone", "driver topology keys from the CSINode"])
def test_provisioned_volumes_follow_the_selected_node_topology(labels, csinode, want):
    objects = [make_node("n1", labels=labels), make_sc("fast", provisioner=PROVISIONER),
               make_pvc("c", "fast", request="1Gi", annotations={ANN_SELECTED_NODE: "n1"})]
    if csinode:
        node = make_csinode("n1", {PROVISIONER: 10})
        node["spec"]["drivers"][0]["topologyKeys"] = csinode
        objects.append(node)
    store = cluster(*objects)
    drive(store)
    pv = store.get(PV, None, claim(store, "c")["spec"]["volumeName"])
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] == [{"matchExpressions": want}]


def test_volumes_prebound_by_the_scheduler_are_bound():
    store = cluster(make_node("n1"), make_sc("local"), make_pv("disk", "local", affinity={HOSTNAME: ["n1"]}), make_pvc("c", "local"))
    drive(store)
    uid = claim(store, "c")["metadata"]["uid"]

    def prebind(s: ObjectStore) -> None:
        s.mutate(PV, None, "disk", lambda o: o["spec"].update(claimRef={"kind": "PersistentVolumeClaim", "namespace": "default",
                                                                          "name": "c", "uid": uid}))

    drive(store, prebind)
    assert claim(store, "c")["spec"]["volumeName"] == "disk"
    assert store.get(PV, None, "disk")["status"]["phase"] == "Bound"


def test_provisioning_takes_storage_capacity_and_gives_up_without_room():
    store = cluster(make_node("n1", labels={ZONE: "z1"}), make_sc("fast", provisioner=PROVISIONER), make_csidriver(PROVISIONER, True),
                    make_capacity("pool", "fast", "10Gi", {ZONE: "z1"}, max_size="8Gi"),
                    make_pvc("a", "fast", request="6Gi", annotations={ANN_SELECTED_NODE: "n1"}),
                    make_pvc("b", "fast", request="6Gi", annotations={ANN_SELECTED_NODE: "n1"}))
    drive(store)
    pool = store.get(CAPACITY, "kube-system", "pool")
    assert pool["capacity"] == "4Gi" and pool["maximumVolumeSize"] == "4Gi"
    bound = [name for name in "ab" if claim(store, name)["spec"].get("volumeName")]
    assert bound == ["a"]
    assert ANN_SELECTED_NODE not in claim(store, "b")["metadata"]["annotations"]


def test_deleted_claims_release_or_delete_their_volumes():
    store = cluster(make_node("n1", labels={ZONE: "z1"}), make_sc("fast", provisioner=PROVISIONER), make_sc("std", mode="Immediate"),
                    make_csidriver(PROVISIONER, True), make_capacity("pool", "fast", "10Gi", {ZONE: "z1"}),
                    make_pvc("dyn", "fast", request="4Gi", annotations={ANN_SELECTED_NODE: "n1"}),
                    make_pv("static", "std", "1Gi"), make_pvc("st", "std", request="1Gi"))
    drive(store)
    provisioned = claim(store, "dyn")["spec"]["volumeName"]
    assert store.get(CAPACITY, "kube-system", "pool")["capacity"] == "6Gi"

    def delete(s: ObjectStore) -> None:
        s.delete(PVC, "default", "dyn")
        s.delete(PVC, "default", "st")

    drive(store, delete)
    assert store.try_get(PV, None, provisioned) is None
    assert store.get(CAPACITY, "kube-system", "pool")["capacity"] == "10Gi"
    assert store.get(PV, None, "static")["status"]["phase"] == "Released"


@pytest.mark.parametrize("topology", [{ZONE: "z1"}, None], ids=["pool with a topology", "pool without one"])
def test_an_immediate_volume_gives_its_space_back_when_deleted(topology):
    store = cluster(make_sc("fast", mode="Immediate", provisioner=PROVISIONER), make_csidriver(PROVISIONER, True),
                    make_capacity("pool", "fast", "10Gi", topology))

    async def main() -> list[str]:
        controller = FakeVolumeController(store)
        controller.start()
        left = []
        for step in (lambda: store.create(PVC, fresh(make_pvc("c", "fast", request="4Gi"))),
                     lambda: store.delete(PVC, "default", "c")):
            step()
            await _drain(controller)
            left.append(store.get(CAPACITY, "kube-system", "pool")["capacity"])
        await controller.stop()
        return left

    assert run_virtual(main()) == ["6Gi", "10Gi"]
    assert not list(store.iter_all(PV))


def test_a_claim_whose_volume_is_deleted_is_lost():
    store = cluster(make_sc("std", mode="Immediate"), make_pv("pv", "std", "1Gi"), make_pvc("c", "std", request="1Gi"))
    drive(store, lambda s: s.delete(PV, None, "pv"))
    assert claim(store, "c")["status"]["phase"] == "Lost"


def test_claims_bound_to_missing_volumes_are_lost():
    store = cluster(make_pvc("c", "std", volume="gone", bound=True))
    drive(store)
    assert claim(store, "c")["status"]["phase"] == "Lost"


# --- end to end ---------------------------------------------------------------------------------------------
#: Only the plugins this test is about (and what scheduling needs), whatever else is registered.
CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": "default-scheduler", "plugins": {"multiPoint": {
        "disabled": [{"name": "*"}],
        "enabled": [{"name": n} for n in ("PrioritySort", "NodeResourcesFit", "VolumeRestrictions", "NodeVolumeLimits",
                                          "VolumeBinding", "VolumeZone", "DefaultBinder")],
    }}}],
}


def schedule(*objects: dict, pods: list[dict]) -> ObjectStore:
    async def main():
        loop = asyncio.get_running_loop()
        clock = LoopClock(loop, wall_start=VIRTUAL_EPOCH)
        store = ObjectStore(clock, seed=11, auto_create_namespaces=True)
        for obj in objects:
            store.create(kind_named(obj["kind"]), fresh(obj))
        for pod in pods:
            store.create(POD, fresh(pod))
        kubelet, controller = FakeKubelet(store), FakeVolumeController(store)
        kubelet.start()
        controller.start()
        sched = Scheduler(MemoryClient(store), load_dict(CONFIG), clock=clock, seed=11)
        await sched.start()
        runner = loop.create_task(sched.run())
        try:
            await settle(sched, store, Components({"kubelet": kubelet, "controller": controller}))
        finally:
            await sched.stop()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await kubelet.stop()
            await controller.stop()
        return store

    return run_virtual(main())


def node_of(store: ObjectStore, name: str) -> str:
    return (store.get(POD, "default", name).get("spec") or {}).get("nodeName", "")


def test_wait_for_first_consumer_pods_bind_to_the_node_of_their_local_volume():
    objects = [make_node("n1"), make_node("n2"), make_node("n3"), make_sc("local"),
               make_pv("disk-2", "local", "10Gi", affinity={HOSTNAME: ["n2"]}), make_pvc("data", "local", request="5Gi")]
    store = schedule(*objects, pods=[pod_with_claims("app", "data")])
    assert node_of(store, "app") == "n2"
    assert claim(store, "data")["spec"]["volumeName"] == "disk-2"


def test_wait_for_first_consumer_pods_get_volumes_provisioned_where_they_land():
    objects = [make_node("n1", labels={ZONE: "z1"}), make_node("n2", labels={ZONE: "z2"}),
               make_sc("zonal", provisioner=PROVISIONER, allowed=[{"matchLabelExpressions": [{"key": ZONE, "values": ["z2"]}]}]),
               *(make_pvc(f"data-{i}", "zonal", request="1Gi") for i in range(3))]
    store = schedule(*objects, pods=[pod_with_claims(f"app-{i}", f"data-{i}") for i in range(3)])
    for i in range(3):
        assert node_of(store, f"app-{i}") == "n2"
        pvc = claim(store, f"data-{i}")
        assert pvc["metadata"]["annotations"][ANN_SELECTED_NODE] == "n2"
        pv = store.get(PV, None, pvc["spec"]["volumeName"])
        assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["z2"]


def test_two_pods_never_get_the_same_local_volume():
    objects = [make_node("n1"), make_node("n2"), make_sc("local"),
               make_pv("disk-1", "local", "10Gi", affinity={HOSTNAME: ["n1"]}), make_pvc("a", "local"), make_pvc("b", "local"),
               make_pvc("c", "local")]
    store = schedule(*objects, pods=[pod_with_claims("pa", "a"), pod_with_claims("pb", "b"), pod_with_claims("pc", "c")])
    placed = [p for p in ("pa", "pb", "pc") if node_of(store, p)]
    assert len(placed) == 1 and node_of(store, placed[0]) == "n1"
    pending = [p for p in ("pa", "pb", "pc") if not node_of(store, p)]
    conditions = store.get(POD, "default", pending[0])["status"]["conditions"]
    message = next(c["message"] for c in conditions if c["type"] == "PodScheduled")
    assert "node(s) didn't find available persistent volumes to bind" in message
