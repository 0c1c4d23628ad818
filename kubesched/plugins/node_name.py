"""NodeName: a pod that names a node (``spec.nodeName``) fits only that node."""

from __future__ import annotations

from typing import Any

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.framework.interface import BatchFilterPlugin, EnqueueExtensions, FilterVerdict
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo
from kubesched.nodetable.table import NodeBatch
from kubesched.plugins import names

ERR_REASON = "node(s) didn't match the requested node name"


class NodeName(BatchFilterPlugin, EnqueueExtensions):
    name = names.NodeName

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        wanted = pod.node_name
        if not wanted:
            return None
        row = nodes.table.row_of.get(wanted, -1)
        mismatch = nodes.row_ids() != row
        if np.all(~mismatch):
            return None
        return FilterVerdict.fail_where(mismatch, Status(Code.UnschedulableAndUnresolvable, ERR_REASON))

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add), self._after_node_add)]

    @staticmethod
    def _after_node_add(pod: dict, _old: Any, new: Any) -> QueueingHint:
        wanted = (pod.get("spec") or {}).get("nodeName")
        if not wanted or wanted == new["metadata"]["name"]:
            return QueueingHint.Queue
        return QueueingHint.QueueSkip
