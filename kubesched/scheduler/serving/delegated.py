"""Delegated authentication and authorization of ``kubesched run``'s secure port, as
k8s.io/apiserver's ``DelegatingAuthenticationOptions``/``DelegatingAuthorizationOptions`` give
kube-scheduler.

* Authentication: a bearer token is sent to the API server in a TokenReview; a token it does not
  recognize is a 401. A request without a token (or with one when no TokenReview client exists)
  is ``system:anonymous`` in ``system:unauthenticated``.
* Authorization, in order: members of ``system:masters`` are allowed; ``--authorization-always-allow-paths``
  (``/healthz``, ``/readyz``, ``/livez`` by default; ``/p/*`` is a prefix) are allowed; else a
  SubjectAccessReview for the non-resource path and the lower-cased HTTP method decides; without a
  SubjectAccessReview client, everything else is a 403.
* Clients: ``--authentication-kubeconfig``/``--authorization-kubeconfig``; when empty, the in-cluster
  service account; outside a cluster there is none, with upstream's warnings (the scheduler's own
  ``--kubeconfig`` is not used for this, exactly as upstream).
* Answers are cached as upstream: TokenReviews for ``--authentication-token-webhook-cache-ttl``,
  allowed and denied SubjectAccessReviews for ``--authorization-webhook-cache-authorized-ttl`` and
  ``-unauthorized-ttl`` (10 s each), so frequent scrapes of ``/metrics`` cost one review per TTL.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from kubesched.api.apierrors import APIError

log = logging.getLogger(__name__)

DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
ALWAYS_ALLOW_GROUPS = ("system:masters",)
DEFAULT_CACHE_TTL = 10.0
ANONYMOUS = ("system:anonymous", ("system:unauthenticated",))
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
STATUS_HEADERS = {"Content-Type": "application/json", "X-Content-Type-Options": "nosniff"}


@dataclass(frozen=True)
class Caller:
    """Who a request comes from, as a TokenReview's ``status.user`` says."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, list[str]] = field(default_factory=dict, compare=False, hash=False)


