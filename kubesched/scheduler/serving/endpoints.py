"""kube-scheduler's HTTP endpoints, with its paths, check names and response texts.

* ``/healthz``, ``/livez``, ``/readyz``: named checks (``/readyz/<check>`` runs one). Success is
  ``ok`` (``?verbose`` lists each check, ``[+]name ok``, then ``<path> check passed``); a failure is
  a 500 listing every check with ``[-]name failed: reason withheld`` and ``<path> check failed``.
  ``?exclude=name`` skips a check. The scheduler installs: ``/healthz`` = ``leaderElection`` (with
  leader election) or ``ping``; ``/livez`` = ``ping``; ``/readyz`` = ``leaderElection``,
  ``shutdown``, ``sched-handler-sync``.
* ``/metrics``: the scheduler's Prometheus registry; ``/metrics/slis``: the health checks' SLI
  metrics (``kubernetes_healthcheck``, ``kubernetes_healthchecks_total``).
* ``/configz``: ``{"componentconfig": <the v1 configuration>}``.
* ``/debug/cache`` (kubesched's; with ``enableProfiling``): the cache dump and comparer as JSON;
  ``PUT /debug/flags/v`` sets the log verbosity, as upstream's ``/debug/flags/v``.

The secure port authenticates and authorizes every request through the API server when given a
``DelegatedAuth`` (``delegated``), as kube-scheduler does; kubesched's plain-HTTP ``--port`` (which
kube-scheduler no longer has) is open to anyone who reaches it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kubesched.scheduler.serving.delegated import DelegatedAuth

log = logging.getLogger(__name__)

TEXT = "text/plain"


@dataclass
class Check:
    """A named health check: ``fn()`` returns None when healthy, else the reason."""

    name: str
    fn: Callable[[], str | None]

    def run(self) -> str | None:
        try:
            return self.fn()
        except Exception as e:  # a crashing check is a failing check
            return str(e) or type(e).__name__


def ping() -> Check:
    return Check("ping", lambda: None)


class SLIMetrics:
    """component-base's health check SLIs, in their own registry (served at ``/metrics/slis``)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.healthcheck = Gauge("kubernetes_healthcheck", "This metric records the result of a single healthcheck.",
                                 ["name", "type"], registry=self.registry)
        self.healthchecks = Counter("kubernetes_healthchecks", "This metric records the results of all healthcheck.",
                                    ["name", "status", "type"], registry=self.registry)

    def observe(self, name: str, kind: str, ok: bool) -> None:
        self.healthcheck.labels(name, kind).set(1 if ok else 0)
        self.healthchecks.labels(name, "success" if ok else "error", kind).inc()


