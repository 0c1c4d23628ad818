"""NodeResourcesFit: a node must have room for the pod's requests (pod count, cpu, memory,
ephemeral-storage, hugepages, extended resources), and nodes are scored by how allocated they
would be: LeastAllocated (default), MostAllocated or RequestedToCapacityRatio (upstream
``noderesources/fit.go``).

Filtering compares the pod's request with ``allocatable - requested`` for every node in one numpy
expression per requested resource; nodes failing the same way share one Status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api import resources as res
from kubesched.api.types import NodeInfo, PodInfo, node_allocatable
from kubesched.scheduler.config.args import LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO, NodeResourcesFitArgs
from kubesched.scheduler.features import DEFAULT_GATES
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    FilterVerdict,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    SignFragment,
    SignPlugin,
)
from kubesched.scheduler.framework.memo import memo_of
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import PODS, NodeBatch, NodeTable
from kubesched.scheduler.plugins import _signers as signers
from kubesched.scheduler.plugins import names
from kubesched.scheduler.plugins._hints import is_same_pod
from kubesched.scheduler.plugins._resource_allocation import (
    POD_LEVEL_RESOURCES_GATE,
    ResourceSpec,
    RowScorer,
    Scorer,
    check_resources,
    least_allocated,
    least_allocated_row,
    most_allocated,
    most_allocated_row,
    pod_memo,
    pod_request_amounts,
    pod_request_list,
    requested_and_allocatable,
    requested_and_allocatable_row,
    requested_to_capacity_ratio,
    specs_from,
)

PRE_FILTER_KEY = "PreFilter" + names.NodeResourcesFit
PRE_SCORE_KEY = "PreScore" + names.NodeResourcesFit

TOO_MANY_PODS = "Too many pods"
_STANDARD_ORDER = (res.CPU, res.MEMORY, res.EPHEMERAL_STORAGE)
#: Up to this many failure reasons per node the failure keys are int64 bitmasks; wider requests
#: use Python ints (object arrays), slower but just as exact.
_MAX_BITS = 62


def build_scorer(kind: str, specs: Sequence[ResourceSpec], shape: Sequence[tuple[int, int]],
                 fast_paths: bool = True) -> Scorer:
    """The scoring strategy ``kind``'s scorer (``fast_paths``: float arithmetic where exact)."""
    if kind == LEAST_ALLOCATED:
        return least_allocated(specs, fast_paths)
    if kind == MOST_ALLOCATED:
        return most_allocated(specs, fast_paths)
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        return requested_to_capacity_ratio(specs, shape)
    raise ValueError(f"scoring strategy {kind} is not supported")


def build_row_scorer(kind: str, specs: Sequence[ResourceSpec]) -> RowScorer | None:
    """``build_scorer``'s scalar form on one row, where the strategy has one."""
    if kind == LEAST_ALLOCATED:
        return least_allocated_row(specs)
    if kind == MOST_ALLOCATED:
        return most_allocated_row(specs)
    return None


# --- the pod's request (``computePodResourceRequest``) ------------------------------------------
#: ``pod_fit_request`` by what it depends on (``PodInfo.requests_key``, the pod-level gate), so
#: that replicas of one template, read anew from the store by each component, share one answer.
_FIT_BY_KEY: dict[tuple[Any, bool], dict[str, int]] = {}
_FIT_MEMO_LIMIT = 8192


def pod_fit_request(pod: PodInfo, pod_level: bool = True) -> dict[str, int]:
    """The pod's request as NodeResourcesFit reads it (read-only): cpu (millicores), memory,
    ephemeral-storage and scalar resources (hugepages, extended, ``*kubernetes.io/*``);
    zero-valued scalars kept."""
    def compute() -> dict[str, int]:
        amounts = pod_request_amounts(pod, non_missing=False, pod_level=pod_level)
        return {name: res.to_int(name, amount) for name, amount in amounts.items()
                if name in _STANDARD_ORDER or res.is_scalar(name)}

    def shared() -> dict[str, int]:
        key = pod.requests_key
        if key is None:
            return compute()
        found = _FIT_BY_KEY.get((key, pod_level))
        if found is None:
            if len(_FIT_BY_KEY) >= _FIT_MEMO_LIMIT:
                _FIT_BY_KEY.clear()
            found = _FIT_BY_KEY[(key, pod_level)] = compute()
        return found

    return pod_memo(pod, f"_fit_request_{pod_level}", shared)


