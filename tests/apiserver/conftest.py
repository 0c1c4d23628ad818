"""A running API server on a free port, and helpers to talk to it."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from kubesched.apiserver import APIServer
from kubesched.cluster.store import ObjectStore


class Http:
    """Requests to the fixture's server as its admin (the session carries the admin token and
    trusts the server's CA)."""

    def __init__(self, server: APIServer, session: aiohttp.ClientSession) -> None:
        self.server = server
        self.session = session

    async def call(self, method: str, path: str, body=None, *, content_type: str = "application/json",
                   accept: str = "application/json", raw: bytes | None = None, params: dict | None = None):
        data = raw if raw is not None else (None if body is None else orjson.dumps(body))
        async with self.session.request(method, self.server.url + path, data=data, params=params,
                                        headers={"Content-Type": content_type, "Accept": accept}) as resp:
            payload = await resp.read()
            return resp.status, (orjson.loads(payload) if payload and payload[:1] in b"{[" else payload), resp.headers

    async def watch_lines(self, path: str, params: dict, count: int | None = None) -> list[dict]:
        """Events of a watch, until ``count`` of them arrived or the server ended the stream."""
        out = []
        async with self.session.get(self.server.url + path, params={"watch": "1", **params}) as resp:
            async for line in resp.content:
                if line.strip():
                    out.append(orjson.loads(line))
                    if count is not None and len(out) >= count:
                        break
        return out


@pytest.fixture
async def api(request):
    marker = request.node.get_closest_marker("store")
    store = ObjectStore(**(marker.kwargs if marker else {}))
    server = APIServer(store, port=0, bookmark_interval=0.2)
    await server.start()
    async with server.client_session() as session:
        yield Http(server, session)
    await server.stop()


def pod(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name[:1]}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"capacity": {"cpu": "4", "pods": "110"}}}


def pytest_configure(config):
    config.addinivalue_line("markers", "store(**kwargs): ObjectStore arguments for the api fixture")
