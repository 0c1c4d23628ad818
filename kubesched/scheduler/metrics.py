"""Prometheus metrics with kube-scheduler's names, labels and buckets (``pkg/scheduler/metrics``).

Each Scheduler owns a ``Metrics`` with its own registry, so several schedulers (tests, several
profiles' processes) never clash; ``/metrics`` serves that registry.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric

SUBSYSTEM = "scheduler"


class HotCounter:
    """A labelled counter for the scheduling hot path (several increments per plugin and cycle):
    plain integers read at scrape time, where ``prometheus_client.Counter`` takes a lock on every
    increment. The scheduler runs on one event loop, so no lock is needed."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], namespace: str,
                 registry: CollectorRegistry) -> None:
        self._name = f"{namespace}_{name}"
        self._documentation = documentation
        self._labelnames = list(labelnames)
        self._values: dict[tuple[str, ...], list[float]] = {}
        registry.register(self)

    def labels(self, *values: str) -> _HotChild:
        cell = self._values.setdefault(tuple(values), [0.0])
        return _HotChild(cell)

    def describe(self) -> list[Metric]:
        return [CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)]

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for values, cell in self._values.items():
            family.add_metric(list(values), cell[0])
        yield family


class _HotChild:
    __slots__ = ("_cell",)

    def __init__(self, cell: list[float]) -> None:
        self._cell = cell

    def inc(self, amount: float = 1) -> None:
        self._cell[0] += amount


class _PlainValue:
    """A histogram bucket's count or its sum, without ``prometheus_client``'s lock per change
    (``HotHistogram``)."""

    __slots__ = ("_exemplar", "_value")

    def __init__(self) -> None:
        self._value = 0.0
        self._exemplar: Any = None

    def inc(self, amount: float) -> None:
        self._value += amount

    def set(self, value: float, timestamp: float | None = None) -> None:
        self._value = value

    def get(self) -> float:
        return self._value

    def set_exemplar(self, exemplar: Any) -> None:
        self._exemplar = exemplar

    def get_exemplar(self) -> Any:
        return self._exemplar


class HotHistogram(Histogram):
    """``prometheus_client.Histogram`` for the scheduling hot path (about fifteen observations per
    scheduled pod): the same samples, read the same way at scrape time, but an observation finds
    its bucket by bisection and adds to plain floats, where the library walks the buckets in
    Python and takes a lock for the sum and again for the bucket. The scheduler observes on one
    event loop (as ``HotCounter`` counts), so no lock is needed."""

    def _metric_init(self) -> None:
        self._created = time.time()
        self._sum = _PlainValue()
        self._buckets = [_PlainValue() for _ in self._upper_bounds]

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        """The bucket is the first whose upper bound is at least ``amount``, as the library's walk
        finds it; an exemplar, a NaN (no bucket takes it) and a labelled parent (which refuses
        observations) go the library's way."""
        if exemplar or amount != amount or (not self._labelvalues and self._labelnames):
            super().observe(amount, exemplar)
            return
        self._sum.inc(amount)
        self._buckets[bisect_left(self._upper_bounds, amount)].inc(1)


