"""Clocks. Every timer in kubesched (backoff, flushes, Permit timeouts, assumed-pod expiry, grace
periods) reads one injected clock, so a simulation can run on virtual time.

``VirtualTimeLoop`` (in ``kubesched.simulator.virtualtime``) is an asyncio event loop whose ``time()`` is virtual: when no callback is
ready it jumps straight to the next timer instead of sleeping. A simulation that waits out
five-minute flushes therefore finishes in milliseconds, while code keeps using plain
``asyncio.sleep``, ``loop.call_later`` and ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import Iterator
from typing import Protocol

#: Wall-clock start of every virtual run, so simulated timestamps are reproducible.
VIRTUAL_EPOCH = dt.datetime(2025, 1, 1, tzinfo=dt.UTC).timestamp()


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""
        ...

    def wall(self) -> float:
        """Seconds since the Unix epoch, for timestamps written into objects."""
        ...


_last_second: tuple[int | None, str, str] = (None, "", "")


def _second(whole: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` of a whole second, remembered: timestamps come in runs of the same second."""
    return _stamps(whole)[0]


def _stamps(whole: int) -> tuple[str, str]:
    """The second's text without and with the ``Z``; one string object per second, shared by every
    object stamped in it (tens of thousands of pods carry a few hundred distinct timestamps)."""
    global _last_second
    if _last_second[0] != whole:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _last_second = (whole, text, text + "Z")
    return _last_second[1], _last_second[2]


def rfc3339(epoch_seconds: float) -> str:
    return _stamps(int(epoch_seconds // 1))[1]


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


@contextlib.contextmanager
def awaiting_real_io() -> Iterator[None]:
    """Mark the running loop as waiting on outside I/O (an extender's HTTP answer) for the block.

    On a virtual-time loop, time must not jump to the next timer while a real peer is answering:
    the loop then waits for real and advances its clock by the real time that passed, so timeouts
    around the call are measured in real seconds and the simulation sees the call's latency. Other
    loops have no such mode and run the block unchanged."""
    hold = getattr(asyncio.get_running_loop(), "hold_virtual_time", None)
    if hold is None:
        yield
        return
    with hold():
        yield
