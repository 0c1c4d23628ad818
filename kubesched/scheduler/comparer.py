"""The cache comparer that also repairs (upstream ``backend/cache/debugger``'s ``CacheComparer``,
which only logs): it compares three views of the cluster and brings the scheduler's back in line.

* informers against the API server: a fresh list of nodes at every comparison, of pods at every
  tenth (``POD_LIST_EVERY``). An object the server has
  that the informer lacks, or the reverse, means the informer's watch went wrong without an error
  (a server that lost its history, a missed event): that informer relists at once.
* the cache and queue against the informers: every node the informer holds must be in the cache;
  every non-terminal pod that is assigned, or unassigned with a ``schedulerName`` this scheduler
  serves and not being deleted, must be in the cache (on a node) or in the scheduling queue. A
  missed object is handed to the event handlers again (an earlier handler error left it out), a
  redundant one is removed.

An object is repaired only when two consecutive comparisons find it diverging, so a change still
on its way (listed but not yet delivered by the watch) is never mistaken for a divergence. Every
repair is counted in ``scheduler_cache_divergences_total{kind}``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesched.api.kinds import kind_named, object_key
from kubesched.api.types import PodInfo

if TYPE_CHECKING:
    from kubesched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

#: Seconds between two comparisons in ``kubesched run`` (0 turns the repair loop off).
DEFAULT_INTERVAL = 30.0
#: Pods are listed from the API server at every this many comparisons only (a full pod list is the
#: costly part on a large cluster); nodes at every one.
POD_LIST_EVERY = 10


@dataclass
class Divergence:
    """What one comparison found, by kind: keys (node names, namespace/name of pods)."""

    missed_nodes: set[str] = field(default_factory=set)
    redundant_nodes: set[str] = field(default_factory=set)
    missed_pods: set[str] = field(default_factory=set)
    redundant_pods: set[str] = field(default_factory=set)
    stale_informers: set[str] = field(default_factory=set)

    def empty(self) -> bool:
        return not (self.missed_nodes or self.redundant_nodes or self.missed_pods or self.redundant_pods
                    or self.stale_informers)

    def __and__(self, other: Divergence) -> Divergence:
        return Divergence(self.missed_nodes & other.missed_nodes, self.redundant_nodes & other.redundant_nodes,
                          self.missed_pods & other.missed_pods, self.redundant_pods & other.redundant_pods,
                          self.stale_informers & other.stale_informers)

    def as_dict(self) -> dict[str, list[str]]:
        return {"missedNodes": sorted(self.missed_nodes), "redundantNodes": sorted(self.redundant_nodes),
                "missedPods": sorted(self.missed_pods), "redundantPods": sorted(self.redundant_pods)}


def compare_cache(sched: Scheduler) -> Divergence:
    """The cache and queue against the informers (``CacheComparer.Compare``)."""
    listed_nodes = set(sched.informers.store("Node"))
    cached_nodes = {name for name, info in sched.cache.nodes.items() if info.node is not None}
    expected = {}
    for key, pod in sched.informers.store("Pod").items():
        if expected_in_scheduler(sched, pod):
            expected[pod["metadata"].get("uid")] = key
    actual = {}
    for info in sched.cache.nodes.values():
        for p in info.pods.values():
            actual[p.uid] = p.key
    pending, _ = sched.queue.pending_pods()
    for p in [*pending, *sched.queue.in_flight_pods()]:
        actual[p.uid] = p.key
    return Divergence(listed_nodes - cached_nodes, cached_nodes - listed_nodes,
                      {expected[uid] for uid in expected.keys() - actual.keys()},
                      {actual[uid] for uid in actual.keys() - expected.keys()})


async def compare_informers(sched: Scheduler, kinds: tuple[str, ...] = ("Node", "Pod")) -> dict[str, set[str]]:
    """Per kind, the keys on which the informer and a fresh list disagree (missing, extra, or
    another UID). A change still on its way shows here too; the caller only acts on keys that
    disagree at two comparisons in a row."""
    stale: dict[str, set[str]] = {}
    for kind_name in kinds:
        informer = sched.informers.informers.get(kind_name)
        kind = kind_named(kind_name)
        if informer is None or kind is None or not informer.synced.is_set():
            continue
        items, _ = await sched.client.list(kind)
        listed = {object_key(o): (o.get("metadata") or {}).get("uid") for o in items}
        held = {k: (o.get("metadata") or {}).get("uid") for k, o in informer.store.items()}
        differing = {k for k in listed.keys() | held.keys() if listed.get(k) != held.get(k)}
        if differing:
            stale[kind_name] = differing
    return stale


def expected_in_scheduler(sched: Scheduler, pod: dict[str, Any]) -> bool:
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if spec.get("nodeName"):
        return True
    if meta.get("deletionTimestamp"):
        return False  # the scheduler drops a pod being deleted from its queue
    return (spec.get("schedulerName") or "default-scheduler") in sched.frameworks


class CacheComparer:
    """Compares every ``interval`` seconds and repairs what diverged twice in a row."""

    def __init__(self, sched: Scheduler, interval: float = DEFAULT_INTERVAL) -> None:
        self.sched = sched
        self.interval = interval
        self._previous = Divergence()
        #: Per kind, the keys found differing from the API at its last comparison; comparisons made.
        self._stale: dict[str, set[str]] = {}
        self._rounds = 0
        #: Objects repaired so far (also in the metric).
        self.repaired = 0

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("cache comparison failed: %s", e)

    async def check(self) -> Divergence:
        """One comparison; returns what was repaired (what diverged now and at the previous check).
        Skipped while informers relist from a changed server (they are known to diverge then)."""
        if not self.sched.informers.consistent.is_set():
            return Divergence()
        found = compare_cache(self.sched)
        self._rounds += 1
        kinds = ("Node", "Pod") if self._rounds % POD_LIST_EVERY == 0 else ("Node",)
        stale = await compare_informers(self.sched, kinds)
        confirmed = found & self._previous
        confirmed.stale_informers = {kind for kind, keys in stale.items() if keys & self._stale.get(kind, set())}
        for kind in kinds:
            self._stale[kind] = stale.get(kind, set())
        self._previous = found
        if not confirmed.empty():
            log.warning("Cache mismatch, repairing: %s (stale informers: %s)", confirmed.as_dict(),
                        sorted(confirmed.stale_informers))
            self.repair(confirmed)
        return confirmed

    def repair(self, found: Divergence) -> None:
        sched = self.sched
        for kind_name in found.stale_informers:
            sched.informers.informer(kind_name).restart("stale")
            sched.metrics.cache_divergences.labels(kind_name).inc()
        nodes, pods = sched.informers.store("Node"), sched.informers.store("Pod")
        for name in found.missed_nodes:
            self._resync("Node", nodes.get(name), present=True)
        for name in found.redundant_nodes:
            info = sched.cache.nodes.get(name)
            self._resync("Node", info.node if info is not None else None, present=False)
        for key in found.missed_pods:
            self._resync("Pod", pods.get(key), present=True)
        for pod in self._cached_and_queued():
            if pod.key in found.redundant_pods:
                self._resync("Pod", pod.pod, present=False)

    def _cached_and_queued(self) -> list[PodInfo]:
        cached = [p for info in self.sched.cache.nodes.values() for p in info.pods.values()]
        pending, _ = self.sched.queue.pending_pods()
        return [*cached, *pending]

    def _resync(self, kind_name: str, obj: dict[str, Any] | None, *, present: bool) -> None:
        if obj is None:
            return
        self.sched.metrics.cache_divergences.labels(kind_name).inc()
        self.repaired += 1
        try:
            self.sched.handlers.resync(kind_name, obj, present=present)
        except Exception as e:
            log.error("repairing the cache's %s %s failed: %r", kind_name, object_key(obj), e)
