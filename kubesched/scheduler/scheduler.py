"""The Scheduler: the loop that pops pods, runs the scheduling cycle synchronously and the binding
cycle asynchronously, and handles failures (upstream ``scheduler.go`` and ``schedule_one.go``).

It only talks to the cluster through a ``ClusterClient``, so the same object schedules the
embedded cluster, ``kubesched apiserver`` and a real cluster.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kubesched.api.types import PodInfo
from kubesched.client.informers import Handler, InformerFactory, drop_managed_fields
from kubesched.client.interface import ClusterClient
from kubesched.client.recorder import Broadcaster, EventSink
from kubesched.scheduler.backend.apidispatcher import APIDispatcher, DispatchingClient, PodStatusPatchCall
from kubesched.scheduler.backend.cache import Cache
from kubesched.scheduler.backend.queue import DEFAULT_POD_MAX_IN_UNSCHEDULABLE, QueueProfile, SchedulingQueue
from kubesched.scheduler.backend.workloadmanager import WorkloadManager
from kubesched.scheduler.comparer import CacheComparer
from kubesched.scheduler.config.args import NodeResourcesFitArgs
from kubesched.scheduler.config.types import Profile, SchedulerConfiguration
from kubesched.scheduler.eventhandlers import EventHandlers
from kubesched.scheduler.extender import HTTPExtender, bind_with_extenders, build_extenders, ignored_by_scheduler
from kubesched.scheduler.features import DEFAULT_GATES, FeatureGates
from kubesched.scheduler.framework import events as ev
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.diagnosis import Diagnosis, FitError, NoNodesAvailable
from kubesched.scheduler.framework.extender import Extender, ExtenderError
from kubesched.scheduler.framework.interface import NominatingInfo, NominatingMode
from kubesched.scheduler.framework.preemption_report import PreemptionObserver
from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo
from kubesched.scheduler.framework.registry import Registry
from kubesched.scheduler.framework.runtime import Framework, FrameworkError, FrameworkOptions, HandleContext, UnknownPlugin
from kubesched.scheduler.framework.status import Code, Status, StatusError
from kubesched.scheduler.metrics import Metrics
from kubesched.scheduler.plugins.registry import in_tree_registry, trusted_score_ranges
from kubesched.scheduler.schedule_one import Algorithm, Attempt, ScheduleResult
from kubesched.utils.clock import Clock, RealClock

log = logging.getLogger(__name__)

PLUGIN_METRICS_SAMPLE_PERCENT = 10
#: The scheduling loop's time slice with an in-process client (the embedded store), in seconds: it
#: schedules pods back to back for this long before it lets the event loop's other tasks run
#: (binding cycles, informers, the event broadcaster, servers), as Go's runtime lets a goroutine,
#: kube-scheduler's scheduling loop included, run for 10 ms before it preempts it for others
#: waiting for a core. Yielding after every pod woke each of those tasks once per pod; after a
#: slice, each handles in one go what piled up. A pod's binding starts at most one slice after its
#: cycle. Against an API server in another process the loop yields after every pod: each binding
#: sent at once is work that process does on another core meanwhile.
SCHEDULING_TIME_SLICE = 0.010
#: ... unless more pods than this are assumed and not yet seen bound (bindings waiting on Permit or
#: on an extender): the loop then yields after every pod, so that those bindings keep pace.
MAX_ASSUMED_IN_SLICE = 128
CLEAR_NOMINATED_NODE = NominatingInfo("", NominatingMode.Override)

#: Kinds the scheduler's informers watch: what the cache and the in-tree plugins read.
#: What the scheduler informs on: exactly what the bootstrap ``system:kube-scheduler`` and
#: ``system:volume-scheduler`` roles let kube-scheduler read, so it runs under them unchanged.
WATCHED_KINDS = (
    "Pod", "Node", "Namespace", "PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode",
    "CSIDriver", "CSIStorageCapacity", "VolumeAttachment", "PodDisruptionBudget", "Service", "ReplicaSet",
    "StatefulSet", "ReplicationController", "ResourceClaim", "DeviceClass", "ResourceSlice",
)
#: Watched too when their feature gate is on, as kube-scheduler adds their informers.
GATED_WATCHED_KINDS = {"Workload": "GenericWorkload"}


#: Builds the scheduling algorithm from the global percentageOfNodesToScore, the run's random
#: source and the extenders (``Algorithm`` itself, or a subclass that observes attempts, as the
#: bench's does).
AlgorithmFactory = Callable[[int, random.Random, Sequence[Extender]], Algorithm]


#: A binding cycle waiting for the binding worker: what ``_binding_cycle`` takes.
_Binding = tuple[CycleState, Framework, ScheduleResult, QueuedPodInfo, float]


@dataclass
class _Outcome:
    result: ScheduleResult
    qpi: QueuedPodInfo
    status: Status | None
    nominating: NominatingInfo | None = None


#: The scheduler's pod informer never holds a pod that has finished (kube-scheduler's
#: ``newPodInformer``): the API server filters them out, and a pod that finishes is deleted.
NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"


class Scheduler:
    def __init__(
        self,
        client: ClusterClient,
        config: SchedulerConfiguration,
        *,
        registry: Registry | None = None,
        clock: Clock | None = None,
        seed: int | None = None,
        feature_gates: FeatureGates | None = None,
        metrics: Metrics | None = None,
        assumed_pod_ttl: float = 0.0,
        pod_max_in_unschedulable: float = DEFAULT_POD_MAX_IN_UNSCHEDULABLE,
        on_attempt: Callable[[Attempt], None] | None = None,
        fast_paths: bool = True,
        batching: bool = True,
        algorithm: AlgorithmFactory = Algorithm,
        preemption_observer: PreemptionObserver | None = None,
        fence: Callable[[], str | None] | None = None,
        cache_check_interval: float = 0.0,
        after_attempt: Callable[[PodInfo], Awaitable[None]] | None = None,
    ) -> None:
        """``fast_paths``: use the optimisations that never move a placement (off: their plain
        counterparts, to compare); ``batching``: reuse the previous cycle's results for a pod of the
        same shape where the OpportunisticBatching gate is on (never moves a placement either);
        ``algorithm``: what runs one scheduling attempt;
        ``preemption_observer``: told of every preemption decision; ``after_attempt``: awaited
        after each pod's scheduling cycle in place of the loop's own yields (after every pod, or
        every ``SCHEDULING_TIME_SLICE``; a simulation uses it to yield after every pod, so its
        output does not depend on the machine's speed, and to let virtual time pass while the
        loop spins)."""
        self.client = client
        self.time_slice = SCHEDULING_TIME_SLICE if getattr(client, "in_process", False) else 0.0
        self.config = config
        #: The configuration's extenders, the ignorable ones last (upstream ``buildExtenders``).
        self.extenders: list[HTTPExtender] = build_extenders(config.extenders)
        self.clock = clock or RealClock()
        self.rng = random.Random(seed)
        #: Which cycles record plugin metrics; apart from ``rng`` so the sampling never moves placements.
        self._metrics_sampler = random.Random(seed)
        self.feature_gates = feature_gates or DEFAULT_GATES
        self.metrics = metrics or Metrics()
        #: Says why this replica may no longer schedule or bind (a Lease it cannot prove it holds), or None.
        self.fence = fence
        #: Set when ``fence`` stopped the loop: the process must not touch the cluster any more.
        self.fenced = ""
        #: Moves with every informed change of an object other than a pod or a node (the cache
        #: and the node table follow those): what tells batched cycles that plugins may answer anew.
        self.objects_version = 0
        self.informers = InformerFactory(client, on_handler_error=self._handler_failed, on_relist=self._relisted,
                                         on_server_changed=self._server_changed, transforms={"Pod": drop_managed_fields},
                                         field_selectors={"Pod": NON_TERMINAL_PODS})
        self.cache = Cache(self.clock, ttl=assumed_pod_ttl)
        self.broadcaster = Broadcaster(EventSink(client), self.clock)
        self.algorithm = algorithm(config.percentage_of_nodes_to_score, self.rng, self.extenders)
        self.on_attempt = on_attempt
        self.after_attempt = after_attempt
        #: Binding cycles that waited (on Permit, an API call, a slow PreBind): each finishes in its own task.
        self.binding_tasks: set[asyncio.Task] = set()
        #: Assumed pods whose binding cycle has not started, drained in order by the binding worker.
        self._bindings: deque[_Binding] = deque()
        self._binding_worker: asyncio.Task | None = None
        self._binding_wakeup: asyncio.Future[None] | None = None
        self.api_tasks: set[asyncio.Task] = set()
        #: Queues, coalesces and sends bindings and status patches (SchedulerAsyncAPICalls), or None.
        self.api_dispatcher = APIDispatcher(client, config.parallelism) \
            if self.feature_gates.enabled("SchedulerAsyncAPICalls") else None
        self._stopping = False
        #: Set once the informers synced and their handlers saw the initial lists (``/readyz``).
        self.handlers_synced = False
        #: The pod groups of Workloads (upstream creates the manager only with GenericWorkload on).
        self.workload_manager = WorkloadManager(self.clock) if self.feature_gates.enabled("GenericWorkload") else None
        plugin_client = client if self.api_dispatcher is None else DispatchingClient(client, self.api_dispatcher)
        base = HandleContext(clock=self.clock, snapshot=lambda: self.cache.table, client=plugin_client,
                             activator=self._activate, informers=self.informers, feature_gates=self.feature_gates,
                             metrics=self.metrics, parallelism=config.parallelism, rng=self.rng,
                             preemption_observer=preemption_observer, extenders=tuple(self.extenders),
                             workload_manager=self.workload_manager, objects_version=lambda: self.objects_version)
        registry = registry if registry is not None else in_tree_registry()
        options = FrameworkOptions(fast_paths=fast_paths, trusted_score_ranges=trusted_score_ranges(registry),
                                   batching=batching)
        self.frameworks: dict[str, Framework] = {}
        ignored = ignored_by_scheduler(config.extenders)
        for profile in config.profiles:
            if ignored:
                profile = _with_ignored_resources(profile, ignored)
            ctx = replace(base, recorder=self.broadcaster.recorder(profile.scheduler_name))
            try:
                self.frameworks[profile.scheduler_name] = Framework(registry, profile, ctx, options)
            except UnknownPlugin as e:  # worded as profile.NewMap and scheduler.New wrap it
                raise UnknownPlugin(_profile_error(profile.scheduler_name, e), e.plugin_name) from e
            except FrameworkError as e:
                raise FrameworkError(_profile_error(profile.scheduler_name, e)) from e
        if not self.frameworks:
            raise FrameworkError("at least one profile is required")
        first = next(iter(self.frameworks.values()))
        self.queue_profiles = {name: QueueProfile(fw.pre_enqueue_plugins(), build_hint_map(fw)) for name, fw in self.frameworks.items()}
        self.queue = SchedulingQueue(
            self.clock, first.queue_sort_less(), self.queue_profiles,
            initial_backoff=float(config.pod_initial_backoff_seconds),
            max_backoff=float(config.pod_max_backoff_seconds),
            max_in_unschedulable=pod_max_in_unschedulable,
            pop_from_backoff=self.feature_gates.enabled("SchedulerPopFromBackoffQ"),
            metrics=self.metrics,
            pod_lister=self._lookup_pod,
            sort_key=first.queue_sort_key(),
        )
        for fw in self.frameworks.values():
            fw.ctx.nominator = self.queue
        self.handlers = EventHandlers(self)
        #: Compares the cache with the informers and the API, and repairs it (off when the interval is 0).
        self.comparer = CacheComparer(self, cache_check_interval)
        self._background: list[asyncio.Task] = []

    # --- lifecycle ---------------------------------------------------------------------------------
    def registered_resources(self) -> set[str]:
        """Resources some profile's queueing hints are registered for (upstream ``unionedGVKs``)."""
        return {event.resource for profile in self.queue_profiles.values() for event in profile.hints}

    def watched_kinds(self) -> tuple[str, ...]:
        """What the informers watch with this run's feature gates."""
        gated = tuple(kind for kind, gate in GATED_WATCHED_KINDS.items() if self.feature_gates.enabled(gate))
        return WATCHED_KINDS + gated

    async def start(self) -> None:
        """Start informers, wait for them to sync, and start the queue's timers (not the loop)."""
        await self.start_informers()
        self.start_scheduling()

    async def start_informers(self) -> None:
        """Informers, event handlers and the event broadcaster, until synced: what a standby replica
        runs too (upstream starts informers before leader election, so a new leader has a warm cache)."""
        for kind in self.watched_kinds():
            informer = self.informers.informer(kind)
            if kind not in ("Pod", "Node"):
                informer.add_handler(Handler(on_add=self._object_changed, on_update=self._object_changed,
                                             on_delete=self._object_changed))
        self.handlers.register()
        self.informers.start()
        await self.informers.wait_for_sync()
        self.broadcaster.start()
        self.handlers_synced = True

    def start_scheduling(self) -> None:
        """The queue's timers and the assumed-pod cleanup: what only the leader runs (then ``run()``)."""
        loop = asyncio.get_running_loop()
        if self.api_dispatcher is not None:
            self.api_dispatcher.start()
        self._background.append(loop.create_task(self.queue.run(), name="scheduling-queue"))
        if self.cache.ttl > 0:
            self._background.append(loop.create_task(self._cleanup_assumed(), name="cache-cleanup"))
        if self.comparer.interval > 0:
            self._background.append(loop.create_task(self.comparer.run(), name="cache-comparer"))

    async def run(self) -> None:
        """Schedule pods until ``stop()`` or until the fence says this replica may not lead any more.
        An exception while scheduling one pod fails that pod (Error status, backoff), never the loop."""
        slice_start = time.perf_counter()
        while not self._stopping:
            if self._check_fence("scheduling"):
                break
            await self.informers.consistent.wait()
            qpi = await self.queue.pop()
            if qpi is None:
                break
            if self._check_fence("scheduling"):
                self.queue.done(qpi.pod_info.uid)
                break
            if not await self._still_current(qpi.pod_info):
                self.queue.done(qpi.pod_info.uid)
                continue
            try:
                await self.schedule_one(qpi)
            except Exception as e:
                self._contain(qpi, e)
            if self.after_attempt is not None:
                await self.after_attempt(qpi.pod_info)
            elif time.perf_counter() - slice_start >= self.time_slice or len(self.cache.assumed) > MAX_ASSUMED_IN_SLICE:
                await asyncio.sleep(0)  # binding cycles and informers run
                slice_start = time.perf_counter()

    def _check_fence(self, what: str) -> bool:
        """True (and the loop stops) when the fence forbids this replica to go on."""
        if self.fence is None:
            return False
        reason = self.fenced or self.fence()
        if not reason:
            return False
        if not self.fenced:
            log.error("stopped %s: %s", what, reason)
            self.fenced = reason
            self._stopping = True
            self.queue.close()
        return True

    async def _still_current(self, pod: PodInfo, node: str = "") -> bool:
        """After waiting for informers that relist from a changed server: whether the pod (and the
        node) still exist there. Free when the informers are consistent, the usual case."""
        if self.informers.consistent.is_set():
            return True
        await self.informers.consistent.wait()
        cached = self.informers.store("Pod").get(pod.key)
        if cached is None or (cached.get("metadata") or {}).get("uid") != pod.uid:
            log.info("pod %s is gone from the API server, not scheduling it", pod.key)
            return False
        return not node or node in self.informers.store("Node")

    def _contain(self, qpi: QueuedPodInfo, error: Exception) -> None:
        """The last line of defence when the failure handling of a pod failed too: count an error
        attempt, record the event and requeue the pod with backoff, each step on its own."""
        pod = qpi.pod_info
        log.error("scheduling pod %s failed unexpectedly: %r", pod.key, error, exc_info=error)
        self.metrics.pod_schedule_error(pod.scheduler_name, 0.0)
        fw = self.frameworks.get(pod.scheduler_name)
        message = f"internal error while scheduling the pod: {error!r}"
        if fw is not None:
            try:
                fw.event_recorder.eventf(pod.pod, None, "Warning", "FailedScheduling", "Scheduling", message)
            except Exception as e:
                log.error("recording the failure of pod %s failed: %r", pod.key, e)
        try:
            self.queue.add_unschedulable_if_not_present(qpi, self.queue.scheduling_cycle)
        except Exception as e:
            log.error("requeueing pod %s failed, it waits for its next update: %r", pod.key, e)
            self.queue.done(pod.uid)

    def _object_changed(self, *_objects: dict | bool) -> None:
        self.objects_version += 1

    def _handler_failed(self, kind: str, error: BaseException) -> None:
        """An event handler raised for one object: counted, the informer carries on."""
        self.metrics.event_handler_errors.labels(kind).inc()

    def _server_changed(self, reason: str) -> None:
        """The API server is another cluster: a leader's Lease went with the old one (the new
        cluster's Lease may already be another replica's), so a leading replica is fenced."""
        if self.fence is None or self.fenced or self.fence() is not None:
            return
        self.fenced = f"{reason}: the Lease this replica held belonged to the previous cluster"
        log.error("stopped scheduling: %s", self.fenced)
        self._stopping = True
        self.queue.close()

    def _relisted(self, kind: str, reason: str) -> None:
        self.metrics.informer_relists.labels(kind, reason).inc()

    async def stop(self, binding_timeout: float | None = None, flush_timeout: float | None = None) -> None:
        """Stop taking pods, let in-flight binding cycles finish (those still running after
        ``binding_timeout`` seconds are cancelled, which rolls them back), flush API writes and
        events (for at most ``flush_timeout`` seconds, then they are dropped with a warning), then
        stop the informers."""
        self._stopping = True
        self.queue.close()
        while self._bindings and self._binding_worker is not None and not self._binding_worker.done():
            await asyncio.sleep(0)  # the worker starts every queued cycle; those that wait join binding_tasks
        await _finish_or_cancel(self.binding_tasks, binding_timeout, "binding cycle")
        if self._binding_worker is not None:
            self._binding_worker.cancel()
            await asyncio.gather(self._binding_worker, return_exceptions=True)
            self._binding_worker = None
        background = next(iter(self.frameworks.values())).ctx.background
        await _finish_or_cancel({*self.api_tasks, *background}, flush_timeout, "API write")
        if self.api_dispatcher is not None:
            await self.api_dispatcher.close(flush_timeout)
        await self.broadcaster.stop(flush_timeout)
        for extender in self.extenders:
            await extender.close()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.informers.stop()

    def busy(self) -> bool:
        """Whether anything is in flight: pods to pop, bindings, API writes or events to send."""
        background = next(iter(self.frameworks.values())).ctx.background
        return bool(not self.queue.is_idle() or self._bindings or self.binding_tasks or self.api_tasks or background
                    or not self.broadcaster.idle() or (self.api_dispatcher is not None and not self.api_dispatcher.idle()))

    async def _cleanup_assumed(self) -> None:
        """Expire assumed pods (upstream's cache only forgets them: no queue event)."""
        while True:
            await asyncio.sleep(1.0)
            self.cache.cleanup_assumed_pods()

    def _lookup_pod(self, namespace: str, name: str) -> dict | None:
        return self.informers.store("Pod").get(f"{namespace}/{name}")

    def _activate(self, pods: dict[str, PodInfo]) -> None:
        self.queue.activate(pods)

    # --- scheduleOne -------------------------------------------------------------------------------
    async def schedule_one(self, qpi: QueuedPodInfo) -> None:
        """One scheduling cycle, then the binding cycle handed to the binding worker. The cycle
        suspends only while extenders answer over HTTP."""
        pod = qpi.pod_info
        fw = self.frameworks.get(pod.scheduler_name)
        if fw is None:
            log.error("profile not found for scheduler name %r", pod.scheduler_name)
            self.queue.done(pod.uid)
            return
        if self._skip(fw, pod):
            self.queue.done(pod.uid)
            return
        start = self.clock.now()
        self.algorithm.cycle = self.queue.scheduling_cycle
        state = CycleState()
        state.record_plugin_metrics = self._metrics_sampler.randrange(100) < PLUGIN_METRICS_SAMPLE_PERCENT
        try:
            outcome = await self._scheduling_cycle(state, fw, qpi, start)
        except Exception as e:
            outcome = self._cycle_crashed(state, fw, qpi, e)
        if outcome.status is not None and not outcome.status.is_success():
            self._handle_failure(fw, outcome.qpi, outcome.status, outcome.nominating, start)
            return
        self._bindings.append((state, fw, outcome.result, outcome.qpi, start))
        wakeup = self._binding_wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)
        if self._binding_worker is None or self._binding_worker.done():  # none yet, or cancelled from outside
            self._binding_worker = asyncio.get_running_loop().create_task(self._run_bindings(), name="binding-worker")

    async def _run_bindings(self) -> None:
        """The binding worker: runs queued binding cycles one after another, in the order their pods
        were assumed, for as long as each completes without waiting (the embedded cluster's
        binding, every plugin synchronous). The first cycle that waits (on Permit, on an API call,
        on a slow PreBind) keeps this task as its own, so whatever the cycle tied to its task (a
        timeout, a cancellation) stays with it, and a new worker takes over the queue: a waiting
        pod never holds the others back, and no task is created for a binding that does not wait."""
        loop = asyncio.get_running_loop()
        while True:
            while not self._bindings:
                self._binding_wakeup = loop.create_future()
                await self._binding_wakeup
            self._binding_wakeup = None
            cycle = self._binding_cycle(*self._bindings.popleft())
            try:
                waiting_on = cycle.send(None)
            except StopIteration:
                continue
            except Exception as e:  # the cycle handles its own failures; this is the worker's guard
                log.error("binding cycle raised %r", e, exc_info=e)
                continue
            break
        task = asyncio.current_task()
        if task is not None:
            self.binding_tasks.add(task)
            task.add_done_callback(self.binding_tasks.discard)
        self._binding_worker = None
        if self._bindings:
            self._binding_worker = loop.create_task(self._run_bindings(), name="binding-worker")
        await _Resumed(cycle, waiting_on)

    def _cycle_crashed(self, state: CycleState, fw: Framework, qpi: QueuedPodInfo, error: Exception) -> _Outcome:
        """A plugin, the framework or the cache raised: undo what the cycle assumed and fail the pod
        with an Error status (kube-scheduler turns a plugin failure into one; a Python exception is
        its panic, which must not end the loop)."""
        pod = qpi.pod_info
        log.error("scheduling cycle of pod %s raised %r", pod.key, error, exc_info=error)
        assumed = self.cache.get_pod(pod.uid) if self.cache.is_assumed(pod.uid) else None
        if assumed is not None:
            try:
                fw.run_unreserve(state, assumed, assumed.node_name)
            except Exception as e:
                log.error("Unreserve of pod %s after a failed cycle raised %r", pod.key, e)
            try:
                self.cache.forget_pod(assumed)
            except Exception as e:
                log.error("Scheduler cache ForgetPod failed: %s", e)
        return _Outcome(ScheduleResult(), qpi, Status(Code.Error, f"running the scheduling cycle: {error!r}", error=error),
                        CLEAR_NOMINATED_NODE)

    def _skip(self, fw: Framework, pod: PodInfo) -> bool:
        if pod.deletion_timestamp:
            fw.event_recorder.eventf(pod.pod, None, "Warning", "FailedScheduling", "Scheduling",
                                     f"skip schedule deleting pod: {pod.namespace}/{pod.name}")
            return True
        return self.cache.is_assumed(pod.uid)

    async def _scheduling_cycle(self, state: CycleState, fw: Framework, qpi: QueuedPodInfo, start: float) -> _Outcome:
        pod = qpi.pod_info
        table = self.cache.update_snapshot()
        attempt = Attempt(pod.key) if self.on_attempt is not None else None
        try:
            result = await self.algorithm.schedule_pod(fw, state, pod, table, attempt)
        except (NoNodesAvailable, FitError, StatusError, ExtenderError) as e:
            self._report_attempt(attempt)
            outcome = await self._schedule_failure(state, fw, qpi, e)
            # As upstream's deferred observation: failed attempts count too, PostFilter included.
            self.metrics.scheduling_algorithm_duration.observe(self.clock.now() - start)
            return outcome
        self.metrics.scheduling_algorithm_duration.observe(self.clock.now() - start)
        self._report_attempt(attempt)
        host = result.suggested_host
        assumed = pod.bound_to(host)
        assumed_qpi = qpi.snapshot()
        assumed_qpi.pod_info = assumed
        try:
            self.cache.assume_pod(assumed)
        except Exception as e:
            return _Outcome(result, assumed_qpi, Status.from_error(e), CLEAR_NOMINATED_NODE)
        self.queue.delete_nominated_pod_if_exists(assumed)
        status = fw.run_reserve(state, assumed, host)
        if status is not None:
            return self._undo_assume(state, fw, result, assumed_qpi, status)
        status = fw.run_permit(state, assumed, host)
        if status is not None and not status.is_wait():
            return self._undo_assume(state, fw, result, assumed_qpi, status)
        if state.pods_to_activate:
            self.queue.activate(dict(state.pods_to_activate))
            state.pods_to_activate.clear()
        return _Outcome(result, assumed_qpi, None)

    async def _schedule_failure(self, state: CycleState, fw: Framework, qpi: QueuedPodInfo, error: Exception) -> _Outcome:
        if isinstance(error, NoNodesAvailable):
            status = Status(Code.UnschedulableAndUnresolvable, str(error), error=error)
            return _Outcome(ScheduleResult(), qpi, status, CLEAR_NOMINATED_NODE)
        if isinstance(error, FitError):
            return await self._post_filter(state, fw, qpi, error)
        log.error("Error selecting node for pod %s: %s", qpi.pod_info.key, error)
        status = error.status if isinstance(error, StatusError) else Status.from_error(error)
        return _Outcome(ScheduleResult(), qpi, status, CLEAR_NOMINATED_NODE)

    def _report_attempt(self, attempt: Attempt | None) -> None:
        if attempt is not None and self.on_attempt is not None:
            self.on_attempt(attempt)

    async def _post_filter(self, state: CycleState, fw: Framework, qpi: QueuedPodInfo, fit_error: FitError) -> _Outcome:
        if not fw.has_post_filter_plugins():
            return _Outcome(ScheduleResult(), qpi, Status(Code.Unschedulable, str(fit_error), error=fit_error), CLEAR_NOMINATED_NODE)
        result, status = await fw.run_post_filter(state, qpi.pod_info, fit_error.diagnosis.node_to_status)
        fit_error.diagnosis.post_filter_msg = status.message()
        if status.code == Code.Error:
            log.error("Status after running PostFilter plugins for pod %s: %s", qpi.pod_info.key, status.message())
        nominating = result.nominating_info if result is not None else None
        return _Outcome(ScheduleResult(), qpi, Status(Code.Unschedulable, str(fit_error), error=fit_error), nominating)

    def _undo_assume(self, state: CycleState, fw: Framework, result: ScheduleResult, qpi: QueuedPodInfo,
                     status: Status) -> _Outcome:
        pod = qpi.pod_info
        fw.run_unreserve(state, pod, result.suggested_host)
        try:
            self.cache.forget_pod(pod)
        except Exception as e:
            log.error("Scheduler cache ForgetPod failed: %s", e)
        if status.is_rejected():
            error = _single_node_fit_error(pod, result.suggested_host, status)
            return _Outcome(result, qpi, Status(status.code, str(error), plugin=status.plugin, error=error), CLEAR_NOMINATED_NODE)
        return _Outcome(result, qpi, status, CLEAR_NOMINATED_NODE)

    # --- binding cycle -----------------------------------------------------------------------------
    async def _binding_cycle(self, state: CycleState, fw: Framework, result: ScheduleResult, qpi: QueuedPodInfo,
                             start: float) -> None:
        try:
            status = await self._bind_pod(state, fw, result, qpi, start)
        except asyncio.CancelledError:
            # Shutdown cut the cycle short: roll it back (Unreserve, forget the assumed pod, requeue).
            self._handle_binding_error(state, fw, qpi, result, Status(Code.Error, "binding cycle cancelled: scheduler is shutting down"),
                                       start)
            raise
        except Exception as e:
            log.exception("binding cycle of %s failed", qpi.pod_info.key)
            status = Status.from_error(e)
        if status is not None and not status.is_success():
            try:
                self._handle_binding_error(state, fw, qpi, result, status, start)
            except Exception as e:
                log.error("rolling back the binding cycle of %s failed: %r", qpi.pod_info.key, e, exc_info=e)
                self.queue.done(qpi.pod_info.uid)

    async def _bind_pod(self, state: CycleState, fw: Framework, result: ScheduleResult, qpi: QueuedPodInfo,
                        start: float) -> Status | None:
        pod = qpi.pod_info
        host = result.suggested_host
        if self.feature_gates.enabled("NominatedNodeNameForExpectation"):
            preflight = fw.run_pre_bind_pre_flights(state, pod, host)
            if preflight is not None and (preflight.code == Code.Error or preflight.is_rejected()):
                return preflight
            if preflight is None or fw.will_wait_on_permit(pod):
                self._patch_status(pod, None, NominatingInfo(host, NominatingMode.Override))
        status = await fw.wait_on_permit(pod)
        if status is not None and not status.is_success():
            if status.is_rejected():
                error = _single_node_fit_error(pod, host, status)
                error.diagnosis.unschedulable_plugins = {status.plugin}
                return Status(status.code, str(error), plugin=status.plugin, error=error)
            return status
        self.queue.done(pod.uid)
        status = await fw.run_pre_bind(state, pod, host)
        if status is not None and not status.is_success():
            return status
        if not await self._still_current(pod, host):
            return Status(Code.Error, f"not binding pod {pod.key}: node {host} or the pod is gone from the API server")
        if self._check_fence("binding"):
            return Status(Code.Error, f"not binding pod {pod.key}: {self.fenced}")
        status = await self._bind(state, fw, pod, host)
        self._finish_binding(fw, pod, host, status)
        if status is not None and not status.is_success():
            return status
        profile = fw.profile_name
        now = self.clock.now()
        self.metrics.pod_scheduled(profile, now - start)
        self.metrics.pod_scheduling_attempts.observe(qpi.attempts)
        if qpi.initial_attempt_timestamp is not None:
            self.metrics.sli_duration(qpi.attempts, now - qpi.initial_attempt_timestamp)
        fw.run_post_bind(state, pod, host)
        if state.pods_to_activate:
            self.queue.activate(dict(state.pods_to_activate))
        return None

    async def _bind(self, state: CycleState, fw: Framework, pod: PodInfo, host: str) -> Status | None:
        """An interested binder extender binds the pod in place of the Bind plugins."""
        bound, status = await bind_with_extenders(self.extenders, pod, host)
        if bound:
            return status
        return await fw.run_bind(state, pod, host)

    def _finish_binding(self, fw: Framework, pod: PodInfo, host: str, status: Status | None) -> None:
        self.cache.finish_binding(pod)
        if status is not None and not status.is_success():
            log.info("Failed to bind pod %s", pod.key)
            return
        fw.event_recorder.eventf(pod.pod, None, "Normal", "Scheduled", "Binding",
                                 f"Successfully assigned {pod.namespace}/{pod.name} to {host}")

    def _handle_binding_error(self, state: CycleState, fw: Framework, qpi: QueuedPodInfo, result: ScheduleResult,
                              status: Status, start: float) -> None:
        """Roll the cycle back. Forgetting the assumed pod frees what it held, an AssignedPodDelete
        for the others; after a rejection that event is sent only once the failure handler has
        taken the pod back, or the queue would keep it as an in-flight event of the pod itself
        (still in flight after a WaitOnPermit rejection) and send it to backoff."""
        pod = qpi.pod_info
        fw.run_unreserve(state, pod, result.suggested_host)
        forgotten = True
        try:
            self.cache.forget_pod(pod)
        except Exception as e:
            log.error("scheduler cache ForgetPod failed: %s", e)
            forgotten = False
        rejected = status.is_rejected()
        if forgotten and not rejected:
            self.queue.move_all_to_active_or_backoff_queue(ev.EVENT_ASSIGNED_POD_DELETE, pod.pod, None)
        self._handle_failure(fw, qpi, status, CLEAR_NOMINATED_NODE, start)
        if forgotten and rejected:
            self.queue.move_all_to_active_or_backoff_queue(ev.EVENT_ASSIGNED_POD_DELETE, pod.pod, None, lambda p: p.uid != pod.uid)

    # --- failures ----------------------------------------------------------------------------------
    def _handle_failure(self, fw: Framework, qpi: QueuedPodInfo, status: Status, nominating: NominatingInfo | None,
                        start: float) -> None:
        """``handleSchedulingFailure``: requeue, record the event and the PodScheduled condition."""
        pod = qpi.pod_info
        rejected = status.is_rejected()
        reason = "Unschedulable" if rejected else "SchedulerError"
        elapsed = self.clock.now() - start
        if rejected:
            self.metrics.pod_unschedulable(fw.profile_name, elapsed)
        else:
            self.metrics.pod_schedule_error(fw.profile_name, elapsed)
        error = status.error
        message = status.message()
        if isinstance(error, FitError):
            qpi.unschedulable_plugins = set(error.diagnosis.unschedulable_plugins)
            qpi.pending_plugins = set(error.diagnosis.pending_plugins)
        elif not isinstance(error, NoNodesAvailable):
            log.error("Error scheduling pod %s; retrying: %s", pod.key, message)
        cached = self.informers.store("Pod").get(pod.key)
        requeued = False
        if cached is None:
            log.info("Pod %s doesn't exist in informer cache", pod.key)
        elif (cached.get("spec") or {}).get("nodeName"):
            log.info("Pod %s has been assigned to node %s. Abort adding it back to queue.", pod.key, cached["spec"]["nodeName"])
        else:
            qpi.pod_info = PodInfo(cached)
            self.queue.add_unschedulable_if_not_present(qpi, self.queue.scheduling_cycle)
            requeued = True
        if not requeued:
            self.queue.done(pod.uid)
        self.queue.add_nominated_pod(qpi.pod_info, nominating)
        target = cached or pod.pod
        fw.event_recorder.eventf(target, None, "Warning", "FailedScheduling", "Scheduling", message)
        condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
        generation = (target.get("metadata") or {}).get("generation")
        if generation:
            condition["observedGeneration"] = generation
        self._patch_status(PodInfo(target), condition, nominating)

    def _patch_status(self, pod: PodInfo, condition: dict | None, nominating: NominatingInfo | None) -> None:
        """``updatePod``: patch the condition and/or nominatedNodeName only when they change."""
        status = pod.status
        nominated = None
        if nominating is not None and nominating.mode == NominatingMode.Override and \
                (status.get("nominatedNodeName") or "") != nominating.nominated_node_name:
            nominated = nominating.nominated_node_name
        condition_changes = condition is not None and not _condition_current(status, condition)
        if not condition_changes and nominated is None:
            return
        conditions = [condition] if condition_changes and condition is not None else []
        if self.api_dispatcher is not None:
            self.api_dispatcher.add(PodStatusPatchCall(pod.pod, conditions, nominated))
            return
        task = asyncio.get_running_loop().create_task(self._patch(pod, conditions, nominated))
        self.api_tasks.add(task)
        task.add_done_callback(self.api_tasks.discard)

    async def _patch(self, pod: PodInfo, conditions: list[dict], nominated: str | None) -> None:
        try:
            await self.client.patch_pod_status(pod.pod, conditions, nominated)
        except Exception as e:
            log.warning("Error updating pod %s: %s", pod.key, e)


