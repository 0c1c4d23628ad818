"""Clocks. Every timer in kubesched (backoff, flushes, Permit timeouts, assumed-pod expiry, grace
periods) reads one injected clock, so a simulation can run on virtual time.

``VirtualTimeLoop`` is an asyncio event loop whose ``time()`` is virtual: when no callback is
ready it jumps straight to the next timer instead of sleeping. A simulation that waits out
five-minute flushes therefore finishes in milliseconds, while code keeps using plain
``asyncio.sleep``, ``loop.call_later`` and ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import selectors
import time
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

#: Wall-clock start of every virtual run, so simulated timestamps are reproducible.
VIRTUAL_EPOCH = dt.datetime(2025, 1, 1, tzinfo=dt.UTC).timestamp()


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""
        ...

    def wall(self) -> float:
        """Seconds since the Unix epoch, for timestamps written into objects."""
        ...


_last_second: list = [None, ""]


def _second(whole: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` of a whole second, remembered: timestamps come in runs of the same second."""
    if _last_second[0] != whole:
        _last_second[0] = whole
        _last_second[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    return _last_second[1]


def rfc3339(epoch_seconds: float) -> str:
    return _second(int(epoch_seconds // 1)) + "Z"


def rfc3339_micro(epoch_seconds: float) -> str:
    whole = int(epoch_seconds // 1)
    micros = min(round((epoch_seconds - whole) * 1_000_000), 999_999)
    return f"{_second(whole)}.{micros:06d}Z"


class RealClock:
    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()


class LoopClock:
    """Time as the running event loop sees it: real for a normal loop, virtual for VirtualTimeLoop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, wall_start: float | None = None) -> None:
        self.loop = loop
        self._mono_start = loop.time()
        self._wall_start = wall_start if wall_start is not None else time.time()

    def now(self) -> float:
        return self.loop.time()

    def wall(self) -> float:
        return self._wall_start + (self.loop.time() - self._mono_start)


class ManualClock:
    """A clock tests move by hand."""

    def __init__(self, start: float = 1000.0, wall_start: float = VIRTUAL_EPOCH) -> None:
        self._now = start
        self._start = start
        self._wall_start = wall_start

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._wall_start + (self._now - self._start)

    def step(self, seconds: float) -> None:
        self._now += seconds


class _VirtualSelector(selectors.BaseSelector):
    """Wraps the loop's real selector: polls it without blocking, then advances virtual time."""

    def __init__(self, real: selectors.BaseSelector, loop: VirtualTimeLoop) -> None:
        self._real = real
        self._loop = loop

    def register(self, fileobj, events, data=None):  # type: ignore[no-untyped-def]
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj):  # type: ignore[no-untyped-def]
        return self._real.unregister(fileobj)

    def modify(self, fileobj, events, data=None):  # type: ignore[no-untyped-def]
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None):  # type: ignore[no-untyped-def]
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            # Nothing is scheduled at all: only outside I/O can wake us, so wait for it for real.
            return self._real.select(None)
        self._loop.advance(timeout)
        return []

    def close(self) -> None:
        self._real.close()

    def get_map(self):  # type: ignore[no-untyped-def]
        return self._real.get_map()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0
        self._selector = _VirtualSelector(self._selector, self)  # type: ignore[has-type]

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._virtual_now += seconds


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a fresh VirtualTimeLoop."""
    loop = VirtualTimeLoop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main)
    finally:
        try:
            _cancel_remaining(loop)
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _cancel_remaining(loop: asyncio.AbstractEventLoop) -> None:
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
