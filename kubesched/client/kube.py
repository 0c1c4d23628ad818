"""``KubeClient``: the scheduler's ``ClusterClient`` over HTTP, for ``kubesched apiserver`` and real
clusters alike.

Configuration and credentials come from lightkube (kubeconfig files, ``KUBECONFIG``, in-cluster
service accounts, tokens, token files, exec plugins, client certificates, CA bundles); requests
go through one pooled aiohttp session with orjson, because the hot paths (watch streams,
bindings, status patches) run thousands of times a second, except POSTs (bindings, events,
creations), which take the leaner transport of ``kubesched.client.posts``. Bindings are raw
POSTs: the ``pods/binding`` reply is a ``Status``, which typed clients fail to decode.

A watch call ends when the server ends its stream (its timeout); the informer then watches again
from the last resourceVersion seen (events or bookmarks) once it has checked that the server is
still the same one; a ``410 Gone`` (as an ERROR event or a status) is raised as
``Gone`` so the informer relists. A broken stream or an unreachable server is raised as
``StreamBroken`` (a ``ConnectionError``), which the informer answers by backing off and watching
again from the same resourceVersion, as client-go's reflector does.

Like client-go, every request (watches included) first takes a token from a client-side token
bucket when ``qps`` is set (``clientConnection.qps``/``burst``), and credentials read from a token
file are re-read every minute and after a 401, so rotated service-account tokens keep working.
"""

from __future__ import annotations

import asyncio
import base64
import builtins  # annotations after the `list` verb name the builtin through it
import contextlib
import logging
import os
import platform
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson
import yarl

from kubesched.api import apierrors as errors
from kubesched.api.kinds import CustomKind, Kind
from kubesched.api.meta import set_condition
from kubesched.api.watch import BOOKMARK, ERROR, WatchEvent
from kubesched.client.interface import ClusterClient
from kubesched.client.posts import PostTransport
from kubesched.utils.clock import RealClock

log = logging.getLogger(__name__)

LIST_PAGE = 500
_ERRORS: dict[int, type[errors.APIError]] = {
    400: errors.BadRequest, 403: errors.Forbidden, 404: errors.NotFound, 405: errors.MethodNotAllowed, 410: errors.Gone,
    413: errors.TooLarge, 415: errors.Unsupported, 422: errors.Invalid, 429: errors.TooManyRequests, 504: errors.Timeout,
}
_JSON = {"Content-Type": "application/json", "Accept": "application/json"}
#: How long credentials from a token file are reused before the file is read again (client-go: 1 minute).
TOKEN_FILE_REFRESH = 60.0
#: A watch that ends within this many seconds without delivering anything is treated as an error.
SHORT_WATCH = 1.0
#: Retries of a request the server answered with 429 (or 5xx) and Retry-After (client-go: 10).
MAX_RETRIES = 10
#: Client-side throttling longer than this is logged (client-go logs from 50ms at V(3), from 1s always).
LONG_THROTTLE = 1.0
_GOARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}
#: client-go's default user agent shape: ``<binary>/<version> (<os>/<arch>) <vendor>/<commit>``.
USER_AGENT = f"kubesched/v0.1.0 ({platform.system().lower()}/{_GOARCH.get(platform.machine().lower(), platform.machine().lower())}) kubesched"


class StreamBroken(ConnectionError):
    """A watch stream or connection failed before the server ended it: watch again from the last
    resourceVersion after a backoff (no relist needed)."""


class WriteFenced(RuntimeError):
    """A write refused on the client side because ``write_fence`` forbids writes."""


class TokenBucket:
    """client-go's ``flowcontrol.NewTokenBucketRateLimiter(qps, burst)``: ``burst`` tokens at start,
    refilled at ``qps`` per second; a caller without a token waits for its reservation."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = float(qps)
        self.burst = max(1, int(burst))
        self.tokens = float(self.burst)
        self.last = time.monotonic()
        self.throttled = 0.0

    def reserve(self) -> float:
        """Take a token now (possibly going into debt); returns how long the caller must wait."""
        now = time.monotonic()
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
        self.last = now
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0 else -self.tokens / self.qps

    async def acquire(self, what: str = "") -> None:
        wait = self.reserve()
        if wait <= 0:
            return
        self.throttled += wait
        if wait >= LONG_THROTTLE:
            log.info("Waited for %.3fs due to client-side throttling, not priority and fairness, request: %s", wait, what)
        await asyncio.sleep(wait)


def rate_limiter(qps: float | None, burst: int | None) -> TokenBucket | None:
    """The limiter for a ``clientConnection``: none for a negative qps (client-go: "no rate limit"),
    client-go's defaults (5 qps, burst 10) for zeros, else a token bucket."""
    if qps is None or qps < 0:
        return None
    return TokenBucket(qps or 5.0, burst or 10)


