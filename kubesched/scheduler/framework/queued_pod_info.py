"""What the scheduling queue keeps about each pod (upstream ``framework.QueuedPodInfo``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.events import ClusterEvent


@dataclass(eq=False)
class QueuedPodInfo:
    pod_info: PodInfo
    #: When the pod was added to the queue (or last moved back to it); ties in PrioritySort.
    timestamp: float
    #: Scheduling attempts so far, for metrics and backoff.
    attempts: int = 0
    #: Attempts that ended Unschedulable (not Error): drives the backoff duration.
    unschedulable_count: int = 0
    #: Consecutive attempts that ended in Error: drives the error backoff.
    consecutive_errors_count: int = 0
    #: First time the pod entered the queue, for pod_scheduling_sli_duration_seconds.
    initial_attempt_timestamp: float | None = None
    #: Plugins that rejected the pod in its last attempt; their events move it back.
    unschedulable_plugins: set[str] = field(default_factory=set)
    #: Plugins that returned Pending in its last attempt.
    pending_plugins: set[str] = field(default_factory=set)
    #: The PreEnqueue plugin that keeps the pod out of activeQ, if any.
    gating_plugin: str = ""
    #: Events the gating plugin registered: only these (and wildcard ones) can un-gate the pod.
    gating_plugin_events: list[ClusterEvent] = field(default_factory=list)
    #: Cached backoff expiry (seconds on the queue's clock), None until computed.
    backoff_expiration: float | None = None

    @property
    def pod(self) -> dict[str, Any]:
        return self.pod_info.pod

    @property
    def uid(self) -> str:
        return self.pod_info.uid

    @property
    def key(self) -> str:
        """``namespace/name``: how activeQ, backoffQ and unschedulablePods identify the pod."""
        return self.pod_info.key

    def snapshot(self) -> QueuedPodInfo:
        """A shallow copy that later changes to this object do not affect (cheaper than copy.copy)."""
        clone = object.__new__(QueuedPodInfo)
        clone.__dict__.update(self.__dict__)
        return clone
