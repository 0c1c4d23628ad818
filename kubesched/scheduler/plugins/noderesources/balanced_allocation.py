"""NodeResourcesBalancedAllocation: nodes whose requested fractions of the configured resources
(cpu and memory by default) stay close to each other once the pod lands score higher: the score
is ``(1 - standard deviation of the fractions) * 100`` (upstream ``noderesources/balanced_allocation.go``).

Best-effort pods (requesting none of the resources) are skipped in PreScore, as upstream does to
avoid piling them onto one node.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kubesched.api.types import PodInfo
from kubesched.scheduler.config.args import NodeResourcesBalancedAllocationArgs
from kubesched.scheduler.features import DEFAULT_GATES
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import BatchScorePlugin, PreScorePlugin, SignFragment, SignPlugin
from kubesched.scheduler.framework.memo import memo_of
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable
from kubesched.scheduler.plugins import _signers as signers
from kubesched.scheduler.plugins import names
from kubesched.scheduler.plugins._resource_allocation import (
    POD_LEVEL_RESOURCES_GATE,
    balanced_allocation,
    balanced_allocation_row,
    check_resources,
    is_best_effort,
    pod_request_list,
    requested_and_allocatable,
    requested_and_allocatable_row,
    specs_from,
)

PRE_SCORE_KEY = "PreScore" + names.NodeResourcesBalancedAllocation


class _PreScoreState:
    __slots__ = ("pod_requests",)

    def __init__(self, pod_requests: list[int]) -> None:
        self.pod_requests = pod_requests

    def clone(self) -> _PreScoreState:
        return self


class NodeResourcesBalancedAllocation(SignPlugin, PreScorePlugin, BatchScorePlugin):
    name = names.NodeResourcesBalancedAllocation
    Args = NodeResourcesBalancedAllocationArgs

    def __init__(self, args: NodeResourcesBalancedAllocationArgs | None = None, handle: Any = None) -> None:
        gates = getattr(handle, "feature_gates", None) or DEFAULT_GATES
        if args is None:
            args = NodeResourcesBalancedAllocationArgs()
            args.set_defaults(gates)
        super().__init__(args, handle)
        self.pod_level = gates.enabled(POD_LEVEL_RESOURCES_GATE)
        self.resources = specs_from(args.resources)
        #: Profiles share the snapshot's memos: scores are kept apart per resource list.
        self._memo = f"{self.name}/{self.resources}"

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        """Scoring reads the pod's requests."""
        fragment = signers.resources(pod)
        return fragment if isinstance(fragment, Status) else [fragment]

    def _requests(self, pod: PodInfo) -> list[int]:
        return pod_request_list(pod, self.resources, use_requested=True, pod_level=self.pod_level,
                                memoise=self.fast_paths)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        requests = self._requests(pod)
        if is_best_effort(requests):
            return Status(Code.Skip)
        state.write(PRE_SCORE_KEY, _PreScoreState(requests))
        return None

    def score_row(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> int:
        s: _PreScoreState | None = state.get(PRE_SCORE_KEY)
        if s is None or not self.fast_paths:
            return super().score_row(state, pod, table, row)
        check_resources(self.resources)
        return balanced_allocation_row(requested_and_allocatable_row(table, row, self.resources, s.pod_requests,
                                                                     use_requested=True))

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        s: _PreScoreState | None = state.get(PRE_SCORE_KEY)
        requests = s.pod_requests if s is not None else self._requests(pod)
        if s is None and is_best_effort(requests):
            return np.zeros(len(nodes), dtype=np.int64)
        check_resources(self.resources)

        def compute(batch: NodeBatch) -> np.ndarray:
            requested, allocatable = requested_and_allocatable(batch, self.resources, requests, use_requested=True)
            return balanced_allocation(requested, allocatable, self.fast_paths)

        table = nodes.table

        def per_row(row: int) -> int:
            return balanced_allocation_row(requested_and_allocatable_row(table, row, self.resources, requests, use_requested=True))

        return memo_of(table, self._memo).values(tuple(requests), compute, nodes, memoise=self.fast_paths,
                                                 per_row=per_row)
