"""The scheduler of ``kubesched up`` in a process of its own, so that it and the API server each
have a core: ``SchedulerProcess`` is the API server's side, ``serve`` the scheduler's.

The scheduler talks to the API server as ``system:kube-scheduler``, with its bearer token, over
the server's Unix socket (``APIServer.listen_unix``: plain HTTP in a directory only this user can
enter), or over HTTPS when no socket is given. Everything else passes over the child's standard
input and output, one JSON document a line (requests on stdin, answers on stdout, in order):

* the first line is the ``SchedulerSpec`` (server, socket, token, CA, configuration, gates, plugins, seed);
* the child answers ``{"synced": true}`` once its informers have synced;
* ``{"op": "start", "pods": [...]}``: wait until the informers hold these pods (created by the
  server after the sync), then schedule; answers ``{"started": true}``. Pods created before the
  loop starts sit in the queue together, as ``simulate``'s do, so ``--seed`` places them alike;
* ``{"op": "explain", "namespace": ..., "name": ...}``: ``{"explanation": <document or null>}``;
* ``{"op": "metrics"}``: ``{"metrics": <the scheduler's exposition text>}``.

End of input (the server closed it, or its process died) stops the scheduler gracefully and ends
the child, so it never outlives ``up``; so does SIGTERM. SIGINT is ignored: Ctrl-C reaches the
whole process group, and the server's side stops the child in order.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from kubesched.api.errors import KubeschedError
from kubesched.scheduler.features import GATES, FeatureGates
from kubesched.scheduler.framework.registry import Registry

log = logging.getLogger(__name__)

#: The module the child runs (``python -m``): it resolves the plugins, then calls ``serve``.
CHILD_MODULE = "kubesched.cli.up_scheduler"
#: Seconds the child may take to start and sync its informers, and to see the created pods.
START_TIMEOUT = 120.0
#: Seconds an explanation or a metrics scrape may take before the server answers without it.
REQUEST_TIMEOUT = 10.0
#: Seconds the child gets to finish its bindings and flush its writes once told to stop.
STOP_TIMEOUT = 15.0
#: Connections the scheduler's bindings and Events share: the server serves one request at a time,
#: so more only queue there, cost each side a TLS handshake and crowd out other clients (with the
#: client's 256, a 10,000-pod ``up`` opened about 250, and the creates' p99 rose with them).
POST_CONNECTIONS = 32
#: The longest line either side reads (a metrics text or an explanation of a big cluster).
LINE_LIMIT = 1 << 28


class SchedulerProcessError(KubeschedError):
    """The scheduler process could not start (it exited, or did not sync in time)."""


@dataclass
class SchedulerSpec:
    """What the child needs to build the scheduler ``up`` ran in-process before."""

    server: str
    token: str
    #: The API server's CA (PEM, base64 in transit).
    ca_data: bytes
    #: The v1 KubeSchedulerConfiguration, as ``--write-config-to`` writes it.
    config: str
    #: The gates that differ from their defaults.
    feature_gates: dict[str, bool] = field(default_factory=dict)
    #: ``--plugin`` specifications (modules or .py files).
    plugins: list[str] = field(default_factory=list)
    seed: int | None = None
    #: The server's Unix socket (``APIServer.listen_unix``), used instead of ``server`` when set.
    unix_socket: str = ""

    def to_line(self) -> bytes:
        doc = asdict(self)
        doc["ca_data"] = base64.b64encode(self.ca_data).decode()
        return orjson.dumps(doc) + b"\n"

    @classmethod
    def from_line(cls, line: bytes) -> SchedulerSpec:
        doc = orjson.loads(line)
        doc["ca_data"] = base64.b64decode(doc["ca_data"])
        return cls(**doc)


def changed_gates(gates: Mapping[str, bool] | None) -> dict[str, bool]:
    """The gates of ``gates`` that differ from their defaults (what a child must be told)."""
    return {name: value for name, value in (gates or {}).items() if value != GATES[name].default}


# --- the API server's side ----------------------------------------------------------------------------
class SchedulerProcess:
    """The child process, seen from ``up``: start it, let it schedule, ask it, stop it."""

    def __init__(self, spec: SchedulerSpec) -> None:
        self.spec = spec
        self.proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._stopping = False
        self._exited: asyncio.Task | None = None
        self._synced = False

    async def start(self) -> None:
        """Spawn the child and wait until its informers have synced."""
        import kubesched

        root = str(Path(kubesched.__file__).resolve().parents[1])  # the child imports this kubesched
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", CHILD_MODULE, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env=env, limit=LINE_LIMIT)
        assert self.proc.stdin is not None
        self.proc.stdin.write(self.spec.to_line())
        await self._expect("synced", START_TIMEOUT)
        self._synced = True
        self._exited = asyncio.get_running_loop().create_task(self._report_exit(self.proc), name="scheduler-process")

    async def _report_exit(self, proc: asyncio.subprocess.Process) -> None:
        """An exit ``stop`` did not ask for leaves the cluster without a scheduler: say so."""
        status = await proc.wait()
        if not self._stopping:
            log.error("the scheduler process (pid %d) exited with status %d; pods are no longer scheduled", proc.pid, status)

    async def start_scheduling(self, pods: list[str]) -> None:
        """Let the child schedule once its informers hold ``pods`` ("namespace/name")."""
        async with self._lock:
            self._send({"op": "start", "pods": pods})
            await self._expect("started", START_TIMEOUT)

    async def explanation(self, namespace: str, name: str) -> dict | None:
        """The pod's scheduling explanation (None: not attempted, or no answer)."""
        reply = await self._ask({"op": "explain", "namespace": namespace, "name": name})
        return reply.get("explanation") if reply else None

    async def metrics(self) -> bytes:
        """The scheduler's exposition text (empty when the child does not answer)."""
        reply = await self._ask({"op": "metrics"})
        return reply["metrics"].encode() if reply else b""

    async def stop(self) -> None:
        """Close the child's input (it stops gracefully and exits); kill it if it takes too long."""
        self._stopping = True
        proc = self.proc
        if self._exited is not None:
            self._exited.cancel()
        if proc is None or proc.returncode is not None:
            return
        if not self._synced:  # still starting (informers that never sync, say): nothing to finish
            proc.kill()
            await proc.wait()
            return
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), STOP_TIMEOUT)
        except TimeoutError:
            log.warning("the scheduler process did not stop within %.0fs; killing it", STOP_TIMEOUT)
            proc.kill()
            await proc.wait()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _send(self, message: dict) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(message) + b"\n")

    async def _ask(self, message: dict) -> dict | None:
        """One request and its answer; None when the child is gone or slow (logged)."""
        if self.proc is None or self.proc.returncode is not None or self._stopping:
            return None
        async with self._lock:
            try:
                self._send(message)
                return await self._read(REQUEST_TIMEOUT)
            except (TimeoutError, ConnectionError, SchedulerProcessError) as e:
                log.warning("the scheduler process did not answer %s: %s", message["op"], e or type(e).__name__)
                return None

    async def _expect(self, key: str, timeout: float) -> None:
        reply = await self._read(timeout)
        if not reply.get(key):
            raise SchedulerProcessError(f"the scheduler process answered {reply!r}, expected {key}")

    async def _read(self, timeout: float) -> dict:
        assert self.proc is not None and self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            status = await self.proc.wait()
            raise SchedulerProcessError(f"the scheduler process exited with status {status}")
        return orjson.loads(line)


