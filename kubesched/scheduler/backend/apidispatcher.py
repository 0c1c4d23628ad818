"""Asynchronous API calls (kube-scheduler's ``SchedulerAsyncAPICalls``): the API dispatcher.

With the gate on, the scheduler does not send a pod's status patch or binding the moment it
decides it. It hands the call to the dispatcher, which keeps at most one call per pod (by UID)
queued or in flight:

* a call for a pod that has one queued is reconciled with it by relevance: a binding (relevance 2)
  replaces a queued status patch (1), a status patch arriving while a binding is queued is
  skipped, and two status patches merge (the newer conditions win by type; the newer nominated
  node wins unless the newer call leaves it alone);
* a call that would change nothing (the pod already has those conditions and that nominated node)
  is skipped;
* a call for a pod whose previous call is in flight waits for it to finish, so the calls for one
  pod reach the server in the order the scheduler made them; calls for different pods go out
  first come first served, ``parallelism`` at a time, each request also taking a token from the
  client's QPS/burst limiter.

Whoever added a call learns its outcome through ``on_finish``: None when it was sent, else the
error; ``CallSkipped`` and ``CallOverwritten`` say it was not needed. ``DispatchingClient`` is the
client plugins see: its ``bind`` goes through the dispatcher and waits for the outcome, its
``patch_pod_status`` only queues (upstream's ``APICacher``).

A fixed set of worker tasks drains the queue: no task per call.
"""

from __future__ import annotations

import abc
import asyncio
import builtins  # annotations after the `list` verb name the builtin through it
import itertools
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from kubesched.api.kinds import Kind
from kubesched.api.watch import WatchEvent
from kubesched.client.interface import ClusterClient

log = logging.getLogger(__name__)

POD_STATUS_PATCH = "pod_status_patch"
POD_BINDING = "pod_binding"
#: A more relevant call replaces a less relevant one queued for the same object (upstream ``Relevances``).
RELEVANCES: Mapping[str, int] = {POD_STATUS_PATCH: 1, POD_BINDING: 2}

OnFinish = Callable[[BaseException | None], None]
#: An API object as the Kubernetes JSON API shapes it.
Obj = dict[str, Any]


class CallSkipped(Exception):
    """The call was not sent: it would change nothing, or a more relevant one is queued."""


class CallOverwritten(Exception):
    """The call was not sent: a newer (or more relevant) call for the same object replaced it."""


class DispatcherClosed(RuntimeError):
    """The dispatcher stopped before the call was sent."""


def unexpected(error: BaseException | None) -> bool:
    """Whether an outcome is a real failure (upstream ``IsUnexpectedError``)."""
    return error is not None and not isinstance(error, (CallSkipped, CallOverwritten))


