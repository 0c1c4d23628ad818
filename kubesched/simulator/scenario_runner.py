"""Runs a scenario's steps on the virtual clock, inside a simulation: each step fires at its time
and acts on the store as a client would (``kubectl apply``, ``delete``, ``scale``, ``cordon``,
``drain``, ``taint``), so the scheduler, the fake kubelets and the controllers react as they do
to any other write. A step that cannot be carried out (a node or an object that does not exist)
is an error on the timeline; the run goes on.

``drain`` follows ``kubectl drain --ignore-daemonsets --delete-emptydir-data --force``: every
selected node is cordoned, then each node's pods are evicted through the Eviction subresource
(DaemonSet-managed and mirror pods stay), an eviction a PodDisruptionBudget refuses is retried
every 5 seconds, and the drain of a node is done once its evicted pods are gone.

The operations act through a ``ClusterAccess``: ``StoreAccess`` writes to the store directly, as
the simulation's in-process components do; ``kubesched up``'s web UI runs the same operations
through the API server as the user who started the scenario (``scenario_live``), on a clock of
its own (``wait_until``, ``scaled``), and follows each step's state (``on_step``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol, cast

from kubesched.api.apierrors import APIError, Conflict, NotFound, TooManyRequests
from kubesched.api.errors import KubeschedError
from kubesched.api.kinds import NODE, POD, Kind, kind_for
from kubesched.apiserver.eviction import evict
from kubesched.apiserver.store import ObjectStore
from kubesched.simulator.nodestatus import FAILURE_ANNOTATION
from kubesched.simulator.scenario import (
    AddNodes,
    Apply,
    Drain,
    NodeSelection,
    ObjectRef,
    Scale,
    Scenario,
    Step,
    Taint,
    Untaint,
    describe_seconds,
)
from kubesched.simulator.timeline import Timeline
from kubesched.utils.clock import rfc3339

#: kubectl drain's pause before retrying an eviction a disruption budget refused.
EVICTION_RETRY = 5.0
#: kubectl drain's poll of evicted pods until they are gone.
DELETION_POLL = 1.0
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


class StepFailed(KubeschedError):
    """A step that cannot be carried out on the cluster as it is at the step's time."""


def _pod_key(pod: dict) -> str:
    return f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"


def drainable(pods: Iterable[dict]) -> list[dict]:
    """Of the pods on a node, the ones a drain evicts, in name order."""
    out = []
    for pod in pods:
        meta = pod["metadata"]
        if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
            continue
        if any(ref.get("controller") and ref.get("kind") == "DaemonSet" for ref in meta.get("ownerReferences") or []):
            continue
        out.append(pod)
    return sorted(out, key=_pod_key)


class ClusterAccess(Protocol):
    """How the steps read and change the cluster; every method raises the API's errors."""

    def timestamp(self) -> str:
        """Now, as an RFC 3339 time for a NoExecute taint's ``timeAdded``."""
        ...

    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict | None: ...

    async def nodes(self) -> list[dict]: ...

    async def pods_on(self, node: str) -> list[dict]: ...

    async def create(self, kind: Kind, obj: dict) -> None: ...

    async def replace(self, kind: Kind, obj: dict) -> None:
        """An unconditional update (the object carries no resourceVersion)."""
        ...

    async def delete(self, kind: Kind, namespace: str | None, name: str) -> None: ...

    async def mutate(self, kind: Kind, namespace: str | None, name: str, change: Callable[[dict], None]) -> None:
        """Read, change and write back one object (retried when it changed meanwhile)."""
        ...

    async def evict(self, namespace: str, name: str, grace: int | None, uid: str | None) -> None: ...