# --- the scheduler's side -------------------------------------------------------------------------------
async def serve(spec: SchedulerSpec, registry: Registry, requests: asyncio.StreamReader,
                answer: Callable[[dict], None]) -> int:
    """Build and sync the scheduler, then answer ``requests`` until they end (or SIGTERM)."""
    from prometheus_client import disable_created_metrics

    from kubesched.client.kube import KubeClient, wait_ready
    from kubesched.scheduler import config as config_module
    from kubesched.scheduler.scheduler import Scheduler
    from kubesched.simulator.explanations import ExplanationRecorder
    from kubesched.utils.clock import RealClock
    from kubesched.utils.signals import on_signals

    gates = FeatureGates(spec.feature_gates)
    cfg = config_module.load_text(spec.config, registry=registry, feature_gates=gates)
    client = KubeClient.for_server("http://localhost" if spec.unix_socket else spec.server, token=spec.token or None,
                                   ca_data=spec.ca_data, post_connections=POST_CONNECTIONS,
                                   unix_socket=spec.unix_socket or None)
    await wait_ready(client)
    disable_created_metrics()  # no ``*_created`` series: upstream's registry has none
    recorder = ExplanationRecorder(RealClock())
    sched = Scheduler(client, cfg, registry=registry, seed=spec.seed, feature_gates=gates,
                      on_attempt=recorder.on_attempt, preemption_observer=recorder.observer())
    terminated = asyncio.Event()
    on_signals(terminated.set, (signal.SIGTERM,))
    runner: asyncio.Task | None = None
    try:
        await sched.start_informers()
        answer({"synced": True})
        runner = await _answer_until_done(sched, recorder, requests, answer, terminated)
    finally:
        await sched.stop(binding_timeout=STOP_TIMEOUT / 3, flush_timeout=STOP_TIMEOUT / 3)
        if runner is not None:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        await client.close()
    return 0


async def _answer_until_done(sched: Any, recorder: Any, requests: asyncio.StreamReader, answer: Callable[[dict], None],
                             terminated: asyncio.Event) -> asyncio.Task | None:
    """Answer requests until the input ends or SIGTERM; the scheduling loop's task, once started."""
    from kubesched.scheduler.serving.app import render_metrics

    runner: asyncio.Task | None = None
    ended = asyncio.ensure_future(terminated.wait())
    try:
        while True:
            reading = asyncio.ensure_future(requests.readline())
            await asyncio.wait({reading, ended}, return_when=asyncio.FIRST_COMPLETED)
            if not reading.done():
                reading.cancel()
                return runner
            line = reading.result()
            if not line:
                return runner
            message = orjson.loads(line)
            op = message.get("op")
            if op == "start" and runner is None:
                await _until_seen(sched, message.get("pods") or [], terminated)
                sched.start_scheduling()
                runner = asyncio.get_running_loop().create_task(sched.run(), name="scheduler")
                answer({"started": True})
            elif op == "explain":
                answer({"explanation": recorder.explanation(message["namespace"], message["name"])})
            elif op == "metrics":
                answer({"metrics": render_metrics(sched).decode()})
            else:
                answer({"error": f"unknown request {op!r}"})
    finally:
        ended.cancel()


async def _until_seen(sched: Any, pods: list[str], terminated: asyncio.Event) -> None:
    """Until the pod informer holds every pod of ``pods`` (or ``START_TIMEOUT`` passes)."""
    store = sched.informers.informer("Pod").store
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT
    while not terminated.is_set() and loop.time() < deadline:
        if all(key in store for key in pods):
            return
        await asyncio.sleep(0.01)
    if not terminated.is_set():
        log.warning("the scheduler starts before its informer saw every pod created at start")
