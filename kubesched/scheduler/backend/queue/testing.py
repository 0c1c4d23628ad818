"""Helpers for tests of the scheduling queue and of code that drives it (upstream ``queue/testing.go``)."""

from __future__ import annotations

from typing import Any

from kubesched.api.types import DEFAULT_SCHEDULER_NAME, PodInfo
from kubesched.scheduler.backend.queue.scheduling_queue import QueueProfile, SchedulingQueue
from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo
from kubesched.utils.clock import Clock, ManualClock


def priority_less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """PrioritySort's less: higher priority first, then the earlier queue timestamp."""
    pa, pb = a.pod_info.priority, b.pod_info.priority
    return pa > pb or (pa == pb and a.timestamp < b.timestamp)


def make_pod(name: str, namespace: str = "default", *, uid: str | None = None, priority: int | None = None,
             nominated_node: str = "", node_name: str = "", scheduler_name: str = "",
             gates: tuple[str, ...] = (), labels: dict[str, str] | None = None,
             affinity: dict[str, Any] | None = None) -> PodInfo:
    """A parsed pod with just the fields the queue looks at."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause"}]}
    if priority is not None:
        spec["priority"] = priority
    if node_name:
        spec["nodeName"] = node_name
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if affinity:
        spec["affinity"] = affinity
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"{namespace}-{name}-uid"}
    if labels:
        metadata["labels"] = labels
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {}}
    if nominated_node:
        pod["status"]["nominatedNodeName"] = nominated_node
    return PodInfo(pod)


def new_test_queue(clock: Clock | None = None, profile: QueueProfile | None = None, **kwargs: Any) -> SchedulingQueue:
    """A queue with PrioritySort and one profile for the default scheduler name (upstream ``NewTestQueue``)."""
    return SchedulingQueue(clock or ManualClock(), priority_less, {DEFAULT_SCHEDULER_NAME: profile or QueueProfile()}, **kwargs)
