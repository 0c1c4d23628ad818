"""The event loop simulations run on: time advances only when nothing is runnable, by jumping to
the next timer, so ``LoopClock`` on this loop reads simulated seconds."""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import time
from collections.abc import Coroutine, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

T = TypeVar("T")


class _VirtualSelector(selectors.BaseSelector):
    """Wraps the loop's real selector: polls it without blocking, then advances virtual time."""

    def __init__(self, real: selectors.BaseSelector, loop: VirtualTimeLoop) -> None:
        self._real = real
        self._loop = loop

    def register(self, fileobj: FileDescriptorLike, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: FileDescriptorLike) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: FileDescriptorLike, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            # Nothing is scheduled at all: only outside I/O can wake us, so wait for it for real.
            return self._real.select(None)
        if self._loop.holds:
            # A real peer is answering: wait for it for real, at most until the next timer, and
            # let virtual time follow real time meanwhile.
            start = time.monotonic()
            ready = self._real.select(timeout)
            self._loop.advance(min(time.monotonic() - start, timeout))
            return ready
        self._loop.advance(timeout)
        return []

    def close(self) -> None:
        self._real.close()

    def get_map(self) -> Mapping[FileDescriptorLike, selectors.SelectorKey]:
        return self._real.get_map()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._virtual_now = 0.0
        #: How many callers wait on outside I/O (``hold_virtual_time``).
        self.holds = 0
        super().__init__(_VirtualSelector(selectors.DefaultSelector(), self))

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._virtual_now += seconds

    @contextlib.contextmanager
    def hold_virtual_time(self) -> Iterator[None]:
        """While inside, time advances only as fast as real time (see ``awaiting_real_io``)."""
        self.holds += 1
        try:
            yield
        finally:
            self.holds -= 1


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a fresh VirtualTimeLoop.

    asyncio's Runner turns Ctrl-C into the cancellation of ``main`` (then a KeyboardInterrupt
    here), so the interrupt never lands inside some other task, and it cancels whatever ``main``
    left running before the loop closes."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main)