class Endpoints:
    """The endpoint server. ``metrics`` renders ``/metrics`` (called per scrape, so gauges can be
    refreshed first); ``configz`` and ``debug`` return JSON documents (``debug`` None: no
    ``/debug/*``)."""

    def __init__(self, *, healthz: list[Check], livez: list[Check], readyz: list[Check], metrics: Callable[[], bytes],
                 configz: Callable[[], dict], debug: Callable[[], dict] | None = None, auth: DelegatedAuth | None = None) -> None:
        self.checks = {"healthz": healthz or [ping()], "livez": livez or [ping()], "readyz": readyz or [ping()]}
        self.metrics = metrics
        self.configz = configz
        self.debug = debug
        self.slis = SLIMetrics()
        self.auth = auth
        self._runners: list[web.AppRunner] = []
        self.ports: dict[str, int] = {}

    def app(self, secure: bool = False) -> web.Application:
        """The routes; the secure port's app checks ``auth`` first."""
        app = web.Application(middlewares=[self.auth.middleware] if secure and self.auth is not None else [])
        for kind in self.checks:
            app.router.add_get(f"/{kind}", self._health(kind))
            app.router.add_get(f"/{kind}/{{check}}", self._single(kind))
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/metrics/slis", self._slis)
        app.router.add_get("/configz", self._configz)
        if self.debug is not None:
            app.router.add_get("/debug/cache", self._debug_cache)
            app.router.add_put("/debug/flags/v", self._set_verbosity)
        return app

    async def start(self, bind_address: str, secure_port: int = 0, insecure_port: int = 0,
                    ssl_context: ssl.SSLContext | None = None) -> None:
        """Serve on ``secure_port`` (TLS with ``ssl_context``) and/or ``insecure_port`` (plain HTTP);
        0 turns either off. Bound ports (useful after asking for port 0 in tests: pass -1) are in
        ``self.ports``."""
        for name, port, context in (("secure", secure_port, ssl_context), ("insecure", insecure_port, None)):
            if port == 0:
                continue
            runner = web.AppRunner(self.app(secure=name == "secure"), access_log=None, shutdown_timeout=1.0)
            await runner.setup()
            self._runners.append(runner)
            site = web.TCPSite(runner, bind_address, max(port, 0), ssl_context=context, reuse_address=True)
            await site.start()
            server = site._server
            sockets = getattr(server, "sockets", None) or []
            self.ports[name] = sockets[0].getsockname()[1] if sockets else port
            log.info("Serving %s on %s:%d", "securely" if context else "insecurely", bind_address, self.ports[name])

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners = []

    # --- health ---------------------------------------------------------------------------------
    def _health(self, kind: str) -> Callable[[web.Request], Any]:
        async def handler(request: web.Request) -> web.Response:
            status, body = self.evaluate(kind, request.query.getall("exclude", []), "verbose" in request.query)
            return web.Response(status=status, text=body, content_type=TEXT, headers={"X-Content-Type-Options": "nosniff"})

        return handler

    def evaluate(self, kind: str, exclude: list[str], verbose: bool) -> tuple[int, str]:
        """Run ``kind``'s checks; (HTTP status, body) as upstream's ``handleRootHealth`` writes them."""
        excluded = {e for item in exclude for e in item.split(",") if e}
        lines, failed = [], []
        for check in self.checks[kind]:
            if check.name in excluded:
                excluded.discard(check.name)
                lines.append(f"[+]{check.name} excluded: ok")
                continue
            error = check.run()
            self.slis.observe(check.name, kind, error is None)
            if error is None:
                lines.append(f"[+]{check.name} ok")
            else:
                lines.append(f"[-]{check.name} failed: reason withheld")
                failed.append(f"[-]{check.name} failed: {error}")
        if excluded:
            quoted = ",".join(f'"{e}"' for e in sorted(excluded))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
        if failed:
            log.info("%s check failed: %s", kind, "; ".join(failed))
            return 500, "\n".join(lines) + f"\n{kind} check failed\n"
        if not verbose:
            return 200, "ok"
        return 200, "\n".join(lines) + f"\n{kind} check passed\n"

    def _single(self, kind: str) -> Callable[[web.Request], Any]:
        async def handler(request: web.Request) -> web.Response:
            name = request.match_info["check"]
            check = next((c for c in self.checks[kind] if c.name == name), None)
            if check is None:
                return web.Response(status=404, text="404 page not found\n", content_type=TEXT)
            error = check.run()
            if error is not None:
                return web.Response(status=500, text=f"internal server error: {error}\n", content_type=TEXT)
            return web.Response(text="ok", content_type=TEXT)

        return handler

    # --- metrics, configz, debug ------------------------------------------------------------------
    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(body=self.metrics(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _slis(self, _request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.slis.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _configz(self, _request: web.Request) -> web.Response:
        return web.json_response({"componentconfig": self.configz()}, dumps=lambda o: json.dumps(o, sort_keys=True))

    async def _debug_cache(self, _request: web.Request) -> web.Response:
        assert self.debug is not None
        # Let in-flight handlers finish their step so the dump is consistent with one loop turn.
        await asyncio.sleep(0)
        return web.json_response(self.debug(), dumps=lambda o: json.dumps(o, sort_keys=True, default=str))

    async def _set_verbosity(self, request: web.Request) -> web.Response:
        text = (await request.text()).strip()
        try:
            level = int(text)
        except ValueError:
            return web.Response(status=400, text=f"invalid verbosity {text!r}\n", content_type=TEXT)
        set_verbosity(level)
        return web.Response(text=f"successfully set klog.logging.verbosity to {level}", content_type=TEXT)


def set_verbosity(level: int) -> None:
    """klog levels to Python logging as ``kubesched run -v`` maps them: 0-3 info (kube-scheduler
    logs Info at level 0), 4+ debug."""
    logging.getLogger().setLevel(logging.INFO if level < 4 else logging.DEBUG)
