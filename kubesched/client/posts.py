"""A lean HTTP/1.1 transport for the client's POSTs: bindings, events and creations.

aiohttp spends over 100 µs of Python on every request (a ``ClientRequest`` with its header
multidicts, payload object, timer context, connector bookkeeping and response object), more than
the TLS and socket work under it; a scheduler sends two POSTs per pod (its binding and its
``Scheduled`` event). Here a POST is one write of bytes built from a header block made once per
credential, on a kept-alive connection, and a small parser of the reply: about 100 µs of client
CPU per POST over TLS against aiohttp's 220-240 (docs/performance.md).

Semantics are aiohttp's for a POST: one request per connection at a time (no pipelining), so a
connection lost before the reply is complete fails exactly the request in flight
(``ServerDisconnectedError``) and the request is not sent again (a POST is not idempotent;
aiohttp retries only idempotent methods); failing to connect raises ``ClientOSError``, the
request timeout ``TimeoutError``. A connection is reused only after a complete reply that did
not ask to close it, and not after ``KEEPALIVE`` idle seconds.
"""

from __future__ import annotations

import asyncio
import gzip
import ssl
import time
import zlib
from collections import deque
from typing import cast
from urllib.parse import urlsplit

import aiohttp

#: Seconds an idle connection is kept for reuse (the aiohttp connector's ``keepalive_timeout``).
KEEPALIVE = 60.0
_HEAD_END = b"\r\n\r\n"

#: A reply: status, body, the ``Retry-After`` header (or None).
Reply = tuple[int, bytes, "str | None"]


class _Reply:
    """The status line of a reply, the few headers the client reads, and how its body ends.
    Headers are looked up in the lower-cased head rather than all parsed: a reply carries a dozen
    the client never reads."""

    __slots__ = ("chunked", "encoding", "keep_alive", "length", "retry_after", "status")

    def __init__(self, head: bytes) -> None:
        if not head.startswith(b"HTTP/1.") or head[8:9] != b" " or not head[9:12].isdigit():
            raise aiohttp.ClientPayloadError(f"malformed reply status line {head[:100]!r}")
        self.status = int(head[9:12])
        lowered = head.lower()
        connection = _header(lowered, b"connection") or ""
        self.keep_alive = "close" not in connection and (head[7:8] == b"1" or "keep-alive" in connection)
        self.chunked = "chunked" in (_header(lowered, b"transfer-encoding") or "")
        self.encoding = _header(lowered, b"content-encoding")
        self.retry_after = _header(head, b"retry-after", lowered)
        length = _header(lowered, b"content-length")
        bodiless = self.status in (204, 304)
        self.length: int | None = 0 if bodiless else int(length) if length is not None and not self.chunked else None
        if self.length is None and not self.chunked:
            self.keep_alive = False  # the body ends when the server closes the connection


def _header(head: bytes, name: bytes, lowered: bytes | None = None) -> str | None:
    """The value of header ``name`` (lower case) in a reply's head, found in ``lowered`` (the head
    lower-cased; ``head`` itself when omitted) and read from ``head``."""
    at = (head if lowered is None else lowered).find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    end = head.find(b"\r\n", start)
    return head[start:end if end >= 0 else len(head)].strip().decode("latin-1")


def _dechunk(data: bytearray) -> tuple[bytes, int] | None:
    """A chunked body from the start of ``data``: the body and the bytes it took, or None while
    incomplete. Trailers are read and ignored."""
    body, at = bytearray(), 0
    while True:
        end = data.find(b"\r\n", at)
        if end < 0:
            return None
        size = int(bytes(data[at:end]).split(b";", 1)[0].strip() or b"x", 16)
        at = end + 2
        if size == 0:
            trailer_end = data.find(b"\r\n", at)
            while trailer_end > at:  # a trailer line: skip it
                at = trailer_end + 2
                trailer_end = data.find(b"\r\n", at)
            return (bytes(body), trailer_end + 2) if trailer_end >= 0 else None
        if len(data) < at + size + 2:
            return None
        body += data[at:at + size]
        at += size + 2


