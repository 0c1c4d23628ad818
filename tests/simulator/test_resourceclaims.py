"""The embedded ResourceClaim controller: claims generated from templates and recorded in the pod
status, reservations released when pods go, and a pod with a claim template scheduled end to end."""

from __future__ import annotations

import asyncio

from kubesched.api.kinds import POD, kind_named
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config.types import PluginRef, Plugins, PluginSet, Profile, SchedulerConfiguration
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.components import Components
from kubesched.simulator.kubelet import FakeKubelet
from kubesched.simulator.resourceclaims import FINALIZER, POD_CLAIM_NAME_ANNOTATION, FakeResourceClaimController, generate_name
from kubesched.simulator.simulate import settle
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock
from tests.helpers import make_node, make_pod
from tests.plugins.test_dynamic_resources_support import REGISTRY, device, device_class, resource_slice

CLAIM = kind_named("ResourceClaim")
TEMPLATE = kind_named("ResourceClaimTemplate")
CLASS = kind_named("DeviceClass")
SLICE = kind_named("ResourceSlice")
NODE = kind_named("Node")


def template(name: str = "gpu-template", labels: dict | None = None) -> dict:
    spec: dict = {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}
    if labels:
        spec["metadata"] = {"labels": labels}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def templated_pod(name: str = "my-pod", template_name: str = "gpu-template") -> dict:
    return make_pod(name, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": template_name}])


async def idle(controller: FakeResourceClaimController) -> None:
    for _ in range(50):
        await asyncio.sleep(0)
        if controller.idle():
            await asyncio.sleep(0)
            if controller.idle():
                return


def claims(store: ObjectStore) -> list[dict]:
    return list(store.iter_all(CLAIM))


async def test_claim_is_generated_from_the_template_and_recorded_in_the_pod_status():
    store = ObjectStore(seed=3)
    store.create(TEMPLATE, template(labels={"team": "a"}))
    controller = FakeResourceClaimController(store)
    controller.start()
    try:
        pod = store.create(POD, templated_pod())
        await idle(controller)
        [generated] = claims(store)
        meta = generated["metadata"]
        assert meta["name"].startswith("my-pod-gpu-") and len(meta["name"]) == len("my-pod-gpu-") + 5
        assert meta["annotations"] == {POD_CLAIM_NAME_ANNOTATION: "gpu"}
        assert meta["labels"] == {"team": "a"}
        assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "my-pod", "uid": pod["metadata"]["uid"],
                                            "controller": True, "blockOwnerDeletion": True}]
        assert generated["spec"] == template()["spec"]["spec"]
        stored_pod = store.get(POD, "default", "my-pod")
        assert stored_pod["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": meta["name"]}]
    finally:
        await controller.stop()


async def test_claim_is_created_once_the_template_appears():
    store = ObjectStore(seed=3)
    controller = FakeResourceClaimController(store)
    controller.start()
    try:
        store.create(POD, templated_pod())
        await idle(controller)
        assert claims(store) == []
        store.create(TEMPLATE, template())
        await idle(controller)
        assert len(claims(store)) == 1
        assert store.get(POD, "default", "my-pod")["status"]["resourceClaimStatuses"][0]["name"] == "gpu"
    finally:
        await controller.stop()


async def test_existing_claim_for_the_pod_is_adopted_instead_of_created_again():
    store = ObjectStore(seed=3)
    store.create(TEMPLATE, template())
    pod = store.create(POD, templated_pod())
    store.create(CLAIM, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": "earlier", "namespace": "default", "annotations": {POD_CLAIM_NAME_ANNOTATION: "gpu"},
                                      "ownerReferences": [{"kind": "Pod", "name": "my-pod", "uid": pod["metadata"]["uid"], "controller": True}]},
                         "spec": {"devices": {"requests": []}}})
    FakeResourceClaimController(store).sync_pod(store.get(POD, "default", "my-pod"))
    assert [c["metadata"]["name"] for c in claims(store)] == ["earlier"]
    assert store.get(POD, "default", "my-pod")["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": "earlier"}]


async def test_deleting_the_pod_releases_deallocates_and_deletes_its_claim():
    store = ObjectStore(seed=3, graceful_pod_deletion=False)
    store.create(TEMPLATE, template())
    controller = FakeResourceClaimController(store)
    controller.start()
    try:
        pod = store.create(POD, templated_pod())
        await idle(controller)
        [generated] = claims(store)

        def allocate(c: dict) -> None:
            c["metadata"]["finalizers"] = [FINALIZER]
            c["status"] = {"allocation": {"devices": {"results": []}},
                           "reservedFor": [{"resource": "pods", "name": "my-pod", "uid": pod["metadata"]["uid"]}]}

        store.mutate(CLAIM, "default", generated["metadata"]["name"], allocate)
        await idle(controller)
        assert claims(store)[0]["status"]["reservedFor"]
        store.delete(POD, "default", "my-pod")
        await idle(controller)
        assert claims(store) == []
    finally:
        await controller.stop()


