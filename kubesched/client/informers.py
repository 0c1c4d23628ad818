"""Informers: list, then watch from the list's resourceVersion, keep a local cache, and tell
handlers about every change (client-go's SharedInformer, reflector and DeltaFIFO in one).

The reflector's rules, which keep the cache right across API-server restarts and network trouble:

* the watch asks for bookmarks, so the informer's resourceVersion keeps moving even when nothing of
  its kind changes, and a re-watch starts from the newest version seen;
* a stream the server ends (its timeout) is watched again from that version, once the server
  proved it is the same one (see below);
* a broken stream or an unreachable server (``ConnectionError``/``OSError``, ``TimeoutError``, 429)
  backs off exponentially (0.8s doubling to 30s, with jitter) and watches again from the same
  version: nothing is relisted when the server comes back with its history intact;
* ``410 Gone`` (history compacted, or a restarted server that lost it) relists at once, as does a
  504 whose cause is ``ResourceVersionTooLarge`` (a restarted in-memory server counting from the
  start again: it answers so only after waiting for the version, so relisting cannot spin); any
  other error relists after the backoff;
* before watching again after a stream ended or broke, the informer asks the server who it is
  (``ClusterClient.server_identity``): another identity (a server restarted without its data is
  another cluster) or a history behind what was seen makes every informer of the factory relist,
  and ``consistent`` is cleared until all have.

A relist updates the cache *in place* and reports the difference (adds, updates, deletes, and
delete + add for an object recreated under the same name), so handlers never miss a change and
holders of the cache dict keep seeing the live one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

from kubesched.api.apierrors import APIError, Gone, Timeout, TooManyRequests
from kubesched.api.kinds import CustomKind, Kind, custom_resource_kind, kind_named, object_key
from kubesched.api.watch import ADDED, BOOKMARK, DELETED, MODIFIED, WatchEvent
from kubesched.client.interface import ClusterClient

log = logging.getLogger(__name__)

INITIAL_BACKOFF = 0.8
MAX_BACKOFF = 30.0
#: Errors after which the informer watches again from its resourceVersion instead of relisting.
RETRIABLE_WATCH_ERRORS: tuple[type[BaseException], ...] = (OSError, TimeoutError, TooManyRequests)


class ServerUnreachable(ConnectionError):
    """The server did not answer the identity probe (down, restarting, failing)."""


@dataclass
class Handler:
    on_add: Callable[[dict, bool], None] | None = None
    on_update: Callable[[dict, dict], None] | None = None
    on_delete: Callable[[dict], None] | None = None


class Backoff:
    """Exponential backoff with jitter (client-go's reflector: 800ms doubling to 30s, jitter 1.0)."""

    def __init__(self, initial: float | None = None, maximum: float | None = None) -> None:
        self.initial = INITIAL_BACKOFF if initial is None else initial
        self.maximum = MAX_BACKOFF if maximum is None else maximum
        self.current = self.initial

    def next(self) -> float:
        delay = self.current * (1.0 + random.random())
        self.current = min(self.current * 2, self.maximum)
        return min(delay, self.maximum)

    def reset(self) -> None:
        self.current = self.initial


#: What an informer does to each object before caching it (client-go's ``TransformFunc``).
Transform = Callable[[dict], dict]


def drop_managed_fields(obj: dict) -> dict:
    """``obj`` without ``metadata.managedFields``, as kube-scheduler's pod informer caches pods
    ("to improve memory usage"); the object itself when it has none. A copy otherwise: the
    object may be one the embedded store and other readers hold."""
    meta = obj.get("metadata") or {}
    if "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


class Informer:
    def __init__(self, client: ClusterClient, kind: Kind, *,
                 on_handler_error: Callable[[str, BaseException], None] | None = None,
                 on_relist: Callable[[str, str], None] | None = None, transform: Transform | None = None,
                 field_selector: str = "") -> None:
        self.client = client
        self.kind = kind
        self.transform = transform
        #: What the API server filters the lists and watches by (an object leaving it is deleted).
        self.field_selector = field_selector
        #: Told (kind, error) when a handler raises for one object, and (kind, reason) before a relist.
        self.on_handler_error = on_handler_error
        self.on_relist = on_relist
        #: Told (kind, reason) when this informer found the server changed, before it relists.
        self.on_server_changed: Callable[[str, str], None] | None = None
        #: Set after every list (cleared by ``restart``): the cache reflects the current server.
        self.listed = asyncio.Event()
        #: The server's identity and resourceVersion at the last list (see ``_server_changed``).
        self.server_identity = ""
        self._relist_requested = False
        self.store: dict[str, dict] = {}
        self.handlers: list[Handler] = []
        self.synced = asyncio.Event()
        self.resource_version = ""
        #: Counters for ``/debug/cache`` and tests: relists after the first list, watches (re)started
        #: after an interruption, and the last error seen.
        self.relists = 0
        self.rewatches = 0
        self.last_error = ""
        self.handler_errors = 0
        self._lists = 0
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
        """List and watch until cancelled (the reflector's ListAndWatch loop)."""
        backoff = Backoff()
        while True:
            try:
                await self._list()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self._failed("list", e)
                await asyncio.sleep(backoff.next())
                continue
            backoff.reset()
            await self._watch_until_relist(backoff)

    async def _watch_until_relist(self, backoff: Backoff) -> None:
        """Watch, re-watching from the newest resourceVersion after normal ends and retriable
        errors; return when the informer must relist."""
        while True:
            try:
                delivered = await self._watch()
            except asyncio.CancelledError:
                raise
            except Gone as e:
                log.info("watch of %s at resourceVersion %s expired (%s), relisting", self.kind.resource,
                         self.resource_version, e)
                self._relisting("expired")
                return
            except Timeout as e:
                if not e.is_resource_version_too_large():
                    self._failed("watch", e)
                    await asyncio.sleep(backoff.next())
                    return
                log.info("watch of %s at resourceVersion %s is ahead of the server (%s), relisting", self.kind.resource,
                         self.resource_version, e)
                return
            except RETRIABLE_WATCH_ERRORS as e:
                self._failed("watch", e)
                self.rewatches += 1
                if self._server_changed_after(await self._wait_for_server(backoff)):
                    return
                continue
            except Exception as e:
                self._failed("watch", e)
                self._relisting("watch-error")
                await asyncio.sleep(backoff.next())
                return
            if self._relist_requested:
                self._relisting("requested")
                return
            if delivered:
                backoff.reset()
            else:  # a stream that ended without a single event (not even a bookmark): don't spin
                await asyncio.sleep(backoff.next())
            # A server that ends its streams may be shutting down, to come back as another cluster.
            if self._server_changed_after(await self._wait_for_server(backoff, back_off_first=False)):
                return

    def restart(self, reason: str = "server-changed") -> None:
        """Relist now, whatever the informer is doing (another informer found the server changed, or
        the cache comparer found this one stale): the task restarts, and its loop begins with a list
        that replaces the cache in place."""
        if self._task is None:
            return
        self.listed.clear()
        if reason == "server-changed":
            self.server_identity = ""  # known to be another server: the relist records its identity
        self._task.cancel()
        self._task = None
        self._relisting(reason)
        self.start()

    def request_relist(self) -> None:
        """Relist when the current watch stream next ends or breaks (the cache comparer's repair)."""
        self._relist_requested = True

    def _relisting(self, reason: str) -> None:
        if self.on_relist is not None:
            self.on_relist(self.kind.kind, reason)

    def _server_changed_after(self, reason: str) -> bool:
        """Report a changed server (``reason`` not empty): this informer must relist, and so must
        every other one (``on_server_changed``)."""
        if not reason:
            return False
        log.warning("%s: relisting %s instead of watching from resourceVersion %s", reason, self.kind.resource,
                    self.resource_version)
        self._relisting("server-changed")
        self.server_identity = ""  # reported once: the relist records the new one
        if self.on_server_changed is not None:
            self.on_server_changed(self.kind.kind, reason)
        return True

    async def _wait_for_server(self, backoff: Backoff, back_off_first: bool = True) -> str:
        """Before watching again: (back off and) retry until the server answers the identity probe
        (never watch on from a resourceVersion before knowing which server will answer), then say
        why watching on would be wrong (see ``_server_changed``), or "" to watch on."""
        while True:
            if back_off_first:
                await asyncio.sleep(backoff.next())
            back_off_first = True
            try:
                return await self._server_changed()
            except ServerUnreachable as e:
                self._failed("server identity probe", e)

    async def _server_changed(self) -> str:
        """Why watching on from ``resource_version`` would be wrong: the server is another one (its
        identity changed: an API server restarted without its data), or its history went back
        behind what this informer saw. Empty when it is the same server, or when the server does
        not say. Raises when it cannot be reached (see ``_probe``)."""
        probe = await self._probe()
        if probe is None:
            return ""
        identity, current = probe
        if identity and self.server_identity and identity != self.server_identity:
            return f"the API server's identity changed ({self.server_identity} -> {identity})"
        if _version_before(current, self.resource_version):
            return f"the API server's resourceVersion went back ({self.resource_version} -> {current})"
        return ""

    async def _probe(self) -> tuple[str, str] | None:
        """The server's identity and current resourceVersion; None when the client or the server
        does not tell (no support, refused). An unreachable or failing server (5xx, 429,
        connection errors) raises ``ServerUnreachable``: the caller retries before trusting
        anything it had."""
        try:
            return await self.client.server_identity()
        except RETRIABLE_WATCH_ERRORS as e:
            raise ServerUnreachable(str(e) or type(e).__name__) from e
        except APIError as e:
            if e.code >= 500:
                raise ServerUnreachable(str(e)) from e
            log.debug("server identity probe for %s refused: %s", self.kind.resource, e)
            return None

    def _failed(self, what: str, error: BaseException) -> None:
        self.last_error = f"{what}: {error or type(error).__name__}"
        log.warning("%s of %s failed: %s", what, self.kind.resource, error or type(error).__name__)

    async def _list(self) -> None:
        probe = await self._probe()
        identity = probe[0] if probe is not None else ""
        if identity and self.server_identity and identity != self.server_identity:
            # Found while relisting after an error: the other informers may still hold the old cluster.
            self._server_changed_after(f"the API server's identity changed ({self.server_identity} -> {identity})")
        items, rv = await self.client.list(self.kind, field_selector=self.field_selector)
        first = not self.synced.is_set()
        if self._lists:
            self.relists += 1
            if _version_before(rv, self.resource_version):
                log.warning("the list of %s is at resourceVersion %s, behind the %s seen before: the API server's "
                            "history went back, its state replaces the cache", self.kind.resource, rv, self.resource_version)
        self._lists += 1
        self._relist_requested = False
        self.server_identity = identity
        self.listed.set()
        self.resource_version = rv
        transform = self.transform
        self._replace({object_key(o): o if transform is None else transform(o) for o in items}, first)
        self.synced.set()

    def _replace(self, fresh: dict[str, dict], initial: bool) -> None:
        """Make the cache equal ``fresh`` in place, telling handlers what changed."""
        store = self.store
        for key in [k for k in store if k not in fresh]:
            self._emit_delete(store.pop(key))
        for key, obj in fresh.items():
            previous = store.get(key)
            store[key] = obj
            if previous is None:
                self._emit_add(obj, initial)
            elif _uid(previous) != _uid(obj):
                self._emit_delete(previous)
                self._emit_add(obj, False)
            elif _rv(previous) != _rv(obj):
                self._emit_update(previous, obj)

    async def _watch(self) -> int:
        """One watch call until its stream ends; returns how many events it delivered."""
        delivered = 0
        async for batch in self.client.watch(self.kind, self.resource_version, field_selector=self.field_selector):
            for event in batch:
                self._apply(event)
            delivered += len(batch)
        return delivered

    def _apply(self, event: WatchEvent) -> None:
        obj = event.object
        if event.type == BOOKMARK:
            self.resource_version = obj["metadata"].get("resourceVersion", self.resource_version)
            return
        if self.transform is not None:
            obj = self.transform(obj)
        key = object_key(obj)
        self.resource_version = obj["metadata"].get("resourceVersion", self.resource_version)
        if event.type == DELETED:
            self.store.pop(key, None)
            self._emit_delete(obj)  # the final state the event carries, as client-go hands it over
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
                self._guard(h.on_add, obj, initial)

    def _emit_update(self, old: dict, new: dict) -> None:
        for h in self.handlers:
            if h.on_update is not None:
                self._guard(h.on_update, old, new)

    def _emit_delete(self, obj: dict) -> None:
        for h in self.handlers:
            if h.on_delete is not None:
                self._guard(h.on_delete, obj)

    def _guard(self, fn: Callable, *args: object) -> None:
        """A handler that raises for one object is logged and counted; the others still run."""
        try:
            fn(*args)
        except Exception as e:
            obj = args[-1] if isinstance(args[-1], dict) else args[0]
            log.exception("event handler %s failed for %s %s", getattr(fn, "__qualname__", fn), self.kind.kind,
                          object_key(obj) if isinstance(obj, dict) else obj)
            self.handler_errors += 1
            if self.on_handler_error is not None:
                self.on_handler_error(self.kind.kind, e)

    def stats(self) -> dict:
        """What ``/debug/cache`` shows about this informer."""
        return {"resourceVersion": self.resource_version, "objects": len(self.store), "synced": self.synced.is_set(),
                "relists": self.relists, "rewatches": self.rewatches, "handlerErrors": self.handler_errors,
                "lastError": self.last_error}


def _uid(obj: dict) -> str | None:
    return (obj.get("metadata") or {}).get("uid")


def _rv(obj: dict) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion")


def _version_before(version: str, seen: str) -> bool:
    """Whether ``version`` is older than ``seen``. resourceVersions are opaque to clients, but every
    Kubernetes-compatible server issues increasing integers; anything else is never compared."""
    if not (version.isdigit() and seen.isdigit()):
        return False
    return int(version) < int(seen)


class InformerFactory:
    """One informer per kind, shared by every consumer (SharedInformerFactory)."""

    def __init__(self, client: ClusterClient, *, on_handler_error: Callable[[str, BaseException], None] | None = None,
                 on_relist: Callable[[str, str], None] | None = None,
                 on_server_changed: Callable[[str], None] | None = None,
                 transforms: dict[str, Transform] | None = None, field_selectors: dict[str, str] | None = None) -> None:
        self.client = client
        self.on_handler_error = on_handler_error
        self.on_relist = on_relist
        #: Per kind name, what its informer does to each object before caching it.
        self.transforms = dict(transforms or {})
        #: Per kind name, the field selector its informer lists and watches with.
        self.field_selectors = dict(field_selectors or {})
        #: Told why, once per change, when an informer finds the server is another one.
        self.on_server_changed = on_server_changed
        self.informers: dict[str, Informer] = {}
        #: Cleared while informers relist after one of them found the server changed: what they hold
        #: may mix two servers' objects until every one has listed again (the scheduler waits).
        self.consistent = asyncio.Event()
        self.consistent.set()
        self._resync: asyncio.Task | None = None

    def informer(self, kind_name: str) -> Informer:
        inf = self.informers.get(kind_name)
        if inf is None:
            kind = kind_named(kind_name) or parse_custom_resource(kind_name)
            if kind is None:
                raise KeyError(f"unknown kind {kind_name}")
            inf = self.informers[kind_name] = Informer(self.client, kind, on_handler_error=self.on_handler_error,
                                                       on_relist=self.on_relist, transform=self.transforms.get(kind_name),
                                                       field_selector=self.field_selectors.get(kind_name, ""))
            inf.on_server_changed = self._server_changed
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

    def _server_changed(self, kind_name: str, reason: str) -> None:
        """One informer found the server changed: every other one relists at once, and the
        informers are inconsistent until all have."""
        log.warning("%s (seen by the %s informer): every informer relists", reason, kind_name)
        if self.consistent.is_set() and self.on_server_changed is not None:
            self.on_server_changed(reason)
        self.consistent.clear()
        for name, inf in self.informers.items():
            if name == kind_name:
                inf.listed.clear()
            else:
                inf.restart()
        if self._resync is None or self._resync.done():
            self._resync = asyncio.get_running_loop().create_task(self._await_relists(), name="informer-resync")

    async def _await_relists(self) -> None:
        await asyncio.gather(*(inf.listed.wait() for inf in self.informers.values()))
        log.info("every informer relisted from the current server")
        self.consistent.set()

    async def wait_for_sync(self) -> None:
        await asyncio.gather(*(inf.synced.wait() for inf in self.informers.values()))

    def has_synced(self) -> bool:
        return all(inf.synced.is_set() for inf in self.informers.values())

    def stats(self) -> dict[str, dict]:
        return {name: inf.stats() for name, inf in sorted(self.informers.items())}

    async def stop(self) -> None:
        if self._resync is not None:
            self._resync.cancel()
        await asyncio.gather(*(inf.stop() for inf in self.informers.values()))


def parse_custom_resource(name: str) -> CustomKind | None:
    """The custom resource named by upstream's resource argument ``<plural>.<version>.<group>``
    (``podgroups.v1alpha1.scheduling.x-k8s.io``), or None for a name of another form."""
    plural, _, rest = name.partition(".")
    version, _, group = rest.partition(".")
    if not (plural and version and "." in group and version[:1] == "v" and plural.islower()):
        return None
    return custom_resource_kind(group, version, plural)


class CustomObjectLister:
    """Read-only view of one custom resource's informer cache (objects as plain dicts, shared:
    copy before changing one). ``kind`` is what the client's verbs take to write them."""

    def __init__(self, kind: CustomKind, cache: Callable[[str], dict[str, dict]] | None) -> None:
        self.kind = kind
        self._cache = cache
        if cache is not None:
            cache(kind.kind)  # the informer exists from now on: the scheduler starts and syncs it with the others

    def _objects(self) -> dict[str, dict]:
        return self._cache(self.kind.kind) if self._cache is not None else {}

    def get(self, namespace: str | None, name: str) -> dict | None:
        """The object ``namespace/name`` (``name`` alone for a cluster-scoped resource), or None."""
        return self._objects().get(f"{namespace}/{name}" if namespace else name)

    def list(self, namespace: str | None = None) -> list[dict]:
        """Every object, or those of ``namespace``."""
        objects = self._objects().values()
        if namespace is None:
            return list(objects)
        return [o for o in objects if (o.get("metadata") or {}).get("namespace") == namespace]
