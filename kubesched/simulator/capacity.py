"""How many more copies of a pod the cluster can take, and what stops the next one (what
kubernetes-sigs/cluster-capacity answers), with the full scheduler.

The cluster is built once, exactly as ``simulate`` builds it (same store, components and
Scheduler), and its own pods are scheduled first. Then copies of each template are created one
at a time, each waited for until it is bound or rejected: the real queue, scheduling cycle and
binding cycle place every copy, so every plugin (taints, affinity, spread, volumes, claims) counts,
and nothing is re-run per copy. The first copy that cannot be placed ends the count; its
PodScheduled condition is kube-scheduler's FitError message, the one ``simulate`` prints for a
pending pod. That copy is then deleted, so the next template starts on the cluster as the
previous one left it (its copies stay), as cluster-capacity does with several pod specs.

Preemption is off unless asked for: with it, a copy may evict lower-priority pods, and the count
answers "how many fit if lower-priority work gives way".
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kubesched.api.errors import KubeschedError
from kubesched.api.kinds import POD
from kubesched.api.watch import DELETED, MODIFIED, WatchEvent
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config.types import PluginRef, SchedulerConfiguration
from kubesched.scheduler.features import FeatureGates
from kubesched.scheduler.framework.registry import Registry
from kubesched.scheduler.schedule_one import Attempt
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.components import Components, start_components
from kubesched.simulator.crds import with_plugin_crds
from kubesched.simulator.simulate import (
    POLL,
    SIMULATION_COMPONENTS,
    UNSCHEDULABLE_FLUSH,
    create_input,
    creation_order,
    settle,
)
from kubesched.simulator.spinning import watch_for_spinning
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock

#: The stop reason when every requested copy was placed.
LIMIT_REACHED = "LimitReached"
#: The stop reason when a copy was neither placed nor rejected (gated, or retried on errors).
NOT_SCHEDULED = "NotScheduled"
#: How long (virtual seconds) a copy may stay undecided: past two unschedulable flushes, nothing
#: in the cluster is going to decide it.
UNDECIDED_AFTER = 2 * UNSCHEDULABLE_FLUSH
#: The largest batch of copies created at once (see ``_fill``).
MAX_BATCH = 256
#: Fields a template may carry from an exported pod that a fresh copy must not.
_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
               "generation", "managedFields", "ownerReferences")


class TemplateError(KubeschedError, ValueError):
    """A ``--pod`` template that cannot be copied into the cluster, naming the template and field."""

    def __init__(self, template: str, field_path: str, detail: str) -> None:
        super().__init__(f"pod template {template}: {field_path}: {detail}")


@dataclass(frozen=True)
class PodCapacity:
    """How many copies of one template were placed, why the next one was not, and where they went."""

    name: str
    namespace: str
    count: int
    #: ``Unschedulable`` (the next copy was rejected), ``LimitReached`` or ``NotScheduled``.
    stop_reason: str
    stop_message: str
    per_node: dict[str, int] = field(default_factory=dict)
    #: The last scheduling attempt of the copy that was not placed (with ``explain``): every
    #: node's Filter outcome, for the report's reasons per node count.
    stop_attempt: Attempt | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "count": self.count,
                "stopReason": {"reason": self.stop_reason, "message": self.stop_message}, "perNode": dict(self.per_node)}

    def lines(self) -> list[str]:
        """The report cluster-capacity users know: the count, the termination reason, the spread."""
        out = [f"The cluster can schedule {self.count} instance(s) of the pod {self.name}.",
               f"Termination reason: {self.stop_reason}: {self.stop_message}"]
        if self.per_node:
            out += ["", "Pod distribution among nodes:"]
            out += [f"  {node}: {n} instance(s)" for node, n in self.per_node.items()]
        return out


@dataclass
class CapacityResult:
    """One entry per template, in the order given; ``store`` holds the cluster as the copies left it."""

    pods: list[PodCapacity]
    store: ObjectStore

    def to_json(self) -> dict[str, Any]:
        return {"pods": [p.to_json() for p in self.pods]}

    def to_html(self, path: str | os.PathLike[str] | None = None) -> str:
        """The result as a self-contained HTML page (``capacity --report``), written to ``path``
        when given. The stop's filter reasons per node count need ``explain=True``."""
        from kubesched.simulator import htmlreport

        return htmlreport.write(htmlreport.render_capacity(self), path)


