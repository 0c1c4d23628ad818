"""Informers: list, then watch from the list's resourceVersion, keep a local cache, and tell
handlers about every change (client-go's SharedInformer, reflector and DeltaFIFO in one).

On ``410 Gone`` the informer relists and reports the difference (adds, updates, deletes) so
handlers never miss a change; other errors back off exponentially (up to 30s) and retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from kubesched.api.kinds import Kind, kind_named, object_key
from kubesched.cluster.client import ClusterClient
from kubesched.cluster.errors import Gone
from kubesched.cluster.store import ADDED, BOOKMARK, DELETED, ERROR, MODIFIED, WatchEvent

log = logging.getLogger(__name__)

INITIAL_BACKOFF = 0.8
MAX_BACKOFF = 30.0


@dataclass
class Handler:
    on_add: Callable[[dict, bool], None] | None = None
    on_update: Callable[[dict, dict], None] | None = None
    on_delete: Callable[[dict], None] | None = None


class Informer:
    def __init__(self, client: ClusterClient, kind: Kind) -> None:
        self.client = client
        self.kind = kind
        self.store: dict[str, dict] = {}
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0
        self._task: asyncio.Task | None = None

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)
        if self.synced.is_set() and handler.on_add is not None:
            for obj in list(self.store.values()):
                handler.on_add(obj, True)

    def start(self) -> asyncio.Task:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"informer-{self.kind.resource}")
        return self._task

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def run(self) -> None:
        backoff = INITIAL_BACKOFF
        while True:
            try:
                await self._list()
                backoff = INITIAL_BACKOFF
                await self._watch()
            except asyncio.CancelledError:
                raise
            except Gone:
                self.relists += 1
                log.info("watch of %s expired, relisting", self.kind.resource)
                continue
            except Exception as e:
                log.warning("informer for %s failed: %s; retrying in %.1fs", self.kind.resource, e, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)

    async def _list(self) -> None:
        items, rv = await self.client.list(self.kind)
        fresh = {object_key(o): o for o in items}
        first = not self.synced.is_set()
        old = self.store
        self.store = fresh
        self.resource_version = rv
        for key, obj in old.items():
            if key not in fresh:
                self._emit_delete(obj)
        for key, obj in fresh.items():
            previous = old.get(key)
            if previous is None:
                self._emit_add(obj, first)
            elif previous["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                self._emit_update(previous, obj)
        self.synced.set()

    async def _watch(self) -> None:
        async for batch in self.client.watch(self.kind, self.resource_version):
            for event in batch:
                self._apply(event)

    def _apply(self, event: WatchEvent) -> None:
        obj = event.object
        if event.type == BOOKMARK:
            self.resource_version = obj["metadata"].get("resourceVersion", self.resource_version)
            return
        if event.type == ERROR:
            if obj.get("code") == 410:
                raise Gone(obj.get("message", "resource version too old"))
            raise RuntimeError(obj.get("message", "watch error"))
        key = object_key(obj)
        self.resource_version = obj["metadata"].get("resourceVersion", self.resource_version)
        if event.type == DELETED:
            previous = self.store.pop(key, None)
            self._emit_delete(previous or obj)
            return
        previous = self.store.get(key)
        self.store[key] = obj
        if previous is None:
            self._emit_add(obj, False)
        elif event.type in (MODIFIED, ADDED):
            self._emit_update(previous, obj)

    def _emit_add(self, obj: dict, initial: bool) -> None:
        for h in self.handlers:
            if h.on_add is not None:
                _guard(h.on_add, obj, initial)

    def _emit_update(self, old: dict, new: dict) -> None:
        for h in self.handlers:
            if h.on_update is not None:
                _guard(h.on_update, old, new)

    def _emit_delete(self, obj: dict) -> None:
        for h in self.handlers:
            if h.on_delete is not None:
                _guard(h.on_delete, obj)


def _guard(fn: Callable, *args: object) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("event handler %s failed", getattr(fn, "__qualname__", fn))


class InformerFactory:
    """One informer per kind, shared by every consumer (SharedInformerFactory)."""

    def __init__(self, client: ClusterClient) -> None:
        self.client = client
        self.informers: dict[str, Informer] = {}

    def informer(self, kind_name: str) -> Informer:
        inf = self.informers.get(kind_name)
        if inf is None:
            kind = kind_named(kind_name)
            if kind is None:
                raise KeyError(f"unknown kind {kind_name}")
            inf = self.informers[kind_name] = Informer(self.client, kind)
        return inf

    def store(self, kind_name: str) -> dict[str, dict]:
        """The informer cache for ``kind_name`` (starting the informer if it was not watched yet)."""
        inf = self.informers.get(kind_name)
        if inf is None:
            inf = self.informer(kind_name)
            with contextlib.suppress(RuntimeError):
                inf.start()
        return inf.store

    def start(self) -> None:
        for inf in self.informers.values():
            inf.start()

    async def wait_for_sync(self) -> None:
        await asyncio.gather(*(inf.synced.wait() for inf in self.informers.values()))

    def has_synced(self) -> bool:
        return all(inf.synced.is_set() for inf in self.informers.values())

    async def stop(self) -> None:
        await asyncio.gather(*(inf.stop() for inf in self.informers.values()))
