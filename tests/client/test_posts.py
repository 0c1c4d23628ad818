"""The POST transport (``kubesched.client.posts``): against the real ``kubesched apiserver`` over
TLS, and against a scripted server for the replies and failures a real network produces (chunked
and close-delimited bodies, lost connections before and during a reply, silence, refusals)."""

from __future__ import annotations

import asyncio
import gzip

import aiohttp
import pytest

from kubesched.api.apierrors import AlreadyExists, Conflict
from kubesched.api.kinds import kind_for, kind_named
from kubesched.apiserver import APIServer
from kubesched.apiserver.store import ObjectStore
from kubesched.client.kube import KubeClient
from kubesched.client.posts import PostTransport
from kubesched.utils.clock import RealClock
from tests.run.harness import free_port

POD = kind_named("Pod")
NODE = kind_named("Node")
EVENTS_V1 = kind_for("events.k8s.io/v1", "Event")
OK = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


async def test_bindings_and_events_reach_the_real_api_server_over_tls_on_one_kept_alive_connection():
    server = APIServer(ObjectStore(RealClock()), port=0)
    await server.start()
    client = server.client()
    try:
        await client.create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        for name in ("a", "b", "c"):
            created = await client.create(POD, pod(name))
            await client.bind(created, "n1")
        event = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "a.1", "namespace": "default"},
                 "eventTime": "2025-01-01T00:00:00.000000Z", "reportingController": "s", "reportingInstance": "s-1",
                 "action": "Binding", "reason": "Scheduled", "type": "Normal", "note": "bound",
                 "regarding": {"kind": "Pod", "name": "a", "namespace": "default"}}
        await client.create(EVENTS_V1, event)
        with pytest.raises(AlreadyExists):
            await client.create(EVENTS_V1, event)
        with pytest.raises(Conflict):  # bound already: the server refuses, the connection stays usable
            await client.bind(await client.get(POD, "default", "a"), "n1")
        bound = [(await client.get(POD, "default", n))["spec"].get("nodeName") for n in ("a", "b", "c")]
        assert bound == ["n1", "n1", "n1"]
        assert (await client.get(EVENTS_V1, "default", "a.1"))["reason"] == "Scheduled"
        assert client.posts().opened == 1
    finally:
        await client.close()
        await server.stop()


async def _bind_over_a_unix_socket() -> tuple[str | None, int]:
    server = APIServer(ObjectStore(RealClock()), port=0)
    await server.start()
    client = KubeClient.for_server("http://localhost", token=server.scheduler_token, unix_socket=await server.listen_unix())
    try:
        await server.client().create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        created = await server.client().create(POD, pod("a"))
        await client.bind(created, "n1")
        return (await client.get(POD, "default", "a"))["spec"].get("nodeName"), client.posts().opened
    finally:
        await client.close()
        await server.stop()


def test_bindings_go_over_the_servers_unix_socket_on_asyncios_loop_and_on_uvloops():
    import uvloop

    for loop_factory in (None, uvloop.new_event_loop):  # uvloop's transports are no asyncio.Transport
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            assert runner.run(_bind_over_a_unix_socket()) == ("n1", 1)


class ScriptedServer:
    """A plain-HTTP server that reads each request whole and answers it with the next step of
    ``script``: bytes to write (the connection stays open), ``("close", bytes)`` to write and then
    close, or ``"hang"`` to answer nothing."""

    def __init__(self, script: list) -> None:
        self.script = list(script)
        self.requests: list[bytes] = []
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.handlers: set[asyncio.Task] = set()

    async def __aenter__(self) -> ScriptedServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for task in self.handlers:
            task.cancel()
        await asyncio.gather(*self.handlers, return_exceptions=True)

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
                self.requests.append(head + await reader.readexactly(length))
                step = self.script.pop(0)
                if step == "hang":
                    await asyncio.sleep(3600)
                if isinstance(step, tuple):
                    writer.write(step[1])
                    await writer.drain()
                    writer.close()
                    return
                writer.write(step)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()


async def posted(server: ScriptedServer, count: int = 1, timeout: float = 5.0) -> list[tuple[int, bytes, str | None]]:
    transport = PostTransport(server.url, False, 4)
    try:
        return [await transport.post("/api/v1/namespaces/default/pods", b"User-Agent: t\r\n", b'{"a":1}', timeout)
                for _ in range(count)]
    finally:
        transport.close()


async def test_the_request_is_one_http_1_1_post_with_host_and_length():
    async with ScriptedServer([OK]) as server:
        assert await posted(server) == [(201, b"{}", None)]
        port = server.url.rsplit(":", 1)[1]
    assert server.requests == [b"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: 127.0.0.1:" + port.encode() +
                               b"\r\nUser-Agent: t\r\nContent-Length: 7\r\n\r\n" + b'{"a":1}']


