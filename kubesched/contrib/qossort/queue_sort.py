"""QOSSort: the active queue ordered by priority, then QoS class (Guaranteed before Burstable
before BestEffort), then the time the pod was queued (scheduler-plugins ``pkg/qos/queue_sort.go``).

Among pods of equal priority, those whose requests equal their limits go first: they are the ones
a node's kubelet evicts last, so placing them early keeps the cluster's guaranteed workloads from
waiting behind best-effort ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.api.resources import qos_class
from kubesched.scheduler.framework.interface import QueueSortPlugin
from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo

#: Precedence of each QoS class: higher sorts first.
QOS_ORDER = {"BestEffort": 1, "Burstable": 2, "Guaranteed": 3}


class QOSSort(QueueSortPlugin):
    """Upstream ``qos.Sort``; takes no args."""

    name = "QOSSort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod_info.priority, b.pod_info.priority
        if pa != pb:
            return pa > pb
        qa, qb = QOS_ORDER[self.qos_of(a.pod)], QOS_ORDER[self.qos_of(b.pod)]
        if qa != qb:
            return qa > qb
        return a.timestamp < b.timestamp

    def qos_of(self, pod: Mapping[str, Any]) -> str:
        """The pod's QoS class as ``qos.GetPodQOS`` reads it: the one its status records, else
        computed from its resources (pod-level ones with the PodLevelResources gate)."""
        recorded = (pod.get("status") or {}).get("qosClass")
        if recorded in QOS_ORDER:
            return str(recorded)
        gates = self.handle.feature_gates if self.handle is not None else None
        return qos_class(pod, gates.enabled("PodLevelResources") if gates is not None else True)


__all__ = ["QOS_ORDER", "QOSSort"]