async def test_finished_pod_releases_a_shared_claim_and_it_is_deallocated():
    store = ObjectStore(seed=3)
    controller = FakeResourceClaimController(store)
    controller.start()
    try:
        pod = store.create(POD, make_pod("user", resourceClaims=[{"name": "shared", "resourceClaimName": "shared"}]))
        store.create(CLAIM, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                             "metadata": {"name": "shared", "namespace": "default", "finalizers": [FINALIZER]},
                             "spec": {"devices": {"requests": []}},
                             "status": {"allocation": {"devices": {"results": []}},
                                        "reservedFor": [{"resource": "pods", "name": "user", "uid": pod["metadata"]["uid"]}]}})
        await idle(controller)
        assert store.get(CLAIM, "default", "shared")["status"]["reservedFor"]
        store.mutate(POD, "default", "user", lambda p: p.setdefault("status", {}).update(phase="Succeeded"))
        await idle(controller)
        shared = store.get(CLAIM, "default", "shared")
        assert shared.get("status", {}) == {}
        assert shared["metadata"].get("finalizers") == []
    finally:
        await controller.stop()


async def test_pod_writes_reach_the_controller_only_when_claims_can_concern_them():
    """Without any claim, a pod that asks for none is not delivered (its write would change
    nothing); once a claim exists, every pod write is, since the claim may name any pod."""
    store = ObjectStore(seed=3)
    controller = FakeResourceClaimController(store)
    controller.start()
    try:
        store.create(POD, make_pod("plain"))
        assert controller.idle()
        store.create(POD, templated_pod("asks"))
        assert not controller.idle()
        await idle(controller)
        store.create(CLAIM, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                             "metadata": {"name": "other", "namespace": "default"}, "spec": {"devices": {"requests": []}}})
        await idle(controller)
        store.mutate(POD, "default", "plain", lambda p: p.setdefault("status", {}).update(phase="Succeeded"))
        assert not controller.idle()
        await idle(controller)
    finally:
        await controller.stop()


def test_generate_name_truncates_both_parts_proportionally():
    assert generate_name("pod", "gpu") == "pod-gpu-"
    assert generate_name("p" * 60, "c" * 30) == "p" * 37 + "-" + "c" * 18


# --- end to end ---------------------------------------------------------------------------------------
def test_pod_with_a_claim_template_schedules_end_to_end_and_the_second_waits_for_the_device():
    result = run_virtual(_schedule_two_pods())
    first, second, claim_objs = result
    assert first == "n1"
    assert second is None
    [allocated] = [c for c in claim_objs if (c.get("status") or {}).get("allocation")]
    assert allocated["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert allocated["status"]["reservedFor"][0]["name"] == "pod-a"


async def _schedule_two_pods() -> tuple:
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop, wall_start=VIRTUAL_EPOCH)
    store = ObjectStore(clock, seed=1, auto_create_namespaces=True)
    for node in ("n1", "n2"):
        store.create(NODE, make_node(node))
    store.create(CLASS, device_class())
    store.create(SLICE, resource_slice("n1-gpus", [device("gpu-0")], node="n1"))
    store.create(TEMPLATE, template())
    kubelet = FakeKubelet(store)
    controller = FakeResourceClaimController(store)
    kubelet.start()
    controller.start()
    profile = Profile(plugins=Plugins(multi_point=PluginSet(enabled=[
        PluginRef(n) for n in ("PrioritySort", "NodeResourcesFit", "DynamicResources", "DefaultBinder")])))
    sched = Scheduler(MemoryClient(store), SchedulerConfiguration(profiles=[profile]), registry=REGISTRY, clock=clock, seed=1)
    await sched.start()
    runner = loop.create_task(sched.run())
    try:
        store.create(POD, templated_pod("pod-a"))
        await settle(sched, store, Components({"kubelet": kubelet, "controller": controller}))
        store.create(POD, templated_pod("pod-b"))
        await settle(sched, store, Components({"kubelet": kubelet, "controller": controller}))
        await asyncio.sleep(1)
        await settle(sched, store, Components({"kubelet": kubelet, "controller": controller}))
    finally:
        await sched.stop()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        await kubelet.stop()
        await controller.stop()
    a = store.get(POD, "default", "pod-a")
    b = store.get(POD, "default", "pod-b")
    return (a["spec"].get("nodeName"), b["spec"].get("nodeName"), claims(store))
