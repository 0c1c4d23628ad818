"""PrioritySort: the queue order. Higher priority first; among equals, the pod queued earlier."""

from __future__ import annotations

from collections.abc import Callable

from kubesched.scheduler.framework.interface import QueueSortPlugin
from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo
from kubesched.scheduler.plugins import names


class PrioritySort(QueueSortPlugin):
    name = names.PrioritySort

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod_info.priority, b.pod_info.priority
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)

    def sort_key(self) -> Callable[[QueuedPodInfo], tuple[int, float]]:
        """(-priority, queued time): ``less``'s order as a key the active queue compares in C."""
        return _priority_then_time


def _priority_then_time(qpi: QueuedPodInfo) -> tuple[int, float]:
    return -qpi.pod_info.priority, qpi.timestamp