def api_error(code: int, body: bytes) -> errors.APIError:
    """The typed error for an apiserver failure response (its ``Status`` when there is one)."""
    try:
        status = orjson.loads(body)
    except orjson.JSONDecodeError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    message = status.get("message") or body.decode("utf-8", "replace")[:500] or f"HTTP {code}"
    details = status.get("details") or {}
    if code == 409:
        cls: type[errors.APIError] = errors.AlreadyExists if status.get("reason") == "AlreadyExists" else errors.Conflict
    else:
        cls = _ERRORS.get(code, errors.APIError)
    error = cls(message, kind=details.get("kind", ""), name=details.get("name", ""), group=details.get("group", ""),
                causes=details.get("causes"))
    if isinstance(error, errors.Timeout):
        error.retry_after = int(details.get("retryAfterSeconds") or 0)
    if cls is errors.APIError:
        error.code = code
        error.reason = status.get("reason", "InternalError")
    return error


class KubeClient(ClusterClient):
    """See the module docstring. ``config`` is a lightkube ``SingleConfig``; without it the
    kubeconfig file (or lightkube's default discovery: ``KUBECONFIG``, ``~/.kube/config``, in-cluster)
    and ``context`` are used."""

    def __init__(self, config: Any = None, *, kubeconfig: str | Path | None = None, context: str | None = None,
                 timeout: float = 30.0, connections: int = 256, watch_timeout: tuple[int, int] = (300, 600),
                 qps: float | None = None, burst: int | None = None, user_agent: str | None = None,
                 post_connections: int | None = None, unix_socket: str | None = None) -> None:
        """``qps``/``burst``: client-side rate limit as ``clientConnection`` sets it (None: unlimited).
        ``timeout``: seconds for one request (watches excepted). ``post_connections``: at most this
        many connections for POSTs (``connections`` when None); see ``kubesched.client.posts``.
        ``unix_socket``: connect to this socket instead of the server's address, without TLS (the
        server of ``kubesched up`` listens on one for its own scheduler process)."""
        if config is None:
            config = load_config(kubeconfig, context)
        self.config = config
        self.server = str(config.cluster.server).rstrip("/")
        self.timeout = timeout
        self.connections = connections
        self.post_connections = post_connections or connections
        self.unix_socket = unix_socket
        self.watch_timeout = watch_timeout
        self.limiter = rate_limiter(qps, burst)
        self.user_agent = user_agent or USER_AGENT
        self._session: aiohttp.ClientSession | None = None
        #: POSTs go through a leaner transport than aiohttp's (see ``kubesched.client.posts``).
        self._posts: PostTransport | None = None
        self._request_timeout = aiohttp.ClientTimeout(total=timeout)
        #: The headers of a request by content type, built once per credential (see ``_request_headers``),
        #: and the same encoded for a POST.
        self._header_sets: dict[str, dict[str, str]] = {}
        self._header_blocks: dict[str, bytes] = {}
        self._auth = _auth_of(config)
        self._auth_headers: dict[str, str] | None = None
        self._auth_read = 0.0
        self.clock = RealClock()
        #: Says why writes must not be sent (a replica that cannot prove it still leads), or None.
        #: Checked after the rate limiter, right before a write goes out.
        self.write_fence: Callable[[], str | None] | None = None
        #: Whether each custom resource (group, version, plural) is namespaced, as discovery said.
        self._custom_scopes: dict[tuple[str, str, str], bool] = {}

    @classmethod
    def for_server(cls, url: str, token: str | None = None, *, ca_data: bytes = b"", **kwargs: Any) -> KubeClient:
        """A client for ``url`` and an optional token; over HTTPS the server's certificate is
        verified against ``ca_data`` (PEM) when given, else against the system's CAs."""
        from lightkube.config.kubeconfig import KubeConfig

        cluster: dict[str, Any] = {"server": url}
        if ca_data:
            cluster["certificate-authority-data"] = base64.b64encode(ca_data).decode()
        conf = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": token} if token else {}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}], "current-context": "c"}
        return cls(KubeConfig.from_dict(conf).get(), **kwargs)

    # --- plumbing ---------------------------------------------------------------------------
    def _ssl(self) -> ssl.SSLContext | bool:
        if self.unix_socket is not None or not self.server.startswith("https"):
            return False
        from lightkube.config.client_adapter import verify_cluster

        return verify_cluster(self.config.cluster, self.config.user, self.config.abs_file)

    async def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector: aiohttp.BaseConnector
            if self.unix_socket is not None:
                connector = aiohttp.UnixConnector(self.unix_socket, limit=self.connections, keepalive_timeout=60)
            else:
                connector = aiohttp.TCPConnector(limit=self.connections, ssl=self._ssl(), keepalive_timeout=60)
            # No cookie jar (the API sets no cookies), and no default headers to merge per request.
            self._session = aiohttp.ClientSession(connector=connector, json_serialize=lambda o: orjson.dumps(o).decode(),
                                                  timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeout),
                                                  cookie_jar=aiohttp.DummyCookieJar())
        return self._session

    def posts(self) -> PostTransport:
        if self._posts is None:
            self._posts = PostTransport(self.server, self._ssl(), self.post_connections, unix_socket=self.unix_socket)
        return self._posts

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._posts is not None:
            self._posts.close()
            self._posts = None

    async def _headers(self, refresh: bool = False) -> dict[str, str]:
        """Authorization (and User-Agent) headers. A refresh builds the auth anew, so token files are
        read again and exec plugins run again; token files are also re-read every minute."""
        base = {"User-Agent": self.user_agent}
        if self._auth is None:
            return base
        stale = self._auth_stale()
        if self._auth_headers is None or refresh or stale:
            if refresh or stale:
                self._auth = _auth_of(self.config)
            self._auth_headers = await _run_auth_flow(self._auth, self.server)
            self._auth_read = time.monotonic()
            self._header_sets.clear()
            self._header_blocks.clear()
        return {**base, **self._auth_headers}

    def _auth_stale(self) -> bool:
        """Whether credentials read from a token file are due to be read again."""
        return self.config.user is not None and self.config.user.token_file is not None and \
            time.monotonic() - self._auth_read > TOKEN_FILE_REFRESH

    async def _request_headers(self, content_type: str, refresh: bool) -> dict[str, str]:
        """The full header set of a request: built once per content type and credential, since
        bindings and status patches send thousands of identical ones (aiohttp copies them)."""
        headers = self._header_sets.get(content_type)
        if headers is not None and not refresh and not self._auth_stale():
            return headers
        auth = await self._headers(refresh=refresh)
        headers = self._header_sets.get(content_type)
        if headers is None:
            headers = self._header_sets[content_type] = {**_JSON, "Content-Type": content_type, **auth}
        return headers

    async def _post_headers(self, content_type: str, refresh: bool) -> bytes:
        """``_request_headers`` as a POST's header lines, with the content codings offered (Go's
        transport offers gzip)."""
        block = self._header_blocks.get(content_type)
        if block is not None and not refresh and not self._auth_stale():
            return block
        headers = await self._request_headers(content_type, refresh)
        block = self._header_blocks.get(content_type)
        if block is None:
            lines = {**headers, "Accept-Encoding": "gzip"}
            block = self._header_blocks[content_type] = "".join(f"{k}: {v}\r\n" for k, v in lines.items()).encode("latin-1")
        return block

    async def _throttle(self, method: str, path: str) -> None:
        if self.limiter is not None:
            await self.limiter.acquire(f"{method}:{self.server}{path}")

    async def request(self, method: str, path: str, *, params: Mapping[str, str] | None = None, body: Any = None,
                      content_type: str = "application/json") -> tuple[int, bytes]:
        """One request, after the rate limiter; retried once with fresh credentials on 401, and, as
        client-go does, after ``Retry-After`` seconds on 429 (or a 5xx carrying ``Retry-After``), up to
        ``MAX_RETRIES`` times. Returns status and body."""
        data = body if isinstance(body, bytes) or body is None else orjson.dumps(body)
        refreshed, retries = False, 0
        while True:
            await self._throttle(method, path)
            if method != "GET" and self.write_fence is not None and (reason := self.write_fence()):
                raise WriteFenced(f"{method} {path} not sent: {reason}")
            if method == "POST" and params is None:
                headers = await self._post_headers(content_type, refreshed)
                status, payload, retry_after = await self.posts().post(path, headers, data or b"", self.timeout)
            else:
                status, payload, retry_after = await self._aiohttp_request(method, path, params, data, content_type, refreshed)
            if status == 401 and not refreshed and self._auth is not None:
                refreshed = True
                continue
            if retries < MAX_RETRIES and (status == 429 or (status >= 500 and retry_after is not None)):
                retries += 1
                await asyncio.sleep(_seconds(retry_after))
                continue
            return status, payload

    async def _aiohttp_request(self, method: str, path: str, params: Mapping[str, str] | None, data: bytes | None,
                               content_type: str, refresh: bool) -> tuple[int, bytes, str | None]:
        session = await self.session()
        headers = await self._request_headers(content_type, refresh)
        url = yarl.URL(self.server + path, encoded=True)  # paths are quoted already: no parsing again
        async with session.request(method, url, params=params, data=data, headers=headers,
                                   timeout=self._request_timeout) as resp:
            return resp.status, await resp.read(), resp.headers.get("Retry-After")

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict:
        status, payload = await self.request(method, path, **kwargs)
        if status >= 400:
            raise api_error(status, payload)
        return orjson.loads(payload) if payload else {}

    # --- ClusterClient ------------------------------------------------------------------------
    async def list(self, kind: Kind, *, field_selector: str = "") -> tuple[list[dict], str]:
        items: list[dict] = []
        selection = {"fieldSelector": field_selector} if field_selector else {}
        params = {"limit": str(LIST_PAGE), **selection}
        while True:
            try:
                page = await self._call("GET", resource_path(kind), params=params)
            except errors.Gone:
                if "continue" not in params:
                    raise
                items, params = [], {**selection}
                continue
            for item in page.get("items") or []:
                item.setdefault("apiVersion", kind.api_version)
                item.setdefault("kind", kind.kind)
                items.append(item)
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                return items, str(meta.get("resourceVersion", ""))
            params = {"limit": str(LIST_PAGE), "continue": meta["continue"], **selection}

    async def watch(self, kind: Kind, resource_version: str, *, namespace: str | None = None,
                    field_selector: str = "") -> AsyncIterator[builtins.list[WatchEvent]]:
        """Watch from ``resource_version`` with bookmarks (in ``namespace`` and matching
        ``field_selector`` when given); re-watch from the last version seen when the server ends a
        stream. Raises ``Gone`` (relist), ``StreamBroken`` (watch again later) or the API error of a
        refused watch."""
        rv = resource_version
        loop = asyncio.get_running_loop()
        path = resource_path(kind, namespace)
        while True:
            timeout = random.randint(*self.watch_timeout)
            params = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout)}
            if field_selector:
                params["fieldSelector"] = field_selector
            if rv:
                params["resourceVersion"] = rv
            started, delivered = loop.time(), 0
            try:
                async with self._open_watch(kind, params, timeout, path) as resp:
                    async for batch in _event_batches(resp, kind):
                        for event in batch:
                            if event.type == ERROR:
                                raise _watch_error(event.object)
                            rv = event.object.get("metadata", {}).get("resourceVersion", rv)
                        delivered += len(batch)
                        yield batch
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError) as e:
                raise StreamBroken(f"watch of {kind.resource} at resourceVersion {rv}: {e or type(e).__name__}") from e
            if not delivered and loop.time() - started < SHORT_WATCH:
                raise StreamBroken(f"very short watch of {kind.resource}: unexpected watch close - "
                                   "watch lasted less than a second and no items received")
            return  # the informer checks the server is still the same one before it watches again

    @contextlib.asynccontextmanager
    async def _open_watch(self, kind: Kind, params: dict[str, str], timeout: int,
                          path: str = "") -> AsyncIterator[aiohttp.ClientResponse]:
        """The streaming GET of a watch (of ``path``, by default every object of ``kind``), after the
        rate limiter and credentials (a 401 is retried once with fresh ones); raises the API error
        of a refused watch."""
        session = await self.session()
        path = path or resource_path(kind)
        read_timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=timeout + 60)
        for attempt in range(2):
            await self._throttle("GET", path)
            headers = {"Accept": "application/json", **await self._headers(refresh=attempt > 0)}
            async with session.get(self.server + path, params=params, headers=headers, timeout=read_timeout) as resp:
                if resp.status == 401 and attempt == 0 and self._auth is not None:
                    continue
                if resp.status >= 400:
                    raise api_error(resp.status, await resp.read())
                yield resp
                return
        raise api_error(401, b"")

    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict | None:
        status, payload = await self.request("GET", resource_path(kind, namespace, name))
        if status == 404:
            return None
        if status >= 400:
            raise api_error(status, payload)
        return orjson.loads(payload)

    async def create(self, kind: Kind, obj: dict) -> dict:
        namespaced = await self.namespaced(kind)
        namespace = (obj.get("metadata") or {}).get("namespace") if namespaced else None
        path = resource_path(kind, namespace or "default") if namespaced else _cluster_path(kind)
        return await self._call("POST", path, body=obj)

    async def namespaced(self, kind: Kind) -> bool:
        """Whether ``kind``'s objects live in namespaces. A custom resource named by group, version
        and plural alone does not say (its CRD does): the server's discovery document of the group
        version tells, as client-go's REST mapper learns it, once per resource."""
        if not isinstance(kind, CustomKind) or kind.schema is not None:
            return kind.namespaced
        key = (kind.group, kind.version, kind.resource)
        if key not in self._custom_scopes:
            status, payload = await self.request("GET", f"/apis/{quote(kind.group)}/{quote(kind.version)}")
            if status >= 400 and status != 404:
                raise api_error(status, payload)
            found = orjson.loads(payload) if status < 400 else {}
            for resource in found.get("resources") or ():
                if resource.get("name") == kind.resource:
                    self._custom_scopes[key] = bool(resource.get("namespaced"))
                    break
            else:
                raise errors.NotFound(f"the server could not find the requested resource ({kind.resource}.{kind.version}.{kind.group})",
                                      kind=kind.resource, group=kind.group)
        return self._custom_scopes[key]

    async def update(self, kind: Kind, obj: dict) -> dict:
        meta = obj["metadata"]
        return await self._call("PUT", resource_path(kind, meta.get("namespace"), meta["name"]), body=obj)

    async def update_status(self, kind: Kind, obj: dict) -> dict:
        meta = obj["metadata"]
        return await self._call("PUT", resource_path(kind, meta.get("namespace"), meta["name"], "status"), body=obj)

    async def patch(self, kind: Kind, namespace: str | None, name: str, patch: dict, *,
                    patch_type: str = "application/merge-patch+json", subresource: str | None = None) -> dict:
        """PATCH an object (a JSON merge patch unless ``patch_type`` says otherwise); what client-go's
        event sink does to bump an event series."""
        return await self._call("PATCH", resource_path(kind, namespace, name, subresource), body=patch, content_type=patch_type)

    async def delete(self, kind: Kind, namespace: str | None, name: str, *, uid: str | None = None,
                     grace_period: int | None = None) -> None:
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if uid:
            options["preconditions"] = {"uid": uid}
        if grace_period is not None:
            options["gracePeriodSeconds"] = grace_period
        await self._call("DELETE", resource_path(kind, namespace, name), body=options)

    async def bind(self, pod: dict, node_name: str) -> None:
        meta = pod["metadata"]
        namespace = meta.get("namespace", "default")
        binding = {"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": meta["name"], "namespace": namespace, "uid": meta.get("uid")},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        status, payload = await self.request("POST", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(meta['name'])}/binding",
                                             body=binding)
        if status >= 400:
            raise api_error(status, payload)

    async def patch_pod_status(self, pod: dict, conditions: builtins.list[dict], nominated_node_name: str | None) -> None:
        """A strategic merge patch of ``status``: conditions merge by type (lastTransitionTime moved
        only when the status changes, as ``podutil.UpdatePodCondition``), the nominated node is set
        or, with "", cleared."""
        meta = pod["metadata"]
        current = (pod.get("status") or {}).get("conditions") or []
        status: dict[str, Any] = {}
        if conditions:
            updated = current
            for condition in conditions:
                updated = set_condition(updated, condition, self.clock.wall())
            changed = [c for c in updated if c not in current]
            if changed:
                status["conditions"] = changed
        if nominated_node_name is not None:
            status["nominatedNodeName"] = nominated_node_name or None
        if not status:
            return
        patch = {"status": status}
        path = resource_path_pod(meta.get("namespace", "default"), meta["name"]) + "/status"
        await self._call("PATCH", path, body=patch, content_type="application/strategic-merge-patch+json")


