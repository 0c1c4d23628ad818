"""The ``kubesched run`` process: kube-scheduler's ``app.Run`` around a ``Scheduler``.

Order of events, as upstream except for step 5's drain (kube-scheduler exits at once on SIGTERM):

1. three API clients from the same kubeconfig, each with its own ``clientConnection`` rate limiter:
   the scheduler's (user agent ``.../scheduler``), the event recorder's, and leader election's
   (whose request timeout is the renew deadline), so a burst of bindings never starves renewals;
2. the endpoint server starts at once (``/livez`` answers while the caches fill; ``/readyz`` waits
   for ``sched-handler-sync``);
3. informers start and sync (on every replica, leader or not, unless ``delayCacheUntilActive``);
4. with leader election, the scheduling loop runs only once the Lease is held. Losing it exits the
   process with status 1 at once ("Leaderelection lost"). Stricter than upstream, the replica is
   fenced: before popping each pod, before each bind and before any write of the scheduler's
   client, it checks that its last renewal started less than the renew deadline ago on its
   monotonic clock; if not (a process that was paused, a renewal stuck in the network), it stops
   and exits the same way, so it never binds once a standby may have taken the Lease;
5. SIGTERM/SIGINT: ``/readyz`` fails (``shutdown``), the queue stops handing out pods, in-flight
   binding cycles get ``BINDING_GRACE`` seconds to finish (then are cancelled, which rolls them back:
   Unreserve, forget, requeue), pending API writes and events are flushed (for at most
   ``FLUSH_GRACE`` seconds: a stop never hangs on an unreachable server), and only then is the
   Lease released, so the next leader never overlaps with bindings of this one. Exit status 0.

SIGUSR2 logs the cache comparison and dump (upstream's cache debugger); ``/debug/cache`` serves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import ssl
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import disable_created_metrics, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from kubesched.api.errors import KubeschedError
from kubesched.api.kinds import EVENT
from kubesched.client.kube import USER_AGENT, KubeClient, load_config
from kubesched.client.leaderelection import ELECTION_NAME, LeaderElector, LeaseLock, legacy_event, new_identity
from kubesched.client.recorder import EventSink
from kubesched.scheduler import config as config_module
from kubesched.scheduler.backend.queue import DEFAULT_POD_MAX_IN_UNSCHEDULABLE
from kubesched.scheduler.comparer import DEFAULT_INTERVAL
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.features import FeatureGates
from kubesched.scheduler.framework.registry import Registry
from kubesched.scheduler.scheduler import Scheduler
from kubesched.scheduler.serving import debug
from kubesched.scheduler.serving.delegated import (
    DEFAULT_ALWAYS_ALLOW_PATHS,
    DEFAULT_CACHE_TTL,
    DelegatedAuth,
    requester_of,
    review_client,
)
from kubesched.scheduler.serving.endpoints import Check, Endpoints
from kubesched.utils.certs import server_context
from kubesched.utils.signals import on_signals

log = logging.getLogger(__name__)

CORE_EVENT = EVENT  # the core group's Event (v1)
#: Seconds in-flight binding cycles may take to finish after SIGTERM before they are rolled back.
BINDING_GRACE = 10.0
#: Seconds then given to status patches and events still queued; what is left after them is dropped.
FLUSH_GRACE = 5.0


@dataclass
class RunOptions:
    """Everything ``kubesched run`` resolved from its flags and configuration file."""

    config: SchedulerConfiguration
    feature_gates: FeatureGates
    registry: Registry | None = None
    kubeconfig: str = ""
    master: str = ""
    bind_address: str = "0.0.0.0"
    secure_port: int = 10259
    insecure_port: int = 0
    cert_dir: str = ""
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    pod_max_in_unschedulable: float = DEFAULT_POD_MAX_IN_UNSCHEDULABLE
    binding_grace: float = BINDING_GRACE
    flush_grace: float = FLUSH_GRACE
    #: Seconds between two runs of the cache comparer that repairs the cache (0: off).
    cache_check_interval: float = DEFAULT_INTERVAL
    identity: str = field(default_factory=new_identity)
    #: Delegated authentication and authorization of the secure port (``serving.delegated``).
    authentication_kubeconfig: str = ""
    authorization_kubeconfig: str = ""
    authorization_always_allow_paths: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS
    authentication_token_cache_ttl: float = DEFAULT_CACHE_TTL
    authorization_allow_cache_ttl: float = DEFAULT_CACHE_TTL
    authorization_deny_cache_ttl: float = DEFAULT_CACHE_TTL


class SchedulerApp:
    """One ``kubesched run`` process; ``await run()`` returns its exit status (or never returns when
    the Lease is lost: ``exit`` is called with 1, as upstream's ``klog.FlushAndExit``)."""

    def __init__(self, options: RunOptions, *, exit: Callable[[int], Any] = os._exit) -> None:
        self.options = options
        self.exit = exit
        self.shutdown = asyncio.Event()
        self.leading = False
        #: The status ``run`` returns after a shutdown (1 when the scheduling loop crashed).
        self.exit_code = 0
        self.scheduler: Scheduler | None = None
        self.elector: LeaderElector | None = None
        self.endpoints: Endpoints | None = None
        self._clients: list[KubeClient] = []
        self._rest: Any = None
        self._tasks: set[asyncio.Task] = set()
        self._sync_task: asyncio.Task | None = None
        self._loop_task: asyncio.Task | None = None

    # --- setup ------------------------------------------------------------------------------------
    def _client(self, suffix: str, timeout: float = 30.0) -> KubeClient:
        cc = self.options.config.client_connection
        if self._rest is None:  # read the kubeconfig once for the three clients
            self._rest = load_config(self.options.kubeconfig or None, master=self.options.master or None)
        rest = self._rest
        agent = f"{USER_AGENT}/{suffix}" if suffix else USER_AGENT  # restclient.AddUserAgent
        client = KubeClient(rest, qps=cc.qps, burst=cc.burst, user_agent=agent, timeout=timeout)
        self._clients.append(client)
        return client

    def build(self) -> Scheduler:
        """Clients, scheduler, elector and endpoints (nothing started yet)."""
        cfg = self.options.config
        client = self._client("scheduler")
        sched = Scheduler(client, cfg, registry=self.options.registry, feature_gates=self.options.feature_gates,
                          pod_max_in_unschedulable=self.options.pod_max_in_unschedulable,
                          cache_check_interval=self.options.cache_check_interval)
        events = self._client("")
        sched.broadcaster.sink = EventSink(events)
        disable_created_metrics()  # no ``*_created`` series: upstream's registry has none
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            with contextlib.suppress(ValueError):
                collector(registry=sched.metrics.registry)
        self.scheduler = sched
        le = cfg.leader_election
        if le.leader_elect:
            self.elector = self._elector(sched, le, events)
            # Fencing: no pod is scheduled and no write leaves the scheduler's client unless the
            # last renewal is younger than the renew deadline.
            sched.fence = self.elector.fence
            client.write_fence = self.elector.fence
        self.endpoints = self._endpoints(sched)
        return sched

    def _elector(self, sched: Scheduler, le: Any, events: KubeClient) -> LeaderElector:
        """The elector, with its own client (request timeout = renew deadline, as upstream); its
        transition events go through the event client. A standby watches the Lease so that it
        takes over right after the lease runs out (``leaderelection``'s prompt takeover)."""
        client = self._client("leader-election", timeout=le.renew_deadline)
        component = self.options.config.profiles[0].scheduler_name if self.options.config.profiles else "default-scheduler"

        def record(lease: dict, message: str) -> None:
            event = legacy_event(lease, message, component, sched.clock.wall())
            self._spawn(events.create(CORE_EVENT, event), "leader election event")

        lock = LeaseLock(client, le.resource_namespace, le.resource_name, self.options.identity, recorder=record)
        return LeaderElector(lock, lease_duration=le.lease_duration, renew_deadline=le.renew_deadline,
                             retry_period=le.retry_period, on_started_leading=self._started_leading,
                             on_stopped_leading=self._stopped_leading, on_new_leader=self._new_leader,
                             registry=sched.metrics.registry, watch_lease=True)

    def _endpoints(self, sched: Scheduler) -> Endpoints:
        watchdog = [Check("leaderElection", self.elector.check)] if self.elector is not None else []
        readyz = [*watchdog, Check("shutdown", lambda: "process is shutting down" if self.shutdown.is_set() else None),
                  Check("sched-handler-sync", lambda: None if sched.handlers_synced else "handlers are not fully synchronized")]
        profiling = self.options.config.enable_profiling
        return Endpoints(healthz=watchdog, livez=[], readyz=readyz, metrics=self._render_metrics,
                         configz=lambda: config_module.to_v1(self.options.config),
                         debug=(lambda: debug.dump(sched)) if profiling else None, auth=self._delegated_auth())

    def _delegated_auth(self) -> DelegatedAuth | None:
        """The secure port's authentication and authorization (None without a secure port)."""
        opts = self.options
        if not opts.secure_port:
            return None
        authn = review_client(opts.authentication_kubeconfig, "authentication")
        authz = review_client(opts.authorization_kubeconfig, "authorization")
        self._clients += [c for c in (authn, authz) if c is not None]
        return DelegatedAuth(token_reviews=requester_of(authn), access_reviews=requester_of(authz),
                             always_allow_paths=opts.authorization_always_allow_paths,
                             token_ttl=opts.authentication_token_cache_ttl, allow_ttl=opts.authorization_allow_cache_ttl,
                             deny_ttl=opts.authorization_deny_cache_ttl)

    def _render_metrics(self) -> bytes:
        assert self.scheduler is not None
        return render_metrics(self.scheduler)

    # --- run --------------------------------------------------------------------------------------
    async def run(self) -> int:
        sched = self.scheduler or self.build()
        assert self.endpoints is not None
        opts = self.options
        log.info("Starting Kubernetes Scheduler (kubesched), identity %s", opts.identity)
        self._install_signals()
        if not self._delay_cache():
            # The informers' lists go out first: the API server answers them while this process
            # makes its serving certificate and starts the endpoints.
            self._start_sync(sched)
        try:
            context = server_context(opts.tls_cert_file, opts.tls_private_key_file, opts.cert_dir) if opts.secure_port else None
            await self.endpoints.start(opts.bind_address, opts.secure_port, opts.insecure_port, context)
        except (ValueError, OSError, ssl.SSLError) as e:
            await self._cancel_sync()
            await sched.stop()
            await self._close()
            raise ServingError(f"cannot serve the health and metrics endpoints: {e}") from e
        try:
            return await self._serve(sched)
        finally:
            await self._close()

    async def _serve(self, sched: Scheduler) -> int:
        if not self._delay_cache() and not await self._sync(sched):
            await sched.stop()
            return 0
        if self.elector is None:
            self._start_loop(sched)
            await self.shutdown.wait()
            await self._stop_scheduling(sched)
            return self.exit_code
        elector_task = asyncio.get_running_loop().create_task(self.elector.run(), name="leader-election")
        stopped = asyncio.get_running_loop().create_task(self.shutdown.wait())
        await asyncio.wait({elector_task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        lost = elector_task.done() and not self.elector.stop_requested
        await self._stop_scheduling(sched)
        self.elector.stop()
        await asyncio.gather(elector_task, return_exceptions=True)
        if lost:  # only reached when ``exit`` did not end the process (tests)
            return 1
        log.info("Requested to terminate, exiting")
        return self.exit_code

    def _delay_cache(self) -> bool:
        """``delayCacheUntilActive`` with leader election: informers start only once leading."""
        return self.options.config.delay_cache_until_active and self.elector is not None

    def _start_sync(self, sched: Scheduler) -> asyncio.Task:
        """The informers' start and sync, as a task (started once)."""
        if self._sync_task is None:
            self._sync_task = asyncio.get_running_loop().create_task(sched.start_informers(), name="informer-sync")
        return self._sync_task

    async def _cancel_sync(self) -> None:
        if self._sync_task is not None and not self._sync_task.done():
            self._sync_task.cancel()
            await asyncio.gather(self._sync_task, return_exceptions=True)

    async def _sync(self, sched: Scheduler) -> bool:
        """Start informers (unless started) and wait for them (or for a shutdown request); True once synced."""
        sync = self._start_sync(sched)
        stopped = asyncio.get_running_loop().create_task(self.shutdown.wait())
        await asyncio.wait({sync, stopped}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not sync.done():
            await self._cancel_sync()
            return False
        sync.result()
        log.info("Handlers synced")
        return True

    def _start_loop(self, sched: Scheduler) -> None:
        sched.start_scheduling()
        self._loop_task = asyncio.get_running_loop().create_task(sched.run(), name="scheduling-loop")
        self._loop_task.add_done_callback(self._loop_ended)

    def _loop_ended(self, task: asyncio.Task) -> None:
        """The loop only ends on shutdown, when the fence stopped it (the Lease can no longer be
        proven: exit at once, as on a lost Lease), or if it crashed (shut down, exit non-zero)."""
        if self.scheduler is not None and self.scheduler.fenced:
            self._stopped_leading()
            return
        if task.cancelled() or task.exception() is None:
            return
        log.error("the scheduling loop failed: %r", task.exception())
        self.exit_code = 1
        self.request_shutdown()

    async def _stop_scheduling(self, sched: Scheduler) -> None:
        await sched.stop(binding_timeout=self.options.binding_grace, flush_timeout=self.options.flush_grace)
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)

    # --- leader election callbacks ------------------------------------------------------------------
    def _started_leading(self) -> None:
        self.leading = True
        sched = self.scheduler
        assert sched is not None
        if self._sync_task is None:  # delayCacheUntilActive: sync now, then schedule
            async def sync_then_run() -> None:
                log.info("Starting informers and waiting for sync...")
                if await self._sync(sched):
                    log.info("Sync completed")
                    self._start_loop(sched)

            self._spawn(sync_then_run(), "sync-then-schedule")
            return
        self._start_loop(sched)

    def _stopped_leading(self) -> None:
        if self.elector is not None and self.elector.stop_requested:
            return
        log.error("Leaderelection lost")
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        sys.stderr.flush()
        self.exit(1)

    def _new_leader(self, identity: str) -> None:
        if identity and identity != self.options.identity:
            log.info("new leader elected: %s", identity)

    # --- signals and cleanup ----------------------------------------------------------------------
    def _install_signals(self) -> None:
        on_signals(self.request_shutdown)
        dump_signal = getattr(signal, "SIGUSR2", None)  # not on Windows
        if dump_signal is not None:
            on_signals(self._dump, (dump_signal,))

    def request_shutdown(self) -> None:
        if not self.shutdown.is_set():
            log.info("Received termination signal, shutting down gracefully")
        self.shutdown.set()

    def _dump(self) -> None:
        if self.scheduler is not None:
            debug.log_dump(self.scheduler)

    def _spawn(self, coro: Any, what: str) -> None:
        async def guarded() -> None:
            try:
                await coro
            except Exception as e:
                log.warning("%s failed: %s", what, e)

        task = asyncio.get_running_loop().create_task(guarded(), name=what)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _close(self) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=2.0)
        if self.endpoints is not None:
            await self.endpoints.stop()
        for client in self._clients:
            await client.close()


class ServingError(KubeschedError):
    """The endpoints could not start (bad TLS files, a port in use)."""


def run(options: RunOptions) -> int:
    """Blocking entry point of ``kubesched run``."""
    return asyncio.run(SchedulerApp(options).run())


__all__ = ["ELECTION_NAME", "RunOptions", "SchedulerApp", "ServingError", "run"]


def render_metrics(sched: Scheduler) -> bytes:
    """The scheduler's exposition text, with the gauges read at scrape time brought up to date."""
    m = sched.metrics
    m.cache_size.labels("nodes").set(sched.cache.node_count())
    m.cache_size.labels("pods").set(len(sched.cache.pod_states))
    m.cache_size.labels("assumed_pods").set(len(sched.cache.assumed))
    m.goroutines.labels("binding").set(len(sched.binding_tasks))
    return generate_latest(m.registry)
