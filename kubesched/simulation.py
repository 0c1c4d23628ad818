"""Simulation: build an embedded cluster from manifests, run the scheduler on virtual time until no
pod can make progress, and report what happened (placements, and each preemption: preemptor,
node, victims, and with ``explain`` the candidates weighed).

"No progress" is decided the way an operator would: the queue is drained and nothing is in flight
with no pod left unschedulable, or two full flushes of the unschedulable pods (five minutes each,
which virtual time makes instant) went by without a pod created, bound or deleted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kubesched.api.kinds import kind_for
from kubesched.backend.queue.scheduling_queue import DEFAULT_POD_MAX_IN_UNSCHEDULABLE, UNSCHEDULABLE_FLUSH_PERIOD
from kubesched.clock import VIRTUAL_EPOCH, LoopClock, run_virtual
from kubesched.cluster.client import MemoryClient
from kubesched.cluster.components import ComponentOptions, Components, start_components
from kubesched.cluster.nodestatus import LEASE_DURATION
from kubesched.cluster.store import POD, ObjectStore
from kubesched.config.types import SchedulerConfiguration
from kubesched.features import FeatureGates
from kubesched.framework.preemption import Evaluator, PreemptionRecord
from kubesched.framework.registry import Registry
from kubesched.schedule_one import Attempt
from kubesched.scheduler import Scheduler

#: Creation order: what others refer to first, pods last (as ``kubectl apply`` of a well-formed
#: directory would end up), so that the scheduler starts with the whole cluster in view.
_ORDER = ("Namespace", "PriorityClass", "StorageClass", "CSIDriver", "PersistentVolume", "Node", "CSINode",
          "CSIStorageCapacity", "DeviceClass", "ResourceSlice", "PersistentVolumeClaim", "ResourceClaimTemplate",
          "ResourceClaim", "Service", "PodDisruptionBudget", "ReplicationController", "ReplicaSet", "StatefulSet",
          "Deployment", "Pod")
#: The longest a pod can sit in unschedulablePods before a retry: the maximum stay, plus up to one
#: period of the flush that checks it, plus a second for the backoff flush to move it on.
UNSCHEDULABLE_FLUSH = DEFAULT_POD_MAX_IN_UNSCHEDULABLE + UNSCHEDULABLE_FLUSH_PERIOD + 1.0
POLL = 0.1
#: The components beside the scheduler. Owner references from exported manifests cannot match new
#: uids, so dangling dependents are not collected; deleted pods take their full grace period. Node
#: Leases are renewed once per lease duration instead of four times: a lease renewed that often
#: never expires, nor does the node lifecycle's grace period run out, and on a large cluster
#: waiting out unschedulable pods for ten virtual minutes the renewals would otherwise cost more
#: than the scheduling.
SIMULATION_COMPONENTS = ComponentOptions(collect_dangling=False, lease_renew_interval=LEASE_DURATION)


@dataclass
class SimulationResult:
    store: ObjectStore
    attempts: list[Attempt] = field(default_factory=list)
    virtual_seconds: float = 0.0
    ignored: list[dict] = field(default_factory=list)
    #: Every PostFilter run of a preemption plugin, in order (those with a ``node`` evicted pods).
    preemption_attempts: list[PreemptionRecord] = field(default_factory=list)
    #: Index in ``attempts`` -> the preemption that followed that failed attempt (with ``explain``).
    preemption_of_attempt: dict[int, PreemptionRecord] = field(default_factory=dict)

    @property
    def preemptions(self) -> list[PreemptionRecord]:
        """Preemptions that chose a node and evicted victims."""
        return [r for r in self.preemption_attempts if r.node]

    def pods(self) -> list[dict]:
        return sorted(self.store.iter_all(POD), key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]))


def creation_order(objects: Iterable[dict]) -> tuple[list[dict], list[dict]]:
    """Objects the store serves, in creation order, and those it does not (kept for the report)."""
    rank = {k: i for i, k in enumerate(_ORDER)}
    served, ignored = [], []
    for index, obj in enumerate(objects):
        if kind_for(obj.get("apiVersion", ""), obj.get("kind", "")) is None:
            ignored.append(obj)
        else:
            served.append((rank.get(obj["kind"], len(_ORDER) - 1), index, obj))
    return [obj for _, _, obj in sorted(served, key=lambda t: (t[0], t[1]))], ignored


def simulate(
    objects: list[dict],
    config: SchedulerConfiguration,
    *,
    seed: int = 0,
    registry: Registry | None = None,
    feature_gates: FeatureGates | None = None,
    explain: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> SimulationResult:
    """Schedule ``objects`` (already validated manifests) on an embedded cluster."""
    return run_virtual(_simulate(objects, config, seed, registry, feature_gates, explain, progress))


async def _simulate(objects: list[dict], config: SchedulerConfiguration, seed: int, registry: Registry | None,
                    gates: FeatureGates | None, explain: bool, progress: Callable[[int, int], None] | None) -> SimulationResult:
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop, wall_start=VIRTUAL_EPOCH)
    store = ObjectStore(clock, seed=seed, auto_create_namespaces=True, feature_gates=gates)
    ordered, ignored = creation_order(objects)
    for obj in ordered:
        store.create(kind_for(obj["apiVersion"], obj["kind"]), obj)  # type: ignore[arg-type]
    result = SimulationResult(store, ignored=ignored)
    if progress is not None:
        _report_progress(store, progress)
    components = start_components(store, SIMULATION_COMPONENTS)
    sched = Scheduler(MemoryClient(store), config, registry=registry, clock=clock, seed=seed, feature_gates=gates,
                      on_attempt=result.attempts.append if explain else None)
    record_preemptions(sched, result, explain)
    await sched.start()
    started = loop.time()
    runner = loop.create_task(sched.run(), name="scheduler")
    try:
        await settle(sched, store, components)
    finally:
        await sched.stop()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        await components.stop()
    result.virtual_seconds = loop.time() - started
    return result


def record_preemptions(sched: Scheduler, result: SimulationResult, explain: bool) -> None:
    """Have every preemption plugin report its decisions into ``result`` (with every candidate
    and its criteria when explaining), each tied to the failed attempt it followed."""

    def on_preemption(record: PreemptionRecord) -> None:
        result.preemption_attempts.append(record)
        if explain and result.attempts and result.attempts[-1].pod == record.preemptor:
            result.preemption_of_attempt[len(result.attempts) - 1] = record

    for fw in sched.frameworks.values():
        for plugin in fw.plugins.values():
            evaluator = getattr(plugin, "evaluator", None)
            if isinstance(evaluator, Evaluator):
                evaluator.on_preemption = on_preemption
                evaluator.record_candidates = explain


async def settle(sched: Scheduler, store: ObjectStore, components: Components) -> None:
    """Return once nothing can change any more: the cluster is quiet with no pod left
    unschedulable, or nothing was created, bound or deleted for two unschedulable flushes, whether
    the cluster went quiet meanwhile or work kept going (pods failing with errors retry forever, as
    upstream's do)."""
    loop = asyncio.get_running_loop()
    marker, changed_at = tuple(store.progress), loop.time()
    while True:
        await asyncio.sleep(POLL)
        if tuple(store.progress) != marker:
            marker, changed_at = tuple(store.progress), loop.time()
        if loop.time() - changed_at > 2 * UNSCHEDULABLE_FLUSH:
            return
        if not _quiet(sched, store, components):
            continue
        if not sched.queue.counts().get("unschedulable"):
            return
        await asyncio.sleep(UNSCHEDULABLE_FLUSH)


def _quiet(sched: Scheduler, store: ObjectStore, components: Components) -> bool:
    return not (sched.busy() or store.pending_timers or store.watch_events_pending() or not components.idle())


def _report_progress(store: ObjectStore, progress: Callable[[int, int], None]) -> None:
    """Call ``progress(bound pods, pods)`` every few hundred writes while the scheduler works."""
    bound_at_start = sum(1 for p in store.iter_all(POD) if (p.get("spec") or {}).get("nodeName"))

    def hook(rv: int, _kind: object, _event: object) -> None:
        if rv % 256 == 0:
            progress(store.progress[1] + bound_at_start, store.count(POD))

    store.write_hooks.append(hook)
