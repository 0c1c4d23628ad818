"""Informers over the embedded store: what handlers are told."""

import asyncio

from kubesched.api.kinds import POD
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.client.informers import Handler, Informer
from kubesched.scheduler.config import default_configuration
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.virtualtime import run_virtual
from tests.helpers import make_pod


def test_a_delete_hands_over_the_final_state_the_event_carries():
    async def scenario() -> tuple[str, str]:
        store = ObjectStore(seed=1)
        informer = Informer(MemoryClient(store), POD)
        deleted: list[dict] = []
        informer.add_handler(Handler(on_delete=deleted.append))
        informer.start()
        await informer.synced.wait()
        store.create(POD, make_pod("p"))
        await asyncio.sleep(0.01)
        store.delete(POD, "default", "p")
        await asyncio.sleep(0.01)
        await informer.stop()
        return deleted[0]["metadata"]["resourceVersion"], str(store.rv)

    handed, deletion = run_virtual(scenario())
    assert handed == deletion  # not the cached object's version from before the deletion


def _pod_with_managed_fields(name: str) -> dict:
    pod = make_pod(name)
    pod["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                                         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
    return pod


def test_the_schedulers_pod_cache_drops_managed_fields_as_kube_scheduler_does():
    """kube-scheduler's pod informer drops ``metadata.managedFields`` from what it caches; the
    object the store (and every other reader) holds keeps them, listed or watched."""

    async def scenario() -> tuple[dict, dict, dict]:
        store = ObjectStore(seed=1)
        store.create(POD, _pod_with_managed_fields("listed"))
        sched = Scheduler(MemoryClient(store), default_configuration())
        informer = sched.informers.informer("Pod")
        informer.start()
        await informer.synced.wait()
        store.create(POD, _pod_with_managed_fields("watched"))
        await asyncio.sleep(0.01)
        await informer.stop()
        return informer.store["default/listed"], informer.store["default/watched"], store.get(POD, "default", "watched")

    listed, watched, stored = run_virtual(scenario())
    assert "managedFields" not in listed["metadata"] and "managedFields" not in watched["metadata"]
    assert listed["metadata"]["name"] == "listed" and watched["spec"] == stored["spec"]
    assert stored["metadata"]["managedFields"][0]["manager"] == "kubectl"


def _finish(store: ObjectStore, name: str, phase: str) -> None:
    store.update(POD, {**store.get(POD, "default", name), "status": {"phase": phase}}, status_only=True)


def test_the_schedulers_pod_informer_never_holds_a_finished_pod_as_kube_schedulers_does():
    """kube-scheduler lists and watches pods with ``status.phase!=Succeeded,status.phase!=Failed``:
    a pod that finished before the list is not listed, one that finishes later is deleted from the
    cache (its handlers are told), and the store keeps every one of them."""

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        store = ObjectStore(seed=1)
        for name in ("done", "running"):
            store.create(POD, make_pod(name))
        _finish(store, "done", "Succeeded")
        sched = Scheduler(MemoryClient(store), default_configuration())
        informer = sched.informers.informer("Pod")
        deleted: list[str] = []
        informer.add_handler(Handler(on_delete=lambda pod: deleted.append(pod["metadata"]["name"])))
        informer.start()
        await informer.synced.wait()
        listed = sorted(informer.store)
        _finish(store, "running", "Failed")
        await asyncio.sleep(0.01)
        await informer.stop()
        return listed, deleted, sorted(informer.store)

    listed, deleted, held = run_virtual(scenario())
    assert listed == ["default/running"]
    assert deleted == ["running"] and held == []
