"""The scheduling queue's metrics, with labelled children cached so the hot path skips ``labels()``.

Every method is a no-op without a ``Metrics``; the queue calls them unconditionally.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubesched.scheduler.metrics import Metrics

#: inflight_events label for a popped pod (upstream ``metrics.PodPoppedInFlightEvent``).
POD_POPPED_IN_FLIGHT_EVENT = "PodPopped"


class QueueRecorder:
    def __init__(self, metrics: Metrics | None) -> None:
        self.metrics = metrics
        self._incoming: dict[tuple[str, str], Any] = {}
        self._in_flight: dict[str, Any] = {}
        self._reasons: dict[tuple[str, str], Any] = {}
        self._hints: dict[tuple[str, str, str], Any] = {}
        self._pending = {q: metrics.pending_pods.labels(q) for q in ("active", "backoff", "unschedulable", "gated")} if metrics else {}

    def incoming(self, queue: str, event: str) -> None:
        """``queue_incoming_pods_total{queue, event}``: a pod entered ``queue`` because of ``event``."""
        if self.metrics is None:
            return
        child = self._incoming.get((queue, event))
        if child is None:
            child = self._incoming[(queue, event)] = self.metrics.queue_incoming_pods.labels(queue, event)
        child.inc()

    def watch_pending(self, active: Callable[[], int], backoff: Callable[[], int], unschedulable: Callable[[], int],
                      gated: Callable[[], int]) -> None:
        """``pending_pods{queue}``, read from the queue when scraped rather than set on every change."""
        if self.metrics is None:
            return
        for queue, read in (("active", active), ("backoff", backoff), ("unschedulable", unschedulable), ("gated", gated)):
            self._pending[queue].set_function(read)

    def in_flight(self, label: str, delta: int) -> None:
        """``inflight_events{event}``: events (and popped pods) the queue keeps for in-flight pods."""
        if self.metrics is None or not delta:
            return
        child = self._in_flight.get(label)
        if child is None:
            child = self._in_flight[label] = self.metrics.inflight_events.labels(label)
        child.inc(delta)

    def unschedulable_reason(self, plugins: set[str], profile: str, delta: int) -> None:
        """``unschedulable_pods{plugin, profile}`` (upstream ``metrics.UnschedulableReason``)."""
        if self.metrics is None:
            return
        for plugin in plugins:
            child = self._reasons.get((plugin, profile))
            if child is None:
                child = self._reasons[(plugin, profile)] = self.metrics.unschedulable_pods.labels(plugin, profile)
            child.inc(delta)

    def queueing_hint(self, plugin: str, event: str, result: str, start: float) -> None:
        """``queueing_hint_execution_duration_seconds{plugin, event, hint}`` since ``start``
        (``time.perf_counter()``); ``result`` is Queue, QueueSkip or Error."""
        if self.metrics is None:
            return
        child = self._hints.get((plugin, event, result))
        if child is None:
            child = self._hints[(plugin, event, result)] = self.metrics.queueing_hint_execution_duration.labels(plugin, event, result)
        child.observe(time.perf_counter() - start)
