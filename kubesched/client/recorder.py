"""The event recorder: ``events.k8s.io/v1`` events with client-go's ``tools/events`` aggregation.

An event isomorphic to one seen before (same regarding object, related object, action, reason
and reporting controller) is not written again: the second occurrence turns it into a series
(count 2, written at once), later ones only bump the count in memory until the 30-minute refresh
writes it; a series idle for 6 minutes is finished, after which a new event starts. Writing
never blocks scheduling: events go through a queue drained by one task, up to ``WRITE_CONCURRENCY``
new events at a time so the backlog stays short under load; a write the server could not take
(unreachable, 5xx, 429) is retried with backoff, up to 12 times as client-go does. ``stop(timeout)`` writes what is
still queued within ``timeout`` seconds (kube-scheduler's broadcaster shutdown), then gives up on
the rest with a warning counting them; events still queued when the process is killed are lost.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
from collections import deque
from collections.abc import Callable
from typing import Any

from kubesched.api.events import object_reference
from kubesched.client.interface import EVENTS_V1
from kubesched.utils.clock import Clock, rfc3339_micro

log = logging.getLogger(__name__)

NOTE_LENGTH_LIMIT = 1024
REFRESH_INTERVAL = 30 * 60.0
FINISH_INTERVAL = 6 * 60.0
#: New events written at the same time by the drain.
WRITE_CONCURRENCY = 16
#: Attempts per event write (client-go's ``maxTriesPerEvent``), and the backoff between them.
MAX_TRIES = 12
RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 10.0


def _retriable(error: Exception) -> bool:
    """A failure worth another try: the server unreachable, overloaded or failing (5xx, 429)."""
    code = getattr(error, "code", None)
    return isinstance(error, (OSError, TimeoutError)) or (isinstance(code, int) and (code >= 500 or code == 429))


def truncate_note(message: str) -> str:
    if len(message) <= NOTE_LENGTH_LIMIT:
        return message
    return message[: NOTE_LENGTH_LIMIT - 4] + " ..."


class EventSink:
    """Writes events; the client implementation decides the wire shape."""

    def __init__(self, client: Any) -> None:
        self.client = client

    @property
    def concurrent(self) -> bool:
        """Whether writes gain from running concurrently: not to an in-process client."""
        return not getattr(self.client, "in_process", False)

    async def create(self, event: dict) -> None:
        await self.client.create_event(event)

    async def update_series(self, event: dict) -> None:
        meta = event["metadata"]
        patch = getattr(self.client, "patch", None)
        if patch is not None:  # an HTTP client: one merge patch of the series, as client-go's sink sends
            from kubesched.api.apierrors import NotFound

            try:
                await patch(EVENTS_V1, meta.get("namespace"), meta["name"], {"series": dict(event["series"])})
            except NotFound:
                await self.client.create(EVENTS_V1, event)  # the event was removed meanwhile: write it anew
            return
        current = await self.client.get(EVENTS_V1, meta.get("namespace"), meta["name"])
        if current is None:
            await self.client.create(EVENTS_V1, event)
            return
        updated = dict(current)
        updated["series"] = dict(event["series"])
        await self.client.update(EVENTS_V1, updated)


class Broadcaster:
    """Shared by every profile's recorder (client-go's EventBroadcaster)."""

    def __init__(self, sink: EventSink, clock: Clock) -> None:
        self.sink = sink
        self.clock = clock
        self._cache: dict[tuple, dict] = {}
        self._pending: deque[tuple[str, dict]] = deque()
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._timers: list[asyncio.Task] = []
        self.written = 0
        #: The last nanosecond stamp an event name took: names stay unique when several events
        #: share an instant, as they do on a simulation's virtual clock.
        self._last_stamp = 0

    def name_stamp(self, wall: float) -> int:
        """``wall`` in nanoseconds, moved past the previous stamp when it would repeat it."""
        self._last_stamp = max(int(wall * 1e9), self._last_stamp + 1)
        return self._last_stamp

    def recorder(self, controller: str) -> Recorder:
        return Recorder(self, controller, f"{controller}-{socket.gethostname()}")

    def record(self, event: dict) -> None:
        key = _key(event)
        existing = self._cache.get(key)
        if existing is None:
            self._cache[key] = event
            self._enqueue("create", event)
            return
        now = rfc3339_micro(self.clock.wall())
        series = existing.get("series")
        if series is not None:
            series["count"] += 1
            series["lastObservedTime"] = now
            return
        existing["series"] = {"count": 2, "lastObservedTime": now}
        self._enqueue("series", dict(existing))

    def _enqueue(self, verb: str, event: dict) -> None:
        self._pending.append((verb, event))
        if self._wakeup is not None:
            self._wakeup.set()

    def start(self) -> None:
        if self._task is not None:
            return
        loop = asyncio.get_running_loop()
        self._wakeup = asyncio.Event()
        self._task = loop.create_task(self._drain(), name="event-broadcaster")
        self._timers = [loop.create_task(self._every(REFRESH_INTERVAL, self._refresh)),
                        loop.create_task(self._every(FINISH_INTERVAL, self._finish))]

    async def stop(self, timeout: float | None = None) -> None:
        """Flush what is queued (for at most ``timeout`` seconds), then stop the drain and timers."""
        try:
            await asyncio.wait_for(self.flush(), timeout)
        except TimeoutError:
            log.warning("gave up writing %d event(s) after %gs while stopping", len(self._pending), timeout)
        for task in [self._task, *self._timers]:
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in [self._task, *self._timers] if t is not None), return_exceptions=True)
        self._task = None
        self._timers = []

    async def flush(self) -> None:
        """Write everything queued: consecutive creations together, series updates one by one
        (a series must follow the creation of its event). Together means concurrently, except
        to an in-process client, whose writes never wait: there a task per write would only add
        its own cost (most of an embedded write's), so they are written in turn."""
        concurrent = self.sink.concurrent
        while self._pending:
            batch = [self._pending.popleft()]
            while self._pending and len(batch) < WRITE_CONCURRENCY and batch[0][0] == "create" \
                    and self._pending[0][0] == "create":
                batch.append(self._pending.popleft())
            if concurrent:
                await asyncio.gather(*(self._write(verb, event) for verb, event in batch))
                continue
            for verb, event in batch:
                await self._write(verb, event)

    def idle(self) -> bool:
        return not self._pending

    async def _drain(self) -> None:
        assert self._wakeup is not None
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            await self.flush()

    async def _write(self, verb: str, event: dict) -> None:
        """One event write, retried like client-go's sink (up to ``MAX_TRIES``) while the server is
        unreachable or failing; refused events (4xx) are dropped with a warning."""
        delay = RETRY_DELAY
        for attempt in range(1, MAX_TRIES + 1):
            try:
                if verb == "create":
                    await self.sink.create(event)
                else:
                    await self.sink.update_series(event)
                self.written += 1
                return
            except Exception as e:
                if attempt == MAX_TRIES or not _retriable(e):
                    log.warning("could not record event %s: %s", event["metadata"].get("name"), e)
                    return
            await asyncio.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, MAX_RETRY_DELAY)

    async def _every(self, seconds: float, action: Callable[[], None]) -> None:
        while True:
            await asyncio.sleep(seconds)
            action()

    def _refresh(self) -> None:
        for event in self._cache.values():
            if event.get("series"):
                self._enqueue("series", dict(event))

    def _finish(self) -> None:
        now = self.clock.wall()
        horizon = now - FINISH_INTERVAL
        stale = [k for k, e in self._cache.items() if _last_seen(e) < horizon]
        for key in stale:
            event = self._cache.pop(key)
            if event.get("series"):
                self._enqueue("series", dict(event))


