"""NodeUnschedulable: ``spec.unschedulable`` nodes (cordoned) take only pods tolerating
``node.kubernetes.io/unschedulable:NoSchedule``."""

from __future__ import annotations

from typing import Any

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.framework.interface import BatchFilterPlugin, EnqueueExtensions, FilterVerdict
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo, Taint, tolerates_taint
from kubesched.nodetable.table import NodeBatch
from kubesched.plugins import names

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_UNSCHEDULABLE_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, "", "NoSchedule")


def tolerates_unschedulable(pod: PodInfo) -> bool:
    return tolerates_taint(pod.tolerations, _UNSCHEDULABLE_TAINT)


class NodeUnschedulable(BatchFilterPlugin, EnqueueExtensions):
    name = names.NodeUnschedulable

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        cordoned = nodes.col(nodes.table.unschedulable)
        if not cordoned.any() or tolerates_unschedulable(pod):
            return None
        return FilterVerdict.fail_where(cordoned, Status(Code.UnschedulableAndUnresolvable, ERR_REASON_UNSCHEDULABLE))

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add | ActionType.UpdateNodeTaint), self._after_node_change),
            ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.UpdatePodToleration), self._after_pod_toleration_change),
        ]

    @staticmethod
    def _after_node_change(_pod: dict, old: Any, new: Any) -> QueueingHint:
        was_unschedulable = old is None or bool((old.get("spec") or {}).get("unschedulable"))
        now_schedulable = not (new.get("spec") or {}).get("unschedulable")
        return QueueingHint.Queue if was_unschedulable and now_schedulable else QueueingHint.QueueSkip

    @staticmethod
    def _after_pod_toleration_change(pod: dict, _old: Any, new: Any) -> QueueingHint:
        if new is None or new["metadata"].get("uid") != pod["metadata"].get("uid"):
            return QueueingHint.QueueSkip
        return QueueingHint.Queue if tolerates_unschedulable(PodInfo(new)) else QueueingHint.QueueSkip