def _exponential(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self._attempt_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._sli_children: dict[str, Any] = {}
        self.schedule_attempts = Counter(
            "schedule_attempts", "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"], namespace=SUBSYSTEM, registry=r)
        self.scheduling_attempt_duration = HotHistogram(
            "scheduling_attempt_duration_seconds", "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"], namespace=SUBSYSTEM, registry=r, buckets=_exponential(0.001, 2, 15))
        self.scheduling_algorithm_duration = HotHistogram(
            "scheduling_algorithm_duration_seconds", "Scheduling algorithm latency in seconds",
            namespace=SUBSYSTEM, registry=r, buckets=_exponential(0.001, 2, 15))
        self.pending_pods = Gauge(
            "pending_pods", "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
            "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods "
            "that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that "
            "the scheduler never attempted to schedule because they are gated.",
            ["queue"], namespace=SUBSYSTEM, registry=r)
        self.preemption_attempts = Counter(
            "preemption_attempts", "Total preemption attempts in the cluster till now", namespace=SUBSYSTEM, registry=r)
        self.preemption_victims = HotHistogram(
            "preemption_victims", "Number of selected preemption victims",
            namespace=SUBSYSTEM, registry=r, buckets=_exponential(1, 2, 7))
        self.framework_extension_point_duration = HotHistogram(
            "framework_extension_point_duration_seconds", "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"], namespace=SUBSYSTEM, registry=r,
            buckets=_exponential(0.0001, 2, 12))
        self.plugin_execution_duration = HotHistogram(
            "plugin_execution_duration_seconds", "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"], namespace=SUBSYSTEM, registry=r,
            buckets=_exponential(0.00001, 1.5, 20))
        self.plugin_evaluation = HotCounter(
            "plugin_evaluation", "Number of attempts to schedule pods by each plugin and the extension point "
            "(available only in PreFilter, Filter, PreScore, and Score).",
            ["plugin", "extension_point", "profile"], namespace=SUBSYSTEM, registry=r)
        self.queue_incoming_pods = Counter(
            "queue_incoming_pods", "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"], namespace=SUBSYSTEM, registry=r)
        self.pod_scheduling_sli_duration = HotHistogram(
            "pod_scheduling_sli_duration_seconds", "E2e latency for a pod being scheduled, from the time the pod "
            "enters the scheduling queue and might involve multiple scheduling attempts.",
            ["attempts"], namespace=SUBSYSTEM, registry=r, buckets=_exponential(0.01, 2, 20))
        self.pod_scheduling_attempts = HotHistogram(
            "pod_scheduling_attempts", "Number of attempts to successfully schedule a pod.",
            namespace=SUBSYSTEM, registry=r, buckets=_exponential(1, 2, 5))
        self.permit_wait_duration = HotHistogram(
            "permit_wait_duration_seconds", "Duration of waiting on permit.",
            ["result"], namespace=SUBSYSTEM, registry=r, buckets=_exponential(0.001, 2, 15))
        self.unschedulable_pods = Gauge(
            "unschedulable_pods", "The number of unschedulable pods broken down by plugin name. A pod will "
            "increment the gauge for all plugins that caused it to not schedule and so this metric have meaning "
            "only when broken down by plugin.", ["plugin", "profile"], namespace=SUBSYSTEM, registry=r)
        self.cache_size = Gauge(
            "cache_size", "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"], namespace=SUBSYSTEM, registry=r)
        self.goroutines = Gauge(
            "goroutines", "Number of running goroutines split by the work they do such as binding.",
            ["operation"], namespace=SUBSYSTEM, registry=r)
        self.event_handling_duration = HotHistogram(
            "event_handling_duration_seconds", "Event handling latency in seconds.",
            ["event"], namespace=SUBSYSTEM, registry=r, buckets=_exponential(0.0001, 2, 12))
        self.queueing_hint_execution_duration = HotHistogram(
            "queueing_hint_execution_duration_seconds", "Duration for running a queueing hint function of a plugin.",
            ["plugin", "event", "hint"], namespace=SUBSYSTEM, registry=r, buckets=_exponential(0.000001, 1.5, 20))
        self.event_handler_errors = Counter(
            "event_handler_errors", "Number of informer events whose handler raised, by resource (kubesched): the "
            "object was skipped and the cache comparer repairs what it left out.",
            ["resource"], namespace=SUBSYSTEM, registry=r)
        self.cache_divergences = Counter(
            "cache_divergences", "Number of objects the cache comparer found missing from or redundant in the "
            "scheduler's cache or informers, and repaired, by kind (kubesched).",
            ["kind"], namespace=SUBSYSTEM, registry=r)
        self.informer_relists = Counter(
            "informer_relists", "Number of relists after the first list, by kind and reason (kubesched).",
            ["kind", "reason"], namespace=SUBSYSTEM, registry=r)
        self.inflight_events = Gauge(
            "inflight_events", "Number of events currently tracked in the scheduling queue.",
            ["event"], namespace=SUBSYSTEM, registry=r)

    # Result labels, as upstream spells them.
    SCHEDULED = "scheduled"
    UNSCHEDULABLE = "unschedulable"
    ERROR = "error"

    def pod_scheduled(self, profile: str, seconds: float) -> None:
        self._attempt(self.SCHEDULED, profile, seconds)

    def pod_unschedulable(self, profile: str, seconds: float) -> None:
        self._attempt(self.UNSCHEDULABLE, profile, seconds)

    def pod_schedule_error(self, profile: str, seconds: float) -> None:
        self._attempt(self.ERROR, profile, seconds)

    def _attempt(self, result: str, profile: str, seconds: float) -> None:
        """``schedule_attempts_total`` and ``scheduling_attempt_duration_seconds`` of one attempt;
        the labelled children are looked up once per (result, profile), not once per pod."""
        children = self._attempt_children.get((result, profile))
        if children is None:
            children = self._attempt_children[(result, profile)] = (
                self.schedule_attempts.labels(result, profile), self.scheduling_attempt_duration.labels(result, profile))
        children[0].inc()
        children[1].observe(seconds)

    def sli_duration(self, attempts: int, seconds: float) -> None:
        """``pod_scheduling_sli_duration_seconds{attempts}`` of a scheduled pod (15 and more share "15+")."""
        label = "15+" if attempts >= 15 else str(attempts)
        child = self._sli_children.get(label)
        if child is None:
            child = self._sli_children[label] = self.pod_scheduling_sli_duration.labels(label)
        child.observe(seconds)
