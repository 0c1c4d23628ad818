"""What scheduler_perf measures, measured the same way.

* ``ThroughputCollector``: upstream's ``throughputCollector`` (``scheduler_perf/util.go``). It
  counts pods of the measured namespaces that become bound, as the scheduler's own pod informer
  reports them (upstream shares the scheduler's informer too), and samples that count every
  second: sampling starts at the first non-zero count, that first sample is skipped (pod creation
  and sampling start independently), an interval with no new pod is merged into the next one, and
  a merged interval records its rate once per second it covered, so percentiles stay right.
* ``RecordingMetrics``: the scheduler's own ``Metrics`` that also keeps every observation of
  ``scheduling_attempt_duration_seconds`` and ``scheduling_algorithm_duration_seconds`` while
  recording, for exact percentiles (upstream interpolates histogram buckets; kubesched's attempts
  are far below the first 1 ms bucket, where interpolation says nothing).
* ``ScoredNodesAlgorithm``: the scheduler's ``Algorithm`` that remembers, per successful attempt,
  how many nodes Score ran on out of the nodes in the snapshot.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from prometheus_client import Histogram

from kubesched.api.types import PodInfo
from kubesched.client.informers import Handler, Informer
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.extender import Extender
from kubesched.scheduler.framework.runtime import Framework
from kubesched.scheduler.metrics import Metrics
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable
from kubesched.scheduler.schedule_one import Algorithm, Attempt, ScheduleResult

SAMPLE_INTERVAL = 1.0
PERCENTILES = (50, 90, 95, 99)


def nearest_rank(sorted_values: Sequence[float], percent: int) -> float:
    """Upstream's percentile: the value at index ceil(n * p / 100) - 1 of the sorted samples."""
    return sorted_values[max(math.ceil(len(sorted_values) * percent / 100) - 1, 0)]


def summarize(values: Iterable[float], scale: float = 1.0) -> dict[str, float] | None:
    """Average and Perc50/90/95/99 (and the sample count) of ``values`` times ``scale``, or None."""
    ordered = sorted(v * scale for v in values)
    if not ordered:
        return None
    out = {"average": sum(ordered) / len(ordered)}
    for p in PERCENTILES:
        out[f"perc{p}"] = nearest_rank(ordered, p)
    out["max"] = ordered[-1]
    out["samples"] = len(ordered)
    return out


class BoundPods:
    """Counts pods of the given namespaces that get bound (add with a node, or update that sets
    one), from informer events; ``wait(ns, n)`` returns once ``n`` pods of ``ns`` were bound."""

    def __init__(self, informer: Informer) -> None:
        self.counts: dict[str, int] = {}
        self.first_bound_at: float | None = None
        self.last_bound_at: float | None = None
        self._waiters: list[tuple[str, int, asyncio.Future]] = []
        informer.add_handler(Handler(on_add=self._on_add, on_update=self._on_update))

    def _on_add(self, pod: dict, _initial: bool) -> None:
        if (pod.get("spec") or {}).get("nodeName"):
            self._bound(pod)

    def _on_update(self, old: dict, new: dict) -> None:
        if not (old.get("spec") or {}).get("nodeName") and (new.get("spec") or {}).get("nodeName"):
            self._bound(new)

    def _bound(self, pod: dict) -> None:
        ns = pod["metadata"].get("namespace", "")
        count = self.counts[ns] = self.counts.get(ns, 0) + 1
        now = time.monotonic()
        if self.first_bound_at is None:
            self.first_bound_at = now
        self.last_bound_at = now
        for waiter in [w for w in self._waiters if w[0] == ns and count >= w[1]]:
            self._waiters.remove(waiter)
            if not waiter[2].done():
                waiter[2].set_result(None)

    def count(self, namespaces: Iterable[str]) -> int:
        return sum(self.counts.get(ns, 0) for ns in namespaces)

    async def wait(self, namespace: str, target: int) -> None:
        if self.counts.get(namespace, 0) >= target:
            return
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._waiters.append((namespace, target, future))
        await future