def checked_resources(request: Mapping[str, int], ignored: Iterable[str] = (),
                      ignored_groups: Iterable[str] = ()) -> list[tuple[str, int]]:
    """The non-zero requests Filter compares, in the order upstream reports them: cpu, memory,
    ephemeral-storage, then scalar resources (sorted; Go visits them in map order). Extended
    resources named in ``ignored`` or whose prefix is in ``ignored_groups`` are left out."""
    ignored, ignored_groups = frozenset(ignored), frozenset(ignored_groups)
    checked = [(name, request[name]) for name in _STANDARD_ORDER if request.get(name, 0) > 0]
    for name in sorted(n for n in request if n not in _STANDARD_ORDER):
        amount = request[name]
        if amount == 0:
            continue
        if res.is_extended(name) and (name in ignored or name.split("/", 1)[0] in ignored_groups):
            continue
        checked.append((name, amount))
    return checked


class _FitRequest:
    """PreFilter state: the requests Filter compares (computed once per cycle)."""

    __slots__ = ("amounts", "bits", "checked", "reasons")

    def __init__(self, checked: list[tuple[str, int]]) -> None:
        self.checked = checked
        self.reasons = [TOO_MANY_PODS] + [f"Insufficient {name}" for name, _ in checked]
        self.amounts = np.array([amount for _, amount in checked], dtype=np.int64)
        #: The failure bit of each check.
        if len(self.reasons) <= _MAX_BITS:
            self.bits = np.left_shift(1, np.arange(len(self.reasons), dtype=np.int64))
        else:
            self.bits = np.array([1 << bit for bit in range(len(self.reasons))], dtype=object)

    def clone(self) -> _FitRequest:
        return self


# --- per-node fitting (``Fits``), for hints and the kubelet -----------------------------------
@dataclass(frozen=True)
class InsufficientResource:
    """What a node lacks (upstream ``InsufficientResource``); the kubelet prints the numbers."""

    resource_name: str
    reason: str
    requested: int
    used: int
    capacity: int
    unresolvable: bool = False


def fits_request(request: Mapping[str, int], pod_count: int, allocatable: Mapping[str, int], requested: Mapping[str, int],
                 ignored: Iterable[str] = (), ignored_groups: Iterable[str] = ()) -> list[InsufficientResource]:
    """``fitsRequest`` on one node's aggregates."""
    out = []
    allowed = allocatable.get(res.PODS, 0)
    if pod_count + 1 > allowed:
        out.append(InsufficientResource(res.PODS, TOO_MANY_PODS, 1, pod_count, allowed))
    for name, amount in checked_resources(request, ignored, ignored_groups):
        alloc, used = allocatable.get(name, 0), requested.get(name, 0)
        if amount > alloc - used:
            out.append(InsufficientResource(name, f"Insufficient {name}", amount, used, alloc, amount > alloc))
    return out


def fits(pod: PodInfo, node_info: NodeInfo, pod_level: bool = True) -> list[InsufficientResource]:
    """``noderesources.Fits``: what the node lacks for the pod (no resources ignored)."""
    return fits_request(pod_fit_request(pod, pod_level), len(node_info.pods), node_info.allocatable, node_info.requested)


def insufficient_resources(pod: PodInfo, node_info: NodeInfo) -> list[str]:
    """The reasons of ``fits`` ("Too many pods", "Insufficient cpu", ...), for the kubelet's admission."""
    return [r.reason for r in fits(pod, node_info)]


def fits_empty_node(pod: PodInfo, node: Mapping, pod_level: bool = True) -> bool:
    """``isFit``: whether the pod fits the node with nothing on it (no resources ignored)."""
    return not fits_request(pod_fit_request(pod, pod_level), 0, node_allocatable(node), {})


def requested_resources_increased(pod: PodInfo, old: Mapping, new: Mapping, pod_level: bool = True) -> bool:
    """``haveAnyRequestedResourcesIncreased``: more pods allowed, or more of something the pod asks for."""
    before, after = node_allocatable(old), node_allocatable(new)
    if after.get(res.PODS, 0) > before.get(res.PODS, 0):
        return True
    request = pod_fit_request(pod, pod_level)
    return any(amount > 0 and after.get(name, 0) > before.get(name, 0) for name, amount in request.items())


