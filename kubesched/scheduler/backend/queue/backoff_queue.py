"""backoffQ (upstream ``backoff_queue.go``): pods waiting out their backoff before they may retry.

Two heaps ordered by backoff expiry: one for pods rejected by plugins, one for pods that failed
with an error (no rejector plugins), because the two backoffs count different things: repeated
rejections (``unschedulable_count``) and consecutive errors (``consecutive_errors_count``).

With SchedulerPopFromBackoffQ, expiries are truncated to one-second ordering windows; inside a
window pods are ordered as activeQ orders them, so popping from backoffQ when activeQ is empty
(KEP-5142) still favours important pods, and the flush every second moves whole windows at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from kubesched.api.types import PodInfo
from kubesched.scheduler.backend.queue.heap import KeyedHeap
from kubesched.scheduler.backend.queue.recorder import QueueRecorder
from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo
from kubesched.utils.clock import Clock

#: Width of an ordering window, and the period of the backoff flush (upstream ``backoffQOrderingWindowDuration``).
ORDERING_WINDOW = 1.0

_NEVER_BACKED_OFF = -math.inf


class BackoffQueue:
    def __init__(self, clock: Clock, initial_backoff: float, max_backoff: float,
                 active_less: Callable[[QueuedPodInfo, QueuedPodInfo], bool], pop_from_backoff: bool,
                 recorder: QueueRecorder) -> None:
        self._clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self._active_less = active_less
        self._aligned = pop_from_backoff
        self._recorder = recorder
        backoff_less = self._less_with_priority if pop_from_backoff else self._less_by_expiry
        self._backoff: KeyedHeap[QueuedPodInfo] = KeyedHeap(backoff_less, QueuedPodInfo.snapshot)
        self._error_backoff: KeyedHeap[QueuedPodInfo] = KeyedHeap(self._less_by_expiry, QueuedPodInfo.snapshot)

    # --- backoff arithmetic ----------------------------------------------------------------
    def align(self, t: float) -> float:
        """The start of ``t``'s ordering window (identity without SchedulerPopFromBackoffQ)."""
        return math.floor(t / ORDERING_WINDOW) * ORDERING_WINDOW if self._aligned else t

    def calculate_backoff_duration(self, count: int) -> float:
        """initial * 2^(count-1), capped at max (upstream ``calculateBackoffDuration``)."""
        if count <= 0:
            return 0.0
        shift = count - 1
        if shift >= 63 or self.initial_backoff * (1 << shift) > self.max_backoff:
            return self.max_backoff
        return self.initial_backoff * (1 << shift)

    def backoff_time(self, qpi: QueuedPodInfo) -> float | None:
        """When ``qpi`` completes its backoff; None when it owes none (upstream ``getBackoffTime``).

        The error count wins while the pod keeps failing with errors, so a long unschedulable
        history does not turn one API hiccup into the maximum backoff.
        """
        if self.max_backoff == 0:
            return None
        count = qpi.consecutive_errors_count or qpi.unschedulable_count
        if count == 0:
            return None
        if qpi.backoff_expiration is None:
            qpi.backoff_expiration = self.align(qpi.timestamp + self.calculate_backoff_duration(count))
        return qpi.backoff_expiration

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        """Whether ``qpi`` must still wait; a pod whose expiry is in the current window still waits."""
        expiry = self.backoff_time(qpi)
        return expiry is not None and expiry >= self.align(self._clock.now())

    def next_expiry(self) -> float | None:
        """The earliest clock time at which a flush will move some pod out, None if backoffQ is empty."""
        times = [self._completes_at(h.peek()) for h in (self._backoff, self._error_backoff) if h]
        return min(times) if times else None

    def _completes_at(self, qpi: QueuedPodInfo | None) -> float:
        expiry = None if qpi is None else self.backoff_time(qpi)
        if expiry is None:
            return self._clock.now()
        return expiry + ORDERING_WINDOW if self._aligned else math.nextafter(expiry, math.inf)

    def _expiry_key(self, qpi: QueuedPodInfo) -> float:
        expiry = self.backoff_time(qpi)
        return _NEVER_BACKED_OFF if expiry is None else expiry

    def _less_by_expiry(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self._expiry_key(a) < self._expiry_key(b)

    def _less_with_priority(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        ea, eb = self._expiry_key(a), self._expiry_key(b)
        if ea != eb:
            return ea < eb
        return self._active_less(a, b)

    # --- queue operations ------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._backoff) + len(self._error_backoff)

    def __contains__(self, key: str) -> bool:
        return key in self._backoff or key in self._error_backoff

    def add(self, qpi: QueuedPodInfo, event: str) -> None:
        """Queue ``qpi``; pods without rejector plugins failed with an error and get the error backoff."""
        key = qpi.key
        errored = not qpi.unschedulable_plugins and not qpi.pending_plugins
        target, other = (self._error_backoff, self._backoff) if errored else (self._backoff, self._error_backoff)
        target.add_or_update(key, qpi)
        if other.remove(key) is None:
            self._recorder.incoming("backoff", event)

    def get(self, key: str) -> QueuedPodInfo | None:
        qpi = self._backoff.get(key)
        return qpi if qpi is not None else self._error_backoff.get(key)

    def delete(self, key: str) -> QueuedPodInfo | None:
        qpi = self._backoff.remove(key)
        return qpi if qpi is not None else self._error_backoff.remove(key)

    def update(self, key: str, pod: PodInfo) -> QueuedPodInfo | None:
        """Replace the pod of a queued entry in place (re-sorting it); None if it is not here."""
        for heap in (self._backoff, self._error_backoff):
            qpi = heap.remove(key)
            if qpi is not None:
                qpi.pod_info = pod
                heap.add_or_update(key, qpi)
                return qpi
        return None

    def pop_backoff(self) -> QueuedPodInfo | None:
        """The head of the unschedulable backoff heap, backing off or not (SchedulerPopFromBackoffQ)."""
        return self._backoff.pop()

    def pop_all_completed(self) -> list[QueuedPodInfo]:
        """Every pod whose backoff is over, plugin-rejected ones first (upstream ``popAllBackoffCompleted``)."""
        done: list[QueuedPodInfo] = []
        for heap in (self._backoff, self._error_backoff):
            while (head := heap.peek()) is not None and not self.is_backing_off(head):
                heap.pop()
                done.append(head)
        return done

    def list(self) -> list[QueuedPodInfo]:
        return [*self._backoff, *self._error_backoff]
