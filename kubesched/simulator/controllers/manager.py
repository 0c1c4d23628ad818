"""The loop every embedded controller runs in: store writes become keys in per-controller work
queues, and one task drains the queues.

Controllers read and write the ``ObjectStore`` directly and synchronously, so a sync always sees
the store as it is (no informer lag, hence no upstream "expectations"). Writes are observed
through ``store.write_hooks``: the hook only records keys, the task does the work, so a
controller never re-enters the store from inside a write. A burst of events for one object
(a ReplicaSet's pods being bound one by one) collapses into one sync, because keys are a set
and the task waits ``coalesce`` seconds of loop time after being woken.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import TypeVar

from kubesched.api.kinds import POD, Kind
from kubesched.api.watch import DELETED, MODIFIED, WatchEvent
from kubesched.apiserver.store import ObjectStore
from kubesched.simulator.controllers.util import (
    REPLICA_SET,
    controller_ref,
    is_pod_available,
    is_pod_ready,
    labels_of,
    meta,
    ready_since,
)

log = logging.getLogger(__name__)

Key = tuple[str, str]
DependentRef = tuple[Kind, str, str]

#: Retries of a failing sync back off like client-go's default controller rate limiter.
BACKOFF_BASE = 0.005
BACKOFF_MAX = 1000.0
#: Syncs per round before yielding to the event loop, so a controller cannot starve the scheduler.
ROUND_LIMIT = 2000
#: Kinds a controller may adopt (pods by ReplicaSets, RCs and StatefulSets; ReplicaSets by Deployments).
ADOPTABLE = (POD, REPLICA_SET)


class Controller(ABC):
    """A reconciler: ``observe`` turns store events into keys, ``sync`` reconciles one key."""

    name = "controller"
    #: Kinds whose writes this controller wants to see; None for every kind.
    kinds: tuple[Kind, ...] | None = ()

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.store = manager.store
        self.queue: dict[Key, None] = {}
        self.failures: dict[Key, int] = {}

    def enqueue(self, key: Key) -> None:
        self.queue[key] = None
        self.manager.wake()

    def enqueue_after(self, key: Key, delay: float, *, counted: bool = True) -> None:
        self.manager.call_later(delay, self, key, counted=counted)

    def observe(self, kind: Kind, event: WatchEvent) -> None:  # noqa: B027 - optional hook
        """Called from inside a store write: record keys only, never write."""

    def initial_keys(self) -> Iterable[Key]:
        """Keys to sync at start (objects that existed before the controller)."""
        return ()

    @abstractmethod
    def sync(self, key: Key) -> None: ...

    def requeue_for_availability(self, key: Key, pods: Iterable[dict], min_ready: int) -> None:
        """Sync again just after the first ready pod passes ``minReadySeconds`` (upstream requeues
        only when all are ready; waking at the exact moment keeps availability right in partial
        cases too)."""
        if not min_ready:
            return
        now = self.store.clock.wall()
        pending = [ready_since(p) + min_ready for p in pods if is_pod_ready(p) and not is_pod_available(p, min_ready, now)]
        if pending:
            self.enqueue_after(key, min(pending) - now + 0.001)


class OwnerIndex:
    """owner uid -> the objects whose ownerReferences name it; and, per (kind, namespace), the
    objects no controller owns (candidates for adoption), with a generation that moves whenever
    that orphan set or an orphan's labels change, so adopters can skip rescans."""

    def __init__(self) -> None:
        self.dependents: dict[str, set[DependentRef]] = {}
        self.orphans: dict[tuple[Kind, str], set[str]] = {}
        self.orphan_generation: dict[tuple[Kind, str], int] = {}

    def observe(self, kind: Kind, event: WatchEvent) -> None:
        obj, old = event.object, event.old if event.type == MODIFIED else None
        if old is not None and _same_ownership(old, obj):
            return  # a status write, a binding: neither the owners nor what adoption reads moved
        ns, name = meta(obj).get("namespace") or "", meta(obj)["name"]
        ref: DependentRef = (kind, ns, name)
        old_owners = _owner_uids(obj if event.type == DELETED else old)
        new_owners = _NO_OWNERS if event.type == DELETED else _owner_uids(obj)
        if old_owners or new_owners:  # most objects (every event) have none
            self._move_dependent(ref, old_owners, new_owners)
        if kind in ADOPTABLE:
            self._track_orphan(kind, ns, name, obj, old, event.type)

    def _move_dependent(self, ref: DependentRef, old_owners: AbstractSet[str], new_owners: AbstractSet[str]) -> None:
        """File ``ref`` under the owners it has now, no longer under those it had."""
        for uid in old_owners - new_owners:
            bucket = self.dependents.get(uid)
            if bucket is not None:
                bucket.discard(ref)
                if not bucket:
                    del self.dependents[uid]
        for uid in new_owners - old_owners:
            self.dependents.setdefault(uid, set()).add(ref)

    def _track_orphan(self, kind: Kind, ns: str, name: str, obj: dict, old: dict | None, event_type: str) -> None:
        group = (kind, ns)
        was = old is not None and controller_ref(old) is None
        now = event_type != DELETED and controller_ref(obj) is None
        bucket = self.orphans.setdefault(group, set())
        if now:
            bucket.add(name)
        else:
            bucket.discard(name)
        if was != now or (now and (old is None or labels_of(old) != labels_of(obj))):
            self.orphan_generation[group] = self.orphan_generation.get(group, 0) + 1

    def dependents_of(self, uid: str, kind: Kind | None = None) -> list[DependentRef]:
        refs = self.dependents.get(uid, ())
        return [r for r in refs if kind is None or r[0] == kind]

    def orphan_names(self, kind: Kind, namespace: str) -> set[str]:
        return self.orphans.get((kind, namespace), set())

    def generation(self, kind: Kind, namespace: str) -> int:
        return self.orphan_generation.get((kind, namespace), 0)


