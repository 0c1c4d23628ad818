"""activeQ (upstream ``active_queue.go``): the pods ready to be scheduled, plus in-flight tracking.

A popped pod stays "in flight" until ``done``. Cluster events that arrive meanwhile are recorded,
because if the attempt fails the pod must be judged against them: an event that would have moved
the pod out of unschedulablePods may have come while it was being scheduled. Upstream keeps pods
and events in one list; here each gets a sequence number, and the events a pod must see are the
ones numbered after it. Events older than every in-flight pod are dropped.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubesched.api.types import PodInfo
from kubesched.scheduler.backend.queue.heap import KeyedHeap
from kubesched.scheduler.backend.queue.recorder import POD_POPPED_IN_FLIGHT_EVENT, QueueRecorder
from kubesched.scheduler.framework.events import ClusterEvent
from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class InFlightEvent:
    """A cluster event seen while some pod was in flight (upstream ``clusterEvent``)."""

    event: ClusterEvent
    old: Any
    new: Any


class ActiveQueue:
    def __init__(self, less: Callable[[QueuedPodInfo, QueuedPodInfo], bool], recorder: QueueRecorder,
                 sort_key: Callable[[QueuedPodInfo], Any] | None = None) -> None:
        self.heap: KeyedHeap[QueuedPodInfo] = KeyedHeap(less, QueuedPodInfo.snapshot, sort_key)
        self.scheduling_cycle = 0
        self._recorder = recorder
        #: uid -> (sequence number when popped, pod as popped), in pop order.
        self._in_flight_pods: dict[str, tuple[int, PodInfo]] = {}
        self._in_flight_events: deque[tuple[int, InFlightEvent]] = deque()
        self._seq = 0

    def __len__(self) -> int:
        return len(self.heap)

    def __contains__(self, key: str) -> bool:
        return key in self.heap

    def add(self, qpi: QueuedPodInfo, event: str) -> None:
        self.heap.add_or_update(qpi.key, qpi)
        self._recorder.incoming("active", event)

    def update(self, key: str, pod: PodInfo) -> QueuedPodInfo | None:
        """Replace the pod of a queued entry in place (re-sorting it); None if it is not here."""
        qpi = self.heap.remove(key)
        if qpi is None:
            return None
        qpi.pod_info = pod
        self.heap.add_or_update(key, qpi)
        return qpi

    # --- in flight -------------------------------------------------------------------------
    def in_flight_count(self) -> int:
        return len(self._in_flight_pods)

    def in_flight_pods(self) -> list[PodInfo]:
        return [pod for _, pod in self._in_flight_pods.values()]

    def in_flight_events(self) -> list[InFlightEvent]:
        return [event for _, event in self._in_flight_events]

    def move_to_in_flight(self, qpi: QueuedPodInfo) -> bool:
        """Start an attempt for ``qpi`` (upstream ``unlockedMoveEntityToInFlight``).

        False when the pod is already in flight: a pod tracked twice is a scheduler bug, and
        overwriting the entry would leak the events kept for the first attempt.
        """
        qpi.attempts += 1
        uid = qpi.uid
        if uid in self._in_flight_pods:
            log.error("the same pod is tracked in multiple places in the scheduler: %s; discarding it", qpi.key)
            return False
        self._seq += 1
        self._in_flight_pods[uid] = (self._seq, qpi.pod_info)
        self._recorder.in_flight(POD_POPPED_IN_FLIGHT_EVENT, 1)
        self.scheduling_cycle += 1
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if rejectors:
            self._recorder.unschedulable_reason(rejectors, qpi.pod_info.scheduler_name, -1)
        # The attempt starts with no rejectors: if it then fails with an error rather than a FitError,
        # the pod must get the error backoff, not wait in unschedulablePods for the old rejectors'
        # events. New sets, because copies of ``qpi`` taken during the cycle share the old ones.
        qpi.unschedulable_plugins = set()
        qpi.pending_plugins = set()
        return True

    def cluster_events_for_pod(self, uid: str) -> list[InFlightEvent] | None:
        """Events received since ``uid`` was popped; None if it is not in flight (a bug upstream logs)."""
        entry = self._in_flight_pods.get(uid)
        if entry is None:
            return None
        popped_at = entry[0]
        return [event for seq, event in self._in_flight_events if seq > popped_at]

    def add_events_if_pod_in_flight(self, uid: str, old: Any, new: Any, events: Iterable[ClusterEvent]) -> bool:
        """Record ``events`` about pod ``uid`` if it is in flight; True if it is."""
        if uid not in self._in_flight_pods:
            return False
        for event in events:
            self._push_event(InFlightEvent(event, old, new))
        return True

    def add_event_if_any_in_flight(self, old: Any, new: Any, event: ClusterEvent) -> bool:
        if not self._in_flight_pods:
            return False
        self._push_event(InFlightEvent(event, old, new))
        return True

    def _push_event(self, event: InFlightEvent) -> None:
        self._seq += 1
        self._in_flight_events.append((self._seq, event))
        self._recorder.in_flight(event.event.label, 1)

    def done(self, uid: str) -> None:
        """End ``uid``'s attempt and drop the events no remaining in-flight pod needs."""
        if self._in_flight_pods.pop(uid, None) is None:
            return
        self._recorder.in_flight(POD_POPPED_IN_FLIGHT_EVENT, -1)
        events = self._in_flight_events
        if not events:
            return
        oldest = next(iter(self._in_flight_pods.values()))[0] if self._in_flight_pods else self._seq + 1
        dropped: dict[str, int] = {}
        while events and events[0][0] < oldest:
            label = events.popleft()[1].event.label
            dropped[label] = dropped.get(label, 0) - 1
        for label, count in dropped.items():
            self._recorder.in_flight(label, count)

    def done_all(self) -> None:
        for uid in list(self._in_flight_pods):
            self.done(uid)
