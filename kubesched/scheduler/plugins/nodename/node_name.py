"""NodeName: a pod that names a node (``spec.nodeName``) fits only that node (upstream ``nodename``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import BatchFilterPlugin, EnqueueExtensions, FilterVerdict, SignFragment, SignPlugin
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeBatch
from kubesched.scheduler.plugins import _signers as signers
from kubesched.scheduler.plugins import names

ERR_REASON = "node(s) didn't match the requested node name"


def fits(pod: Mapping, node: Mapping) -> bool:
    """``nodename.Fits``: the pod names no node, or this one."""
    wanted = (pod.get("spec") or {}).get("nodeName")
    return not wanted or wanted == node["metadata"]["name"]


class NodeName(SignPlugin, BatchFilterPlugin, EnqueueExtensions):
    name = names.NodeName
    reads_node_pods = False

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self._mismatch = Status(Code.UnschedulableAndUnresolvable, ERR_REASON)

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        return [signers.node_name(pod)]

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        wanted = pod.node_name
        if not wanted:
            return None
        row = nodes.table.row_of.get(wanted, -1)
        return FilterVerdict.fail_where(nodes.row_ids() != row, self._mismatch)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add), self._after_node_add)]

    @staticmethod
    def _after_node_add(pod: dict, _old: Any, new: Any) -> QueueingHint:
        """Only the node the pod names can make it schedulable."""
        return QueueingHint.Queue if fits(pod, new) else QueueingHint.QueueSkip