def _seconds(retry_after: str | None) -> float:
    """A ``Retry-After`` header in seconds (client-go: a whole number, 1 when missing or unreadable)."""
    try:
        return max(0.0, float(int(retry_after or "1")))
    except ValueError:
        return 1.0


def resource_path(kind: Kind, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
    base = "/api/v1" if not kind.group else f"/apis/{kind.group}/{kind.version}"
    if kind.namespaced and namespace:
        base += f"/namespaces/{quote(namespace)}"
    path = f"{base}/{kind.resource}"
    if name:
        path += f"/{quote(name)}"
        if subresource:
            path += f"/{subresource}"
    return path


def _cluster_path(kind: Kind) -> str:
    """The collection of a cluster-scoped ``kind`` (whatever its ``namespaced`` says)."""
    return f"/apis/{kind.group}/{kind.version}/{kind.resource}" if kind.group else f"/api/v1/{kind.resource}"


def resource_path_pod(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"


async def _event_batches(resp: aiohttp.ClientResponse, kind: Kind) -> AsyncIterator[list[WatchEvent]]:
    """Newline-delimited watch events, as many per batch as have arrived."""
    buffer = b""
    while True:
        chunk = await resp.content.readany()
        if not chunk:
            return
        buffer += chunk
        if b"\n" not in buffer:
            continue
        *lines, buffer = buffer.split(b"\n")
        batch = []
        for line in lines:
            if not line.strip():
                continue
            raw = orjson.loads(line)
            obj = raw.get("object") or {}
            if raw.get("type") not in (ERROR, BOOKMARK):
                obj.setdefault("apiVersion", kind.api_version)
                obj.setdefault("kind", kind.kind)
            batch.append(WatchEvent(raw.get("type", ""), obj))
        if batch:
            yield batch


def _watch_error(status: dict) -> errors.APIError:
    code = int(status.get("code") or 500)
    return api_error(code, orjson.dumps(status))


def load_config(kubeconfig: str | Path | None = None, context: str | None = None, master: str | None = None) -> Any:
    """A lightkube ``SingleConfig`` the way ``clientcmd.BuildConfigFromFlags(master, kubeconfig)`` finds
    one: the kubeconfig file when given; else, without a master either, the in-cluster service
    account, falling back (unlike client-go, for convenience) to ``KUBECONFIG`` or ``~/.kube/config``.
    ``master`` overrides the server address."""
    from lightkube.config.kubeconfig import KubeConfig
    from lightkube.core.exceptions import ConfigError

    if kubeconfig:
        conf = KubeConfig.from_file(Path(kubeconfig).expanduser())
    elif master:
        conf = KubeConfig.from_server(master)
    else:
        try:
            conf = KubeConfig.from_service_account()
        except (ConfigError, KeyError) as e:
            log.warning("Neither --kubeconfig nor --master was specified and the in-cluster configuration "
                        "is unavailable (%s); using %s", e, os.environ.get("KUBECONFIG") or "~/.kube/config")
            conf = KubeConfig.from_env()
    single = conf.get(context)
    if single is None:
        raise errors.APIError(f"kubeconfig has no context {context or '(current)'}")
    if master:
        import msgspec

        single = single._replace(cluster=msgspec.structs.replace(single.cluster, server=master))
    return single


def _auth_of(config: Any) -> Any:
    if config.user is None:
        return None
    from lightkube.config.client_adapter import user_auth

    return user_auth(config.user)


async def _run_auth_flow(auth: Any, server: str) -> dict[str, str]:
    """Run a lightkube (httpx) auth flow once to learn the headers it adds."""
    import httpx2 as httpx  # what lightkube 1.x (the lower bound in the dependencies) is built on

    request = httpx.Request("GET", server)
    if hasattr(auth, "async_auth_flow"):
        flow = auth.async_auth_flow(request)
        try:
            authed = await flow.__anext__()
        finally:
            await flow.aclose()
    else:
        sync = auth.sync_auth_flow(request)
        authed = next(sync)
        sync.close()
    value = authed.headers.get("authorization")
    return {"Authorization": value} if value else {}


async def wait_ready(client: KubeClient, timeout: float = 30.0) -> None:
    """Until ``/readyz`` answers (for a server started alongside)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            status, _ = await client.request("GET", "/readyz")
            if status == 200:
                return
        except aiohttp.ClientError:
            pass
        if loop.time() > deadline:
            raise TimeoutError(f"API server at {client.server} not ready after {timeout}s")
        await asyncio.sleep(0.1)
