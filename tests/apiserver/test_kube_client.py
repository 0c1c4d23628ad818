"""KubeClient (the scheduler's HTTP ClusterClient) against the embedded API server."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.api.apierrors import Conflict, Gone, Invalid
from kubesched.api.kinds import POD, kind_for, kind_named
from kubesched.client.informers import Informer
from kubesched.client.kube import api_error
from tests.apiserver.conftest import pod

POD_KIND = kind_named("Pod")
EVENTS_V1 = kind_for("events.k8s.io/v1", "Event")


@pytest.fixture
async def client(api):
    c = api.server.client()
    yield c
    await c.close()


async def test_list_pages_and_fills_type_meta(api, client, monkeypatch):
    import kubesched.client.kube as kube

    monkeypatch.setattr(kube, "LIST_PAGE", 2)
    for i in range(5):
        await client.create(POD_KIND, pod(f"p{i}"))
    items, rv = await client.list(POD_KIND)
    assert [p["metadata"]["name"] for p in items] == [f"p{i}" for i in range(5)]
    assert all(p["kind"] == "Pod" and p["apiVersion"] == "v1" for p in items)
    assert rv == str(api.server.store.rv)


async def test_a_field_selector_filters_every_page_of_a_list(api, client, monkeypatch):
    import kubesched.client.kube as kube

    monkeypatch.setattr(kube, "LIST_PAGE", 2)
    for i in range(5):
        await client.create(POD_KIND, pod(f"p{i}"))
    for name in ("p1", "p4"):
        api.server.store.update(POD, {**api.server.store.get(POD, "default", name), "status": {"phase": "Succeeded"}}, status_only=True)
    items, _ = await client.list(POD_KIND, field_selector="status.phase!=Succeeded")
    assert [p["metadata"]["name"] for p in items] == ["p0", "p2", "p3"]


async def test_get_update_delete(client):
    created = await client.create(POD_KIND, pod("p"))
    assert await client.get(POD_KIND, "default", "missing") is None
    created["metadata"]["labels"] = {"x": "y"}
    updated = await client.update(POD_KIND, created)
    assert updated["metadata"]["labels"] == {"x": "y"}
    with pytest.raises(Conflict, match="the object has been modified"):
        await client.update(POD_KIND, created)
    await client.delete(POD_KIND, "default", "p", uid=created["metadata"]["uid"])
    assert await client.get(POD_KIND, "default", "p") is None


async def test_bind_and_double_bind_conflict(api, client):
    created = await client.create(POD_KIND, pod("p"))
    await client.bind(created, "n1")
    assert api.server.store.get(POD, "default", "p")["spec"]["nodeName"] == "n1"
    with pytest.raises(Conflict, match='pod p is already assigned to node "n1"'):
        await client.bind(created, "n2")


async def test_patch_pod_status_merges_conditions_and_nominates(api, client):
    created = await client.create(POD_KIND, pod("p"))
    await client.patch_pod_status(created, [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}], "n3")
    stored = api.server.store.get(POD, "default", "p")
    assert stored["status"]["nominatedNodeName"] == "n3"
    assert [c["reason"] for c in stored["status"]["conditions"]] == ["Unschedulable"]
    await client.patch_pod_status(stored, [], "")
    assert "nominatedNodeName" not in api.server.store.get(POD, "default", "p")["status"]


async def test_events_v1_round_trip(client):
    event = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "p.1", "namespace": "default"},
             "eventTime": "2025-01-01T00:00:00.000000Z", "reportingController": "s", "reportingInstance": "s-1",
             "action": "Scheduling", "reason": "Scheduled", "type": "Normal", "note": "ok", "regarding": {"kind": "Pod", "name": "p"}}
    created = await client.create(EVENTS_V1, event)
    got = await client.get(EVENTS_V1, "default", "p.1")
    assert got["note"] == "ok" and got["metadata"]["uid"] == created["metadata"]["uid"]
    got["series"] = {"count": 2, "lastObservedTime": "2025-01-01T00:00:01.000000Z"}
    updated = await client.update(EVENTS_V1, got)
    assert updated["series"]["count"] == 2


async def test_a_watch_call_ends_with_the_servers_stream_and_the_caller_watches_on_from_its_last_version(api, client):
    client.watch_timeout = (1, 1)
    _, rv = await client.list(POD_KIND)
    await client.create(POD_KIND, pod("a"))
    first = [e.object for batch in [b async for b in client.watch(POD_KIND, rv)] for e in batch if e.type == "ADDED"]
    assert [o["metadata"]["name"] for o in first] == ["a"]  # returned once the server ended the stream (1 s)
    await client.create(POD_KIND, pod("b"))
    seen: list[str] = []
    async for batch in client.watch(POD_KIND, first[-1]["metadata"]["resourceVersion"]):
        seen.extend(e.object["metadata"]["name"] for e in batch if e.type == "ADDED")
    assert seen == ["b"]


@pytest.mark.store(history_limit=2)
async def test_watch_from_a_compacted_version_raises_gone(client):
    for i in range(4):
        await client.create(POD_KIND, pod(f"p{i}"))
    with pytest.raises(Gone, match="too old resource version"):
        async for _ in client.watch(POD_KIND, "1"):
            pass


async def test_an_informer_over_http_relists_after_gone(api, client):
    informer = Informer(client, POD_KIND)
    informer.start()
    await asyncio.wait_for(informer.synced.wait(), 5)
    await client.create(POD_KIND, pod("a"))
    for _ in range(50):
        if "default/a" in informer.store:
            break
        await asyncio.sleep(0.05)
    assert "default/a" in informer.store
    await informer.stop()


def test_api_error_maps_status_codes():
    assert isinstance(api_error(422, b'{"kind":"Status","message":"bad","reason":"Invalid","code":422}'), Invalid)
    error = api_error(503, b"not json")
    assert error.code == 503 and "not json" in str(error)
