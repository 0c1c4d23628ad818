"""The cache dumper and comparer (upstream ``backend/cache/debugger``): on SIGUSR2, or at
``/debug/cache``, show what the scheduler believes (nodes, the pods on them, assumed pods, the
queue, each informer's resourceVersion) and compare it with the informers' view of the cluster, so
a cache that drifted from the API server (a missed event, a bad relist) is visible.

The comparer reports, like upstream, nodes the informer has but the cache lacks ("missed") or the
reverse ("redundant"), and the same for pods: every non-terminal pod the informer holds that is
assigned, or unassigned with a ``schedulerName`` this scheduler serves, must be in the cache (on a
node) or in the scheduling queue.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from kubesched.scheduler.comparer import compare_cache

if TYPE_CHECKING:
    from kubesched.api.types import PodInfo
    from kubesched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)


def dump(sched: Scheduler) -> dict[str, Any]:
    """Everything ``/debug/cache`` shows: nodes with their pods, assumed pods, the queue, the
    informers and the comparer's verdict."""
    cache = sched.cache
    nodes = {}
    for name, info in sorted(cache.nodes.items()):
        nodes[name] = {
            "present": info.node is not None,
            "requested": dict(info.requested),
            "allocatable": dict(info.allocatable),
            "pods": [_pod(p, cache.is_assumed(p.uid)) for p in sorted(info.pods.values(), key=lambda p: p.key)],
        }
    pending, summary = sched.queue.pending_pods()
    return {
        "nodes": nodes,
        "assumedPods": sorted(cache.pod_states[uid].pod.key for uid in cache.assumed if uid in cache.pod_states),
        "queue": {"summary": summary, "counts": sched.queue.counts(),
                  "pending": sorted(p.key for p in pending), "inFlight": sorted(p.key for p in sched.queue.in_flight_pods())},
        "informers": sched.informers.stats(),
        "comparer": compare(sched),
    }


def compare(sched: Scheduler) -> dict[str, list[str]]:
    """``CacheComparer.Compare``: missed and redundant nodes (by name) and pods (by namespace/name)."""
    return compare_cache(sched).as_dict()


def log_dump(sched: Scheduler) -> None:
    """What SIGUSR2 does: log the comparison, then the dump (upstream logs both at Info)."""
    snapshot = dump(sched)
    verdict = snapshot.pop("comparer")
    if any(verdict.values()):
        log.info("Cache mismatch: %s", json.dumps(verdict, sort_keys=True))
    else:
        log.info("Cache comparison: no mismatch")
    log.info("Dump of cached NodeInfo and scheduling queue: %s", json.dumps(snapshot, sort_keys=True, default=str))


def _pod(pod: PodInfo, assumed: bool) -> dict[str, Any]:
    status = pod.status
    return {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid, "nodeName": pod.node_name,
            "phase": status.get("phase", ""), "nominatedNodeName": status.get("nominatedNodeName", ""), "assumed": assumed}