def capacity(
    objects: list[dict],
    templates: list[dict],
    config: SchedulerConfiguration,
    *,
    seed: int = 0,
    max_copies: int | None = None,
    preemption: bool = False,
    registry: Registry | None = None,
    feature_gates: FeatureGates | None = None,
    explain: bool = False,
) -> CapacityResult:
    """Schedule ``objects`` (validated manifests), then copies of each pod of ``templates`` in
    turn until one cannot be placed (or ``max_copies`` of it were). ``explain`` keeps the failed
    attempt of each copy not placed (``PodCapacity.stop_attempt``), at the price of recording
    every copy's attempt."""
    if max_copies is not None and max_copies < 0:
        raise KubeschedError(f"--max: must be 0 or more, not {max_copies}")
    served = {p.scheduler_name for p in config.profiles}
    checked = [check_template(t, served) for t in templates]
    cfg = config if preemption else without_preemption(config)
    return run_virtual(_capacity(objects, checked, cfg, seed, max_copies, not preemption, registry, feature_gates, explain))


def check_template(template: dict, served: set[str]) -> dict:
    """The template, fit to copy: a Pod the scheduler will see, without what the server sets."""
    meta = template.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or ""
    label = f'{template.get("kind", "?")} "{name}"'
    if template.get("kind") != "Pod":
        raise TemplateError(label, "kind", f'must be Pod, not "{template.get("kind")}"')
    if not name:
        raise TemplateError(label, "metadata.name", "required (copies are named after it)")
    spec = template.get("spec") or {}
    if spec.get("nodeName"):
        raise TemplateError(label, "spec.nodeName", "must be empty: a pod with a node is never scheduled")
    scheduler_name = spec.get("schedulerName") or "default-scheduler"
    if scheduler_name not in served:
        raise TemplateError(label, "spec.schedulerName", f'"{scheduler_name}" has no profile in the configuration')
    out = copy.deepcopy(template)
    out.pop("status", None)
    out_meta = out.setdefault("metadata", {})
    for key in _SERVER_SET:
        out_meta.pop(key, None)
    out_meta["name"] = name.rstrip("-")
    return out


def without_preemption(config: SchedulerConfiguration) -> SchedulerConfiguration:
    """``config`` with every profile's PostFilter plugins disabled (the configuration is not changed)."""
    out = copy.deepcopy(config)
    for profile in out.profiles:
        post_filter = profile.plugins.get("postFilter")
        post_filter.enabled = []
        post_filter.disabled = [PluginRef("*")]
    return out


@dataclass(frozen=True)
class _Outcome:
    """What became of one copy: the node it was bound to, or why it was not."""

    node: str = ""
    reason: str = ""
    message: str = ""


class _CopyWatch:
    """A store write hook that resolves the futures of the copies being waited for once each is
    bound, rejected (PodScheduled False, and no nomination that preemption may still honour), or
    deleted."""

    def __init__(self) -> None:
        self.futures: dict[tuple[str, str], asyncio.Future[_Outcome]] = {}

    def expect(self, namespace: str, name: str) -> asyncio.Future[_Outcome]:
        future = self.futures[(namespace, name)] = asyncio.get_running_loop().create_future()
        return future

    def __call__(self, _rv: int, kind: object, event: WatchEvent) -> None:
        if kind != POD or not self.futures:
            return
        meta = event.object.get("metadata") or {}
        future = self.futures.get((str(meta.get("namespace", "")), str(meta.get("name"))))
        if future is None or future.done():
            return
        outcome = _decided(event)
        if outcome is not None:
            future.set_result(outcome)


