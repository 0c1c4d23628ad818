"""Informers over the embedded store: what handlers are told."""

import asyncio

from kubesched.api.kinds import POD
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.client.informers import Handler, Informer
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