class _Connection(asyncio.Protocol):
    """One connection: at most one request in flight, its reply delivered to ``waiter``."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.reply: _Reply | None = None
        self.waiter: asyncio.Future[tuple[Reply, bool]] | None = None
        self.closed = False
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport; uvloop's do not derive from ``asyncio.Transport``, so no isinstance.
        self.transport = cast(asyncio.Transport, transport)

    def send(self, data: bytes) -> asyncio.Future[tuple[Reply, bool]]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.buffer.clear()
        self.reply = None
        self.transport.write(data)
        return self.waiter

    def data_received(self, data: bytes) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():
            self.close()  # bytes nobody asked for: the connection cannot be trusted any more
            return
        self.buffer += data
        try:
            done = self._parse()
        except (ValueError, EOFError, OSError, zlib.error, aiohttp.ClientPayloadError) as e:  # gzip's errors too
            self._fail(aiohttp.ClientPayloadError(f"malformed reply: {e}"))
            return
        if done is not None:
            waiter.set_result(done)

    def _parse(self) -> tuple[Reply, bool] | None:
        """The reply and whether the connection may be reused, once complete."""
        if self.reply is None:
            end = self.buffer.find(_HEAD_END)
            if end < 0:
                return None
            reply = _Reply(bytes(self.buffer[:end]))
            del self.buffer[:end + 4]
            if 100 <= reply.status < 200:  # an interim reply (100 Continue): the real one follows
                return self._parse()
            self.reply = reply
        reply = self.reply
        if reply.chunked:
            found = _dechunk(self.buffer)
            if found is None:
                return None
            body, used = found
        elif reply.length is not None:
            if len(self.buffer) < reply.length:
                return None
            body, used = bytes(self.buffer[:reply.length]), reply.length
        else:
            return None  # read until the server closes the connection
        reuse = reply.keep_alive and used == len(self.buffer)
        return (reply.status, _decoded(reply, body), reply.retry_after), reuse

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        reply = self.reply
        if reply is not None and reply.length is None and not reply.chunked:
            waiter.set_result(((reply.status, _decoded(reply, bytes(self.buffer)), reply.retry_after), False))
            return
        waiter.set_exception(aiohttp.ServerDisconnectedError(f"server disconnected before the reply was complete{f': {exc}' if exc else ''}"))

    def _fail(self, error: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(error)
        self.close()

    def time_out(self) -> None:
        self._fail(TimeoutError())

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def _decoded(reply: _Reply, body: bytes) -> bytes:
    """The body without its content coding (the request offers gzip, as Go's transport does)."""
    coding = reply.encoding
    if coding == "gzip":
        return gzip.decompress(body)
    if coding == "deflate":
        return zlib.decompress(body)
    return body


class PostTransport:
    """POSTs to one server over a pool of at most ``limit`` kept-alive connections: an idle one is
    reused (the most recent first), else one is opened, else the POST waits for one to be released.
    With ``unix_socket``, connections go to that socket (plain HTTP) instead of the server's address."""

    def __init__(self, server: str, ssl_context: ssl.SSLContext | bool, limit: int, *,
                 unix_socket: str | None = None) -> None:
        parts = urlsplit(server)
        self.unix_socket = unix_socket
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = ssl_context if parts.scheme == "https" and unix_socket is None else None
        self._host = parts.netloc.rpartition("@")[2].encode("idna")
        self.limit = max(1, limit)
        self._idle: list[_Connection] = []
        #: Connections open or opening, idle or busy: at most ``limit``.
        self._count = 0
        #: POSTs waiting for a connection: handed a released one, or None to open their own.
        self._waiters: deque[asyncio.Future[_Connection | None]] = deque()
        self._open: set[_Connection] = set()
        self._closed = False
        self.opened = 0

    async def post(self, path: str, headers: bytes, body: bytes, timeout: float) -> Reply:
        """POST ``body`` to ``path`` with ``headers`` (encoded ``Name: value\\r\\n`` lines)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        request = b"POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\n\r\n%s" % (
            path.encode("ascii"), self._host, headers, len(body), body)
        conn = self._reused() or await self._acquire(deadline)
        timer = loop.call_at(deadline, conn.time_out)
        try:
            reply, reuse = await conn.send(request)
        except BaseException:
            self._drop(conn)
            raise
        finally:
            timer.cancel()
        if reuse:
            self._release(conn)
        else:
            self._drop(conn)
        return reply

    def _reused(self) -> _Connection | None:
        """The most recently used idle connection still open and fresh (older ones are closed)."""
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < KEEPALIVE:
                return conn
            self._drop(conn)
        return None

    async def _acquire(self, deadline: float) -> _Connection:
        """A new connection when under the limit, else the next one released."""
        if self._count >= self.limit:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    conn = await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled() and (got := waiter.result()) is not None:
                    self._release(got)  # handed one just as the wait ended: pass it on
                elif waiter.done() and not waiter.cancelled():
                    self._wake()
                raise
            if conn is not None:
                return conn
        self._count += 1
        try:
            return await self._connect(deadline)
        except BaseException:
            self._count -= 1
            self._wake()
            raise

    async def _connect(self, deadline: float) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(deadline):
                if self.unix_socket is not None:
                    _, conn = await loop.create_unix_connection(_Connection, self.unix_socket)
                else:
                    _, conn = await loop.create_connection(_Connection, self.host, self.port, ssl=self.ssl or None,
                                                           server_hostname=self.host if self.ssl else None)
        except OSError as e:
            where = self.unix_socket or f"{self.host}:{self.port}"
            raise aiohttp.ClientOSError(e.errno, f"Cannot connect to host {where}: {e}") from e
        self.opened += 1
        self._open.add(conn)
        return conn

    def _release(self, conn: _Connection) -> None:
        """Back to the pool after a complete reply: to the first waiter, else idle."""
        if self._closed:
            self._drop(conn)
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    def _drop(self, conn: _Connection) -> None:
        """Close ``conn`` for good; a waiter may open a connection in its place."""
        conn.close()
        if conn in self._open:
            self._open.discard(conn)
            self._count -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        """Close every connection (a POST in flight fails as on a lost connection)."""
        self._closed = True
        for conn in list(self._open):
            self._drop(conn)
        self._idle.clear()
