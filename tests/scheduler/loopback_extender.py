"""A scheduler extender served over real HTTP on 127.0.0.1, in a thread of its own, answering each
verb with a function of the request's JSON arguments (and recording every call), so tests watch
the scheduler talk to it as kube-scheduler talks to an extender."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[dict[str, Any]], Any]


class Reply(Exception):
    """Raised by an answer to reply with this HTTP status instead of 200."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@dataclass
class LoopbackExtender:
    """Verbs and what they answer; ``delays``: seconds to wait before answering the first
    ``slow_calls`` calls of a verb (to exceed an httpTimeout)."""

    verbs: dict[str, Answer]
    delays: dict[str, float] = field(default_factory=dict)
    slow_calls: int = 1
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    url: str = ""

    def args(self, verb: str) -> list[dict[str, Any]]:
        return [args for name, args in self.calls if name == verb]

    def answer(self, verb: str, args: dict[str, Any]) -> tuple[int, Any]:
        self.calls.append((verb, args))
        if verb not in self.verbs:
            return 404, {}
        if verb in self.delays and len(self.args(verb)) <= self.slow_calls:
            time.sleep(self.delays[verb])
        try:
            return 200, self.verbs[verb](args)
        except Reply as e:
            return e.status, {}


def _handler(extender: LoopbackExtender) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, answer = extender.answer(self.path.strip("/"), json.loads(body or b"{}"))
            data = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the scheduler gave up waiting (a timeout under test)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextmanager
def serving(extender: LoopbackExtender, tls: tuple[str, str] | None = None) -> Iterator[LoopbackExtender]:
    """Serve ``extender`` on an ephemeral loopback port for the block; ``extender.url`` is its
    prefix. ``tls``: certificate and key files to serve HTTPS with."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(extender))
    server.daemon_threads = True
    scheme = "http"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    thread = threading.Thread(target=server.serve_forever, name="loopback-extender", daemon=True)
    thread.start()
    extender.url = f"{scheme}://127.0.0.1:{server.server_address[1]}/"
    try:
        yield extender
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def node_names(args: dict[str, Any]) -> list[str]:
    """The candidate nodes of ExtenderArgs, whichever form they were sent in."""
    if args.get("NodeNames") is not None:
        return list(args["NodeNames"])
    return [n["metadata"]["name"] for n in args["Nodes"]["items"]]


def keep(*names: str, failed: dict[str, str] | None = None, unresolvable: dict[str, str] | None = None) -> Answer:
    """A filter answer keeping ``names`` (among those sent), as a node-cache-capable extender does
    when asked by name, else as a NodeList."""

    def answer(args: dict[str, Any]) -> dict[str, Any]:
        kept = [n for n in node_names(args) if n in names]
        out: dict[str, Any] = {"FailedNodes": failed or {}, "FailedAndUnresolvableNodes": unresolvable or {}}
        if args.get("NodeNames") is not None:
            out["NodeNames"] = kept
        else:
            out["Nodes"] = {"items": [n for n in args["Nodes"]["items"] if n["metadata"]["name"] in kept]}
        return out

    return answer


def prefer(best: str) -> Answer:
    """A prioritize answer: MaxExtenderPriority (10) for ``best``, 1 for the others."""
    return lambda args: [{"Host": n, "Score": 10 if n == best else 1} for n in node_names(args)]
