"""An HTTP proxy between one ``kubesched run`` replica and the API server that injects faults and
keeps a ledger of what went through it, for the fault-injection run (``kubesched chaos``).

Faults, switched on and off by the run while replicas work:

* watches: dropped (every connection cut at once), stalled (nothing forwarded for a while), answered
  ``410 Gone`` or ``504`` "Too large resource version" instead of being opened;
* bindings: answered ``409`` or ``500`` without reaching the server, held for longer than the
  client's timeout after the server applied them, or slowed down.

The ledger records, on this process's monotonic clock, every binding the server accepted and every
Lease write it accepted (with the holder it wrote), so the run can tell which replica bound what
while which replica held the Lease.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, field

import aiohttp
import orjson
from aiohttp import web

log = logging.getLogger(__name__)

#: Request headers passed on to the API server.
FORWARDED = ("Authorization", "Content-Type", "Accept", "User-Agent")
#: Seconds a "timed out" binding is held after the server applied it (the client gives up at 30 s).
BIND_HOLD = 35.0


@dataclass
class Faults:
    """What the proxies inject now; the run changes it over time (shared by every proxy)."""

    stall_watches_until: float = 0.0
    watch_gone: float = 0.0
    watch_too_large: float = 0.0
    bind_conflict: float = 0.0
    bind_error: float = 0.0
    bind_timeout: float = 0.0
    bind_slow: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1


@dataclass(frozen=True)
class Write:
    """A write the API server accepted: who sent it, what it wrote, and when (forwarded, answered)."""

    replica: str
    subject: str
    sent: float
    answered: float
    #: Where the API server put the write in its history: (the cluster's epoch, the resourceVersion
    #: it answered). Lease writes are ordered by it: answers can arrive out of order.
    order: tuple[int, int] = (0, 0)


@dataclass
class Ledger:
    bindings: list[Write] = field(default_factory=list)
    #: Lease writes: ``subject`` is the holder identity written ("" for a release).
    lease_writes: list[Write] = field(default_factory=list)
    #: Incremented once an API server that starts over without its data (resourceVersions start
    #: over) has killed its predecessor; a write is in the epoch it was sent in.
    epoch: int = 0


def is_lease_write(method: str, path: str) -> bool:
    """A write of a Lease: an update (PUT to the Lease) or a create (POST to the collection, how a
    candidate takes the Lease of a cluster that has none, such as one restarted without its data)."""
    if method == "PUT":
        return "/leases/" in path
    return method == "POST" and path.rstrip("/").endswith("/leases")


class FaultProxy:
    """One replica's way to the API server."""

    def __init__(self, replica: str, upstream: str, faults: Faults, ledger: Ledger, rng: random.Random) -> None:
        self.replica = replica
        self.upstream = upstream.rstrip("/")
        self.faults = faults
        self.ledger = ledger
        self.rng = rng
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._watches: set[asyncio.Transport] = set()

    async def start(self) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        connector = aiohttp.TCPConnector(limit=512, ssl=False)
        self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None))
        return self.url

    async def stop(self) -> None:
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            if request.query.get("watch") in ("true", "1"):
                return await self._watch(request)
            body = await request.read()
            if request.method == "POST" and request.path.endswith("/binding"):
                return await self._bind(request, body)
            return await self._forward(request, body)
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            return _status(503, "ServiceUnavailable", f"the API server is unreachable: {e or type(e).__name__}")

    # --- plain requests ------------------------------------------------------------------------------
    async def _send(self, request: web.Request, body: bytes) -> tuple[int, bytes, str]:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k in FORWARDED}
        async with self._session.request(request.method, self.upstream + request.path_qs, data=body or None,
                                         headers=headers, timeout=aiohttp.ClientTimeout(total=60)) as resp:
            return resp.status, await resp.read(), resp.headers.get("Content-Type", "application/json")

    async def _forward(self, request: web.Request, body: bytes) -> web.Response:
        sent, epoch = time.monotonic(), self.ledger.epoch  # the server that answers is the one it was sent to
        status, payload, content_type = await self._send(request, body)
        if status < 300 and is_lease_write(request.method, request.path):
            lease = orjson.loads(payload)
            holder = (lease.get("spec") or {}).get("holderIdentity") or ""
            version = str((lease.get("metadata") or {}).get("resourceVersion") or "0")
            order = (epoch, int(version) if version.isdigit() else 0)
            self.ledger.lease_writes.append(Write(self.replica, holder, sent, time.monotonic(), order))
        return web.Response(status=status, body=payload, headers={"Content-Type": content_type})

    def _bind_fault(self) -> str:
        """One draw: which binding fault (if any) this request gets."""
        faults, draw = self.faults, self.rng.random()
        for name, probability in (("409", faults.bind_conflict), ("500", faults.bind_error), ("slow", faults.bind_slow),
                                  ("timeout", faults.bind_timeout)):
            if draw < probability:
                faults.count(f"bind {name}")
                return name
            draw -= probability
        return ""

    async def _bind(self, request: web.Request, body: bytes) -> web.Response:
        pod = request.path.split("/namespaces/", 1)[-1].replace("/pods/", "/").removesuffix("/binding")
        fault = self._bind_fault()
        if fault == "409":
            return _status(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{pod}": injected conflict')
        if fault == "500":
            return _status(500, "InternalError", "injected internal error")
        if fault == "slow":
            await asyncio.sleep(self.rng.uniform(0.5, 2.0))
        sent = time.monotonic()
        status, payload, content_type = await self._send(request, body)
        if status < 300:
            self.ledger.bindings.append(Write(self.replica, pod, sent, time.monotonic()))
        if fault == "timeout":
            await asyncio.sleep(BIND_HOLD)
        return web.Response(status=status, body=payload, headers={"Content-Type": content_type})

    # --- watches -------------------------------------------------------------------------------------
    def drop_watches(self) -> int:
        """Cut every watch connection now (the client sees a broken stream); how many were cut."""
        cut = 0
        for transport in list(self._watches):
            transport.abort()
            cut += 1
        self._watches.clear()
        self.faults.counts["watch dropped"] = self.faults.counts.get("watch dropped", 0) + cut
        return cut

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        faults = self.faults
        if self.rng.random() < faults.watch_gone:
            faults.count("watch 410")
            return _status(410, "Expired", "too old resource version: injected")
        if self.rng.random() < faults.watch_too_large:
            faults.count("watch too large")
            rv = request.query.get("resourceVersion", "0")
            return _status(504, "Timeout", f"Too large resource version: {rv}, current: {rv}",
                           details={"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                                    "retryAfterSeconds": 1})
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k in FORWARDED}
        async with self._session.get(self.upstream + request.path_qs, headers=headers) as upstream:
            if upstream.status >= 300:
                return web.Response(status=upstream.status, body=await upstream.read(),
                                    headers={"Content-Type": upstream.headers.get("Content-Type", "application/json")})
            resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            transport = request.transport if isinstance(request.transport, asyncio.Transport) else None
            if transport is not None:
                self._watches.add(transport)
            try:
                await self._pump(upstream, resp)
            except (TimeoutError, aiohttp.ClientError, OSError):
                if transport is not None:  # the server went away mid-stream: so does the client's stream
                    transport.abort()
            finally:
                if transport is not None:
                    self._watches.discard(transport)
            return resp

    async def _pump(self, upstream: aiohttp.ClientResponse, resp: web.StreamResponse) -> None:
        """Forward the stream, holding each chunk while watches are stalled."""
        while True:
            chunk = await upstream.content.readany()
            if not chunk:
                return
            while time.monotonic() < self.faults.stall_watches_until:
                await asyncio.sleep(0.1)
            await resp.write(chunk)


def _status(code: int, reason: str, message: str, details: dict | None = None) -> web.Response:
    status: dict = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                    "reason": reason, "code": code}
    if details:
        status["details"] = details
    return web.Response(status=code, body=orjson.dumps(status), headers={"Content-Type": "application/json"})