# --- the plugin ---------------------------------------------------------------------------------------
class NodeResourcesFit(SignPlugin, PreFilterPlugin, BatchFilterPlugin, PreScorePlugin, BatchScorePlugin, EnqueueExtensions):
    name = names.NodeResourcesFit
    Args = NodeResourcesFitArgs

    def __init__(self, args: NodeResourcesFitArgs | None = None, handle: Any = None) -> None:
        gates = getattr(handle, "feature_gates", None) or DEFAULT_GATES
        if args is None:
            args = NodeResourcesFitArgs()
            args.set_defaults(gates)
        super().__init__(args, handle)
        self.pod_level = gates.enabled(POD_LEVEL_RESOURCES_GATE)
        self.ignored = frozenset(args.ignored_resources or ())
        self.ignored_groups = frozenset(args.ignored_resource_groups or ())
        strategy = args.scoring_strategy
        if strategy is None:
            raise ValueError("scoring strategy not specified")
        self.strategy = strategy.type
        self.resources = specs_from(strategy.resources)
        rtcr = strategy.requested_to_capacity_ratio
        shape = [(p.utilization, p.score) for p in rtcr.shape] if rtcr is not None else []
        self.scorer = build_scorer(self.strategy, self.resources, shape, self.fast_paths)
        #: The scorer's scalar form, for a few changed rows (None: the strategy has none).
        self.row_scorer = build_row_scorer(self.strategy, self.resources)
        #: Profiles share the snapshot's memos: scores are kept apart per scoring configuration.
        self._score_memo = f"{self.name}/score/{self.strategy}/{self.resources}/{shape}"

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        """Filtering and scoring read the pod's requests."""
        fragment = signers.resources(pod)
        return fragment if isinstance(fragment, Status) else [fragment]

    # --- PreFilter / Filter -------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        request = pod_fit_request(pod, self.pod_level)
        state.write(PRE_FILTER_KEY, _FitRequest(checked_resources(request, self.ignored, self.ignored_groups)))
        return None, None

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        request: _FitRequest | None = state.get(PRE_FILTER_KEY)
        if request is None:
            return FilterVerdict.all_fail(len(nodes), Status.from_error(RuntimeError(
                f'error reading "{PRE_FILTER_KEY}" from cycleState: not found')))
        table = nodes.table
        return memo_of(table, self.name).verdict(
            ("filter", tuple(request.checked)), lambda batch: self._failure_keys(request, batch),
            lambda key: _status_of_key(key, request.reasons), nodes, memoise=self.fast_paths,
            per_row=lambda row: self._failure_key_of_row(request, table, row))

    def filter_row(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> Status | None:
        request: _FitRequest | None = state.get(PRE_FILTER_KEY)
        if request is None or not self.fast_paths:
            return super().filter_row(state, pod, table, row)
        key = self._failure_key_of_row(request, table, row)
        return None if key == 0 else _status_of_key(key, request.reasons)

    @staticmethod
    def _failures(request: _FitRequest, nodes: NodeBatch) -> tuple[np.ndarray, np.ndarray]:
        """Per check (pods first, then each checked resource) and node, whether the node is short;
        and per node whether it is short beyond its allocatable (preemption cannot help there)."""
        table = nodes.table
        short = np.empty((len(request.checked) + 1, len(nodes)), dtype=bool)
        short[0] = nodes.col(table.pod_count) + 1 > nodes.col(table.allocatable[PODS])
        if not request.checked:
            return short, np.zeros(len(nodes), dtype=bool)
        # A resource no node has reads as a row of zeros: short everywhere, and unresolvably so.
        known = [table.resource_row(name) for name, _ in request.checked]
        rows = [0 if idx is None else idx for idx in known]
        alloc = nodes.col(table.allocatable[rows])
        free = alloc - nodes.col(table.requested[rows])
        if None in known:
            absent = np.array([idx is None for idx in known])
            alloc[absent] = free[absent] = 0
        amounts = request.amounts[:, None]
        short[1:] = amounts > free
        unresolvable = np.asarray((short[1:] & (amounts > alloc)).any(axis=0))
        return short, unresolvable

    @classmethod
    def _failure_keys(cls, request: _FitRequest, nodes: NodeBatch) -> np.ndarray:
        """One int per node: a bit per failed check, negated when unresolvable (0: the node fits)."""
        short, unresolvable = cls._failures(request, nodes)
        keys = request.bits @ short
        return np.where(unresolvable, -keys, keys)

    @staticmethod
    def _failure_key_of_row(request: _FitRequest, table: NodeTable, row: int) -> int:
        """``_failure_keys`` of one row, in Python ints (the memo's scalar form, for a few rows)."""
        key = 1 if table.pod_count[row] + 1 > table.allocatable[PODS, row] else 0
        unresolvable = False
        for bit, (name, amount) in enumerate(request.checked, start=1):
            idx = table.resource_row(name)
            alloc = 0 if idx is None else int(table.allocatable[idx, row])
            free = 0 if idx is None else alloc - int(table.requested[idx, row])
            if amount > free:
                key |= 1 << bit
                unresolvable = unresolvable or amount > alloc
        return -key if unresolvable else key

    # --- Score --------------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        requests = pod_request_list(pod, self.resources, use_requested=False, pod_level=self.pod_level,
                                    memoise=self.fast_paths)
        state.write(PRE_SCORE_KEY, requests)
        return None

    def score_row(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> int:
        pod_requests = state.get(PRE_SCORE_KEY)
        if pod_requests is None or self.row_scorer is None or not self.fast_paths:
            return super().score_row(state, pod, table, row)
        check_resources(self.resources)
        return self.row_scorer(requested_and_allocatable_row(table, row, self.resources, pod_requests, use_requested=False))

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        check_resources(self.resources)
        pod_requests = state.get(PRE_SCORE_KEY)
        if pod_requests is None:
            pod_requests = pod_request_list(pod, self.resources, use_requested=False, pod_level=self.pod_level,
                                            memoise=self.fast_paths)
        def compute(batch: NodeBatch) -> np.ndarray:
            requested, allocatable = requested_and_allocatable(batch, self.resources, pod_requests, use_requested=False)
            return self.scorer(requested, allocatable)

        table, row_scorer = nodes.table, self.row_scorer
        per_row = None if row_scorer is None else lambda row: row_scorer(
            requested_and_allocatable_row(table, row, self.resources, pod_requests, use_requested=False))
        return memo_of(table, self._score_memo).values(tuple(pod_requests), compute, nodes, memoise=self.fast_paths,
                                                       per_row=per_row)

    # --- requeueing -----------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.Delete | ActionType.UpdatePodScaleDown), self._after_pod_event),
            ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add | ActionType.UpdateNodeAllocatable), self._after_node_change),
        ]

    @staticmethod
    def _after_pod_event(pod: dict, old: Any, new: Any) -> QueueingHint:
        """A deleted pod that held (or was nominated to) a node, or a scale-down freeing what the pod asks for."""
        if new is None:
            spec, status = old.get("spec") or {}, old.get("status") or {}
            if not spec.get("nodeName") and not status.get("nominatedNodeName"):
                return QueueingHint.QueueSkip
            return QueueingHint.Queue
        return QueueingHint.Queue if _scale_down_helps(pod, old, new) else QueueingHint.QueueSkip

    def _after_node_change(self, pod: dict, old: Any, new: Any) -> QueueingHint:
        """A new node the pod fits, or an update growing something the pod asks for on a node it fits."""
        target = PodInfo(pod)
        if not fits_empty_node(target, new, self.pod_level):
            return QueueingHint.QueueSkip
        if old is None:
            return QueueingHint.Queue
        if not requested_resources_increased(target, old, new, self.pod_level):
            return QueueingHint.QueueSkip
        return QueueingHint.Queue


def _scale_down_helps(pod: dict, old: dict, new: dict) -> bool:
    """``isSchedulableAfterPodScaleDown``."""
    if is_same_pod(pod, new):
        return True
    if not (new.get("spec") or {}).get("nodeName"):
        return False
    before, after = _max_resource(old), _max_resource(new)
    for name, amount in res.pod_requests(pod).items():
        if amount == 0:
            continue
        if (name in _STANDARD_ORDER or res.is_scalar(name)) and before.get(name, 0) > after.get(name, 0):
            return True
    return False


def _max_resource(pod: dict) -> dict[str, int]:
    """``Resource.SetMaxResource(PodRequests(pod))``: the tracked resources as integers."""
    return {name: res.to_int(name, amount) for name, amount in res.pod_requests(pod).items()
            if name in _STANDARD_ORDER or res.is_scalar(name)}


# --- verdicts ---------------------------------------------------------------------------------------
def _status_of_key(key: int, reasons: list[str]) -> Status:
    bits = abs(key)
    failed = [reason for bit, reason in enumerate(reasons) if bits >> bit & 1]
    return Status(Code.UnschedulableAndUnresolvable if key < 0 else Code.Unschedulable, *failed)
