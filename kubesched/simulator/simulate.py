"""Simulation: build an embedded cluster from manifests, run the scheduler on virtual time until no
pod can make progress, and report what happened (placements, and each preemption: preemptor,
node, victims, and with ``explain`` the candidates weighed).

"No progress" is decided the way an operator would: the queue is drained and nothing is in flight
with no pod left unschedulable, or two full flushes of the unschedulable pods (five minutes each,
which virtual time makes instant) went by without a pod created, bound or deleted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.api.apierrors import APIError
from kubesched.api.errors import KubeschedError
from kubesched.api.kinds import EVENT, POD, CustomKind, Kind, kind_for
from kubesched.api.kinds import served as served_with
from kubesched.api.watch import DELETED, WatchEvent
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.backend.queue.scheduling_queue import DEFAULT_POD_MAX_IN_UNSCHEDULABLE, UNSCHEDULABLE_FLUSH_PERIOD
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.features import FeatureGates
from kubesched.scheduler.framework.preemption_report import PreemptionObserver, PreemptionRecord
from kubesched.scheduler.framework.registry import Registry
from kubesched.scheduler.schedule_one import Attempt
from kubesched.scheduler.scheduler import GATED_WATCHED_KINDS, WATCHED_KINDS, Scheduler
from kubesched.simulator.components import ComponentOptions, Components, start_components
from kubesched.simulator.crds import custom_kinds_of, is_crd, unserved_reason, with_plugin_crds
from kubesched.simulator.nodestatus import LEASE_DURATION
from kubesched.simulator.scenario import Scenario
from kubesched.simulator.scenario_runner import ScenarioRunner
from kubesched.simulator.spinning import Spin, watch_for_spinning
from kubesched.simulator.timeline import Timeline, TimelineEntry
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock

#: Creation order: what others refer to first, pods last (as ``kubectl apply`` of a well-formed
#: directory would end up), so that the scheduler starts with the whole cluster in view.
_ORDER = ("Namespace", "PriorityClass", "StorageClass", "CSIDriver", "PersistentVolume", "Node", "CSINode",
          "CSIStorageCapacity", "DeviceClass", "ResourceSlice", "PersistentVolumeClaim", "ResourceClaimTemplate",
          "ResourceClaim", "Service", "PodDisruptionBudget", "ReplicationController", "ReplicaSet", "StatefulSet",
          "Deployment", "Workload", "Pod")
#: The longest a pod can sit in unschedulablePods before a retry: the maximum stay, plus up to one
#: period of the flush that checks it, plus a second for the backoff flush to move it on.
UNSCHEDULABLE_FLUSH = DEFAULT_POD_MAX_IN_UNSCHEDULABLE + UNSCHEDULABLE_FLUSH_PERIOD + 1.0
POLL = 0.1
#: The components beside the scheduler. Dependents whose owners are not in the input (pods
#: exported without their ReplicaSet) are not collected; deleted pods take their full grace period. Node
#: Leases are renewed once per lease duration instead of four times: a lease renewed that often
#: never expires, nor does the node lifecycle's grace period run out, and on a large cluster
#: waiting out unschedulable pods for ten virtual minutes the renewals would otherwise cost more
#: than the scheduling.
SIMULATION_COMPONENTS = ComponentOptions(collect_dangling=False, lease_renew_interval=LEASE_DURATION)
#: Kinds something in the simulation reads: the scheduler's informers, admission (PriorityClasses
#: give pods their priority) and the controllers (Deployments, ResourceClaimTemplates, and node
#: Leases for the node lifecycle, on top of what the scheduler watches). Other objects are kept,
#: not acted on.
ACTED_ON = frozenset(WATCHED_KINDS) | set(GATED_WATCHED_KINDS) | {"Deployment", "Lease", "PriorityClass", "ResourceClaimTemplate"}
#: Why a served kind is not acted on, when there is more to say than "nothing reads it".
NOT_ACTED_ON_BECAUSE = {
    "DaemonSet": "the simulation runs no DaemonSet controller, so its pods are not created",
    "Job": "the simulation runs no Job controller, so its pods are not created",
    "CronJob": "the simulation runs no CronJob controller, so no Job is created",
}
#: Warning events that other parts of the report already say: the pending pods' messages.
REPORTED_ELSEWHERE = frozenset({"FailedScheduling"})
#: Warnings that mean the input asked for pods the API cannot create (an error in the input).
INPUT_ERRORS = frozenset({"FailedCreate"})
#: The DisruptionTarget reason preemption gives its victims (those are reported as preemptions).
PREEMPTED = "PreemptionByScheduler"


class SimulationInterrupted(KeyboardInterrupt):
    """Ctrl-C during a simulation, carrying what was done so far (``None`` before the cluster existed)."""

    def __init__(self, result: SimulationResult | None) -> None:
        super().__init__()
        self.result = result

    def summary(self) -> str:
        """One line: how many pods were bound so far, out of how many."""
        if self.result is None:
            return "stopped before scheduling began"
        pods = self.result.pods()
        bound = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))
        return f"{bound}/{len(pods)} pods scheduled so far"


@dataclass(frozen=True)
class RemovedPod:
    """A pod deleted during the run by the cluster itself (not by preemption): it would otherwise
    vanish from the output without a word."""

    key: str
    node: str
    #: The DisruptionTarget condition's reason (DeletionByPodGC, DeletionByTaintManager), or "".
    reason: str
    message: str

    def explanation(self, node_exists: bool) -> str:
        where = f'bound to node "{self.node}"' if self.node else "not bound"
        if self.node and not node_exists:
            where += ", which does not exist"
        if self.reason == "DeletionByPodGC":
            return f"{where}: no kubelet runs it, so PodGC deleted it (as kube-controller-manager does after 40s)"
        why = f"{self.reason}: {self.message}" if self.reason else "deleted during the simulation"
        return f"{where}; removed ({why})"


@dataclass(frozen=True)
class ClusterWarning:
    """Warning events about one object with one reason, counted (controller failures above all)."""

    kind: str
    key: str
    reason: str
    message: str
    count: int

    def line(self) -> str:
        times = f" ({self.count} times)" if self.count > 1 else ""
        return f"{self.kind} {self.key}: {self.reason}{times}: {self.message}"


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
    #: Pods the cluster deleted during the run, other than preemption victims.
    removed: list[RemovedPod] = field(default_factory=list)
    #: With a scenario: what happened when (steps, placements, evictions, pending reasons).
    timeline: list[TimelineEntry] | None = None
    #: With a scenario: the steps that could not be carried out, one line each.
    scenario_errors: list[str] = field(default_factory=list)
    #: When the scheduler kept retrying the same pods without the cluster changing (``spinning``).
    spins: list[Spin] = field(default_factory=list)

    @property
    def preemptions(self) -> list[PreemptionRecord]:
        """Preemptions that chose a node and evicted victims."""
        return [r for r in self.preemption_attempts if r.node]

    def pods(self) -> list[dict]:
        return sorted(self.store.iter_all(POD), key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]))

    def warnings(self) -> list[ClusterWarning]:
        """Warning events not said elsewhere in the report, grouped by object and reason, with the
        first message (later ones differ only by generated names)."""
        grouped: dict[tuple[str, str, str], list[dict]] = {}
        for event in self.store.iter_all(EVENT):
            if event.get("type") != "Warning" or event.get("reason") in REPORTED_ELSEWHERE:
                continue
            involved = event.get("involvedObject") or {}
            key = f"{involved.get('namespace')}/{involved.get('name')}" if involved.get("namespace") else str(involved.get("name"))
            grouped.setdefault((str(involved.get("kind")), key, str(event.get("reason"))), []).append(event)
        out = []
        for (kind, key, reason), events in sorted(grouped.items()):
            events.sort(key=lambda e: (e.get("firstTimestamp") or "", e["metadata"]["name"]))
            count = sum(int(e.get("count") or 1) for e in events)
            out.append(ClusterWarning(kind, key, reason, str(events[0].get("message", "")), count))
        return out

    def input_errors(self) -> list[ClusterWarning]:
        """Warnings that mean the input is wrong: a controller could not create what it asks for."""
        return [w for w in self.warnings() if w.reason in INPUT_ERRORS]

    def not_acted_on(self) -> dict[str, list[str]]:
        """Kind -> keys of the objects kept but not acted on (unserved kinds, and served kinds that
        nothing in the simulation reads)."""
        out: dict[str, list[str]] = {}
        for obj in self.ignored:
            out.setdefault(str(obj.get("kind")), []).append(_key(obj))
        for kind in self.store.kinds():
            if kind.kind in ACTED_ON or kind.kind in ("Event", "CustomResourceDefinition") or isinstance(kind, CustomKind):
                continue
            keys = [_key(o) for o in self.store.iter_all(kind)]
            if keys:
                out.setdefault(kind.kind, []).extend(keys)
        return out


def _key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


def creation_order(objects: Iterable[dict], gates: Mapping[str, bool] | None = None) -> tuple[list[dict], list[dict]]:
    """Objects the store serves with ``gates``, in creation order, and those it does not (kept for
    the report: unknown kinds, and alpha kinds whose feature gate is off). CustomResourceDefinitions
    come first, whatever their place in the input, and the custom resources they define just before
    the pods (which plugins may read them for)."""
    objects = list(objects)
    rank = {k: i for i, k in enumerate(_ORDER)}
    custom = custom_kinds_of(objects)
    served, ignored = [], []
    for index, obj in enumerate(objects):
        api_version, kind_name = obj.get("apiVersion", ""), obj.get("kind", "")
        kind = kind_for(api_version, kind_name)
        if is_crd(obj):
            served.append((-1.0, index, obj))
        elif kind is not None and served_with(kind, gates):
            served.append((rank.get(obj["kind"], len(_ORDER) - 1), index, obj))
        elif kind is None and (api_version, kind_name) in custom:
            served.append((rank["Pod"] - 0.5, index, obj))
        else:
            ignored.append(obj)
    return [obj for _, _, obj in sorted(served, key=lambda t: (t[0], t[1]))], ignored


def not_served_because(obj: Mapping[str, Any]) -> str:
    """Why an object ``creation_order`` set aside is not served: its alpha gate is off, or kubesched
    has no such kind."""
    kind = kind_for(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if kind is not None and kind.feature_gate:
        return f"kind {kind.api_version} {kind.kind} is served only with the {kind.feature_gate} feature gate on"
    return unserved_reason(obj)


#: ``progress(phase, done, total)``: how far a phase of the run has got.
ProgressCallback = Callable[[str, int, int], None]


def simulate(
    objects: list[dict],
    config: SchedulerConfiguration,
    *,
    seed: int = 0,
    registry: Registry | None = None,
    feature_gates: FeatureGates | None = None,
    explain: bool = False,
    progress: ProgressCallback | None = None,
    fast_paths: bool = True,
    scenario: Scenario | None = None,
    batching: bool = True,
    decoded: bool = False,
) -> SimulationResult:
    """Schedule ``objects`` (already validated manifests) on an embedded cluster. ``fast_paths``
    off runs the scheduler's plain code paths (same placements, slower: for comparisons), and so
    does ``batching`` off (every pod scheduled from scratch, never from its predecessor's results). A
    ``scenario``'s steps fire at their virtual times; the run settles after the last one, and the
    result carries the timeline. ``decoded``: every object of ``objects`` went through
    ``manifests.load`` or ``check_all`` (so the store need not type-check it again).

    Ctrl-C raises ``SimulationInterrupted`` with what was done so far."""
    started: list[SimulationResult] = []
    try:
        return run_virtual(_simulate(objects, config, seed, registry, feature_gates, explain, progress, fast_paths,
                                     started, scenario, batching, decoded))
    except SimulationInterrupted:
        raise
    except KeyboardInterrupt as e:
        raise SimulationInterrupted(started[0] if started else None) from e


async def _simulate(objects: list[dict], config: SchedulerConfiguration, seed: int, registry: Registry | None,
                    gates: FeatureGates | None, explain: bool, progress: ProgressCallback | None,
                    fast_paths: bool, started: list[SimulationResult], scenario: Scenario | None,
                    batching: bool = True, decoded: bool = False) -> SimulationResult:
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop, wall_start=VIRTUAL_EPOCH)
    store = ObjectStore(clock, seed=seed, auto_create_namespaces=True, feature_gates=gates, keep_uids=True)
    ordered, ignored = creation_order(with_plugin_crds(objects, config, registry), gates)
    loaded = {id(obj) for obj in objects} if decoded else set()
    for index, obj in enumerate(ordered):
        create_input(store, obj, decoded=id(obj) in loaded)  # served: creation_order set the others aside
        if progress is not None and index % 1024 == 0:
            progress("creating objects", index, len(ordered))
    result = SimulationResult(store, ignored=ignored)
    started.append(result)
    timeline = Timeline(store) if scenario is not None else None
    runner = ScenarioRunner(scenario, store, timeline) if scenario is not None and timeline is not None else None
    requested = runner.requested if runner is not None else set()
    store.write_hooks.append(lambda _rv, kind, event: _record_removal(result, kind, event, requested))
    if progress is not None:
        _report_progress(store, progress)
    components = start_components(store, SIMULATION_COMPONENTS)
    guard = watch_for_spinning(store, config)
    result.spins = guard.spins
    sched = Scheduler(MemoryClient(store), config, registry=registry, clock=clock, seed=seed, feature_gates=gates,
                      on_attempt=result.attempts.append if explain else None, fast_paths=fast_paths, batching=batching,
                      preemption_observer=preemption_recorder(result, explain), after_attempt=guard.after_attempt)
    await sched.start()
    start = guard.epoch = loop.time()
    scheduling = loop.create_task(sched.run(), name="scheduler")
    try:
        if runner is not None and timeline is not None:
            await _run_scenario(runner, timeline, result, sched, store, components)
        else:
            await settle(sched, store, components)
    finally:
        result.virtual_seconds = loop.time() - start
        await sched.stop()
        scheduling.cancel()
        await asyncio.gather(scheduling, return_exceptions=True)
        await components.stop()
    return result


async def _run_scenario(runner: ScenarioRunner, timeline: Timeline, result: SimulationResult, sched: Scheduler,
                        store: ObjectStore, components: Components) -> None:
    """Fire the steps at their times, settle after the last (drains still evicting keep the
    cluster busy), and leave the timeline and the failed steps in ``result``."""
    timeline.start()
    result.timeline = timeline.entries
    result.scenario_errors = runner.errors
    try:
        await runner.run()
        await settle(sched, store, components, busy=runner.busy)
    finally:
        await runner.stop()
        timeline.stop()


def _record_removal(result: SimulationResult, kind: object, event: WatchEvent, requested: set[str]) -> None:
    """Keep a pod the cluster deleted, unless preemption did (preemptions are reported apart) or a
    scenario asked for it (``requested`` uids: those are on the timeline)."""
    if event.type != DELETED or kind != POD:
        return
    pod = event.object
    target: dict = next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "DisruptionTarget"), {})
    if target.get("reason") == PREEMPTED or pod["metadata"].get("uid") in requested:
        return
    result.removed.append(RemovedPod(_key(pod), (pod.get("spec") or {}).get("nodeName") or "",
                                     str(target.get("reason") or ""), str(target.get("message") or "")))


def preemption_recorder(result: SimulationResult, explain: bool) -> PreemptionObserver:
    """An observer that files every preemption decision into ``result`` (with every candidate and
    its criteria when explaining), each tied to the failed attempt it followed."""

    def on_preemption(record: PreemptionRecord) -> None:
        result.preemption_attempts.append(record)
        if explain and result.attempts and result.attempts[-1].pod == record.preemptor:
            result.preemption_of_attempt[len(result.attempts) - 1] = record

    return PreemptionObserver(on_preemption, record_candidates=explain)


async def settle(sched: Scheduler, store: ObjectStore, components: Components,
                 busy: Callable[[], bool] | None = None) -> None:
    """Return once nothing can change any more: the cluster is quiet with no pod left
    unschedulable, or nothing was created, bound or deleted for two unschedulable flushes, whether
    the cluster went quiet meanwhile or work kept going (pods failing with errors retry forever, as
    upstream's do). ``busy`` says whether some other actor (a scenario's drain) still works."""
    loop = asyncio.get_running_loop()
    marker, changed_at = tuple(store.progress), loop.time()
    while True:
        await asyncio.sleep(POLL)
        if tuple(store.progress) != marker:
            marker, changed_at = tuple(store.progress), loop.time()
        if loop.time() - changed_at > 2 * UNSCHEDULABLE_FLUSH:
            return
        if not _quiet(sched, store, components) or (busy is not None and busy()):
            continue
        if not sched.queue.counts().get("unschedulable"):
            return
        await asyncio.sleep(UNSCHEDULABLE_FLUSH)


def _quiet(sched: Scheduler, store: ObjectStore, components: Components) -> bool:
    return not (sched.busy() or store.pending_timers or store.watch_events_pending() or not components.idle())


def _report_progress(store: ObjectStore, progress: ProgressCallback) -> None:
    """Call ``progress("scheduling", bound pods, pods)`` every few hundred writes while the scheduler works."""
    bound_at_start = sum(1 for p in store.iter_all(POD) if (p.get("spec") or {}).get("nodeName"))
    progress("scheduling", bound_at_start, store.count(POD))

    def hook(rv: int, _kind: object, _event: object) -> None:
        if rv % 256 == 0:
            progress("scheduling", store.progress[1] + bound_at_start, store.count(POD))

    store.write_hooks.append(hook)


class InputRejected(KubeschedError):
    """The API refused an object of the input (a custom resource its CRD's schema refuses, a CRD
    that is not valid): the message names the object and the field."""


def create_input(store: ObjectStore, obj: dict, *, decoded: bool = False) -> dict:
    """Create one object of the input, of a built-in kind or one a CRD created before serves;
    ``decoded``: loading type-checked it already (``manifests.load``, ``check_all``)."""
    kind: Kind | None = store.custom.resolve(obj.get("apiVersion", ""), obj.get("kind", ""))
    meta = obj.get("metadata") or {}
    where = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
    if kind is None:
        raise InputRejected(f"{obj.get('kind')} {where}: no CustomResourceDefinition serves {obj.get('apiVersion')} {obj.get('kind')}")
    try:
        return store.create(kind, obj, decoded=decoded)
    except APIError as e:
        if not isinstance(kind, CustomKind) and not is_crd(obj):
            raise
        raise InputRejected(f"{obj.get('kind')} {where}: {e}") from None