def _decided(event: WatchEvent) -> _Outcome | None:
    if event.type == DELETED:
        return _Outcome(reason=NOT_SCHEDULED, message="the copy was deleted before it was placed")
    spec, status = event.object.get("spec") or {}, event.object.get("status") or {}
    if spec.get("nodeName"):
        return _Outcome(node=str(spec["nodeName"]))
    if status.get("nominatedNodeName"):
        return None
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False" \
                and condition.get("reason") != "SchedulingGated":
            return _Outcome(reason=str(condition.get("reason") or "Unschedulable"), message=str(condition.get("message") or ""))
    return None


async def _capacity(objects: list[dict], templates: list[dict], config: SchedulerConfiguration, seed: int,
                    max_copies: int | None, batches: bool, registry: Registry | None, gates: FeatureGates | None,
                    explain: bool) -> CapacityResult:
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop, wall_start=VIRTUAL_EPOCH)
    store = ObjectStore(clock, seed=seed, auto_create_namespaces=True, feature_gates=gates, keep_uids=True)
    ordered, _ignored = creation_order(with_plugin_crds(objects, config, registry), gates)
    for obj in ordered:
        create_input(store, obj)
    components = start_components(store, SIMULATION_COMPONENTS)
    failed: dict[str, Attempt] = {}
    sched = Scheduler(MemoryClient(store), config, registry=registry, clock=clock, seed=seed, feature_gates=gates,
                      on_attempt=(lambda a: _keep_failed(failed, a)) if explain else None,
                      after_attempt=watch_for_spinning(store, config).after_attempt)
    await sched.start()
    runner = loop.create_task(sched.run(), name="scheduler")
    watch = _CopyWatch()
    store.write_hooks.append(watch)
    try:
        await settle(sched, store, components)
        cluster = _Cluster(store, watch, lambda: _quiet(sched, store, components), failed)
        results = [await _fill(cluster, template, max_copies, batches) for template in templates]
    finally:
        await sched.stop()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        await components.stop()
    return CapacityResult(results, store)


@dataclass
class _Cluster:
    """The running cluster the copies go to: its store, the watch on the copies, and whether
    nothing is left to do (no pod to pop, no binding, no component work)."""

    store: ObjectStore
    watch: _CopyWatch
    quiet: Callable[[], bool]
    #: Pod -> its last failed attempt, while it is not placed (with ``explain``).
    failed: dict[str, Attempt]


def _keep_failed(failed: dict[str, Attempt], attempt: Attempt) -> None:
    """Keep only what the report needs: the last attempt of pods not placed (placed copies'
    attempts would be thousands)."""
    if attempt.chosen:
        failed.pop(attempt.pod, None)
    else:
        failed[attempt.pod] = attempt


async def _fill(cluster: _Cluster, template: dict, max_copies: int | None, batches: bool) -> PodCapacity:
    """Copies of ``template`` until one is not placed or ``max_copies`` were.

    Copies go in batches that double in size (up to ``MAX_BATCH``), each waited for in full. The
    stop is still exact: copies are identical and the queue takes them one after the other, so once
    one is rejected the next meets the same cluster and is rejected too; the copies placed are
    those bound, and the first rejection is the stop reason. With preemption a rejected copy
    changes the cluster (nominations, victims), so copies then go one at a time."""
    meta = template["metadata"]
    namespace, base = meta.get("namespace") or "default", meta["name"]
    store = cluster.store
    names = _names(store, namespace, base)
    per_node: dict[str, int] = {}
    count, size = 0, 1
    while max_copies is None or count < max_copies:
        batch = [next(names) for _ in range(size if max_copies is None else min(size, max_copies - count))]
        outcomes = await _place(cluster, template, namespace, batch)
        for name, outcome in zip(batch, outcomes, strict=True):
            if outcome.node:
                count += 1
                per_node[outcome.node] = per_node.get(outcome.node, 0) + 1
            else:
                _remove_unplaced(store, namespace, name)
        rejected = next(((name, o) for name, o in zip(batch, outcomes, strict=True) if not o.node), None)
        stop_attempt = cluster.failed.get(f"{namespace}/{rejected[0]}") if rejected is not None else None
        for name in batch:
            cluster.failed.pop(f"{namespace}/{name}", None)
        if rejected is not None:
            return PodCapacity(base, namespace, count, rejected[1].reason, rejected[1].message, _sorted(per_node),
                               stop_attempt)
        size = min(size * 2, MAX_BATCH) if batches else 1
    return PodCapacity(base, namespace, count, LIMIT_REACHED, f"the limit of {max_copies} instance(s) was reached",
                       _sorted(per_node))