class ThroughputSampler:
    """The sampling rule of upstream's collector, fed (time, pods scheduled so far) once per tick."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.start_time: float | None = None
        self._last_count = 0
        self._last_time = 0.0
        self._skipped = 0

    def observe(self, now: float, scheduled: int) -> None:
        if scheduled == 0:
            return
        if self.start_time is None:
            # The first sample is skipped: pod creation and sampling start independently.
            self.start_time, self._last_count, self._last_time = now, scheduled, now
            return
        new = scheduled - self._last_count
        if new == 0:
            # No 0 pods/s sample: wait for the next pod, then spread the rate over the whole gap.
            self._skipped += 1
            return
        rate = new / (now - self._last_time)
        self.samples.extend([rate] * (self._skipped + 1))
        self._last_count, self._last_time, self._skipped = scheduled, now, 0


class ThroughputCollector:
    """See the module docstring. ``start()`` before creating the measured pods, ``stop()`` once
    they are all scheduled, then ``collect()``."""

    def __init__(self, bound: BoundPods, namespaces: Sequence[str], interval: float = SAMPLE_INTERVAL) -> None:
        self.bound = bound
        self.namespaces = tuple(namespaces)
        self.interval = interval
        self.sampler = ThroughputSampler()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="throughput-collector")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        """A ticker: the next tick is due ``interval`` after the previous one was due, whatever
        ran in between; the sampler uses the actual times, as upstream does."""
        loop = asyncio.get_running_loop()
        next_tick = loop.time() + self.interval
        while True:
            await asyncio.sleep(max(next_tick - loop.time(), 0.0))
            next_tick += self.interval
            self.sampler.observe(loop.time(), self.bound.count(self.namespaces))

    def collect(self) -> dict[str, float] | None:
        """Average and percentiles of pods/s, or None when the run was shorter than two samples."""
        return summarize(self.sampler.samples)


class _RecordingHistogram:
    """A histogram child that also keeps its observations while ``owner.recording`` is set."""

    def __init__(self, inner: Histogram, owner: RecordingMetrics, samples: list[float]) -> None:
        self._inner = inner
        self._owner = owner
        self._samples = samples

    def observe(self, value: float) -> None:
        self._inner.observe(value)
        if self._owner.recording:
            self._samples.append(value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class RecordingMetrics(Metrics):
    """See the module docstring: observations are kept between ``recording = True`` and False."""

    def __init__(self) -> None:
        super().__init__()
        self.recording = False
        self.attempt_seconds: dict[str, list[float]] = {self.SCHEDULED: [], self.UNSCHEDULABLE: [], self.ERROR: []}
        self.algorithm_seconds: list[float] = []
        # The scheduler observes this Histogram directly (no hook to override, unlike pod_scheduled):
        # the stand-in forwards every other attribute to it, so it is a Histogram to its callers.
        self.scheduling_algorithm_duration = _RecordingHistogram(  # type: ignore[assignment]
            self.scheduling_algorithm_duration, self, self.algorithm_seconds)

    def _keep(self, result: str, seconds: float) -> None:
        if self.recording:
            self.attempt_seconds[result].append(seconds)

    def pod_scheduled(self, profile: str, seconds: float) -> None:
        super().pod_scheduled(profile, seconds)
        self._keep(self.SCHEDULED, seconds)

    def pod_unschedulable(self, profile: str, seconds: float) -> None:
        super().pod_unschedulable(profile, seconds)
        self._keep(self.UNSCHEDULABLE, seconds)

    def pod_schedule_error(self, profile: str, seconds: float) -> None:
        super().pod_schedule_error(profile, seconds)
        self._keep(self.ERROR, seconds)


class ScoredNodesAlgorithm(Algorithm):
    """See the module docstring: ``ratios`` gets (nodes scored / nodes) per successful attempt
    while ``recording`` is set. One feasible node means no Score at all, as upstream. A batched
    cycle served from its kept totals (``RankedTotals``) runs Score on the rows that moved only,
    but chooses among totals that are those of Score over every feasible node it found: it counts
    those nodes."""

    def __init__(self, global_percentage: int, rng: random.Random, extenders: Sequence[Extender] = ()) -> None:
        super().__init__(global_percentage, rng, extenders)
        self.recording = False
        self.ratios: list[float] = []
        self._scored: int | None = None

    async def schedule_pod(self, fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable,
                           attempt: Attempt | None = None) -> ScheduleResult:
        self._scored = None
        result = await super().schedule_pod(fw, state, pod, table, attempt)
        if self.recording and table.n:
            self.ratios.append(self._scored_nodes(result) / table.n)
        return result

    def _scored_nodes(self, result: ScheduleResult) -> int:
        """The nodes Score ran on (``prioritize``), or those the kept totals stand for."""
        if self._scored is not None:
            return self._scored
        return result.feasible_nodes if result.feasible_nodes > 1 else 0

    def prioritize(self, fw: Framework, state: CycleState, pod: PodInfo, batch: NodeBatch,
                   attempt: Attempt | None = None) -> np.ndarray:
        self._scored = len(batch)
        return super().prioritize(fw, state, pod, batch, attempt)
