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