class _Resumed:
    """Awaiting it finishes a coroutine whose first step was run by hand and yielded
    ``waiting_on``: what the coroutine yields goes to the awaiting task, and what the task sends
    or throws back (a result, a cancellation) goes to the coroutine, as if the task had started it."""

    def __init__(self, coroutine: Coroutine[Any, Any, None], waiting_on: Any) -> None:
        self._coroutine = coroutine
        self._waiting_on = waiting_on

    def __await__(self) -> Generator[Any, Any, None]:
        coroutine, yielded = self._coroutine, self._waiting_on
        while True:
            try:
                sent = yield yielded
            except BaseException as thrown:
                try:
                    yielded = coroutine.throw(thrown)
                except StopIteration:
                    return
            else:
                try:
                    yielded = coroutine.send(sent)
                except StopIteration:
                    return


def _with_ignored_resources(profile: Profile, ignored: list[str]) -> Profile:
    """The profile with NodeResourcesFit ignoring the extenders' ``ignoredByScheduler`` resources;
    they replace the plugin's own ``ignoredResources``, as upstream's ``buildExtenders`` does."""
    args = profile.plugin_config.get("NodeResourcesFit")
    if not isinstance(args, NodeResourcesFitArgs):
        raise FrameworkError(f'profile "{profile.scheduler_name}": the extenders\' ignoredByScheduler resources need '
                             "NodeResourcesFitArgs in its pluginConfig")
    return replace(profile, plugin_config={**profile.plugin_config,
                                           "NodeResourcesFit": replace(args, ignored_resources=list(ignored))})