class _TTLCache:
    """Answers remembered for a fixed time (``cache.LRUExpireCache`` without the LRU bound: the
    keys are the few identities that scrape a scheduler)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._entries: dict[Any, tuple[float, Any]] = {}

    def get(self, key: Any) -> Any:
        entry = self._entries.get(key)
        if entry is None or entry[0] <= self.clock():
            self._entries.pop(key, None)
            return None
        return entry[1]

    def put(self, key: Any, value: Any, ttl: float) -> None:
        if ttl > 0:
            if len(self._entries) > 4096:
                self._entries.clear()
            self._entries[key] = (self.clock() + ttl, value)


#: ``request(method, path, body) -> (status, body bytes)``: how reviews reach the API server.
Requester = Callable[[str, str, dict], Awaitable[tuple[int, bytes]]]


class DelegatedAuth:
    """The authentication and authorization of one endpoint server (see the module docstring)."""

    def __init__(self, *, token_reviews: Requester | None, access_reviews: Requester | None,
                 always_allow_paths: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS, token_ttl: float = DEFAULT_CACHE_TTL,
                 allow_ttl: float = DEFAULT_CACHE_TTL, deny_ttl: float = DEFAULT_CACHE_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.token_reviews = token_reviews
        self.access_reviews = access_reviews
        self.always_allow_paths = always_allow_paths
        self.token_ttl, self.allow_ttl, self.deny_ttl = token_ttl, allow_ttl, deny_ttl
        self._tokens = _TTLCache(clock)
        self._decisions = _TTLCache(clock)
        #: Reviews sent to the API server (what the caches save).
        self.reviews_sent = 0

    @web.middleware
    async def middleware(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        """The aiohttp middleware: 401 or 403 as kube-scheduler writes them, else the handler."""
        caller = await self.authenticate(request.headers.get("Authorization"))
        if caller is None:
            return _status(401, "Unauthorized", "Unauthorized")
        verb = request.method.lower()
        if not await self.authorize(caller, verb, request.path):
            message = f'forbidden: User "{caller.name}" cannot {verb} path "{request.path}"'
            return _status(403, "Forbidden", message, details={})
        return await handler(request)

    async def authenticate(self, authorization: str | None) -> Caller | None:
        """The caller, or None for a token the API server does not recognize (a 401)."""
        token = _bearer(authorization)
        if token is None or self.token_reviews is None:
            return Caller(ANONYMOUS[0], ANONYMOUS[1])
        cached = self._tokens.get(token)
        if cached is not None:
            return cached or None
        caller = await self._review_token(token)
        self._tokens.put(token, caller or False, self.token_ttl)
        return caller

    async def _review_token(self, token: str) -> Caller | None:
        assert self.token_reviews is not None
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        status = await self._send(self.token_reviews, TOKEN_REVIEWS, review)
        if status is None or not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        return Caller(str(user.get("username", "")), tuple(user.get("groups") or ()), str(user.get("uid", "")),
                      dict(user.get("extra") or {}))

    async def authorize(self, caller: Caller, verb: str, path: str) -> bool:
        """Privileged groups, then always-allowed paths, then a (cached) SubjectAccessReview."""
        if any(g in ALWAYS_ALLOW_GROUPS for g in caller.groups):
            return True
        if any(_path_matches(rule, path) for rule in self.always_allow_paths):
            return True
        if self.access_reviews is None:
            return False
        key = (caller.name, caller.uid, caller.groups, verb, path)
        cached = self._decisions.get(key)
        if cached is not None:
            return bool(cached)
        spec: dict[str, Any] = {"user": caller.name, "groups": list(caller.groups),
                                "nonResourceAttributes": {"path": path, "verb": verb}}
        if caller.uid:
            spec["uid"] = caller.uid
        if caller.extra:
            spec["extra"] = caller.extra
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        status = await self._send(self.access_reviews, ACCESS_REVIEWS, review)
        if status is None:
            return False  # an error is not cached: the next request asks again
        allowed = bool(status.get("allowed")) and not status.get("denied")
        self._decisions.put(key, allowed, self.allow_ttl if allowed else self.deny_ttl)
        return allowed

    async def _send(self, requester: Requester, path: str, review: dict) -> dict | None:
        """The ``status`` of a created review, or None when the API server could not answer."""
        self.reviews_sent += 1
        try:
            code, body = await requester("POST", path, review)
        except (OSError, APIError, TimeoutError, aiohttp.ClientError) as e:
            log.warning("%s failed: %s", review["kind"], e)
            return None
        if code != 201 and code != 200:
            log.warning("%s failed: HTTP %d: %s", review["kind"], code, body[:200].decode(errors="replace"))
            return None
        try:
            status = orjson.loads(body).get("status")
        except (orjson.JSONDecodeError, AttributeError):
            return None
        return status if isinstance(status, dict) else None


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def _path_matches(rule: str, path: str) -> bool:
    """``path.NewAuthorizer``: an exact path, or a prefix when the rule ends in ``*``."""
    if rule.endswith("*"):
        return path.startswith(rule[:-1])
    return rule == path


def _status(code: int, reason: str, message: str, details: dict | None = None) -> web.Response:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                            "reason": reason}
    if details is not None:
        body["details"] = details
    body["code"] = code
    return web.Response(status=code, body=orjson.dumps(body), headers=STATUS_HEADERS)


def review_client(kubeconfig: str, purpose: str) -> Any:
    """The ``KubeClient`` that sends ``purpose`` reviews (authentication or authorization): from
    ``kubeconfig``, else the in-cluster service account, else None with upstream's warning."""
    from lightkube.config.kubeconfig import KubeConfig
    from lightkube.core.exceptions import ConfigError

    from kubesched.client.kube import KubeClient, load_config

    if kubeconfig:
        return KubeClient(load_config(kubeconfig), qps=200, burst=400, timeout=10.0)
    try:
        config = KubeConfig.from_service_account().get()
    except (ConfigError, KeyError, OSError):
        if purpose == "authentication":
            log.warning("No authentication-kubeconfig provided in order to lookup client-ca-file in "
                        "configmap/extension-apiserver-authentication in kube-system, so client certificate "
                        "authentication won't work; bearer tokens are not reviewed either, so every caller is "
                        "system:anonymous")
        else:
            log.warning("No authorization-kubeconfig provided, so SubjectAccessReview of authorization tokens won't work.")
        return None
    return KubeClient(config, qps=200, burst=400, timeout=10.0)


def requester_of(client: Any) -> Requester | None:
    """A ``Requester`` over a ``KubeClient`` (None for none)."""
    if client is None:
        return None

    async def send(method: str, path: str, body: dict) -> tuple[int, bytes]:
        status, payload = await client.request(method, path, body=body)
        return int(status), bytes(payload)

    return send