@pytest.mark.parametrize(("reply", "body"), [
    (b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\n{\"a\r\n4\r\n\":1}\r\n0\r\nTrailer: t\r\n\r\n", b'{"a":1}'),
    (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nnull", b"null"),
    (b"HTTP/1.1 201 Created\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s" % (len(gzip.compress(b"{}")), gzip.compress(b"{}")), b"{}"),
    (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
])
async def test_replies_of_every_framing_are_read_and_the_connection_reused(reply, body):
    async with ScriptedServer([reply, reply]) as server:
        assert [r[1] for r in await posted(server, 2)] == [body, body]
    assert server.connections == 1


async def test_a_reply_asking_to_close_or_delimited_by_closing_is_read_and_the_connection_not_reused():
    close = b"HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
    unframed = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\n\r\nslow down"
    async with ScriptedServer([("close", close), ("close", unframed), OK]) as server:
        assert await posted(server, 3) == [(201, b"{}", None), (429, b"slow down", "3"), (201, b"{}", None)]
    assert server.connections == 3


@pytest.mark.parametrize("partial", [b"", b"HTTP/1.1 201 Created\r\nContent-Len", b"HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\n{}"])
async def test_a_connection_lost_before_the_reply_is_complete_fails_the_post_without_sending_it_again(partial):
    async with ScriptedServer([("close", partial), OK]) as server:
        transport = PostTransport(server.url, False, 4)
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await transport.post("/p", b"", b"{}", 5.0)
        assert len(server.requests) == 1
        assert await transport.post("/p", b"", b"{}", 5.0) == (201, b"{}", None)  # on a new connection
        transport.close()
    assert server.connections == 2


async def test_a_kept_alive_connection_the_server_closed_meanwhile_is_not_reused():
    async with ScriptedServer([("close", OK), OK]) as server:  # closed after a reply that did not say so
        transport = PostTransport(server.url, False, 4)
        assert await transport.post("/p", b"", b"{}", 5.0) == (201, b"{}", None)
        await asyncio.sleep(0.05)
        assert await transport.post("/p", b"", b"{}", 5.0) == (201, b"{}", None)
        transport.close()
    assert server.connections == 2 and len(server.requests) == 2


async def test_a_silent_server_times_the_post_out_and_its_connection_is_dropped():
    async with ScriptedServer(["hang"]) as server:
        transport = PostTransport(server.url, False, 4)
        with pytest.raises(TimeoutError):
            await transport.post("/p", b"", b"{}", 0.2)
        assert not transport._idle and not transport._open


async def test_malformed_replies_and_unreachable_servers_raise_client_errors():
    bad_gzip = b"HTTP/1.1 201 Created\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}"
    for reply in (b"garbage\r\n\r\n", bad_gzip):
        async with ScriptedServer([reply]) as server:
            with pytest.raises(aiohttp.ClientPayloadError):
                await posted(server)
    transport = PostTransport(f"http://127.0.0.1:{free_port()}", False, 4)
    with pytest.raises(aiohttp.ClientOSError):
        await transport.post("/p", b"", b"{}", 5.0)


async def test_the_client_retries_a_post_answered_429_and_raises_the_typed_error_of_a_refusal():
    refused = b'{"kind":"Status","code":409,"reason":"AlreadyExists","message":"exists","details":{"name":"p","kind":"pods"}}'
    script = [b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n", OK,
              b"HTTP/1.1 409 Conflict\r\nContent-Length: %d\r\n\r\n%s" % (len(refused), refused)]
    async with ScriptedServer(script) as server:
        client = KubeClient.for_server(server.url)
        try:
            assert await client.create(POD, pod("p")) == {}
            with pytest.raises(AlreadyExists, match="exists"):
                await client.create(POD, pod("p"))
        finally:
            await client.close()
    assert len(server.requests) == 3 and server.connections == 1
    assert b"Accept-Encoding: gzip\r\n" in server.requests[0] and b"Content-Type: application/json\r\n" in server.requests[0]



async def test_posts_beyond_the_connection_limit_wait_for_a_released_connection():
    async with ScriptedServer([OK] * 6) as server:
        transport = PostTransport(server.url, False, 2)
        replies = await asyncio.gather(*(transport.post("/p", b"", b"{}", 5.0) for _ in range(6)))
        transport.close()
    assert replies == [(201, b"{}", None)] * 6 and server.connections == 2


async def test_a_post_cancelled_in_flight_drops_its_connection():
    async with ScriptedServer(["hang", OK]) as server:
        transport = PostTransport(server.url, False, 1)
        task = asyncio.ensure_future(transport.post("/p", b"", b"{}", 5.0))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await transport.post("/p", b"", b"{}", 5.0) == (201, b"{}", None)
        transport.close()
    assert server.connections == 2
