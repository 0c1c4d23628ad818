"""``APIServer``: the Kubernetes REST API over HTTP (aiohttp) on top of an ``ObjectStore``.

One catch-all route parses ``/api/v1/...`` and ``/apis/<group>/<version>/...`` itself (cheaper than
a router with hundreds of patterns, and it keeps unknown paths answering with apiserver's 404
Status). Watches stream newline-delimited JSON events over a chunked response, with bookmarks,
``timeoutSeconds``, ``sendInitialEvents`` and a 410 ``ERROR`` event for a resourceVersion the
store no longer has.

Every request is authenticated (``authn``) and authorized by RBAC (``rbac``) before it is
dispatched, over HTTPS (``security``); ``SecurityOptions(allow_anonymous=True)`` serves plain HTTP
and lets every request through, as ``--insecure-allow-anonymous``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import random
import shutil
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
import orjson
import yaml
from aiohttp import web

from kubesched.api.apierrors import APIError, BadRequest, Gone, NotFound, Timeout
from kubesched.api.kinds import Kind, kind_for_resource, served, unserved_kinds
from kubesched.api.watch import BOOKMARK, ERROR, WatchEvent
from kubesched.apiserver import (
    bootstrappolicy,
    bounds,
    codec,
    discovery,
    kubeletproxy,
    metrics,
    openapi,
    openapi_proto,
    tables,
    unixsocket,
)
from kubesched.apiserver.authn import ANONYMOUS_USER, UserInfo
from kubesched.apiserver.crds import CustomResources
from kubesched.apiserver.handlers import Call, NotFoundPath, Reply, RestAPI, View, int_param, method_not_allowed
from kubesched.apiserver.persistence import SQLitePersistence
from kubesched.apiserver.rbac import RBACAuthorizer, check_escalation, forbidden, impersonated, request_attributes
from kubesched.apiserver.reviews import REVIEW_KINDS, Reviews
from kubesched.apiserver.security import SecurityOptions, ServerSecurity
from kubesched.apiserver.store import ObjectStore, Watch
from kubesched.apiserver.webui import UI_API_PREFIX, UI_PREFIX, WebUI, summary

if TYPE_CHECKING:
    from kubesched.client.kube import KubeClient

log = logging.getLogger(__name__)

JSON_HEADERS = {"Content-Type": "application/json", "Cache-Control": "no-cache, private"}
_NAMESPACE_SUBRESOURCES = ("status", "finalize")
#: Where the scheduling explanations of ``kubesched up`` are read (a read-only, namespaced resource).
EXPLANATION_GROUP, EXPLANATION_VERSION, EXPLANATION_RESOURCE = "kubesched.io", "v1alpha1", "explanations"
_CACHE_LIMIT = 8192
#: How long a read at a resourceVersion the store has not reached waits for it (the watch cache's
#: ``blockTimeout``) before the 504 that makes clients relist, and the retry it suggests.
FRESH_TIMEOUT = 3.0
TOO_LARGE_RETRY_SECONDS = 1
_FRESH_POLL = 0.05
#: Seconds a watch waits after its first pending event for more before it writes them: under load
#: one write (one TLS record, one ``send``) then carries the events of many requests, where a
#: write per event cost the server a fifth of its time in ``send`` alone.
WATCH_COALESCE = 0.002
#: The longest request line or header accepted (kube-apiserver serves with Go's ``MaxHeaderBytes``
#: of 1 MiB; the HTTP layer answers longer ones itself, before any handler).
MAX_HEADER_BYTES = 1 << 20
#: Where ``kubesched apiserver`` and ``kubesched up`` write the kubeconfig for their server.
DEFAULT_KUBECONFIG = "~/.kube/kubesched.yaml"
KUBERNETES_SERVICE = {
    "apiVersion": "v1", "kind": "Service",
    "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
    "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]},
}


class APIServer:
    """Serve ``store`` (a fresh one by default) on ``host:port``; ``port=0`` picks a free port.
    ``security`` defaults to HTTPS with authentication and RBAC (see ``security``)."""

    def __init__(self, store: ObjectStore | None = None, *, host: str = "127.0.0.1", port: int = 6443,
                 data: str | Path | None = None, bookmark_interval: float = 60.0, garbage_collect: bool = True,
                 fresh_timeout: float = FRESH_TIMEOUT, security: SecurityOptions | None = None) -> None:
        self.store = store if store is not None else ObjectStore()
        state = Path(f"{data}.credentials") if data else None
        self.security = ServerSecurity(security or SecurityOptions(), host, state)
        self.authorizer = RBACAuthorizer(self.store)
        self.reviews = Reviews(self.security.authenticator, self.authorizer, always_allow=not self.security.enabled)
        self.host = host
        self.port = port
        self.data = Path(data) if data else None
        self.bookmark_interval = bookmark_interval
        self.fresh_timeout = fresh_timeout
        self.rest = RestAPI(self.store, garbage_collect=garbage_collect)
        if self.security.enabled:
            self.rest.guard = lambda call, obj: check_escalation(self.authorizer, call.user, obj)
        self.persistence: SQLitePersistence | None = None
        self.restored = 0
        self._runner: web.AppRunner | None = None
        #: The private directory of the Unix socket ``listen_unix`` opened, if any.
        self._socket_dir: Path | None = None
        self._encoded: dict[tuple, bytes] = {}
        self._watches: set[asyncio.Task] = set()
        self.requests = 0
        #: Extra exposition text appended to ``/metrics`` (``kubesched up`` adds its scheduler
        #: process's, which it has to ask for: a source may return an awaitable).
        self.metrics_sources: list[Callable[[], bytes | Awaitable[bytes]]] = []
        #: The web UI under ``/ui/`` (its files need no credential; its data comes from the API).
        self.webui = WebUI(self.admin_token)
        #: ``(namespace, pod) -> explanation``: the scheduling explanations ``kubesched up`` serves
        #: at ``/apis/kubesched.io/v1alpha1/namespaces/{namespace}/explanations/{pod}`` (None: no
        #: scheduler); it may return an awaitable (``up`` asks its scheduler process).
        self.explanations: Callable[[str, str], dict | Awaitable[dict | None] | None] | None = None

    # --- lifecycle ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Where clients reach the server (127.0.0.1 when it listens on every address, so that
        the serving certificate's 127.0.0.1 matches)."""
        scheme = "https" if self.security.enabled else "http"
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"{scheme}://{host}:{self.port}"

    @property
    def admin_token(self) -> str:
        """The bearer token of the admin (``system:masters``) the kubeconfig carries ("" when insecure)."""
        return self.security.admin_token

    @property
    def scheduler_token(self) -> str:
        """The bearer token of ``system:kube-scheduler`` ("" when insecure)."""
        return self.security.scheduler_token

    def client_session(self, token: str | None = None, **kwargs: Any) -> aiohttp.ClientSession:
        """An ``aiohttp`` session that trusts this server's CA and sends ``token`` (the admin's by
        default) on every request: for tests and tools that speak raw HTTP to the server."""
        headers = {"Authorization": f"Bearer {token or self.admin_token}"} if (token or self.admin_token) else {}
        connector = aiohttp.TCPConnector(ssl=self.security.client_ssl_context())
        return aiohttp.ClientSession(connector=connector, headers=headers, **kwargs)

    def mint_token(self, user: str, groups: tuple[str, ...] = ()) -> str:
        """A new bearer token for ``user`` in ``groups``, valid while the server runs."""
        return self.security.tokens.mint(user, groups)

    def client(self, token: str | None = None, **kwargs: Any) -> KubeClient:
        """A ``KubeClient`` for this server, trusting its CA, as ``token``'s user (the admin by default)."""
        from kubesched.client.kube import KubeClient

        return KubeClient.for_server(self.url, token=token or self.admin_token or "kubesched",
                                     ca_data=self.security.ca_data, **kwargs)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=codec.MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def start(self) -> None:
        if self.data is not None:
            self.persistence = SQLitePersistence(self.data)
            self.restored = self.persistence.attach(self.store)
        if self.restored == 0:
            self._bootstrap()
        self._bootstrap_rbac()
        self._runner = web.AppRunner(self.app(), handler_cancellation=True, access_log=None, shutdown_timeout=1.0,
                                     max_line_size=MAX_HEADER_BYTES, max_field_size=MAX_HEADER_BYTES)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=2048, reuse_address=True,
                           ssl_context=self.security.ssl_context())
        await site.start()
        if self.port == 0:
            self.port = self._runner.addresses[0][1]
        log.info("API server listening on %s", self.url)

    async def listen_unix(self) -> str:
        """Serve on a Unix socket too, and return its path ("" where the platform has none): plain
        HTTP in a directory only this user can enter (the socket is only this user's as well),
        authenticated and authorized as on the TCP address. ``kubesched up``'s own scheduler
        process talks to the server there: on one machine TLS only costs both sides CPU for every
        request and watch event (see docs/security.md). Call after ``start``; ``stop`` removes the
        socket, and the next server removes the directory of one that died without stopping
        (``kubesched.apiserver.unixsocket``)."""
        assert self._runner is not None, "listen_unix needs a started server"
        if not hasattr(socket, "AF_UNIX"):
            return ""
        self._socket_dir = unixsocket.make_socket_dir()
        path = str(self._socket_dir / unixsocket.SOCKET_NAME)
        site = web.UnixSite(self._runner, path)
        await site.start()
        os.chmod(path, 0o600)
        return path

    async def stop(self) -> None:
        for task in list(self._watches):
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None
        if self.persistence is not None:
            self.persistence.close()
            self.persistence = None

    def _bootstrap(self) -> None:
        """What a fresh cluster has besides namespaces and priority classes: the ``kubernetes`` Service."""
        from kubesched.api.kinds import kind_named

        service = kind_named("Service")
        if service is not None and self.store.try_get(service, "default", "kubernetes") is None:
            obj = orjson.loads(orjson.dumps(KUBERNETES_SERVICE))
            obj["spec"]["ports"][0]["targetPort"] = self.port or 6443
            self.rest.create_object(obj)

    def _bootstrap_rbac(self) -> None:
        """The default cluster roles and bindings that are missing (after a restore too, as
        kube-apiserver reconciles them at every start; changed ones are left alone)."""
        for obj in bootstrappolicy.bootstrap_objects():
            kind = kind_for_resource("rbac.authorization.k8s.io", obj["kind"].lower() + "s")
            if kind is not None and self.store.try_get(kind, None, obj["metadata"]["name"]) is None:
                self.rest.create_object(obj)

    def kubeconfig(self, token: str | None = None) -> dict:
        """A kubeconfig for this server: its CA and ``token`` (the admin's by default)."""
        return {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "kubesched", "cluster": self.security.kubeconfig_cluster(self.url)}],
            "users": [{"name": "kubesched", "user": {"token": token or self.admin_token or "kubesched"}}],
            "contexts": [{"name": "kubesched", "context": {"cluster": "kubesched", "user": "kubesched", "namespace": "default"}}],
            "current-context": "kubesched",
        }

    def write_kubeconfig(self, path: str | Path, token: str | None = None) -> Path:
        target = Path(path).expanduser()
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(target.suffix + ".tmp")
        tmp.write_text(yaml.safe_dump(self.kubeconfig(token), sort_keys=False))
        tmp.chmod(0o600)
        tmp.replace(target)
        return target

    # --- dispatch -------------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        try:
            return await self._dispatch(request)
        except APIError as e:
            return _json(e.code, e.status())
        except web.HTTPRequestEntityTooLarge:
            return _json(413, bounds.too_large().status())
        except (asyncio.CancelledError, ConnectionResetError):
            raise
        except Exception as e:
            log.exception("%s %s failed", request.method, request.path_qs)
            return _json(500, APIError(f"Internal error occurred: {e}").status())

    def _authorize(self, request: web.Request, as_path: str | None = None) -> UserInfo | None:
        """The caller of ``request`` once authenticated (401 otherwise) and authorized (403
        otherwise), as a request for ``as_path`` when given; None when security is off."""
        if not self.security.enabled:
            return None
        ssl_object = request.transport.get_extra_info("ssl_object") if request.transport is not None else None
        peercert = ssl_object.getpeercert() if ssl_object is not None else None
        user = self.security.authenticator.authenticate(request.path, request.headers.get("Authorization"), peercert)
        user = impersonated(self.authorizer, user, request.headers, request.headers.getall("Impersonate-Group", []))
        attrs = request_attributes(user, request.method, as_path or request.path, request.query)
        if not self.authorizer.authorize(attrs):
            raise forbidden(attrs)
        return user

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == summary.PODS_PATH and request.method in ("GET", "HEAD"):
            self._authorize(request, as_path=summary.AUTHORIZED_AS)
            return summary.pod_list(self.store)
        if path.startswith(UI_API_PREFIX):
            return await self.webui.handle_api(request, self._authorize(request))
        if path == "/ui" or path.startswith(UI_PREFIX):
            return await self.webui.handle(request)
        user = self._authorize(request)
        parts = [p for p in path.split("/") if p]
        if not parts:
            return _json(200, {"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/metrics", "/readyz", "/openapi/v2",
                                         "/openapi/v3", "/version"]})
        head = parts[0]
        if parts[:3] == ["apis", EXPLANATION_GROUP, EXPLANATION_VERSION]:
            return await self._explanation(request, parts[3:])
        if head in ("api", "apis"):
            target = _parse_resource(parts, self.store.custom)
            if target is None:
                return self._discovery(request, parts)
            if not served(target[0], self.store.feature_gates):
                raise NotFoundPath()
            return await self._resource(request, user, *target)
        if head == "version":
            return _json(200, discovery.VERSION)
        if head in ("healthz", "livez", "readyz"):
            return web.Response(text="ok", content_type="text/plain")
        if head == "metrics" and len(parts) == 1:
            body = metrics.render(self.store, [await _resolved(source()) for source in self.metrics_sources])
            return web.Response(body=body, headers={"Content-Type": metrics.CONTENT_TYPE})
        if head == "openapi":
            return self._openapi(request)
        raise NotFoundPath()

    async def _explanation(self, request: web.Request, rest: list[str]) -> web.StreamResponse:
        """``GET namespaces/{namespace}/explanations/{pod}``: the pod's latest scheduling attempt
        (read-only; RBAC has authorized ``get`` on ``explanations`` in group kubesched.io)."""
        if len(rest) != 4 or rest[0] != "namespaces" or rest[2] != EXPLANATION_RESOURCE:
            raise NotFoundPath()
        if request.method not in ("GET", "HEAD"):
            raise method_not_allowed()
        namespace, name = rest[1], rest[3]
        found = await _resolved(self.explanations(namespace, name)) if self.explanations is not None else None
        if found is None:
            raise NotFound.of(EXPLANATION_RESOURCE, name, EXPLANATION_GROUP)
        return _json(200, found)

    def _discovery(self, request: web.Request, parts: list[str]) -> web.StreamResponse:
        accept = request.headers.get("Accept", "")
        hidden = unserved_kinds(self.store.feature_gates)
        if parts == ["api"] or parts == ["apis"]:
            wanted = discovery.wants_aggregated(accept)
            custom = self.store.custom.kinds()
            if wanted:
                doc = dict(discovery.aggregated(parts == ["api"], hidden))
                if parts == ["apis"]:
                    doc = discovery.with_custom_aggregated(doc, custom)
                doc["apiVersion"] = f"apidiscovery.k8s.io/{wanted}"
                return web.Response(body=orjson.dumps(doc), headers={
                    "Content-Type": f"application/json;g=apidiscovery.k8s.io;v={wanted};as=APIGroupDiscoveryList"})
            if parts == ["api"]:
                return _json(200, discovery.api_versions())
            return _json(200, discovery.with_custom_groups(discovery.api_group_list(hidden), custom))
        if parts == ["api", "v1"]:
            return _json(200, discovery.resource_list("v1", hidden))
        if parts[0] == "apis" and len(parts) == 2:
            group = discovery.api_group(parts[1], hidden) or discovery.custom_group(parts[1], self.store.custom.kinds())
            if group is not None:
                return _json(200, group)
        if parts[0] == "apis" and len(parts) == 3:
            resources = discovery.resource_list(f"{parts[1]}/{parts[2]}", hidden) or \
                discovery.custom_resource_list(parts[1], parts[2], self.store.custom.kinds())
            if resources is not None:
                return _json(200, resources)
        raise NotFoundPath()

    def _openapi(self, request: web.Request) -> web.StreamResponse:
        """``/openapi/v2`` (JSON or protobuf) and ``/openapi/v3[/<group-version>]``, with ETags."""
        path, if_none_match = request.path, request.headers.get("If-None-Match", "")
        if path.rstrip("/") == "/openapi/v2":
            served = openapi.serve_v2(request.headers.get("Accept", ""), if_none_match, self.store.custom.kinds())
        else:
            found = openapi.serve_v3(path, request.query.get("hash"), if_none_match, custom=self.store.custom.kinds())
            if found is None:
                raise NotFoundPath()
            served = found
        if served.status == 406:
            error = codec.NotAcceptable("only the following media types are accepted: application/json, "
                                        + ", ".join(openapi_proto.MEDIA_TYPES))
            return web.Response(status=406, body=orjson.dumps(error.status()), content_type="application/json",
                                headers=served.headers)
        body = served.body if request.method != "HEAD" else b""
        return web.Response(status=served.status, body=body or None, headers=served.headers)

    async def _resource(self, request: web.Request, user: UserInfo | None, kind: Kind, namespace: str | None,
                        name: str | None, subresource: str | None, watch_path: bool) -> web.StreamResponse:
        if subresource in kubeletproxy.ACTIONS:
            raise kubeletproxy.refuse(self.store, kind, namespace, name, subresource)
        method = request.method
        query = request.query
        body = await request.read() if request.can_read_body else b""
        if kind.kind in REVIEW_KINDS:
            caller = user or ANONYMOUS_USER
            review = self.reviews.create(kind, method, namespace, body, request.headers.get("Content-Type", ""), caller)
            return _json(201, review)
        if body and method in ("POST", "PUT"):
            codec.check_body_type(request.headers.get("Content-Type"))
        call = Call(method, View(kind), namespace, name, subresource, query, body,
                    request.headers.get("Content-Type", codec.JSON), user_agent=request.headers.get("User-Agent", ""), user=user)
        if method == "GET":
            call.output = codec.negotiate(request.headers.get("Accept"))
            if watch_path or codec.query_bool(query.get("watch")):
                if name is not None:
                    call.query = {**query, "fieldSelector": _with_name(query.get("fieldSelector"), name)}
                    call.name = None
                return await self._watch(request, call)
            await self._wait_fresh(_resource_version(query.get("resourceVersion")), exact=query.get("resourceVersionMatch") == "Exact")
            reply = self.rest.get(call) if name is not None else self.rest.list(call)
            return _reply(reply)
        if watch_path:
            raise method_not_allowed()
        return _reply(self._write(call))

    def _write(self, call: Call) -> Reply:
        method, name, sub = call.method, call.name, call.subresource
        if sub == "binding" or (call.view.kind.kind == "Binding"):
            if method != "POST":
                raise method_not_allowed()
            return self.rest.bind(call)
        if sub == "eviction":
            if method != "POST":
                raise method_not_allowed()
            return self.rest.evict(call)
        if method == "POST" and name is None:
            return self.rest.create(call)
        if method == "PUT" and name is not None:
            return self.rest.replace(call)
        if method == "PATCH" and name is not None:
            return self.rest.patch(call)
        if method == "DELETE" and name is not None and sub is None:
            return self.rest.delete(call)
        if method == "DELETE" and name is None:
            return self.rest.delete_collection(call)
        raise method_not_allowed()

    async def _wait_fresh(self, wanted: int | None, exact: bool = False) -> None:
        """Wait up to ``fresh_timeout`` for the store to reach resourceVersion ``wanted``, then give
        the watch cache's answer: 504 Timeout with cause ResourceVersionTooLarge, so that a client
        holding versions of a server that has since restarted (and begun counting again) relists.
        An ``Exact`` read goes to storage, which answers the same at once, suggesting no wait."""
        if wanted is None or wanted <= self.store.rv:
            return
        if exact:
            raise Timeout.too_large_resource_version(wanted, self.store.rv, 0)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.fresh_timeout
        while self.store.rv < wanted:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise Timeout.too_large_resource_version(wanted, self.store.rv, TOO_LARGE_RETRY_SECONDS)
            await asyncio.sleep(min(_FRESH_POLL, remaining))

    # --- watch ----------------------------------------------------------------------------------
    async def _watch(self, request: web.Request, call: Call) -> web.StreamResponse:
        query = call.query
        predicate = self.rest.predicate(call)
        rv_text = query.get("resourceVersion", "")
        initial = codec.query_bool(query.get("sendInitialEvents"))
        bookmarks = codec.query_bool(query.get("allowWatchBookmarks"))
        timeout = float(int_param(query, "timeoutSeconds") or 0) or random.uniform(1800, 3600)
        since = _resource_version(rv_text)
        if initial:
            since = None
        response = web.StreamResponse(status=200, headers=JSON_HEADERS)
        response.enable_chunked_encoding()
        try:
            await self._wait_fresh(since)
            watch = self.store.watch(call.view.store_kind, since=since, namespace=call.namespace, predicate=predicate)
        except (Gone, Timeout) as e:
            await response.prepare(request)
            await response.write(self._line(call, ERROR, e.status()))
            await response.write_eof()
            return response
        start_rv = self.store.rv
        task = asyncio.current_task()
        if task is not None:
            self._watches.add(task)
        try:
            await response.prepare(request)
            if initial:
                await response.write(b"".join(self._encode(call, e) for e in watch.drain()))
                await response.write(self._bookmark(call, start_rv, initial_end=True))
            await self._stream(call, watch, response, timeout, bookmarks)
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            watch.stop()
            if task is not None:
                self._watches.discard(task)
        return response

    async def _stream(self, call: Call, watch: Watch, response: web.StreamResponse, timeout: float, bookmarks: bool) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            wait = min(remaining, self.bookmark_interval) if bookmarks else remaining
            try:
                batch = await asyncio.wait_for(watch.next_batch(), wait)
            except TimeoutError:
                if bookmarks and not watch.pending:
                    await response.write(self._bookmark(call, self.store.rv))
                continue
            if not batch:
                if watch.stopped:
                    break
                continue
            await asyncio.sleep(WATCH_COALESCE)
            batch += watch.drain()
            await response.write(b"".join(self._encode(call, e) for e in batch))
        if bookmarks and not watch.pending:
            await response.write(self._bookmark(call, self.store.rv))

    def _encode(self, call: Call, event: WatchEvent) -> bytes:
        obj = event.object
        if call.output.form == "object":
            key = (call.view.kind, call.view.kind.version, event.type, obj["metadata"].get("resourceVersion"), id(obj))
            cached = self._encoded.get(key)
            if cached is None:
                if len(self._encoded) >= _CACHE_LIMIT:
                    self._encoded.clear()
                cached = self._encoded[key] = self._line(call, event.type, call.view.out(obj))
            return cached
        served = call.view.out(obj)
        if call.output.form == "table":
            meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            row_source = self.rest._row_source(call.view)
            out = tables.to_table(call.view.kind, [served], meta, call.query.get("includeObject", "PartialObjectMetadata"), row_source=row_source)
        else:
            out = tables.partial_metadata(served)
        return self._line(call, event.type, out)

    def _line(self, call: Call, event_type: str, obj: dict) -> bytes:
        return b'{"type":"' + event_type.encode() + b'","object":' + orjson.dumps(obj) + b"}\n"

    def _bookmark(self, call: Call, rv: int, initial_end: bool = False) -> bytes:
        meta: dict = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        kind = call.view.kind
        return self._line(call, BOOKMARK, {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta})


