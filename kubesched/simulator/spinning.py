"""Letting virtual time pass while the scheduler spins.

A scheduling attempt takes no virtual time, and virtual time only moves when nothing is left to
run. In a cluster, a scheduler that retries the same pods over and over without anything changing
(a plugin that keeps re-activating pods; pods popped from backoffQ as soon as activeQ empties,
which ``SchedulerPopFromBackoffQ`` does) burns CPU while real time passes: timers fire (Permit
timeouts, backoffs, the periodic flushes), controllers act, nodes join, and one of those changes
the outcome sooner or later. On the virtual clock the same loop would keep every timer from ever
firing, and the simulation would hang at one instant.

``SpinGuard`` watches the attempts. Once some pod was attempted ``SPIN_REPEATS`` times at one
virtual instant while nothing in the cluster made progress (no object created, bound or deleted),
the scheduling loop waits before its next attempt: until the cluster makes progress, or for a
pause that starts at the profile's ``podInitialBackoffSeconds`` and doubles up to
``podMaxBackoffSeconds`` while the spinning goes on, as the pods' own backoff would have. Timers
and other components run meanwhile, so Permit timeouts and scenario steps happen when they would
in a cluster, and the loop resumes the moment one of them changes something. Each episode is kept
(when, which pods, how many attempts) for the report.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from kubesched.api.types import PodInfo
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.simulator.scenario import describe_seconds

#: Attempts of one pod at one virtual instant, with no progress in between, that count as spinning.
SPIN_REPEATS = 5


@dataclass
class Spin:
    """One episode of spinning: from ``start`` to ``end`` (virtual seconds since the loop's epoch),
    the pods attempted over and over, and how many attempts were made at the paused instants."""

    start: float
    end: float
    pods: set[str] = field(default_factory=set)
    attempts: int = 0

    def to_json(self) -> dict[str, object]:
        """The episode in ``simulate -o json|yaml`` (``spinning``)."""
        return {"pods": sorted(self.pods), "attempts": self.attempts, "from": describe_seconds(self.start),
                "fromSeconds": round(self.start, 3), "to": describe_seconds(self.end), "toSeconds": round(self.end, 3)}

    def line(self) -> str:
        """The episode in one line of the report."""
        return (f"{', '.join(sorted(self.pods))}: attempted {self.attempts} times from {describe_seconds(self.start)} "
                f"to {describe_seconds(self.end)} without the cluster changing; the scheduling loop waited for "
                "a change meanwhile (see docs/scheduler-plugins.md, \"A scheduler that spins\")")


class SpinGuard:
    """See the module docstring. ``progress`` returns a value that changes whenever the cluster
    makes progress; ``notice_write`` is to be called after every write to the cluster."""

    def __init__(self, loop: asyncio.AbstractEventLoop, progress: Callable[[], object], first_pause: float,
                 max_pause: float, repeats: int = SPIN_REPEATS) -> None:
        self._loop = loop
        self._progress = progress
        self._first_pause = max(first_pause, 0.001)
        self._max_pause = max(max_pause, self._first_pause)
        self._repeats = repeats
        self._marker: object = None
        self._instant = -1.0
        self._counts: Counter[str] = Counter()
        self._pause = self._first_pause
        self._current: Spin | None = None
        self._woken: asyncio.Event | None = None
        #: Every episode, in order.
        self.spins: list[Spin] = []
        #: The loop time episodes are measured from (when scheduling began).
        self.epoch = loop.time()

    def notice_write(self) -> None:
        """Wake a paused loop once the cluster made progress."""
        if self._woken is not None and self._progress() != self._marker:
            self._woken.set()

    async def after_attempt(self, pod: PodInfo) -> None:
        """Yield to the loop; pause first when ``pod``'s attempts show the scheduler spinning."""
        now = self._loop.time()
        marker = self._progress()
        if marker != self._marker:
            self._marker, self._instant, self._pause, self._current = marker, now, self._first_pause, None
            self._counts.clear()
        elif now != self._instant:
            self._instant = now
            self._counts.clear()
        self._counts[pod.key] += 1
        if self._counts[pod.key] < self._repeats:
            await asyncio.sleep(0)
            return
        await self._wait_for_change(now)

    async def _wait_for_change(self, now: float) -> None:
        spin = self._current
        if spin is None:
            spin = self._current = Spin(now - self.epoch, now - self.epoch)
            self.spins.append(spin)
        spin.pods.update(self._counts)
        spin.attempts += sum(self._counts.values())
        self._counts.clear()
        self._woken = asyncio.Event()
        try:
            await asyncio.wait_for(self._woken.wait(), timeout=self._pause)
        except TimeoutError:
            self._pause = min(self._pause * 2, self._max_pause)
        finally:
            self._woken = None
        spin.end = self._loop.time() - self.epoch


def watch_for_spinning(store: ObjectStore, config: SchedulerConfiguration) -> SpinGuard:
    """A guard on the running loop for a scheduler of ``config`` over ``store``: progress is what
    ``store.progress`` counts (creations, bindings, deletions), and every write is noticed. Pass
    its ``after_attempt`` to the Scheduler."""
    guard = SpinGuard(asyncio.get_running_loop(), lambda: tuple(store.progress), float(config.pod_initial_backoff_seconds),
                      float(config.pod_max_backoff_seconds))
    store.write_hooks.append(lambda _rv, _kind, _event: guard.notice_write())
    return guard


__all__ = ["SPIN_REPEATS", "Spin", "SpinGuard", "watch_for_spinning"]