class Recorder:
    """What plugins and the scheduler call (``fwk.EventRecorder``)."""

    def __init__(self, broadcaster: Broadcaster, controller: str, instance: str) -> None:
        self.broadcaster = broadcaster
        self.controller = controller
        self.instance = instance

    def eventf(self, regarding: dict, related: dict | None, event_type: str, reason: str, action: str, note: str) -> None:
        clock = self.broadcaster.clock
        wall = clock.wall()
        ref = object_reference(regarding)
        namespace = ref.get("namespace") or "default"
        event = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{ref['name']}.{self.broadcaster.name_stamp(wall):x}",
                         "namespace": namespace},
            "eventTime": rfc3339_micro(wall),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": action,
            "reason": reason,
            "regarding": ref,
            "note": truncate_note(note),
            "type": event_type,
        }
        if related is not None:
            event["related"] = object_reference(related)
        self.broadcaster.record(event)


#: The fields of a ``v1.ObjectReference``: an event's key holds them flat, in this order.
_REFERENCE_FIELDS = ("kind", "apiVersion", "name", "namespace", "uid", "resourceVersion", "fieldPath")


def _key(event: dict) -> tuple:
    """client-go's ``eventKey`` (action, reason, reporting controller, regarding and related
    references) as one flat tuple: the cache holds a key per event it saw in the last minutes."""
    regarding = event.get("regarding") or {}
    related = event.get("related") or {}
    return (event.get("action"), event.get("reason"), event.get("reportingController"),
            *map(regarding.get, _REFERENCE_FIELDS), *map(related.get, _REFERENCE_FIELDS))


def _last_seen(event: dict) -> float:
    from kubesched.api.timeutil import parse_time

    series = event.get("series")
    return parse_time((series or {}).get("lastObservedTime") or event.get("eventTime"))
