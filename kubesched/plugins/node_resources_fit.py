"""NodeResourcesFit: a node must have room for the pod's requests (pods, cpu, memory,
ephemeral-storage, hugepages, extended resources), and nodes are scored by how allocated they
would be (LeastAllocated by default, MostAllocated or RequestedToCapacityRatio).

Filtering compares the pod's request vector with ``allocatable - requested`` for every node in
one numpy expression per requested resource.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kubesched.api import resources as res
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    FilterVerdict,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
)
from kubesched.framework.status import Code, Status
from kubesched.framework.types import PodInfo, node_allocatable
from kubesched.nodetable.table import PODS, NodeBatch
from kubesched.plugins import names
from kubesched.plugins._resource_allocation import (
    DEFAULT_RESOURCES,
    ResourceSpec,
    Scorer,
    least_allocated,
    most_allocated,
    pod_request_list,
    requested_and_allocatable,
    requested_to_capacity_ratio,
)

PRE_FILTER_KEY = "PreFilter" + names.NodeResourcesFit
PRE_SCORE_KEY = "PreScore" + names.NodeResourcesFit

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"

_STANDARD_ORDER = (res.CPU, res.MEMORY, res.EPHEMERAL_STORAGE)


def _strategy(args: Any) -> tuple[str, tuple[ResourceSpec, ...], list[tuple[int, int]]]:
    strategy = getattr(args, "scoring_strategy", None)
    if strategy is None:
        return LEAST_ALLOCATED, DEFAULT_RESOURCES, []
    specs = tuple(ResourceSpec(r.name, r.weight) for r in (strategy.resources or ())) or DEFAULT_RESOURCES
    shape = []
    rtcr = getattr(strategy, "requested_to_capacity_ratio", None)
    if rtcr is not None:
        shape = [(p.utilization, p.score) for p in rtcr.shape]
    return strategy.type, specs, shape


def build_scorer(kind: str, specs: Sequence[ResourceSpec], shape: Sequence[tuple[int, int]]) -> Scorer:
    if kind == LEAST_ALLOCATED:
        return least_allocated(specs)
    if kind == MOST_ALLOCATED:
        return most_allocated(specs)
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        return requested_to_capacity_ratio(specs, shape)
    raise ValueError(f"scoring strategy {kind} is not supported")


class _Request:
    """The pod's requests in the order reasons are reported, computed once per cycle."""

    __slots__ = ("checked", "empty")

    def __init__(self, pod: PodInfo, ignored: frozenset[str], ignored_groups: frozenset[str]) -> None:
        requests = pod.requests
        checked: list[tuple[str, int]] = []
        for name in _STANDARD_ORDER:
            amount = requests.get(name, 0)
            if amount > 0:
                checked.append((name, amount))
        for name, amount in requests.items():
            if name in _STANDARD_ORDER or amount == 0:
                continue
            if res.is_extended(name) and (name in ignored or name.split("/", 1)[0] in ignored_groups):
                continue
            checked.append((name, amount))
        self.checked = checked
        self.empty = not any(requests.get(n, 0) for n in requests)

    def clone(self) -> _Request:
        return self


