"""The secure port's delegated authentication (TokenReview) and authorization (SubjectAccessReview)
against kubesched's own API server: 401 for tokens it does not know, 403 for identities RBAC does
not allow, always-allowed health paths, and answers cached for their TTL."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kubesched.apiserver import APIServer
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.serving.delegated import DelegatedAuth, requester_of, review_client
from kubesched.scheduler.serving.endpoints import Endpoints
from kubesched.utils.certs import server_context


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def serve(auth: DelegatedAuth | None) -> Endpoints:
    registry = CollectorRegistry()
    endpoints = Endpoints(healthz=[], livez=[], readyz=[], metrics=lambda: generate_latest(registry),
                          configz=lambda: {"kind": "KubeSchedulerConfiguration"}, debug=lambda: {}, auth=auth)
    await endpoints.start("127.0.0.1", secure_port=-1, insecure_port=-1, ssl_context=server_context(None, None, None))
    return endpoints


async def status_of(endpoints: Endpoints, method: str, path: str, token: str | None, secure: bool = True) -> int:
    url = f"https://127.0.0.1:{endpoints.ports['secure']}{path}" if secure else f"http://127.0.0.1:{endpoints.ports['insecure']}{path}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, session.request(method, url, headers=headers, data=b"2", ssl=False) as resp:
        return resp.status


@pytest.fixture
async def delegated():
    """An API server; a scheduler's endpoints reviewing through it as ``system:kube-scheduler``."""
    server = APIServer(ObjectStore(), port=0)
    await server.start()
    reviewer = server.client(token=server.scheduler_token)
    clock = Clock()
    auth = DelegatedAuth(token_reviews=requester_of(reviewer), access_reviews=requester_of(reviewer), clock=clock)
    endpoints = await serve(auth)
    tokens = {"anonymous": None, "wrong-token": "not-a-token", "nobody": server.mint_token("nobody"),
              "monitoring": server.mint_token("prometheus", ("system:monitoring",)), "admin": server.admin_token}
    yield endpoints, auth, tokens, clock
    await endpoints.stop()
    await reviewer.close()
    await server.stop()


REQUESTS = {"metrics": ("GET", "/metrics"), "configz": ("GET", "/configz"), "debug": ("GET", "/debug/cache"),
            "set verbosity": ("PUT", "/debug/flags/v"), "healthz": ("GET", "/healthz"), "readyz": ("GET", "/readyz")}
EXPECTED = {
    "anonymous":   {"metrics": 403, "configz": 403, "debug": 403, "set verbosity": 403, "healthz": 200, "readyz": 200},
    "wrong-token": {r: 401 for r in REQUESTS},
    "nobody":      {"metrics": 403, "configz": 403, "debug": 403, "set verbosity": 403, "healthz": 200, "readyz": 200},
    "monitoring":  {"metrics": 200, "configz": 403, "debug": 403, "set verbosity": 403, "healthz": 200, "readyz": 200},
    "admin":       {r: 200 for r in REQUESTS},
}


@pytest.mark.parametrize("identity", list(EXPECTED))
async def test_the_secure_port_authenticates_and_authorizes_through_the_api_server(delegated, identity):
    endpoints, _, tokens, _ = delegated
    got = {name: await status_of(endpoints, method, path, tokens[identity]) for name, (method, path) in REQUESTS.items()}
    assert got == EXPECTED[identity]


async def test_the_plain_http_port_is_not_authenticated(delegated):
    endpoints, auth, _, _ = delegated
    assert await status_of(endpoints, "GET", "/metrics", "not-a-token", secure=False) == 200
    assert auth.reviews_sent == 0


async def test_reviews_are_cached_for_their_ttl_so_scrapes_are_cheap(delegated):
    endpoints, auth, tokens, clock = delegated
    for _ in range(5):
        assert await status_of(endpoints, "GET", "/metrics", tokens["monitoring"]) == 200
    assert auth.reviews_sent == 2  # one TokenReview, one SubjectAccessReview
    for _ in range(3):
        assert await status_of(endpoints, "GET", "/configz", tokens["monitoring"]) == 403
    assert auth.reviews_sent == 3  # the denial is cached too
    clock.now += 11  # past both 10 s TTLs
    assert await status_of(endpoints, "GET", "/metrics", tokens["monitoring"]) == 200
    assert auth.reviews_sent == 5


async def test_403_and_401_bodies_are_the_status_objects_kube_scheduler_writes(delegated):
    endpoints, _, tokens, _ = delegated
    url = f"https://127.0.0.1:{endpoints.ports['secure']}/metrics"
    async with aiohttp.ClientSession() as session:
        async with session.get(url, headers={"Authorization": f"Bearer {tokens['nobody']}"}, ssl=False) as resp:
            assert await resp.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                         "message": 'forbidden: User "nobody" cannot get path "/metrics"',
                                         "reason": "Forbidden", "details": {}, "code": 403}
        async with session.get(url, headers={"Authorization": "Bearer not-a-token"}, ssl=False) as resp:
            assert await resp.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                         "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


async def test_without_kubeconfigs_outside_a_cluster_only_the_always_allowed_paths_are_open(monkeypatch, caplog):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    authn, authz = review_client("", "authentication"), review_client("", "authorization")
    assert authn is None and authz is None
    assert "No authorization-kubeconfig provided, so SubjectAccessReview of authorization tokens won't work." in caplog.text
    endpoints = await serve(DelegatedAuth(token_reviews=None, access_reviews=None))
    try:
        assert await status_of(endpoints, "GET", "/healthz", None) == 200
        assert await status_of(endpoints, "GET", "/metrics", None) == 403
        assert await status_of(endpoints, "GET", "/metrics", "any-token") == 403  # no TokenReview: anonymous
    finally:
        await endpoints.stop()