_T = TypeVar("_T")


async def _resolved(value: _T | Awaitable[_T]) -> _T:
    """``value``, awaited first when it is awaitable (a hook that asks another process)."""
    return await value if inspect.isawaitable(value) else value


def _json(status: int, body: Any) -> web.Response:
    return web.Response(status=status, body=body if isinstance(body, bytes) else orjson.dumps(body), headers=JSON_HEADERS)


def _reply(reply: Reply) -> web.Response:
    response = _json(reply.status, reply.body)
    for key, value in reply.headers.items():
        response.headers[key] = value
    return response


def _resource_version(text: str | None) -> int | None:
    """A request's ``resourceVersion``: None for "any" (unset, empty or "0"), 400 when it is not a
    resourceVersion this server issued (a decimal, as etcd's revisions)."""
    if text in (None, "", "0"):
        return None
    assert text is not None
    if not (text.isascii() and text.isdigit() and len(text) <= 20 and int(text) < 2**64):
        raise BadRequest(f'invalid resource version "{text}"')
    return int(text)


def _with_name(selector: str | None, name: str) -> str:
    term = f"metadata.name={name}"
    return f"{selector},{term}" if selector else term


def _parse_resource(parts: list[str], custom: CustomResources) -> tuple[Kind, str | None, str | None, str | None, bool] | None:
    """``(kind, namespace, name, subresource, legacy watch prefix)`` of a resource path, None for a
    discovery path; raises 404 for paths that name nothing served."""
    if parts[0] == "api":
        if len(parts) < 3:
            return None
        if parts[1] != "v1":
            raise NotFoundPath()
        group, version, rest = "", "v1", parts[2:]
    else:
        if len(parts) < 4:
            return None
        group, version, rest = parts[1], parts[2], parts[3:]
    watch = False
    if rest[0] == "watch":
        watch, rest = True, rest[1:]
        if not rest:
            raise NotFoundPath()
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in _NAMESPACE_SUBRESOURCES):
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        raise NotFoundPath()
    resource, name = rest[0], rest[1] if len(rest) > 1 else None
    subresource = rest[2] if len(rest) > 2 else None
    if resource == "bindings" and group == "" and namespace is not None and name is None:
        return _binding_kind(), namespace, None, None, watch
    kind = custom.resolve_path(group, version, resource)
    if kind is None:
        raise NotFoundPath()
    if namespace is not None and not kind.namespaced:
        raise NotFoundPath()
    if subresource is not None and subresource not in kind.subresources:
        raise NotFoundPath()
    return kind, namespace, name, subresource, watch


def _binding_kind() -> Kind:
    return Kind("Binding", "", "v1", "bindings", True)
