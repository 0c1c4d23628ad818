"""A running API server on a free port, and helpers to talk to it."""

from __future__ import annotations

import aiohttp
import orjson
import pytest
from lightkube.config.kubeconfig import KubeConfig

from kubesched.apiserver import APIServer
from kubesched.apiserver.security import SecurityOptions
from kubesched.apiserver.store import ObjectStore
from kubesched.client.kube import KubeClient
from kubesched.utils import certs


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

    def kube_client(self) -> KubeClient:
        """kubesched's HTTP client, configured from a kubeconfig of the server (address, CA and the
        fixture's admin token, which a restart keeps)."""
        return KubeClient(KubeConfig.from_dict(self.server.kubeconfig(token=ADMIN_TOKEN)).get())

    async def restart(self, store: ObjectStore | None = None) -> None:
        """Stop the server and start another on the same port over ``store`` (a fresh, empty one by
        default), with the same serving certificate and tokens: an in-memory API server's restart
        with the same flags, as its clients see it."""
        old = self.server
        await old.stop()
        self.server = APIServer(store if store is not None else ObjectStore(), port=old.port,
                                bookmark_interval=old.bookmark_interval, fresh_timeout=old.fresh_timeout,
                                security=old.security.options)
        await self.server.start()

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


#: The fixture servers' admin token, from a token file so that a restarted server accepts it too.
ADMIN_TOKEN = "fixture-admin-token"


@pytest.fixture(scope="session")
def security(tmp_path_factory) -> SecurityOptions:
    """Flags every fixture server starts with: a serving pair and a token file of its own, as a
    kube-apiserver is given, so that a restart keeps what clients trust and send."""
    folder = tmp_path_factory.mktemp("apiserver-pki")
    cert_pem, key_pem = certs.generate("localhost")
    (folder / "apiserver.crt").write_bytes(cert_pem)
    (folder / "apiserver.key").write_bytes(key_pem)
    (folder / "tokens.csv").write_text(f'{ADMIN_TOKEN},kubesched-admin,kubesched-admin,"system:masters"\n')
    return SecurityOptions(token_auth_file=str(folder / "tokens.csv"), tls_cert_file=str(folder / "apiserver.crt"),
                           tls_private_key_file=str(folder / "apiserver.key"))


@pytest.fixture
async def api(request, security):
    marker = request.node.get_closest_marker("store")
    store = ObjectStore(**(marker.kwargs if marker else {}))
    server = APIServer(store, port=0, bookmark_interval=0.2, security=security)
    await server.start()
    async with server.client_session(token=ADMIN_TOKEN) as session:
        http = Http(server, session)
        yield http
    await http.server.stop()


def pod(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name[:1]}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"capacity": {"cpu": "4", "pods": "110"}}}


def pytest_configure(config):
    config.addinivalue_line("markers", "store(**kwargs): ObjectStore arguments for the api fixture")