class NodeResourcesFit(PreFilterPlugin, BatchFilterPlugin, PreScorePlugin, BatchScorePlugin, EnqueueExtensions):
    name = names.NodeResourcesFit

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.ignored = frozenset(getattr(args, "ignored_resources", None) or ())
        self.ignored_groups = frozenset(getattr(args, "ignored_resource_groups", None) or ())
        self.strategy, self.resources, shape = _strategy(args)
        self.scorer = build_scorer(self.strategy, self.resources, shape)

    # --- PreFilter / Filter ---------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        state.write(PRE_FILTER_KEY, _Request(pod, self.ignored, self.ignored_groups))
        return None, None

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        request = state.get(PRE_FILTER_KEY)
        if request is None:
            return FilterVerdict.all_fail(len(nodes), Status(Code.Error, f'error reading "{PRE_FILTER_KEY}" from cycleState: not found'))
        table = nodes.table
        keys = np.zeros(len(nodes), dtype=np.int64)
        unresolvable = np.zeros(len(nodes), dtype=bool)
        reasons = ["Too many pods"]
        keys |= (nodes.col(table.pod_count) + 1 > nodes.col(table.allocatable[PODS])).astype(np.int64)
        if not request.empty:
            for bit, (name, amount) in enumerate(request.checked, start=1):
                reasons.append(f"Insufficient {name}")
                idx = table.resource_row(name)
                if idx is None:
                    keys |= 1 << bit
                    unresolvable[:] = True
                    continue
                alloc = nodes.col(table.allocatable[idx])
                short = amount > alloc - nodes.col(table.requested[idx])
                keys |= short.astype(np.int64) << bit
                unresolvable |= short & (amount > alloc)
        keys = np.where(unresolvable & (keys > 0), -keys, keys)
        return _verdict_from_keys(keys, reasons)

    # --- Score ----------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        state.write(PRE_SCORE_KEY, pod_request_list(pod, self.resources, use_requested=False))
        return None

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        pod_requests = state.get(PRE_SCORE_KEY) or pod_request_list(pod, self.resources, use_requested=False)
        requested, allocatable = requested_and_allocatable(nodes, self.resources, pod_requests, use_requested=False)
        return self.scorer(requested, allocatable)

    # --- requeueing -----------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.Delete | ActionType.UpdatePodScaleDown), self._after_pod_event),
            ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add | ActionType.UpdateNodeAllocatable), self._after_node_change),
        ]

    @staticmethod
    def _after_pod_event(pod: dict, old: Any, new: Any) -> QueueingHint:
        if new is None:
            return QueueingHint.Queue if (old.get("spec") or {}).get("nodeName") else QueueingHint.QueueSkip
        if new["metadata"].get("uid") == pod["metadata"].get("uid"):
            return QueueingHint.Queue
        if not (new.get("spec") or {}).get("nodeName"):
            return QueueingHint.QueueSkip
        before, after = PodInfo(old).requests, PodInfo(new).requests
        for name, amount in PodInfo(pod).requests.items():
            if amount and before.get(name, 0) > after.get(name, 0):
                return QueueingHint.Queue
        return QueueingHint.QueueSkip

    def _after_node_change(self, pod: dict, old: Any, new: Any) -> QueueingHint:
        target = PodInfo(pod)
        if not fits_empty_node(target, new, self.ignored, self.ignored_groups):
            return QueueingHint.QueueSkip
        if old is None:
            return QueueingHint.Queue
        before, after = node_allocatable(old), node_allocatable(new)
        if after.get(res.PODS, 0) > before.get(res.PODS, 0):
            return QueueingHint.Queue
        for name, amount in target.requests.items():
            if amount and after.get(name, 0) > before.get(name, 0):
                return QueueingHint.Queue
        return QueueingHint.QueueSkip


def fits_empty_node(pod: PodInfo, node: dict, ignored: frozenset[str] = frozenset(), ignored_groups: frozenset[str] = frozenset()) -> bool:
    """Whether the pod's requests fit the node's allocatable at all (upstream ``isFit``)."""
    allocatable = node_allocatable(node)
    if allocatable.get(res.PODS, 0) < 1:
        return False
    request = _Request(pod, ignored, ignored_groups)
    return all(amount <= allocatable.get(name, 0) for name, amount in request.checked)


def insufficient_resources(pod: PodInfo, node_info: Any) -> list[str]:
    """Reasons a pod does not fit a NodeInfo (upstream ``noderesources.Fits``), for the kubelet's admission."""
    reasons = []
    if len(node_info.pods) + 1 > node_info.allocatable.get(res.PODS, 0):
        reasons.append("Too many pods")
    for name, amount in _Request(pod, frozenset(), frozenset()).checked:
        if amount > node_info.allocatable.get(name, 0) - node_info.requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


def _verdict_from_keys(keys: np.ndarray, reasons: list[str]) -> FilterVerdict | None:
    """Nodes sharing a combination of failures share one Status; negative keys are unresolvable."""
    if not keys.any():
        return None
    statuses: dict[int, Status] = {}
    for key in np.unique(keys):
        key = int(key)
        if key == 0:
            continue
        bits = abs(key)
        failed = [reason for bit, reason in enumerate(reasons) if bits >> bit & 1]
        code = Code.UnschedulableAndUnresolvable if key < 0 else Code.Unschedulable
        statuses[key] = Status(code, *failed)
    ordered = sorted(statuses)
    lookup = {k: i for i, k in enumerate(ordered)}
    return FilterVerdict(_map_keys(keys, lookup), [statuses[k] for k in ordered])


def _map_keys(keys: np.ndarray, lookup: dict[int, int]) -> np.ndarray:
    codes = np.full(len(keys), -1, dtype=np.int32)
    for key, index in lookup.items():
        codes[keys == key] = index
    return codes
