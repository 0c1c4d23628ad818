"""NodeUnschedulable: ``spec.unschedulable`` nodes (cordoned) take only pods tolerating
``node.kubernetes.io/unschedulable:NoSchedule`` (upstream ``nodeunschedulable``)."""

from __future__ import annotations

from typing import Any

from kubesched.api.types import PodInfo, Taint
from kubesched.scheduler.features import DEFAULT_GATES
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import BatchFilterPlugin, EnqueueExtensions, FilterVerdict, SignFragment, SignPlugin
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeBatch
from kubesched.scheduler.plugins import _signers as signers
from kubesched.scheduler.plugins import names
from kubesched.scheduler.plugins._hints import is_same_pod
from kubesched.scheduler.plugins.tainttoleration.taint_toleration import COMPARISON_GATE, tolerations_tolerate

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
UNSCHEDULABLE_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, "", "NoSchedule")


def tolerates_unschedulable(pod: PodInfo, comparison_operators: bool = False) -> bool:
    """Whether the pod tolerates the taint a cordoned node stands for."""
    return tolerations_tolerate(pod.tolerations, UNSCHEDULABLE_TAINT, comparison_operators)


class NodeUnschedulable(SignPlugin, BatchFilterPlugin, EnqueueExtensions):
    name = names.NodeUnschedulable
    reads_node_pods = False

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        gates = getattr(handle, "feature_gates", None) or DEFAULT_GATES
        self.comparison_operators = gates.enabled(COMPARISON_GATE)
        self._unschedulable = Status(Code.UnschedulableAndUnresolvable, ERR_REASON_UNSCHEDULABLE)

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        """Whether the pod tolerates the unschedulable taint."""
        return [signers.tolerations(pod)]

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        cordoned = nodes.col(nodes.table.unschedulable)
        if not cordoned.any() or tolerates_unschedulable(pod, self.comparison_operators):
            return None
        return FilterVerdict.fail_where(cordoned, self._unschedulable)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add | ActionType.UpdateNodeTaint), self._after_node_change),
            ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.UpdatePodToleration), self._after_pod_toleration_change),
        ]

    @staticmethod
    def _after_node_change(_pod: dict, old: Any, new: Any) -> QueueingHint:
        """A schedulable node was added, or a node was uncordoned."""
        now_schedulable = not (new.get("spec") or {}).get("unschedulable")
        was_unschedulable = old is None or bool((old.get("spec") or {}).get("unschedulable"))
        return QueueingHint.Queue if was_unschedulable and now_schedulable else QueueingHint.QueueSkip

    def _after_pod_toleration_change(self, pod: dict, _old: Any, new: Any) -> QueueingHint:
        """The rejected pod itself now tolerates the unschedulable taint."""
        if not is_same_pod(pod, new):
            return QueueingHint.QueueSkip
        return QueueingHint.Queue if tolerates_unschedulable(PodInfo(new), self.comparison_operators) else QueueingHint.QueueSkip