async def _finish_or_cancel(tasks: set[asyncio.Task], timeout: float | None, what: str) -> None:
    """Wait up to ``timeout`` seconds for ``tasks``, then cancel (and await) those still running."""
    if not tasks:
        return
    _, pending = await asyncio.wait(set(tasks), timeout=timeout)
    if pending:
        log.warning("cancelling %d %s(s) still running after %gs", len(pending), what, timeout)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


def _condition_current(status: dict, condition: dict) -> bool:
    for existing in status.get("conditions") or []:
        if existing.get("type") == condition["type"]:
            return all(existing.get(k) == v for k, v in condition.items())
    return False


def _single_node_fit_error(pod: PodInfo, node: str, status: Status) -> FitError:
    diagnosis = Diagnosis([node])
    diagnosis.node_to_status.set(node, status)
    diagnosis.add_plugin_status(status)
    return FitError(pod.key, 1, diagnosis)


_NODE_TAINT_UPDATE = ev.ClusterEvent(ev.Resource.Node, ev.ActionType.UpdateNodeTaint)


def build_hint_map(fw: Framework) -> dict[ev.ClusterEvent, list[tuple[str, Any]]]:
    """``buildQueueingHintMap``: registered events to (plugin, queueing hint) lists.

    A plugin registered for Node/Add but not Node/UpdateNodeTaint also gets Node/UpdateNodeTaint
    with an always-Queue hint, as upstream does: a node often arrives tainted
    not-ready, and the taint's removal is what makes it usable.
    """
    hints: dict[ev.ClusterEvent, list[tuple[str, Any]]] = {}
    for plugin, events in fw.enqueue_extensions:
        node_added = node_taint_updated = False
        for registered in events:
            event = registered.event
            if event.resource == ev.Resource.Node:
                node_added |= bool(event.action & ev.ActionType.Add)
                node_taint_updated |= bool(event.action & ev.ActionType.UpdateNodeTaint)
            hints.setdefault(event, []).append((plugin, registered.hint))
        if node_added and not node_taint_updated:
            hints.setdefault(_NODE_TAINT_UPDATE, []).append((plugin, None))
    return hints


def _profile_error(scheduler_name: str, error: Exception) -> str:
    return f"initializing profiles: creating profile for scheduler name {scheduler_name}: {error}"
