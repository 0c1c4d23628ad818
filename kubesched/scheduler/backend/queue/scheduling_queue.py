"""The scheduling queue (upstream ``scheduling_queue.go``, kube-scheduler 1.35, QueueingHints on).

Three places hold pending pods:

* activeQ: pods ready to be tried, ordered by the QueueSort plugin;
* backoffQ: pods that failed and must wait out a backoff before they are tried again;
* unschedulablePods: pods rejected by plugins (or gated by a PreEnqueue plugin), waiting for a
  cluster event that the rejecting plugins' queueing hints say could help, or for the periodic
  flush after ``max_in_unschedulable`` seconds.

Everything runs on one asyncio loop, so upstream's locks become plain sequential code; ``pop`` is
the only coroutine and returns without suspending whenever a pod is available.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from kubesched.api.types import PodInfo
from kubesched.scheduler.backend.queue.active_queue import ActiveQueue
from kubesched.scheduler.backend.queue.backoff_queue import ORDERING_WINDOW, BackoffQueue
from kubesched.scheduler.backend.queue.nominator import NominationJournal, Nominator, PodLister
from kubesched.scheduler.backend.queue.recorder import QueueRecorder
from kubesched.scheduler.backend.queue.unschedulable_pods import UnschedulablePods
from kubesched.scheduler.framework.events import (
    BACKOFF_COMPLETE,
    EVENT_FORCE_ACTIVATE,
    EVENT_UNSCHEDULABLE_TIMEOUT,
    EVENT_UNSCHEDULED_POD_ADD,
    EVENT_UNSCHEDULED_POD_UPDATE,
    FORCE_ACTIVATE,
    POP_FROM_BACKOFF_Q,
    SCHEDULE_ATTEMPT_FAILURE,
    ClusterEvent,
    QueueingHint,
    QueueingHintFn,
    pod_scheduling_properties_change,
)
from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.metrics import Metrics
from kubesched.utils.clock import Clock

if TYPE_CHECKING:
    from kubesched.scheduler.framework.interface import NominatingInfo, PreEnqueuePlugin

log = logging.getLogger(__name__)

#: How often pods left in unschedulablePods are checked (upstream's wait.Until period).
UNSCHEDULABLE_FLUSH_PERIOD = 30.0

_ADD_LABEL = EVENT_UNSCHEDULED_POD_ADD.label
_UPDATE_LABEL = EVENT_UNSCHEDULED_POD_UPDATE.label

ACTIVE_Q, BACKOFF_Q, UNSCHEDULABLE_Q = "Active", "Backoff", "Unschedulable"

#: ``podMaxInUnschedulablePodsDuration``: how long a pod waits in unschedulablePods before a retry anyway.
DEFAULT_POD_MAX_IN_UNSCHEDULABLE = 300.0


#: Shortest sleep of the periodic flush loop, in seconds.
MIN_TIMER_WAIT = 0.001

class Strategy(IntEnum):
    """How a pod leaves unschedulablePods (upstream ``queueingStrategy``); higher wins."""

    SKIP = 0
    AFTER_BACKOFF = 1
    IMMEDIATELY = 2


@dataclass
class QueueProfile:
    """What the queue needs from one scheduling profile (keyed by schedulerName)."""

    pre_enqueue: list[PreEnqueuePlugin] = field(default_factory=list)
    #: event -> [(plugin name, hint fn or None meaning always Queue)].
    hints: dict[ClusterEvent, list[tuple[str, QueueingHintFn | None]]] = field(default_factory=dict)


class _EventHints(NamedTuple):
    """A profile's queueing hints for one event, and the plugins they belong to (a pod none of
    them rejected is not worth requeuing for it, without a call)."""

    fns: list[tuple[str, QueueingHintFn | None]]
    plugins: frozenset[str]


def match_cluster_events(registered: ClusterEvent, incoming: ClusterEvent) -> bool:
    """Upstream ``framework.MatchClusterEvents``: ``ClusterEvent.Match`` plus specificity.

    An incoming event only matches a registration at least as broad: a generic Node/Update does
    not match a plugin that registered only Node/UpdateNodeLabel.
    """
    if not registered.matches(incoming):
        return False
    return registered.is_wildcard() or incoming.action <= registered.action


def _object_uid(obj: Any) -> str | None:
    """The UID of ``obj`` if it is a pod (PodInfo or raw pod), else None."""
    if isinstance(obj, PodInfo):
        return obj.uid
    if isinstance(obj, Mapping) and obj.get("kind", "Pod") == "Pod" and "metadata" in obj:
        meta = obj["metadata"]
        return meta.get("uid") or f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
    return None


class SchedulingQueue:
    def __init__(self, clock: Clock, less: Callable[[QueuedPodInfo, QueuedPodInfo], bool],
                 profiles: dict[str, QueueProfile], *, initial_backoff: float = 1.0, max_backoff: float = 10.0,
                 max_in_unschedulable: float = DEFAULT_POD_MAX_IN_UNSCHEDULABLE, pop_from_backoff: bool = True, metrics: Metrics | None = None,
                 pod_lister: PodLister | None = None, sort_key: Callable[[QueuedPodInfo], Any] | None = None) -> None:
        """``sort_key``: the QueueSort plugin's key function (the same order as ``less``), if it has one."""
        self._clock = clock
        self._profiles = profiles
        self._max_in_unschedulable = max_in_unschedulable
        self._pop_from_backoff = pop_from_backoff
        self._recorder = QueueRecorder(metrics)
        self._recorder.watch_pending(lambda: len(self._active), lambda: len(self._backoff),
                                     lambda: len(self._unschedulable) - self._unschedulable.gated_count,
                                     lambda: self._unschedulable.gated_count)
        self._active = ActiveQueue(less, self._recorder, sort_key)
        self._backoff = BackoffQueue(clock, initial_backoff, max_backoff, less, pop_from_backoff, self._recorder)
        self._unschedulable = UnschedulablePods(self._recorder)
        self._nominator = Nominator(pod_lister)
        self._plugin_events = self._build_plugin_events(profiles)
        self._pre_enqueue_by_name = {name: {p.name: p for p in prof.pre_enqueue} for name, prof in profiles.items()}
        self._hint_cache: dict[tuple[str, ClusterEvent], _EventHints] = {}
        self._interest_cache: dict[ClusterEvent, bool] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._stop: asyncio.Future[None] | None = None
        self._closed = False

    @staticmethod
    def _build_plugin_events(profiles: Mapping[str, QueueProfile]) -> dict[str, list[ClusterEvent]]:
        """plugin name -> events it registered (upstream ``buildEventMap``); gated pods wait on these."""
        events: dict[str, list[ClusterEvent]] = {}
        for profile in profiles.values():
            for event, hints in profile.hints.items():
                for plugin, _ in hints:
                    events.setdefault(plugin, []).append(event)
        return events

    # --- informer-driven -------------------------------------------------------------------
    def add(self, pod: PodInfo) -> None:
        """A new unscheduled pod: into activeQ, or unschedulablePods if a PreEnqueue plugin gates it."""
        if self._move_to_active_q(self._new_queued_pod_info(pod), _ADD_LABEL):
            self._broadcast()

    def update(self, old: PodInfo, new: PodInfo) -> list[ClusterEvent]:
        """Upstream ``Update``: refresh the pod where it is, and requeue it if hints say the change
        helps. Returns the UpdatePodXYZ events the change raised."""
        events = pod_scheduling_properties_change(new.pod, old.pod)
        if self._active.add_events_if_pod_in_flight(new.uid, old.pod, new.pod, events):
            return events
        key = old.key
        qpi = self._active.update(key, new) or self._backoff.update(key, new)
        if qpi is not None:
            self._nominator.update(old, qpi.pod_info)
            return events
        qpi = self._unschedulable.get(new.key)
        if qpi is not None:
            self._update_unschedulable(qpi, old, new, events)
        elif self._move_to_active_q(self._new_queued_pod_info(new), _UPDATE_LABEL):
            self._broadcast()
        return events

    def _update_unschedulable(self, qpi: QueuedPodInfo, old: PodInfo, new: PodInfo, events: list[ClusterEvent]) -> None:
        """The pod's own change may be what its rejectors wait for: each UpdatePodXYZ event asks their hints."""
        qpi.pod_info = new
        self._nominator.update(old, new)
        for event in events:
            strategy = self._worth_requeuing(qpi, event, old.pod, new.pod)
            queue = self._requeue(qpi, strategy, event.label)
            if queue == ACTIVE_Q or (self._pop_from_backoff and queue == BACKOFF_Q):
                self._broadcast()
                break
            if queue != UNSCHEDULABLE_Q:
                # Upstream keeps looping here without SchedulerPopFromBackoffQ and can then put the
                # pod, already in backoffQ, back into unschedulablePods too; stop once it has left.
                break

    def delete(self, pod: PodInfo) -> None:
        self._nominator.delete(pod)
        key = pod.key
        qpi = self._active.heap.remove(key) or self._backoff.delete(key) or self._unschedulable.delete(key)
        if qpi is not None:
            self._recorder.unschedulable_reason(qpi.unschedulable_plugins | qpi.pending_plugins, qpi.pod_info.scheduler_name, -1)

    def activate(self, pods: dict[str, PodInfo]) -> None:
        """Move the pods to activeQ now; a pod in flight gets a ForceActivate event for when it comes back."""
        activated = False
        for pod in pods.values():
            if self._activate(pod):
                activated = True
            else:
                self._active.add_events_if_pod_in_flight(pod.uid, None, pod.pod, (EVENT_FORCE_ACTIVATE,))
        if activated:
            self._broadcast()

    def _activate(self, pod: PodInfo) -> bool:
        qpi = self._unschedulable.get(pod.key)
        from_backoff = False
        if qpi is None:
            qpi = self._backoff.delete(pod.key)
            if qpi is None:
                return False
            from_backoff = True
        return self._move_to_active_q(qpi, FORCE_ACTIVATE, from_backoff)

    def move_all_to_active_or_backoff_queue(self, event: ClusterEvent, old: Any, new: Any,
                                            precheck: Callable[[PodInfo], bool] | None = None) -> None:
        """Offer ``event`` to every unschedulable pod ``precheck`` accepts (all without one)."""
        if not self._is_event_of_interest(event):
            return
        pods = [q for q in self._unschedulable if precheck is None or precheck(q.pod_info)]
        self._move_pods(pods, event, old, new)

    # --- scheduling loop -------------------------------------------------------------------
    async def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule; waits for one, and returns None once the queue is closed."""
        qpi = self.pop_nowait()
        while qpi is None and not self._closed:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if not waiter.done():
                    waiter.cancel()
            qpi = self.pop_nowait()
        return qpi

    def pop_nowait(self) -> QueuedPodInfo | None:
        """Upstream ``Pop`` without the wait: activeQ's head, else backoffQ's with SchedulerPopFromBackoffQ."""
        if self._closed:
            return None
        active = self._active
        while True:
            qpi = active.heap.pop()
            if qpi is None:
                qpi = self._backoff.pop_backoff() if self._pop_from_backoff else None
                if qpi is None:
                    return None
                self._recorder.incoming("active", POP_FROM_BACKOFF_Q)
            if active.move_to_in_flight(qpi):
                self._nominator.touch(qpi.uid)
                return qpi

    def done(self, uid: str) -> None:
        self._active.done(uid)

    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo, pod_scheduling_cycle: int) -> None:
        """Take back a pod whose attempt failed, and decide where it waits (upstream ``AddUnschedulableIfNotPresent``).

        Events seen while it was in flight are replayed against its rejector plugins first, so an
        event that came during the attempt is not lost. The pod is ``done`` afterwards in any case.
        A closed queue takes nothing back: the attempt ended because the scheduler is stopping.
        """
        if self._closed:
            return
        try:
            self._add_unschedulable(qpi, pod_scheduling_cycle)
        finally:
            self._active.done(qpi.uid)
            self._nominator.touch(qpi.uid)

    def _add_unschedulable(self, qpi: QueuedPodInfo, cycle: int) -> None:
        key = qpi.key
        for where, present in (("unschedulable", key in self._unschedulable), ("active", key in self._active),
                               ("backoff", key in self._backoff)):
            if present:
                log.error("Pod %s is already present in the %s queue", key, where)
                return
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if rejectors:
            qpi.unschedulable_count += 1
            qpi.consecutive_errors_count = 0
        else:
            qpi.consecutive_errors_count += 1
        qpi.timestamp = self._clock.now()
        qpi.backoff_expiration = None
        self._recorder.unschedulable_reason(rejectors, qpi.pod_info.scheduler_name, 1)
        strategy = self._strategy_for_in_flight_pod(qpi)
        queue = self._requeue(qpi, strategy, SCHEDULE_ATTEMPT_FAILURE)
        log.debug("pod %s moved to %s after cycle %d (hint %s, rejectors %s)", key, queue, cycle, strategy.name, rejectors)
        if queue == ACTIVE_Q or (self._pop_from_backoff and queue == BACKOFF_Q):
            self._broadcast()

    def _strategy_for_in_flight_pod(self, qpi: QueuedPodInfo) -> Strategy:
        """Upstream ``determineSchedulingHintForInFlightPod``."""
        if not qpi.unschedulable_plugins and not qpi.pending_plugins:
            # No plugin to wait for: the attempt hit an error, so retry after the error backoff.
            return Strategy.AFTER_BACKOFF
        events = self._active.cluster_events_for_pod(qpi.uid)
        if events is None:
            log.error("in flight pod %s isn't found in the scheduling queue; this is likely a bug", qpi.key)
            return Strategy.AFTER_BACKOFF
        best = Strategy.SKIP
        for e in events:
            strategy = self._worth_requeuing(qpi, e.event, e.old, e.new)
            if strategy == Strategy.IMMEDIATELY:
                return strategy
            if strategy == Strategy.AFTER_BACKOFF:
                best = strategy
                if not qpi.pending_plugins:
                    return best
        return best

    @property
    def scheduling_cycle(self) -> int:
        return self._active.scheduling_cycle

    # --- timers ----------------------------------------------------------------------------
    def flush_backoff_q_completed(self) -> None:
        """Move every pod whose backoff is over to activeQ (run every second)."""
        activated = False
        for qpi in self._backoff.pop_all_completed():
            if self._move_to_active_q(qpi, BACKOFF_COMPLETE, moves_from_backoff=True):
                activated = True
        if activated:
            self._broadcast()

    def flush_unschedulable_pods_left_over(self) -> None:
        """Retry pods that waited in unschedulablePods longer than ``max_in_unschedulable`` (run every 30s)."""
        now = self._clock.now()
        stale = [qpi for qpi in self._unschedulable if now - qpi.timestamp > self._max_in_unschedulable]
        if stale:
            self._move_pods(stale, EVENT_UNSCHEDULABLE_TIMEOUT, None, None)

    async def run(self) -> None:
        """Run both flushes until ``close``: backoff at each window boundary, leftovers every 30s."""
        if self._closed:
            return
        self._stop = asyncio.get_running_loop().create_future()
        now = self._clock.now()
        next_backoff = self._backoff.align(now + ORDERING_WINDOW)
        next_leftover = now
        while not self._closed:
            now = self._clock.now()
            if now >= next_leftover:
                self.flush_unschedulable_pods_left_over()
                next_leftover = self._clock.now() + UNSCHEDULABLE_FLUSH_PERIOD
            if now >= next_backoff:
                self.flush_backoff_q_completed()
                while next_backoff <= now:
                    next_backoff += ORDERING_WINDOW
            # Always wait a little: float rounding can leave a boundary a hair in the future, and a
            # zero wait would spin without ever letting (virtual) time advance.
            delay = max(min(next_backoff, next_leftover) - self._clock.now(), MIN_TIMER_WAIT)
            await asyncio.wait((self._stop,), timeout=delay)

    def close(self) -> None:
        """Stop ``run`` and wake ``pop`` (which then returns None); in-flight pods are done()."""
        self._closed = True
        self._active.done_all()
        if self._stop is not None and not self._stop.done():
            self._stop.set_result(None)
        self._broadcast()

    # --- nominator -------------------------------------------------------------------------
    def add_nominated_pod(self, pod: PodInfo, nominating_info: NominatingInfo | None) -> None:
        self._nominator.add(pod, nominating_info)

    def delete_nominated_pod_if_exists(self, pod: PodInfo) -> None:
        self._nominator.delete(pod)

    def update_nominated_pod(self, old: PodInfo, new: PodInfo) -> None:
        self._nominator.update(old, new)

    def nominated_node_names(self) -> list[str]:
        """Nodes that have pods nominated to them (the filter checks only these for nominees)."""
        return list(self._nominator.nominated_pods)

    def nomination_journal(self) -> NominationJournal:
        """A journal of the nodes whose nominated pods change from now on (pods nominated or no
        longer, and nominees leaving the queue for a cycle or coming back)."""
        return self._nominator.journal()

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        """Pods nominated to ``node_name``, as the queue currently knows them (upstream ``NominatedPodsForNode``).

        A nominated pod not in any queue (in flight) comes back with only its identity, as upstream.
        """
        result = []
        for ref in self._nominator.for_node(node_name):
            qpi = self.get(ref.key)
            result.append(qpi.pod_info if qpi is not None else ref.to_pod_info())
        return result

    # --- introspection ---------------------------------------------------------------------
    def get(self, key: str) -> QueuedPodInfo | None:
        """The queued entry for ``namespace/name`` in any of the three places (upstream ``GetPod``)."""
        return self._active.heap.get(key) or self._backoff.get(key) or self._unschedulable.get(key)

    def pending_pods(self) -> tuple[list[PodInfo], str]:
        active = [q.pod_info for q in self._active.heap]
        backoff = [q.pod_info for q in self._backoff.list()]
        unschedulable = [q.pod_info for q in self._unschedulable]
        summary = f"activeQ:{len(active)}; backoffQ:{len(backoff)}; unschedulablePods:{len(unschedulable)}"
        return active + backoff + unschedulable, summary

    def pods_in_backoff_q(self) -> list[PodInfo]:
        return [q.pod_info for q in self._backoff.list()]

    def unschedulable_pods(self) -> list[PodInfo]:
        return [q.pod_info for q in self._unschedulable]

    def in_flight_pods(self) -> list[PodInfo]:
        return self._active.in_flight_pods()

    def counts(self) -> dict[str, int]:
        gated = self._unschedulable.gated_count
        return {"active": len(self._active), "backoff": len(self._backoff),
                "unschedulable": len(self._unschedulable) - gated, "gated": gated}

    def in_flight(self) -> int:
        return self._active.in_flight_count()

    def is_idle(self) -> bool:
        return not self._active.heap and not len(self._backoff) and not self._active.in_flight_count()

    def next_backoff_expiry(self) -> float | None:
        """The earliest clock time at which ``flush_backoff_q_completed`` moves a pod; None if backoffQ is empty."""
        return self._backoff.next_expiry()

    # --- moving pods between queues --------------------------------------------------------
    def _new_queued_pod_info(self, pod: PodInfo) -> QueuedPodInfo:
        return QueuedPodInfo(pod, self._clock.now())

    def _move_to_active_q(self, qpi: QueuedPodInfo, event: str, moves_from_backoff: bool = False) -> bool:
        """Upstream ``moveToActiveQ``: PreEnqueue, then activeQ, or unschedulablePods if gated.

        PreEnqueue already ran when a pod entered backoffQ under SchedulerPopFromBackoffQ.
        """
        if not (moves_from_backoff and self._pop_from_backoff):
            self._run_pre_enqueue(qpi)
        key = qpi.key
        if qpi.gating_plugin:
            if key not in self._active and key not in self._backoff:
                self._unschedulable.add_or_update(qpi, event)
            return False
        if qpi.initial_attempt_timestamp is None:
            qpi.initial_attempt_timestamp = self._clock.now()
        self._unschedulable.delete(key)
        self._backoff.delete(key)
        self._active.add(qpi, event)
        if event in (_ADD_LABEL, _UPDATE_LABEL):
            self._nominator.add(qpi.pod_info, None)
        return True

    def _move_to_backoff_q(self, qpi: QueuedPodInfo, event: str) -> bool:
        """Upstream ``moveToBackoffQ``; with SchedulerPopFromBackoffQ, PreEnqueue runs here, as popping may skip activeQ."""
        if self._pop_from_backoff:
            self._run_pre_enqueue(qpi)
            if qpi.gating_plugin:
                self._unschedulable.add_or_update(qpi, event)
                return False
        self._unschedulable.delete(qpi.key)
        self._backoff.add(qpi, event)
        return True

    def _requeue(self, qpi: QueuedPodInfo, strategy: Strategy, event: str) -> str:
        """Upstream ``requeuePodWithQueueingStrategy``; returns the queue the pod ends up in."""
        if strategy == Strategy.SKIP:
            self._unschedulable.add_or_update(qpi, event)
            return UNSCHEDULABLE_Q
        if strategy == Strategy.AFTER_BACKOFF and self._backoff.is_backing_off(qpi):
            return BACKOFF_Q if self._move_to_backoff_q(qpi, event) else UNSCHEDULABLE_Q
        return ACTIVE_Q if self._move_to_active_q(qpi, event) else UNSCHEDULABLE_Q

    def _move_pods(self, pods: Iterable[QueuedPodInfo], event: ClusterEvent, old: Any, new: Any) -> None:
        """Upstream ``movePodsToActiveOrBackoffQueue``: requeue the pods the event may help, then remember it for in-flight pods."""
        if not self._is_event_of_interest(event):
            return
        activated = False
        for qpi in pods:
            if qpi.gating_plugin and not any(match_cluster_events(e, event) for e in qpi.gating_plugin_events):
                continue  # Only an event the gating plugin registered can lift the gate.
            strategy = self._worth_requeuing(qpi, event, old, new)
            if strategy == Strategy.SKIP:
                continue
            self._unschedulable.delete(qpi.key)
            queue = self._requeue(qpi, strategy, event.label)
            if queue == ACTIVE_Q or (self._pop_from_backoff and queue == BACKOFF_Q):
                activated = True
        self._active.add_event_if_any_in_flight(old, new, event)
        if activated:
            self._broadcast()

    # --- queueing hints and PreEnqueue -----------------------------------------------------
    def _is_event_of_interest(self, event: ClusterEvent) -> bool:
        """Whether any plugin of any profile registered ``event``; wildcard events interest everyone."""
        interested = self._interest_cache.get(event)
        if interested is None:
            interested = event.is_wildcard() or any(
                match_cluster_events(registered, event) for p in self._profiles.values() for registered in p.hints)
            self._interest_cache[event] = interested
        return interested

    def _hints_for(self, profile_name: str, event: ClusterEvent) -> _EventHints | None:
        key = (profile_name, event)
        hints = self._hint_cache.get(key)
        if hints is None:
            profile = self._profiles.get(profile_name)
            if profile is None:
                return None
            fns = [h for registered, hs in profile.hints.items() if match_cluster_events(registered, event) for h in hs]
            hints = self._hint_cache[key] = _EventHints(fns, frozenset(plugin for plugin, _ in fns))
        return hints

    def _worth_requeuing(self, qpi: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any) -> Strategy:
        """Upstream ``isPodWorthRequeuing``: ask the hints of the plugins that rejected the pod.

        Queue from a Pending plugin means retry now; Queue from an Unschedulable plugin means retry
        after backoff; a hint that raises counts as Queue so the pod cannot get stuck.
        """
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if not rejectors:
            return Strategy.AFTER_BACKOFF
        if event.is_wildcard():
            if new is not None and _object_uid(new) != qpi.uid:
                return Strategy.SKIP  # A wildcard event aimed at another pod (ForceActivate).
            return Strategy.AFTER_BACKOFF
        hints = self._hints_for(qpi.pod_info.scheduler_name, event)
        if hints is None:
            log.error("no queueing hints registered for profile %r (pod %s)", qpi.pod_info.scheduler_name, qpi.key)
            return Strategy.AFTER_BACKOFF
        if rejectors.isdisjoint(hints.plugins):
            return Strategy.SKIP  # no plugin that rejected the pod registered the event
        best = Strategy.SKIP
        for plugin, hint_fn in hints.fns:
            if plugin not in rejectors or not self._hint_says_queue(plugin, hint_fn, qpi, event, old, new):
                continue
            if plugin in qpi.pending_plugins:
                return Strategy.IMMEDIATELY
            if not qpi.pending_plugins:
                return Strategy.AFTER_BACKOFF
            best = Strategy.AFTER_BACKOFF
        return best

    def _hint_says_queue(self, plugin: str, hint_fn: QueueingHintFn | None, qpi: QueuedPodInfo,
                         event: ClusterEvent, old: Any, new: Any) -> bool:
        start = time.perf_counter()
        try:
            queue = hint_fn is None or hint_fn(qpi.pod, old, new) != QueueingHint.QueueSkip
            result = "Queue" if queue else "QueueSkip"
        except Exception:
            log.exception("QueueingHintFn of %s returned an error for event %s, pod %s", plugin, event.label, qpi.key)
            queue, result = True, "Error"
        self._recorder.queueing_hint(plugin, event.label, result, start)
        return queue

    def _run_pre_enqueue(self, qpi: QueuedPodInfo) -> None:
        """Upstream ``runPreEnqueuePlugins``: the gating plugin first, stop at the first that gates."""
        profile_name = qpi.pod_info.scheduler_name
        profile = self._profiles.get(profile_name)
        gating = qpi.gating_plugin
        if gating:
            plugin = self._pre_enqueue_by_name.get(profile_name, {}).get(gating)
            if plugin is not None and not self._pre_enqueue_passes(plugin, qpi):
                return
        for plugin in profile.pre_enqueue if profile else ():
            if plugin.name != gating and not self._pre_enqueue_passes(plugin, qpi):
                return
        qpi.gating_plugin = ""

    def _pre_enqueue_passes(self, plugin: PreEnqueuePlugin, qpi: QueuedPodInfo) -> bool:
        try:
            status = plugin.pre_enqueue(qpi.pod_info)
        except Exception as e:
            status = Status.from_error(e, plugin.name)
        if status is None or status.code == Code.Success:
            return True
        name = plugin.name
        if name not in qpi.unschedulable_plugins and name not in qpi.pending_plugins:
            self._recorder.unschedulable_reason({name}, qpi.pod_info.scheduler_name, 1)
        qpi.unschedulable_plugins.add(name)
        qpi.gating_plugin = name
        qpi.gating_plugin_events = self._plugin_events.get(name, [])
        if status.code == Code.Error:
            log.error("unexpected error running PreEnqueue plugin %s for pod %s: %s", name, qpi.key, status.message())
        return False

    # --- waking pop() ----------------------------------------------------------------------
    def _broadcast(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
