"""Reads at a resourceVersion the server has not reached wait for it briefly, then get the watch
cache's 504 (cause ResourceVersionTooLarge), and kubesched's informers relist on it: a restarted
in-memory server counts from the start again, and a client must not keep the old server's objects."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.api.apierrors import Timeout
from kubesched.api.kinds import kind_named
from kubesched.client.informers import Informer
from tests.apiserver.conftest import pod

POD_KIND = kind_named("Pod")
PODS = "/api/v1/namespaces/default/pods"
AHEAD = 10**6


def too_large(current: int, retry: int = 1) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 504, "reason": "Timeout",
            "message": f"Timeout: Too large resource version: {AHEAD}, current: {current}",
            "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                        "retryAfterSeconds": retry}}


@pytest.fixture
async def quick(api):
    """The ``api`` server, waiting a fifth of a second (not 3 s) for a resourceVersion it lacks."""
    api.server.fresh_timeout = 0.2
    return api


@pytest.mark.parametrize("path", [pytest.param(PODS, id="list"), pytest.param(f"{PODS}/p", id="get")])
async def test_a_read_ahead_of_the_server_gets_504_resource_version_too_large(quick, path):
    await quick.call("POST", PODS, pod("p"))
    status, body, _ = await quick.call("GET", path, params={"resourceVersion": str(AHEAD)})
    assert (status, body) == (504, too_large(quick.server.store.rv))


async def test_an_exact_list_ahead_of_the_server_is_answered_at_once_as_storage_does(quick):
    quick.server.fresh_timeout = 3600.0
    params = {"resourceVersion": str(AHEAD), "resourceVersionMatch": "Exact"}
    status, body, _ = await quick.call("GET", PODS, params=params)
    assert (status, body) == (504, too_large(quick.server.store.rv, retry=0))


async def test_a_watch_ahead_of_the_server_ends_with_an_error_event_carrying_the_504(quick):
    events = await quick.watch_lines(PODS, {"resourceVersion": str(AHEAD)})
    assert events == [{"type": "ERROR", "object": too_large(quick.server.store.rv)}]


async def test_a_read_that_the_server_reaches_while_waiting_is_answered(quick):
    quick.server.fresh_timeout = 30.0
    wanted = quick.server.store.rv + 1
    read = asyncio.create_task(quick.call("GET", PODS, params={"resourceVersion": str(wanted)}))
    await quick.call("POST", PODS, pod("p"))
    status, body, _ = await read
    assert status == 200 and [p["metadata"]["name"] for p in body["items"]] == ["p"]


@pytest.mark.parametrize("version", [pytest.param("abc", id="letters"), pytest.param("-1", id="negative"),
                                     pytest.param("1" * 30, id="past-uint64"), pytest.param("\u00b2", id="unicode-digit")])
async def test_a_resource_version_that_is_not_one_is_a_bad_request(quick, version):
    status, body, _ = await quick.call("GET", PODS, params={"resourceVersion": version})
    assert (status, body["reason"], body["message"]) == (400, "BadRequest", f'invalid resource version "{version}"')


async def test_the_http_client_raises_timeout_for_a_watch_ahead_of_the_server(quick):
    client = quick.kube_client()
    try:
        with pytest.raises(Timeout) as raised:
            async for _ in client.watch(POD_KIND, str(AHEAD)):
                pass
    finally:
        await client.close()
    assert raised.value.is_resource_version_too_large() and raised.value.retry_after == 1


async def _until(condition, what: str) -> None:
    for _ in range(400):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


async def test_an_informer_relists_when_its_server_restarts_empty_and_keeps_no_stale_objects(quick):
    for i in range(10):
        await quick.call("POST", PODS, pod(f"old{i}"))
    client = quick.kube_client()
    informer = Informer(client, POD_KIND)
    informer.start()
    try:
        await _until(lambda: len(informer.store) == 10, "the first list")
        await quick.restart()
        await quick.call("POST", PODS, pod("new"))
        assert quick.server.store.rv < int(informer.resource_version)
        await _until(lambda: set(informer.store) == {"default/new"}, "the relist against the restarted server")
        assert informer.relists >= 1
    finally:
        await informer.stop()
        await client.close()
