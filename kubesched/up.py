"""``kubesched up``: a whole simulated cluster in one process, driven through a real Kubernetes API.

Pieces, all on one event loop:

* the API server (``kubesched.apiserver``) on the object store, optionally durable in SQLite;
* the fake kubelet (``kubesched.cluster.kubelet``): admission, Running pods, taint eviction;
* the controllers (``kubesched.controllers``: Deployment, ReplicaSet, StatefulSet, GC);
* a terminator that finishes graceful deletions once "containers have stopped" (a short delay
  instead of the full grace period, so ``kubectl delete`` returns promptly);
* the scheduler, talking to the API server **over HTTPS** with ``kubesched.cluster.kube.KubeClient``,
  exactly as it would to a real cluster, as the user ``system:kube-scheduler`` (its own token, and
  only the rights of the bootstrap ``system:kube-scheduler`` and ``system:volume-scheduler`` roles).

The kubelet, terminator and controllers act on the object store in-process: like components with
direct storage access they pass no API request, so they need no identity (their writes still go
through validation and admission).

``Cluster`` is the programmatic entry point (``async with Cluster(options) as c``); ``run`` is what
the CLI calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesched.apiserver import APIServer
from kubesched.apiserver.security import SecurityOptions
from kubesched.apiserver.server import DEFAULT_KUBECONFIG
from kubesched.clock import RealClock
from kubesched.cluster.errors import AlreadyExists, APIError
from kubesched.cluster.kube import KubeClient, wait_ready
from kubesched.cluster.kubelet import FakeKubelet
from kubesched.cluster.store import ADDED, MODIFIED, POD, ObjectStore, WatchEvent
from kubesched.config.types import SchedulerConfiguration
from kubesched.controllers import Controllers, start_all
from kubesched.features import FeatureGates
from kubesched.framework.registry import Registry
from kubesched.scheduler import Scheduler

log = logging.getLogger(__name__)


@dataclass
class UpOptions:
    host: str = "127.0.0.1"
    port: int = 6443
    data: str | None = None
    kubeconfig_out: str | None = DEFAULT_KUBECONFIG
    config: SchedulerConfiguration | None = None
    registry: Registry | None = None
    feature_gates: FeatureGates | None = None
    objects: list[dict] = field(default_factory=list)
    seed: int | None = None
    #: Seconds a deleted running pod takes to stop before the kubelet removes it (0: at once).
    termination_delay: float = 0.2
    scheduler: bool = True
    controllers: bool = True
    kubelet: bool = True
    bookmark_interval: float = 60.0
    #: TLS, authentication and authorization of the API server (secure by default).
    security: SecurityOptions = field(default_factory=SecurityOptions)


class PodTerminator:
    """Finish graceful pod deletions as a kubelet does once containers exit: a pod with a
    ``deletionTimestamp`` is removed (grace period 0) after ``delay`` seconds, instead of lingering
    for its whole ``terminationGracePeriodSeconds``."""

    def __init__(self, store: ObjectStore, delay: float) -> None:
        self.store = store
        self.delay = delay
        self._pending: set[str] = set()

    def start(self) -> None:
        self.store.write_hooks.append(self._on_write)
        for pod in list(self.store.iter_all(POD)):
            self._consider(pod)

    def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.store.write_hooks.remove(self._on_write)

    def _on_write(self, _rv: int, kind: Any, event: WatchEvent) -> None:
        if kind == POD and event.type in (ADDED, MODIFIED):
            self._consider(event.object)

    def _consider(self, pod: dict) -> None:
        meta = pod["metadata"]
        uid = meta.get("uid", "")
        if not meta.get("deletionTimestamp") or uid in self._pending:
            return
        self._pending.add(uid)
        asyncio.get_running_loop().call_later(self.delay, self._finish, meta.get("namespace"), meta["name"], uid)

    def _finish(self, namespace: str | None, name: str, uid: str) -> None:
        self._pending.discard(uid)
        pod = self.store.try_get(POD, namespace, name)
        if pod is None or pod["metadata"].get("uid") != uid or pod["metadata"].get("finalizers"):
            return
        try:
            self.store.delete(POD, namespace, name, grace_period=0, uid=uid)
        except APIError as e:
            log.debug("could not finish deleting %s/%s: %s", namespace, name, e)


def create_objects(server: APIServer, objects: list[dict]) -> tuple[int, list[str]]:
    """Create manifests through the API server's create path, in dependency order; objects that
    already exist (a restart with ``--data``) are left as they are. Returns (created, problems)."""
    from kubesched.simulation import creation_order

    ordered, ignored = creation_order(objects)
    problems = [f"{o.get('kind')} {(o.get('metadata') or {}).get('name')}: kind not served" for o in ignored]
    created = 0
    for obj in ordered:
        try:
            server.rest.create_object(obj)
            created += 1
        except AlreadyExists:
            continue
        except APIError as e:
            problems.append(str(e))
    return created, problems


class Cluster:
    """The running pieces of ``kubesched up`` (see the module docstring)."""

    def __init__(self, options: UpOptions) -> None:
        self.options = options
        self.store = ObjectStore(RealClock(), seed=options.seed)
        self.server = APIServer(self.store, host=options.host, port=options.port, data=options.data,
                                bookmark_interval=options.bookmark_interval, garbage_collect=not options.controllers,
                                security=options.security)
        self.kubelet: FakeKubelet | None = None
        self.terminator: PodTerminator | None = None
        self.controllers: Controllers | None = None
        self.client: KubeClient | None = None
        self.scheduler: Scheduler | None = None
        self.kubeconfig: Path | None = None
        self.problems: list[str] = []
        self._runner: asyncio.Task | None = None

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        opts = self.options
        await self.server.start()
        if opts.kubeconfig_out:
            self.kubeconfig = self.server.write_kubeconfig(opts.kubeconfig_out)
        if opts.kubelet:
            self.kubelet = FakeKubelet(self.store)
            self.kubelet.start()
            self.terminator = PodTerminator(self.store, opts.termination_delay)
            self.terminator.start()
        if opts.controllers:
            self.controllers = start_all(self.store)
        if opts.objects:
            _, self.problems = create_objects(self.server, opts.objects)
        if opts.scheduler:
            await self._start_scheduler()

    async def _start_scheduler(self) -> None:
        opts = self.options
        from kubesched import config as config_module

        cfg = opts.config or config_module.default_configuration(feature_gates=opts.feature_gates)
        self.client = self.server.client(token=self.server.scheduler_token or None)
        await wait_ready(self.client)
        self.scheduler = Scheduler(self.client, cfg, registry=opts.registry, seed=opts.seed, feature_gates=opts.feature_gates)
        await self.scheduler.start()
        self._runner = asyncio.get_running_loop().create_task(self.scheduler.run(), name="scheduler")

    async def stop(self) -> None:
        if self.scheduler is not None:
            await self.scheduler.stop()
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        if self.client is not None:
            await self.client.close()
        if self.controllers is not None:
            await self.controllers.stop()
        if self.terminator is not None:
            self.terminator.stop()
        if self.kubelet is not None:
            await self.kubelet.stop()
        await self.server.stop()

    async def __aenter__(self) -> Cluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def banner(cluster: Cluster) -> str:
    lines = [f"kubesched API server listening on {cluster.server.url}"]
    if cluster.options.data:
        lines.append(f"data: {cluster.options.data} ({cluster.server.restored} objects restored)")
    if cluster.kubeconfig is not None:
        lines.append(f"kubeconfig written to {cluster.kubeconfig}"
                     + (" (admin credential and CA; see docs/security.md)" if cluster.server.security.enabled else ""))
        lines.append(f"  export KUBECONFIG={cluster.kubeconfig}    # then: kubectl get nodes,pods -o wide")
    parts = [p for p, on in (("scheduler", cluster.scheduler is not None), ("kubelet", cluster.kubelet is not None),
                             ("controllers", cluster.controllers is not None)) if on]
    lines.append("running: API server" + "".join(f", {p}" for p in parts))
    for problem in cluster.problems:
        lines.append(f"warning: {problem}")
    return "\n".join(lines)


async def serve(options: UpOptions, ready: Callable[[Cluster], None] | None = None,
                stop: asyncio.Event | None = None) -> None:
    """Run until ``stop`` is set (or SIGINT/SIGTERM)."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    async with Cluster(options) as cluster:
        if ready is not None:
            ready(cluster)
        await stop.wait()


def run(options: UpOptions, ready: Callable[[Cluster], None] | None = None) -> None:
    """Blocking entry point: start everything, call ``ready``, serve until interrupted."""
    asyncio.run(serve(options, ready))