class StoreAccess:
    """The store itself, as the simulation's in-process components write to it."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def timestamp(self) -> str:
        return rfc3339(self.store.clock.wall())

    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict | None:
        return self.store.try_get(kind, namespace, name)

    async def nodes(self) -> list[dict]:
        return list(self.store.iter_all(NODE))

    async def pods_on(self, node: str) -> list[dict]:
        return [p for p in self.store.iter_all(POD) if (p.get("spec") or {}).get("nodeName") == node]

    async def create(self, kind: Kind, obj: dict) -> None:
        self.store.create(kind, obj)

    async def replace(self, kind: Kind, obj: dict) -> None:
        self.store.update(kind, obj)

    async def delete(self, kind: Kind, namespace: str | None, name: str) -> None:
        self.store.delete(kind, namespace, name)

    async def mutate(self, kind: Kind, namespace: str | None, name: str, change: Callable[[dict], None]) -> None:
        self.store.mutate(kind, namespace, name, change)

    async def evict(self, namespace: str, name: str, grace: int | None, uid: str | None) -> None:
        evict(self.store, namespace, name, grace_period=grace, uid=uid)


class ScenarioRunner:
    """Fires the steps of ``scenario`` at their times; drains run on beside later steps."""

    #: Why a drain stopped when ``stop`` cut it short.
    end_reason = "the simulation ended first"

    def __init__(self, scenario: Scenario, store: ObjectStore, timeline: Timeline, access: ClusterAccess | None = None) -> None:
        self.scenario = scenario
        self.store = store
        self.timeline = timeline
        self.access: ClusterAccess = access if access is not None else StoreAccess(store)
        #: One line per step that could not be carried out (also on the timeline).
        self.errors: list[str] = []
        #: Uids of the pods the scenario deleted or evicted (removals it asked for, not the cluster's).
        self.requested: set[str] = set()
        self._drains: set[asyncio.Task[None]] = set()
        #: Pods a drain is evicting or waiting for -> the last refusal, for the report of a drain cut short.
        self._blocked: dict[str, str] = {}

    def busy(self) -> bool:
        """True while a drain is still evicting (so the simulation does not stop under it)."""
        return bool(self._drains)

    async def run(self) -> None:
        """Fire every step at its time (relative to the timeline's start)."""
        for index, step in enumerate(self.scenario.steps):
            await self.wait_until(step.seconds)
            self.timeline.add("step", f"steps[{index}]", "", step.describe())
            self.on_step(index, "running")
            try:
                await self._execute(index, step)
            except (APIError, StepFailed) as e:
                self._fail(index, step, str(e))
            else:
                if step.drain is None:
                    self.on_step(index, "done")

    async def wait_until(self, at: float) -> None:
        """Return at ``at`` seconds of the timeline (the virtual clock's sleep)."""
        delay = at - self.timeline.now()
        if delay > 0:
            await asyncio.sleep(delay)

    def scaled(self, seconds: float) -> float:
        """How long ``seconds`` of scenario time take on the loop's clock (the same, here)."""
        return seconds

    def on_step(self, index: int, state: str, message: str = "") -> None:
        """A step's progress: ``running``, then ``done`` or ``failed`` (with why); nothing here."""

    async def drains_done(self) -> None:
        """Wait until every drain has finished (or been stopped)."""
        while self._drains:
            await asyncio.gather(*self._drains, return_exceptions=True)

    async def stop(self) -> None:
        """Cancel the drains still waiting (a budget that never allows the eviction, say) and put
        what they left behind on the timeline."""
        for task in list(self._drains):
            task.cancel()
        await asyncio.gather(*self._drains, return_exceptions=True)

    def _fail(self, index: int, step: Step, message: str) -> None:
        self.errors.append(f"steps[{index}] (at {step.at}): {step.operation}: {message}")
        self.timeline.add("error", f"steps[{index}]", "", f"{step.operation}: {message}")
        self.on_step(index, "failed", message)

    # --- operations ----------------------------------------------------------------------------
    async def _execute(self, index: int, step: Step) -> None:
        handlers: dict[str, Callable[[], Awaitable[None]]] = {
            "apply": lambda: self._apply(cast(Apply, step.apply)),
            "delete": lambda: self._delete(cast(list[ObjectRef], step.delete)),
            "scale": lambda: self._scale(cast(Scale, step.scale)),
            "cordon": lambda: self._set_unschedulable(cast(NodeSelection, step.cordon), True),
            "uncordon": lambda: self._set_unschedulable(cast(NodeSelection, step.uncordon), False),
            "drain": lambda: self._start_drain(index, cast(Drain, step.drain)),
            "taint": lambda: self._taint(cast(Taint, step.taint)),
            "untaint": lambda: self._untaint(cast(Untaint, step.untaint)),
            "failNode": lambda: self._set_failure(cast(NodeSelection, step.fail_node), True),
            "recoverNode": lambda: self._set_failure(cast(NodeSelection, step.recover_node), False),
            "addNodes": lambda: self._add_nodes(cast(AddNodes, step.add_nodes)),
            "removeNodes": lambda: self._remove_nodes(cast(NodeSelection, step.remove_nodes)),
        }
        await handlers[step.operation]()

    async def _apply(self, apply: Apply) -> None:
        """Create each object, or replace it when it exists (``kubectl apply`` of whole objects)."""
        for manifest in apply.manifests:
            kind = self.store.custom.resolve(manifest["apiVersion"], manifest["kind"])
            if kind is None:  # a custom resource whose CRD is not (or no longer) in the cluster
                raise NotFound(f'no matches for kind "{manifest["kind"]}" in version "{manifest["apiVersion"]}"')
            meta = manifest.get("metadata") or {}
            namespace = (meta.get("namespace") or "default") if kind.namespaced else None
            obj = {**manifest, "metadata": {**meta}}
            if await self.access.get(kind, namespace, meta.get("name", "")) is None:
                await self.access.create(kind, obj)
            else:
                obj["metadata"].pop("resourceVersion", None)
                await self.access.replace(kind, obj)

    async def _delete(self, refs: list[ObjectRef]) -> None:
        for ref in refs:
            kind = ref.resolve()
            namespace = ref.namespace if kind.namespaced else None
            if kind is POD:
                pod = await self.access.get(POD, namespace, ref.name)
                if pod is None:
                    raise NotFound.of("pods", ref.name)
                self.requested.add(str(pod["metadata"].get("uid")))
            await self.access.delete(kind, namespace, ref.name)

    async def _scale(self, scale: Scale) -> None:
        kind = cast(Kind, kind_for("v1" if scale.kind == "ReplicationController" else "apps/v1", scale.kind))

        def change(obj: dict) -> None:
            obj.setdefault("spec", {})["replicas"] = scale.replicas

        await self.access.mutate(kind, scale.namespace, scale.name, change)

    async def nodes(self, selection: NodeSelection) -> list[str]:
        """The selected nodes as they are now; a named node that does not exist, or a selector that
        matches none, fails the step."""
        existing = {n["metadata"]["name"]: n for n in await self.access.nodes()}
        if selection.nodes:
            missing = [name for name in selection.nodes if name not in existing]
            if missing:
                raise StepFailed(", ".join(f'node "{name}" not found' for name in missing))
            return list(selection.nodes)
        selector = selection.label_selector()
        assert selector is not None
        names = sorted(name for name, node in existing.items() if selector.matches(node["metadata"].get("labels") or {}))
        if not names:
            raise StepFailed(f"no node matches selector {selection.selector}")
        return names

    async def _mutate_nodes(self, selection: NodeSelection, change: Callable[[dict], None]) -> None:
        for name in await self.nodes(selection):
            await self.access.mutate(NODE, None, name, change)

    async def _set_unschedulable(self, selection: NodeSelection, unschedulable: bool) -> None:
        def change(node: dict) -> None:
            spec = node.setdefault("spec", {})
            if unschedulable:
                spec["unschedulable"] = True
            else:
                spec.pop("unschedulable", None)

        await self._mutate_nodes(selection, change)

    async def _set_failure(self, selection: NodeSelection, failed: bool) -> None:
        """Stop or restart the nodes' kubelets (the node lifecycle controller does the rest)."""
        def change(node: dict) -> None:
            annotations = node["metadata"].setdefault("annotations", {})
            if failed:
                annotations[FAILURE_ANNOTATION] = "true"
            else:
                annotations.pop(FAILURE_ANNOTATION, None)

        await self._mutate_nodes(selection, change)

    async def _taint(self, taint: Taint) -> None:
        """Add or replace (same key and effect) each taint; a NoExecute one gets its timeAdded."""
        stamp = self.access.timestamp()

        def change(node: dict) -> None:
            spec = node.setdefault("spec", {})
            taints = list(spec.get("taints") or [])
            for new in taint.taints:
                taints = [t for t in taints if (t.get("key"), t.get("effect")) != (new.key, new.effect)]
                added: dict = {"key": new.key, "effect": new.effect}
                if new.value:
                    added["value"] = new.value
                if new.effect == "NoExecute":
                    added["timeAdded"] = stamp
                taints.append(added)
            spec["taints"] = taints

        await self._mutate_nodes(taint, change)

    async def _untaint(self, untaint: Untaint) -> None:
        """Remove the taints; one that a node does not carry fails the step, as ``kubectl taint`` does."""
        names = await self.nodes(untaint)
        for name in names:
            taints = ((await self.access.get(NODE, None, name) or {}).get("spec") or {}).get("taints") or []
            for ref in untaint.taints:
                if not any(_matches(t, ref.key, ref.effect) for t in taints):
                    raise StepFailed(f'taint "{ref.describe()}" not found on node "{name}"')

        def change(node: dict) -> None:
            spec = node.setdefault("spec", {})
            kept = [t for t in spec.get("taints") or [] if not any(_matches(t, r.key, r.effect) for r in untaint.taints)]
            if kept:
                spec["taints"] = kept
            else:
                spec.pop("taints", None)

        for name in names:
            await self.access.mutate(NODE, None, name, change)

    async def _add_nodes(self, add: AddNodes) -> None:
        existing = {n["metadata"]["name"] for n in await self.access.nodes()}
        number = 1
        for _ in range(add.count):
            while f"{add.prefix}{number}" in existing:
                number += 1
            name = f"{add.prefix}{number}"
            existing.add(name)
            await self.access.create(NODE, add.node(name))

    async def _remove_nodes(self, selection: NodeSelection) -> None:
        for name in await self.nodes(selection):
            await self.access.delete(NODE, None, name)

    # --- drain ---------------------------------------------------------------------------------
    async def _start_drain(self, index: int, drain: Drain) -> None:
        nodes = await self.nodes(drain)
        await self._set_unschedulable(NodeSelection(nodes=nodes), True)
        task = asyncio.get_running_loop().create_task(self._drain(index, drain, nodes), name=f"drain {', '.join(nodes)}")
        self._drains.add(task)
        task.add_done_callback(self._drains.discard)

    async def _drain(self, index: int, drain: Drain, nodes: list[str]) -> None:
        timeout = drain.timeout_seconds()
        try:
            async with asyncio.timeout(self.scaled(timeout) if timeout is not None else None):
                for node in nodes:
                    await self._drain_node(node, drain.grace_period_seconds)
                    self.timeline.add("drained", f"Node {node}")
        except TimeoutError:
            self.on_step(index, "failed", await self._report_unfinished(nodes, f"timed out after {describe_seconds(cast(float, timeout))}"))
        except asyncio.CancelledError:
            self.on_step(index, "failed", await self._report_unfinished(nodes, self.end_reason))
            raise
        else:
            self.on_step(index, "done")

    async def _report_unfinished(self, nodes: list[str], why: str) -> str:
        """Put the pods each node still holds on the timeline; returns the step's failure."""
        for node in nodes:
            left = [_pod_key(p) for p in drainable(await self.access.pods_on(node))]
            if not left:
                continue
            blocked = "; ".join(f"{key}: {self._blocked[key]}" for key in left if key in self._blocked)
            self.timeline.add("drain incomplete", f"Node {node}", "",
                              f"{why}; still on the node: {', '.join(left)}" + (f" ({blocked})" if blocked else ""))
        return f"drain incomplete: {why}"

    async def _drain_node(self, node: str, grace: int | None) -> None:
        pods = drainable(await self.access.pods_on(node))
        await asyncio.gather(*(self._evict_and_wait(pod, grace) for pod in pods))

    async def _evict_and_wait(self, pod: dict, grace: int | None) -> None:
        """kubectl's eviction loop for one pod: retry while a budget refuses, then wait until the
        pod (this uid) is gone."""
        meta, key = pod["metadata"], _pod_key(pod)
        namespace, name, uid = meta.get("namespace", "default"), meta["name"], meta.get("uid")
        while True:
            try:
                await self.access.evict(namespace, name, grace, uid)
                break
            except (NotFound, Conflict):
                return  # gone, or replaced by a pod of the same name
            except TooManyRequests as e:
                message = " ".join([str(e), *(str(c.get("message")) for c in e.causes)])
                if self._blocked.get(key) != message:
                    self._blocked[key] = message
                    self.timeline.add("eviction blocked", f"Pod {key}", str((pod.get("spec") or {}).get("nodeName") or ""),
                                      f"{message} (retrying every {describe_seconds(EVICTION_RETRY)})")
                await asyncio.sleep(self.scaled(EVICTION_RETRY))
            except APIError as e:
                self.errors.append(f"drain: evicting pod {key}: {e}")
                self.timeline.add("eviction failed", f"Pod {key}", str((pod.get("spec") or {}).get("nodeName") or ""), str(e))
                return
        self.requested.add(str(uid))
        while (current := await self.access.get(POD, namespace, name)) is not None and current["metadata"].get("uid") == uid:
            await asyncio.sleep(self.scaled(DELETION_POLL))
        self._blocked.pop(key, None)


def _matches(taint: dict, key: str, effect: str | None) -> bool:
    return taint.get("key") == key and (effect is None or taint.get("effect") == effect)
