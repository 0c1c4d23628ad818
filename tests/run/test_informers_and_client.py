"""Informer robustness (re-watch from the last resourceVersion, relist on 410, in-place cache,
API server restarts) and the HTTP client's rate limiter, credentials refresh and event patches."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from kubesched.api.apierrors import Gone
from kubesched.api.kinds import kind_for, kind_named
from kubesched.api.watch import ADDED, BOOKMARK, WatchEvent
from kubesched.apiserver import APIServer
from kubesched.apiserver.store import ObjectStore
from kubesched.client import informers as informers_module
from kubesched.client import kube
from kubesched.client.informers import Handler, Informer
from kubesched.client.kube import KubeClient, StreamBroken, TokenBucket, load_config, rate_limiter
from kubesched.client.recorder import EventSink
from kubesched.utils.clock import RealClock
from tests.client_doubles import ScriptedClient, settle
from tests.run.harness import free_port

POD_KIND = kind_named("Pod")
EVENTS_V1 = kind_for("events.k8s.io/v1", "Event")


def pod(name: str, rv: str, uid: str | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "resourceVersion": rv,
                                                           "uid": uid or f"uid-{name}"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(informers_module, "INITIAL_BACKOFF", 0.01)


async def test_a_broken_watch_is_resumed_from_the_last_version_seen_without_relisting():
    client = ScriptedClient([([pod("a", "5")], "5")], [
        [[WatchEvent(ADDED, pod("b", "6"))], [WatchEvent(BOOKMARK, {"metadata": {"resourceVersion": "9"}})]],
        StreamBroken("connection reset"),
        None,
    ])
    informer = Informer(client, POD_KIND)
    informer.start()
    await settle(lambda: len(client.watch_calls) == 3)
    await informer.stop()
    assert client.watch_calls == ["5", "9", "9"] and client.list_calls == 1
    assert set(informer.store) == {"default/a", "default/b"} and informer.rewatches == 1 and informer.relists == 0


async def test_gone_relists_and_reports_the_difference_in_place():
    client = ScriptedClient([([pod("keep", "1"), pod("change", "1"), pod("drop", "1"), pod("recreate", "1")], "1"),
                             ([pod("keep", "1"), pod("change", "7"), pod("recreate", "8", uid="new"), pod("new", "9")], "9")],
                            [Gone("too old resource version"), None])
    seen: list[str] = []
    informer = Informer(client, POD_KIND)
    informer.add_handler(Handler(lambda o, initial: seen.append(f"add {o['metadata']['name']}{' (initial)' if initial else ''}"),
                                 lambda old, new: seen.append(f"update {new['metadata']['name']}"),
                                 lambda o: seen.append(f"delete {o['metadata']['name']}")))
    store = informer.store
    informer.start()
    await settle(lambda: client.list_calls == 2 and len(client.watch_calls) == 2)
    await informer.stop()
    assert informer.store is store  # holders of the dict see the relisted objects
    assert sorted(store) == ["default/change", "default/keep", "default/new", "default/recreate"]
    assert seen[:4] == ["add keep (initial)", "add change (initial)", "add drop (initial)", "add recreate (initial)"]
    assert seen[4:] == ["delete drop", "update change", "delete recreate", "add recreate", "add new"]
    assert informer.relists == 1 and informer.resource_version == "9" and client.watch_calls == ["1", "9"]


async def test_an_informer_over_http_survives_an_api_server_restart_and_ends_equal_to_it(tmp_path):
    port, data = free_port(), tmp_path / "state.sqlite"
    server = APIServer(ObjectStore(RealClock()), port=port, data=data)
    await server.start()
    client = server.client()
    informer = Informer(client, POD_KIND)
    informer.start()
    try:
        await asyncio.wait_for(informer.synced.wait(), 5)
        for name in ("a", "b"):
            await client.create(POD_KIND, pod(name, ""))
        await settle(lambda: len(informer.store) == 2)
        # a write the pod informer does not see: its resourceVersion falls behind, and the restarted
        # server (whose watch history starts empty) answers its re-watch with 410 Gone
        await client.create(kind_named("ConfigMap"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
        await server.stop()
        await asyncio.sleep(0.2)  # the watch breaks; the informer backs off and retries
        server = APIServer(ObjectStore(RealClock()), port=port, data=data)
        await server.start()
        await client.delete(POD_KIND, "default", "a")
        await client.create(POD_KIND, pod("c", ""))

        def equal() -> bool:
            items, _ = server.store.list(POD_KIND)
            return {f"default/{p['metadata']['name']}": p["metadata"]["resourceVersion"] for p in items} == \
                {k: v["metadata"]["resourceVersion"] for k, v in informer.store.items()}

        await settle(equal, 15)
        assert sorted(informer.store) == ["default/b", "default/c"]
        assert informer.relists == 1 and informer.rewatches >= 1
    finally:
        await informer.stop()
        await client.close()
        await server.stop()


async def test_a_watch_on_an_unreachable_server_raises_stream_broken():
    client = KubeClient.for_server(f"http://127.0.0.1:{free_port()}")
    try:
        with pytest.raises(StreamBroken):
            async for _ in client.watch(POD_KIND, "1"):
                pass
    finally:
        await client.close()


def test_the_token_bucket_starts_full_and_refills_at_qps(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(kube.time, "monotonic", lambda: now[0])
    bucket = TokenBucket(qps=10, burst=2)
    assert [bucket.reserve(), bucket.reserve()] == [0.0, 0.0]  # the burst
    assert bucket.reserve() == pytest.approx(0.1)  # the third waits one token's time
    now[0] += 0.5  # five tokens' worth of time, capped by what is owed and the burst
    assert bucket.reserve() == 0.0


@pytest.mark.parametrize(("qps", "burst", "expected"), [(None, None, None), (-1, 10, None), (0, 0, (5.0, 10)), (50, 100, (50.0, 100))])
def test_client_connection_rate_limits_follow_client_go(qps, burst, expected):
    limiter = rate_limiter(qps, burst)
    assert (None if limiter is None else (limiter.qps, limiter.burst)) == expected


async def test_every_request_waits_for_the_rate_limiter():
    server = APIServer(ObjectStore(RealClock()), port=0)
    await server.start()
    # 5 qps: a request must take over 200 ms for the next one to find a token, even on a slow machine.
    client = server.client(qps=5, burst=1)
    try:
        for _ in range(3):
            await client.list(POD_KIND)
        assert client.limiter is not None and client.limiter.throttled > 0
    finally:
        await client.close()
        await server.stop()


async def test_credentials_from_a_token_file_are_read_again(tmp_path, monkeypatch):
    token = tmp_path / "token"
    token.write_text("first")
    conf = tmp_path / "kubeconfig"
    conf.write_text(f"""
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:1"}}}}]
users: [{{name: u, user: {{tokenFile: {token}}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
""")
    client = KubeClient(kubeconfig=conf)
    assert (await client._headers())["Authorization"] == "Bearer first"
    token.write_text("rotated")
    assert (await client._headers())["Authorization"] == "Bearer first"  # cached for a minute
    monkeypatch.setattr(kube, "TOKEN_FILE_REFRESH", 0.0)
    assert (await client._headers())["Authorization"] == "Bearer rotated"
    assert (await client._headers(refresh=True))["User-Agent"].startswith("kubesched/")


def test_master_overrides_the_kubeconfig_server(tmp_path):
    conf = tmp_path / "kubeconfig"
    conf.write_text("""
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://from-file:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
""")
    assert load_config(conf).cluster.server == "https://from-file:6443"
    assert load_config(conf, master="http://127.0.0.1:8080").cluster.server == "http://127.0.0.1:8080"
    assert load_config(None, master="http://10.0.0.1:6443").cluster.server == "http://10.0.0.1:6443"


async def test_an_event_series_is_one_merge_patch_and_recreated_if_the_event_was_removed():
    server = APIServer(ObjectStore(RealClock()), port=0)
    await server.start()
    client = server.client()
    sink = EventSink(client)
    event = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "p.1", "namespace": "default"},
             "eventTime": "2025-01-01T00:00:00.000000Z", "reportingController": "s", "reportingInstance": "s-1",
             "action": "Scheduling", "reason": "FailedScheduling", "type": "Warning", "note": "no", "regarding": {"kind": "Pod", "name": "p"}}
    try:
        await sink.create(event)
        before = server.requests
        await sink.update_series({**event, "series": {"count": 2, "lastObservedTime": "2025-01-01T00:00:01.000000Z"}})
        assert server.requests == before + 1
        assert (await client.get(EVENTS_V1, "default", "p.1"))["series"]["count"] == 2
        await client.delete(EVENTS_V1, "default", "p.1")
        await sink.update_series({**event, "series": {"count": 3, "lastObservedTime": "2025-01-01T00:00:02.000000Z"}})
        assert (await client.get(EVENTS_V1, "default", "p.1"))["series"]["count"] == 3
    finally:
        await client.close()
        await server.stop()


async def test_stop_cancels_a_quiet_informer_promptly():
    client = ScriptedClient([([], "1")], [None])
    informer = Informer(client, POD_KIND)
    informer.start()
    await asyncio.sleep(0.05)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(informer.stop(), 1)
    assert informer.synced.is_set()


async def test_a_request_answered_429_is_retried_after_retry_after():
    from aiohttp import web

    answers = [web.Response(status=429, text="slow down", headers={"Retry-After": "0"}),
               web.Response(status=503, text="busy", headers={"Retry-After": "0"}),
               web.json_response({"kind": "PodList", "items": [], "metadata": {"resourceVersion": "3"}})]
    calls = []

    async def handler(request: web.Request) -> web.Response:
        calls.append(request.path)
        return answers.pop(0)

    app = web.Application()
    app.router.add_get("/api/v1/pods", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = KubeClient.for_server(f"http://127.0.0.1:{port}")
    try:
        assert await client.list(POD_KIND) == ([], "3")
        assert len(calls) == 3
    finally:
        await client.close()
        await runner.cleanup()