class APICall(abc.ABC):
    """One call the dispatcher can queue, merge and execute."""

    call_type: str

    def __init__(self, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        self.uid: str = meta.get("uid") or f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        self.pod = pod

    @abc.abstractmethod
    async def execute(self, client: ClusterClient) -> None:
        """Send the call."""

    def merge(self, older: APICall) -> None:
        """Take over what ``older`` (same type, still queued) would have done and this call does not."""
        return None

    def is_noop(self) -> bool:
        return False

    def sync(self, pod: Obj) -> Obj:
        """The pod as it will be once this call is sent (and, before it is, the call's view of the
        pod refreshed from ``pod``)."""
        return pod


class PodStatusPatchCall(APICall):
    """Set conditions (merged by type) and/or the nominated node ("" clears it; None leaves it)."""

    call_type = POD_STATUS_PATCH

    def __init__(self, pod: Obj, conditions: builtins.list[Obj], nominated_node_name: str | None) -> None:
        super().__init__(pod)
        self.conditions = builtins.list(conditions)
        self.nominated_node_name = nominated_node_name
        self.executed = False

    async def execute(self, client: ClusterClient) -> None:
        self.executed = True
        if self.is_noop():
            return
        await client.patch_pod_status(self.pod, self.conditions, self.nominated_node_name)

    def merge(self, older: APICall) -> None:
        assert isinstance(older, PodStatusPatchCall)
        if self.nominated_node_name is None:
            self.nominated_node_name = older.nominated_node_name
        types = {c.get("type") for c in self.conditions}
        self.conditions += [c for c in older.conditions if c.get("type") not in types]

    def is_noop(self) -> bool:
        return self._noop_for(self.pod.get("status") or {})

    def sync(self, pod: Obj) -> Obj:
        if not self.executed:
            self.pod = pod
        current = pod.get("status") or {}
        if self._noop_for(current):
            return pod
        replaced = {c.get("type") for c in self.conditions}
        status = dict(current)
        status["conditions"] = [c for c in current.get("conditions") or [] if c.get("type") not in replaced] + \
            [dict(c) for c in self.conditions]
        if self.nominated_node_name is not None:
            status["nominatedNodeName"] = self.nominated_node_name or None
        return {**pod, "status": status}

    def _noop_for(self, status: Obj) -> bool:
        if self.nominated_node_name is not None and (status.get("nominatedNodeName") or "") != self.nominated_node_name:
            return False
        return all(_condition_current(status, c) for c in self.conditions)


class PodBindingCall(APICall):
    """POST ``pods/binding`` of the pod to ``node_name``."""

    call_type = POD_BINDING

    def __init__(self, pod: Obj, node_name: str) -> None:
        super().__init__(pod)
        self.node_name = node_name

    async def execute(self, client: ClusterClient) -> None:
        await client.bind(self.pod, self.node_name)


def _condition_current(status: Obj, condition: Obj) -> bool:
    """Whether ``status`` has ``condition`` already (status, reason and message: upstream
    ``conditionNeedsUpdate``; transition times do not count)."""
    for existing in status.get("conditions") or []:
        if existing.get("type") == condition.get("type"):
            return all(existing.get(k) == condition.get(k) for k in ("status", "reason", "message"))
    return False


class _Queued:
    __slots__ = ("call", "call_id", "on_finish")

    def __init__(self, call: APICall, on_finish: OnFinish | None, call_id: int) -> None:
        self.call = call
        self.on_finish = on_finish
        self.call_id = call_id

    def finish(self, error: BaseException | None) -> None:
        if self.on_finish is not None:
            on_finish, self.on_finish = self.on_finish, None
            on_finish(error)


class APIDispatcher:
    """See the module docstring. ``parallelism``: calls in flight at once (the configuration's
    ``parallelism``, as upstream sizes its goroutine limiter)."""

    def __init__(self, client: ClusterClient, parallelism: int = 16, relevances: Mapping[str, int] = RELEVANCES) -> None:
        self.client = client
        self.parallelism = max(1, parallelism)
        self.relevances = relevances
        self._ids = itertools.count()
        #: The one call per object UID that is queued or in flight (the newest, when one is in flight
        #: and another waits for it).
        self._calls: dict[str, _Queued] = {}
        #: UIDs whose call waits to be sent, first come first served.
        self._order: deque[str] = deque()
        self._in_flight: set[str] = set()
        self._ready: asyncio.Event | None = None
        #: Set whenever no call is queued or in flight (what ``flush`` waits for).
        self._drained: asyncio.Event | None = None
        self._workers: builtins.list[asyncio.Task[None]] = []
        self._closed = False
        #: Calls sent, and calls that merged into or were replaced by another (for metrics and tests).
        self.executed = 0
        self.coalesced = 0

    # --- adding -----------------------------------------------------------------------------------
    def add(self, call: APICall, on_finish: OnFinish | None = None) -> None:
        """Queue ``call``, reconciling it with a call queued for the same object (see the module
        docstring). ``on_finish`` hears the outcome; it is told at once when the call is skipped."""
        entry = _Queued(call, on_finish, next(self._ids))
        if self._closed:
            entry.finish(DispatcherClosed("api dispatcher is closed"))
            return
        old = self._calls.get(call.uid)
        if old is not None and not self._reconcile(old, entry):
            return
        self._enqueue(entry, old is not None)

    def _reconcile(self, old: _Queued, new: _Queued) -> bool:
        """Merge, overwrite or skip; False when the new call is dropped."""
        if self.relevances[new.call.call_type] < self.relevances[old.call.call_type]:
            self.coalesced += 1
            new.finish(CallSkipped("a more relevant call is already enqueued for this object"))
            return False
        in_flight = old.call.uid in self._in_flight
        if old.call.call_type != new.call.call_type:
            if not in_flight:
                self.coalesced += 1
                old.finish(CallOverwritten("a more relevant call was enqueued for this object"))
            return True
        new.call.merge(old.call)
        if not in_flight:
            self.coalesced += 1
            old.finish(CallOverwritten("a call of the same type was enqueued for this object"))
        return True

    def _enqueue(self, entry: _Queued, old_present: bool) -> None:
        uid = entry.call.uid
        if entry.call.is_noop() and uid not in self._in_flight:
            if old_present:
                self._remove_pending(uid)
            entry.finish(CallSkipped("call does not need to be executed because it has no effect"))
            return
        self._calls[uid] = entry
        if self._drained is not None:
            self._drained.clear()
        if old_present:
            return  # already in the order (queued), or requeued when the in-flight call finalizes
        self._order.append(uid)
        self._wake()

    def _remove_pending(self, uid: str) -> None:
        self._forget(uid)
        if uid not in self._in_flight:
            self._order.remove(uid)

    def _forget(self, uid: str) -> None:
        self._calls.pop(uid, None)
        if not self._calls and self._drained is not None:
            self._drained.set()

    def sync_object(self, pod: Obj) -> Obj:
        """The pod as it will be once its queued call is sent; the call's own view of the pod is
        refreshed, and a call left with nothing to do is dropped (upstream ``SyncObject``)."""
        uid = (pod.get("metadata") or {}).get("uid") or ""
        entry = self._calls.get(uid)
        if entry is None:
            return pod
        synced = entry.call.sync(pod)
        if entry.call.is_noop() and uid not in self._in_flight:
            self._remove_pending(uid)
            entry.finish(CallSkipped("call does not need to be executed because after sync it has no effect"))
        return synced

    # --- running ------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._workers:
            return
        loop = asyncio.get_running_loop()
        self._ready = asyncio.Event()
        if self._order:
            self._ready.set()
        self._drained = asyncio.Event()
        if not self._calls:
            self._drained.set()
        self._workers = [loop.create_task(self._work(), name=f"api-dispatcher-{i}") for i in range(self.parallelism)]

    def idle(self) -> bool:
        return not self._calls

    def pending(self) -> int:
        return len(self._order)

    async def flush(self) -> None:
        """Until every queued and in-flight call finished (the workers must be running)."""
        if self._drained is not None:
            await self._drained.wait()

    async def close(self, timeout: float | None = None) -> None:
        """Send what is queued (for at most ``timeout`` seconds), then stop; calls still queued are
        told ``DispatcherClosed``."""
        if self._workers:
            try:
                await asyncio.wait_for(self.flush(), timeout)
            except TimeoutError:
                log.warning("gave up sending %d API call(s) after %gs while stopping", len(self._calls), timeout)
        self._closed = True
        for entry in builtins.list(self._calls.values()):
            entry.finish(DispatcherClosed("api dispatcher is closed"))
        self._calls.clear()
        self._order.clear()
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []

    def _wake(self) -> None:
        if self._ready is not None:
            self._ready.set()

    async def _pop(self) -> _Queued:
        """The first queued call, now in flight."""
        assert self._ready is not None
        while not self._order:
            self._ready.clear()
            await self._ready.wait()
        uid = self._order.popleft()
        self._in_flight.add(uid)
        return self._calls[uid]

    def _finalize(self, entry: _Queued) -> None:
        """After a call was sent: forget it, or queue the call that arrived for the object meanwhile."""
        uid = entry.call.uid
        self._in_flight.discard(uid)
        current = self._calls.get(uid)
        if current is None or current.call_id == entry.call_id:
            self._forget(uid)
            return
        self._order.append(uid)
        self._wake()

    async def _work(self) -> None:
        while True:
            entry = await self._pop()
            error: BaseException | None = None
            try:
                await entry.call.execute(self.client)
                self.executed += 1
            except asyncio.CancelledError:
                self._finalize(entry)
                raise
            except Exception as e:
                error = e
                if entry.on_finish is None:
                    log.warning("%s of pod %s failed: %s", entry.call.call_type, _pod_key(entry.call.pod), e)
            self._finalize(entry)
            entry.finish(error)


def _pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"


class DispatchingClient(ClusterClient):
    """The client plugins see with asynchronous API calls on: bindings and pod status patches go
    through the dispatcher (a binding waits for its outcome, a status patch only queues, as
    upstream's ``APICacher`` does); every other verb goes straight to ``client``."""

    def __init__(self, client: ClusterClient, dispatcher: APIDispatcher) -> None:
        self.client = client
        self.dispatcher = dispatcher

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)  # verbs beyond the interface (patch, write_fence, ...)

    @property
    def in_process(self) -> bool:
        return self.client.in_process

    async def bind(self, pod: Obj, node_name: str) -> None:
        done: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

        def finished(error: BaseException | None) -> None:
            if not done.done():
                done.set_result(error)

        self.dispatcher.add(PodBindingCall(pod, node_name), finished)
        error = await done
        if unexpected(error):
            assert error is not None
            raise error

    async def patch_pod_status(self, pod: Obj, conditions: builtins.list[Obj], nominated_node_name: str | None) -> None:
        self.dispatcher.add(PodStatusPatchCall(pod, conditions, nominated_node_name))

    async def list(self, kind: Kind, *, field_selector: str = "") -> tuple[builtins.list[Obj], str]:
        return await self.client.list(kind, field_selector=field_selector)

    def watch(self, kind: Kind, resource_version: str, *, field_selector: str = "") -> AsyncIterator[builtins.list[WatchEvent]]:
        return self.client.watch(kind, resource_version, field_selector=field_selector)

    async def get(self, kind: Kind, namespace: str | None, name: str) -> Obj | None:
        return await self.client.get(kind, namespace, name)

    async def create(self, kind: Kind, obj: Obj) -> Obj:
        return await self.client.create(kind, obj)

    async def update(self, kind: Kind, obj: Obj) -> Obj:
        return await self.client.update(kind, obj)

    async def update_status(self, kind: Kind, obj: Obj) -> Obj:
        return await self.client.update_status(kind, obj)

    async def delete(self, kind: Kind, namespace: str | None, name: str, *, uid: str | None = None,
                     grace_period: int | None = None) -> None:
        await self.client.delete(kind, namespace, name, uid=uid, grace_period=grace_period)

    async def server_identity(self) -> tuple[str, str]:
        return await self.client.server_identity()

    async def close(self) -> None:
        await self.client.close()
