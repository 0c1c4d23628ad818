"""``kubesched up``: a whole simulated cluster, driven through a real Kubernetes API, in two processes.

This process, on one event loop:

* the API server (``kubesched.apiserver``) on the object store, optionally durable in SQLite;
* the cluster components ``kubesched simulate`` runs too (``kubesched.simulator.components``): the
  fake kubelets (node status and Leases, admission, Running pods, taint eviction), the node
  lifecycle controller, the PersistentVolume and ResourceClaim controllers and the workload
  controllers. Here the kubelet finishes graceful deletions once "containers have stopped" (a
  short delay instead of the full grace period, so ``kubectl delete`` returns promptly);
* the web UI at ``/ui/`` (``kubesched.apiserver.webui``), with scenario runs under
  ``/ui/api/scenarios`` (``kubesched.simulator.scenario_live``).

The scheduler runs in a child process (``kubesched.simulator.scheduler_process``), so that request
handling and scheduling each have a core: on one loop, every created pod's scheduling cycle,
binding and informer updates waited behind the API requests, and the other way round. It talks to
the API server **over HTTPS** with ``kubesched.client.kube.KubeClient``, exactly as it would to a
real cluster, as the user ``system:kube-scheduler`` (its own token, and only the rights of the
bootstrap ``system:kube-scheduler`` and ``system:volume-scheduler`` roles). The API server asks it,
over the child's standard input and output, for what it serves on the scheduler's behalf: the
scheduling explanation of each pod's latest attempt at
``/apis/kubesched.io/v1alpha1/namespaces/{namespace}/explanations/{pod}``, and the scheduler's
metrics after the server's own on ``/metrics`` (``kubectl get --raw /metrics``). The child ends
with ``up`` (stopped in order on Ctrl-C or SIGTERM; at once when ``up`` dies).

Start-up order: the API server, the components, the objects of ``-f`` other than pods, the
scheduler process (until its informers have synced), the pods, then the scheduling loop (once the
scheduler has seen every pod, so that its queue holds them as ``simulate``'s does and ``--seed``
places them alike), and last the kubeconfig: whoever waits for that file finds the cluster running.

The kubelets and controllers act on the object store in-process: like components with direct
storage access they pass no API request, so they need no identity (their writes still go through
validation and admission).

``Cluster`` is the programmatic entry point (``async with Cluster(options) as c``); ``run`` is what
the CLI calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kubesched.api.apierrors import AlreadyExists, APIError
from kubesched.api.kinds import POD, object_key
from kubesched.apiserver import APIServer
from kubesched.apiserver.security import SecurityOptions
from kubesched.apiserver.selectors import field_predicate
from kubesched.apiserver.server import DEFAULT_KUBECONFIG
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.features import FeatureGates
from kubesched.scheduler.framework.registry import Registry
from kubesched.scheduler.scheduler import NON_TERMINAL_PODS
from kubesched.simulator.components import ComponentOptions, Components, start_components
from kubesched.simulator.crds import plugin_crds, plugin_rbac, with_plugin_crds
from kubesched.simulator.scenario_live import ScenarioService
from kubesched.simulator.scheduler_process import SchedulerProcess, SchedulerSpec, changed_gates
from kubesched.utils.clock import RealClock
from kubesched.utils.eventloop import run_server
from kubesched.utils.signals import on_signals

log = logging.getLogger(__name__)
#: The most watch events the kubelets handle at a time: starting 10,000 pods takes seconds, during
#: which the API server (on the same event loop) must keep answering kubectl and the web UI.
KUBELET_BATCH = 25


@dataclass
class UpOptions:
    host: str = "127.0.0.1"
    port: int = 6443
    data: str | None = None
    kubeconfig_out: str | None = DEFAULT_KUBECONFIG
    config: SchedulerConfiguration | None = None
    registry: Registry | None = None
    feature_gates: FeatureGates | None = None
    #: ``--plugin`` specifications: the scheduler process loads them as the registry's source.
    plugins: list[str] = field(default_factory=list)
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


def create_objects(server: APIServer, objects: list[dict]) -> tuple[int, list[str]]:
    """Create manifests through the API server's create path, in dependency order; objects that
    already exist (a restart with ``--data``) are left as they are. Returns (created, problems)."""
    from kubesched.simulator.simulate import creation_order, not_served_because

    ordered, ignored = creation_order(objects, server.store.feature_gates)
    problems = [f"{o.get('kind')} {(o.get('metadata') or {}).get('name')}: {not_served_because(o)}" for o in ignored]
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
        self.store = ObjectStore(RealClock(), seed=options.seed, feature_gates=options.feature_gates)
        self.server = APIServer(self.store, host=options.host, port=options.port, data=options.data,
                                bookmark_interval=options.bookmark_interval, garbage_collect=not options.controllers,
                                security=options.security)
        self.components: Components | None = None
        self.scheduler: SchedulerProcess | None = None
        self.kubeconfig: Path | None = None
        self.problems: list[str] = []
        #: The scenario runs the web UI starts (``/ui/api/scenarios``).
        self.scenarios = ScenarioService(self.server)
        self.server.webui.api = self.scenarios.handle

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        opts = self.options
        await self.server.start()
        self.components = start_components(self.store, ComponentOptions(
            kubelet=opts.kubelet, controllers=opts.controllers, termination_delay=opts.termination_delay,
            kubelet_batch=KUBELET_BATCH))
        pods = [o for o in opts.objects if (o.get("apiVersion"), o.get("kind")) == ("v1", "Pod")]
        others = [o for o in opts.objects if (o.get("apiVersion"), o.get("kind")) != ("v1", "Pod")]
        if opts.config is not None:
            others = with_plugin_crds(others, opts.config, opts.registry)
            others += plugin_rbac(plugin_crds(opts.config, opts.registry))
        self.problems = create_objects(self.server, others)[1]
        if opts.scheduler:
            await self._start_scheduler()
        # Pods last, once the scheduler has synced the nodes, in manifest order, and only then does
        # it schedule: its queue then holds them all as ``simulate``'s does, so the two place them alike.
        self.problems += create_objects(self.server, pods)[1]
        if self.scheduler is not None:
            watched = field_predicate(POD, NON_TERMINAL_PODS)
            await self.scheduler.start_scheduling([object_key(p) for p in self.store.iter_all(POD) if watched is None or watched(p)])
        # The kubeconfig last: whoever waits for it (a script, a test) finds the whole cluster running.
        if opts.kubeconfig_out:
            self.kubeconfig = self.server.write_kubeconfig(opts.kubeconfig_out)

    async def _start_scheduler(self) -> None:
        """The scheduler process, once its informers have synced (``scheduler_process``)."""
        from kubesched.scheduler import config as config_module

        opts = self.options
        cfg = opts.config or config_module.default_configuration(feature_gates=opts.feature_gates)
        self.scheduler = SchedulerProcess(SchedulerSpec(
            server=self.server.url, token=self.server.scheduler_token, ca_data=self.server.security.ca_data,
            config=config_module.to_yaml(cfg), feature_gates=changed_gates(opts.feature_gates), plugins=list(opts.plugins),
            seed=opts.seed, unix_socket=await self.server.listen_unix()))
        await self.scheduler.start()
        self.server.explanations = self.scheduler.explanation
        self.server.metrics_sources.append(self.scheduler.metrics)

    async def stop(self) -> None:
        await self.scenarios.close()
        if self.scheduler is not None:
            await self.scheduler.stop()
        if self.components is not None:
            await self.components.stop()
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
    lines.append(f"web UI: {ui_url(cluster)}" + ("    (one-time login link)" if cluster.server.security.enabled else ""))
    parts = (["scheduler"] if cluster.scheduler is not None else []) + (cluster.components.names() if cluster.components else [])
    lines.append("running: API server" + "".join(f", {p}" for p in parts))
    for problem in cluster.problems:
        lines.append(f"warning: {problem}")
    return "\n".join(lines)


def ui_url(cluster: Cluster) -> str:
    """The web UI's address; with authentication on, a link that logs the first browser to open it
    in as the admin (the code in the fragment works once)."""
    code = cluster.server.webui.login_code()
    return f"{cluster.server.url}/ui/" + (f"#login={code}" if code else "")


async def serve(options: UpOptions, ready: Callable[[Cluster], None] | None = None,
                stop: asyncio.Event | None = None) -> None:
    """Run until ``stop`` is set (or SIGINT/SIGTERM)."""
    stop = stop or asyncio.Event()
    on_signals(stop.set)
    cluster = Cluster(options)
    if not await _started_unless_stopped(cluster, stop):
        return
    try:
        if ready is not None:
            ready(cluster)
        await stop.wait()
    finally:
        await cluster.stop()


async def _started_unless_stopped(cluster: Cluster, stop: asyncio.Event) -> bool:
    """Start ``cluster`` unless ``stop`` comes first: a scheduler whose informers never sync (a
    list the server refuses, a resource it does not serve) keeps the start waiting, and SIGTERM or
    Ctrl-C must still end ``up`` then (the start is cancelled, which stops what had started)."""
    starting = asyncio.ensure_future(cluster.start())
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not starting.done():
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        return False
    starting.result()
    return True


def run(options: UpOptions, ready: Callable[[Cluster], None] | None = None) -> None:
    """Blocking entry point: start everything, call ``ready``, serve until interrupted."""
    run_server(serve(options, ready))