_NO_OWNERS: frozenset[str] = frozenset()


def _same_ownership(old: dict, new: dict) -> bool:
    """Whether an update keeps the very owner references and labels of the object (the store
    shares them between versions): then the index would change nothing."""
    old_meta, new_meta = meta(old), meta(new)
    return old_meta.get("ownerReferences") is new_meta.get("ownerReferences") and \
        old_meta.get("labels") is new_meta.get("labels")


def _owner_uids(obj: dict | None) -> AbstractSet[str]:
    """The uids ``obj``'s ownerReferences name (most objects have none: no set is built then)."""
    refs = meta(obj).get("ownerReferences") if obj is not None else None
    if not refs:
        return _NO_OWNERS
    return {ref.get("uid", "") for ref in refs if ref.get("uid")}


C = TypeVar("C", bound=Controller)


class Manager:
    """Runs controllers over one store; see the module docstring."""

    def __init__(self, store: ObjectStore, *, coalesce: float = 0.005) -> None:
        self.store = store
        self.coalesce = coalesce
        self.index = OwnerIndex()
        self.controllers: list[Controller] = []
        self._by_kind: dict[Kind, list[Controller]] = {}
        self._all_kinds: list[Controller] = []
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._timers: set[asyncio.TimerHandle] = set()
        self._counted_timers = 0
        self._busy = False
        self._started = False

    def owned(self, owner_uid: str, kind: Kind) -> list[dict]:
        """The objects of ``kind`` whose controller is the owner with this uid."""
        out = []
        for dep_kind, ns, name in self.index.dependents_of(owner_uid, kind):
            obj = self.store.try_get(dep_kind, ns, name)
            if obj is not None and (controller_ref(obj) or {}).get("uid") == owner_uid:
                out.append(obj)
        return out

    def add(self, controller: C) -> C:
        self.controllers.append(controller)
        if controller.kinds is None:
            self._all_kinds.append(controller)
        else:
            for kind in controller.kinds:
                self._by_kind.setdefault(kind, []).append(controller)
        return controller

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Index what exists, queue every controller's initial keys, then follow writes."""
        self._wakeup = asyncio.Event()
        for kind in list(self.store.kinds()):
            for obj in list(self.store.iter_all(kind)):
                self.index.observe(kind, WatchEvent("ADDED", obj))
        self.store.write_hooks.append(self._on_write)
        for controller in self.controllers:
            for key in controller.initial_keys():
                controller.queue[key] = None
        self._started = True
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controllers")

    async def stop(self) -> None:
        if self._on_write in self.store.write_hooks:
            self.store.write_hooks.remove(self._on_write)
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        self._counted_timers = 0
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def idle(self) -> bool:
        """No queued key, no sync running and no timer that will change objects."""
        return not self._busy and not self._counted_timers and not any(c.queue for c in self.controllers)

    # --- events and timers ---------------------------------------------------------------------------
    def wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _on_write(self, _rv: int, kind: Kind, event: WatchEvent) -> None:
        try:
            self.index.observe(kind, event)
            for controller in self._by_kind.get(kind, ()):
                controller.observe(kind, event)
            for controller in self._all_kinds:
                controller.observe(kind, event)
        except Exception:  # a hook must never break the writer
            log.exception("controller event handler failed")
        self.wake()

    def call_later(self, delay: float, controller: Controller, key: Key, *, counted: bool) -> None:
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            self._timers.discard(handle)
            if counted:
                self._counted_timers -= 1
            controller.enqueue(key)

        handle = loop.call_later(max(0.0, delay), fire)
        self._timers.add(handle)
        if counted:
            self._counted_timers += 1

    # --- the loop ------------------------------------------------------------------------------------
    async def _run(self) -> None:
        assert self._wakeup is not None
        while True:
            if not any(c.queue for c in self.controllers):
                self._wakeup.clear()
                await self._wakeup.wait()
                if self.coalesce:
                    await asyncio.sleep(self.coalesce)
            self._busy = True
            try:
                self._round()
            finally:
                self._busy = False
            await asyncio.sleep(0)

    def _round(self) -> None:
        done = 0
        while done < ROUND_LIMIT:
            progressed = False
            for controller in self.controllers:
                if not controller.queue:
                    continue
                key = next(iter(controller.queue))
                del controller.queue[key]
                self._sync(controller, key)
                progressed = True
                done += 1
            if not progressed:
                return

    def _sync(self, controller: Controller, key: Key) -> None:
        try:
            controller.sync(key)
        except Exception as e:
            failures = controller.failures.get(key, 0) + 1
            controller.failures[key] = failures
            delay = min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (failures - 1))
            log.debug("%s: sync %s/%s failed (%s), retrying in %.3fs", controller.name, key[0], key[1], e, delay)
            self.call_later(delay, controller, key, counted=False)
        else:
            controller.failures.pop(key, None)