def _names(store: ObjectStore, namespace: str, base: str) -> Iterator[str]:
    """``base-1``, ``base-2``, ... skipping names pods already have."""
    for suffix in itertools.count(1):
        name = f"{base}-{suffix}"
        if store.try_get(POD, namespace, name) is None:
            yield name


async def _place(cluster: _Cluster, template: dict, namespace: str, names: list[str]) -> list[_Outcome]:
    """Create a copy per name and wait until each is decided. A rejection is only final once the
    cluster is quiet: a copy may be turned away while something it needs is still on its way (a
    claim the ResourceClaim controller creates from a template), then placed on the retry."""
    futures = []
    for name in names:
        pod = copy.deepcopy(template)
        pod["metadata"].update(name=name, namespace=namespace)
        futures.append(cluster.watch.expect(namespace, name))
        cluster.store.create(POD, pod)
    try:
        outcomes = [await _wait(cluster.store, future, namespace, name) for name, future in zip(names, futures, strict=True)]
    finally:
        for name in names:
            cluster.watch.futures.pop((namespace, name), None)
    if all(o.node for o in outcomes):
        return outcomes
    await _until(cluster.quiet)
    return [o if o.node else _now(cluster.store, namespace, name, o) for name, o in zip(names, outcomes, strict=True)]


async def _until(condition: Callable[[], bool]) -> None:
    """Until ``condition()``, or ``UNDECIDED_AFTER`` virtual seconds (a cluster retrying a pod on
    errors forever is never quiet)."""

    async def poll() -> None:
        while not condition():
            await asyncio.sleep(POLL)

    try:
        await asyncio.wait_for(poll(), UNDECIDED_AFTER)
    except TimeoutError:
        return


def _now(store: ObjectStore, namespace: str, name: str, earlier: _Outcome) -> _Outcome:
    """A copy's outcome as the store has it now (placed after all, or rejected again)."""
    pod = store.try_get(POD, namespace, name)
    if pod is None:
        return earlier
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return _Outcome(node=str(node))
    return _decided(WatchEvent(MODIFIED, pod, None)) or earlier


async def _wait(store: ObjectStore, future: asyncio.Future[_Outcome], namespace: str, name: str) -> _Outcome:
    """The copy's outcome; one still undecided after ``UNDECIDED_AFTER`` virtual seconds is
    reported with what its status says so far."""
    try:
        return await asyncio.wait_for(future, UNDECIDED_AFTER)
    except TimeoutError:
        pod = store.try_get(POD, namespace, name) or {}
        gates = [g.get("name", "") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
        if gates:
            return _Outcome(reason=NOT_SCHEDULED, message="waiting for scheduling gates: [" + " ".join(gates) + "]")
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        where = f" (nominated to {nominated})" if nominated else ""
        return _Outcome(reason=NOT_SCHEDULED,
                        message=f"pod {namespace}/{name} was not placed within {UNDECIDED_AFTER:.0f} virtual seconds{where}")


def _remove_unplaced(store: ObjectStore, namespace: str, name: str) -> None:
    """Delete the copy that was not placed, so it does not take part in what follows."""
    if store.try_get(POD, namespace, name) is not None:
        store.delete(POD, namespace, name, grace_period=0)


def _sorted(per_node: dict[str, int]) -> dict[str, int]:
    """Most copies first, then by node name: the nodes that took the load lead."""
    return dict(sorted(per_node.items(), key=lambda item: (-item[1], item[0])))


def _quiet(sched: Scheduler, store: ObjectStore, components: Components) -> bool:
    """Nothing in flight: no pod to pop or bind, no timer, watch event or component work pending."""
    return not (sched.busy() or store.pending_timers or store.watch_events_pending() or not components.idle())
