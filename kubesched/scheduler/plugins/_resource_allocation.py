"""Scoring helpers shared by the in-tree score plugins, vectorised over nodes.

* upstream ``noderesources/resource_allocation.go``: a pod's request per configured resource, and
  per node the (requested + pod request, allocatable) pair for each resource, as int64 arrays;
* the strategies over those arrays: LeastAllocated, MostAllocated, RequestedToCapacityRatio
  (``helper.BuildBrokenLinearFunction``) and BalancedAllocation's standard deviation;
* ``helper.DefaultNormalizeScore``.

Every formula keeps Go's integer semantics (truncating division, int64 conversion of floats) so
scores are bit-for-bit upstream's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from kubesched.api import resources as res
from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.interface import MAX_NODE_SCORE
from kubesched.scheduler.framework.status import Status, StatusError
from kubesched.scheduler.nodetable.table import CPU, EPHEMERAL, MEMORY, NodeBatch, NodeTable

MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10
POD_LEVEL_RESOURCES_GATE = "PodLevelResources"

#: ``schedutil.DefaultMilliCPURequest`` / ``DefaultMemoryRequest`` as exact amounts, the
#: ``NonMissingContainerRequests`` NodeResourcesFit scores with.
NON_MISSING_DEFAULTS = {
    res.CPU: Fraction(res.DEFAULT_MILLI_CPU_REQUEST, 1000),
    res.MEMORY: Fraction(res.DEFAULT_MEMORY_REQUEST),
}


@dataclass(frozen=True)
class ResourceSpec:
    name: str
    weight: int


DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))

Scorer = Callable[[list[np.ndarray], list[np.ndarray]], np.ndarray]


def specs_from(resources: Sequence[Any] | None) -> tuple[ResourceSpec, ...]:
    """Config ``ResourceSpec`` objects (name, weight) as this module's immutable specs."""
    return tuple(ResourceSpec(r.name, r.weight) for r in resources or ())


def pod_memo(pod: PodInfo, key: str, compute: Callable[[], Any]) -> Any:
    """A value derived from the pod, computed once for the pod's life (PodInfo keeps a ``__dict__``)."""
    cache = pod.__dict__
    if key not in cache:
        cache[key] = compute()
    return cache[key]


# --- the pod's requests -------------------------------------------------------------------------
def pod_request_amounts(pod: PodInfo, non_missing: bool, pod_level: bool = True) -> dict[str, Fraction]:
    """``resourcehelper.PodRequests`` of the pod: with the 100m / 200Mi defaults for containers that
    ask nothing when ``non_missing``; without pod-level ``spec.resources`` when not ``pod_level``."""
    if pod_level:
        return pod.non_zero_amounts if non_missing else pod.request_amounts

    def compute() -> dict[str, Fraction]:
        defaults = NON_MISSING_DEFAULTS if non_missing else None
        amounts = res.aggregate_container_requests(pod.pod, defaults)
        overhead = res.parse_list((pod.spec.get("overhead")) or {})
        for name, amount in overhead.items():
            amounts[name] = amounts.get(name, Fraction(0)) + amount
        return amounts

    return pod_memo(pod, f"_ra_amounts_{non_missing}_{pod_level}", compute)


_LISTS: dict[tuple, list[int]] = {}


def pod_request_list(pod: PodInfo, specs: Sequence[ResourceSpec], use_requested: bool, pod_level: bool = True,
                     memoise: bool = True) -> list[int]:
    """``calculatePodResourceRequestList``: the pod's request for each configured resource, cpu in
    millicores. Scoring on non-zero requests (``use_requested`` False) fills in the defaults.
    Memoised (unless ``memoise`` is off) by the pod's requests key, so replicas of one template
    compute it once."""
    key = pod.requests_key if memoise else None
    if key is not None:
        found = _LISTS.get((key, tuple(specs), use_requested, pod_level))
        if found is not None:
            return found
    amounts = pod_request_amounts(pod, not use_requested, pod_level)
    result = [res.to_int(spec.name, amounts.get(spec.name, Fraction(0))) for spec in specs]
    if key is not None:
        if len(_LISTS) > 4096:
            _LISTS.clear()
        _LISTS[(key, tuple(specs), use_requested, pod_level)] = result
    return result


def is_best_effort(pod_requests: Sequence[int]) -> bool:
    return not any(pod_requests)


# --- the nodes' side ------------------------------------------------------------------------------
def requested_and_allocatable(nodes: NodeBatch, specs: Sequence[ResourceSpec], pod_requests: Sequence[int],
                              use_requested: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``calculateResourceAllocatableRequest`` for every node: per resource, (node requested + pod
    request, node allocatable), both zero where the resource is left out of the score (a scalar
    resource the pod does not ask for, one the node lacks, or a name that is not a resource)."""
    size = len(nodes)
    requested_list, allocatable_list = [], []
    for spec, pod_req in zip(specs, pod_requests):
        used, alloc = _node_columns(nodes, spec.name, pod_req, use_requested)
        if alloc is None:
            requested_list.append(np.zeros(size, dtype=np.int64))
            allocatable_list.append(np.zeros(size, dtype=np.int64))
            continue
        requested = used + pod_req
        if not alloc.all():
            requested = np.where(alloc != 0, requested, 0)
        requested_list.append(requested)
        allocatable_list.append(alloc)
    return requested_list, allocatable_list


def _node_columns(nodes: NodeBatch, name: str, pod_req: int, use_requested: bool) -> tuple[np.ndarray, np.ndarray | None]:
    table = nodes.table
    if name == res.CPU:
        used = table.requested[CPU] if use_requested else table.non_zero[0]
        return nodes.col(used), nodes.col(table.allocatable[CPU])
    if name == res.MEMORY:
        used = table.requested[MEMORY] if use_requested else table.non_zero[1]
        return nodes.col(used), nodes.col(table.allocatable[MEMORY])
    if name == res.EPHEMERAL_STORAGE:
        return nodes.col(table.requested[EPHEMERAL]), nodes.col(table.allocatable[EPHEMERAL])
    idx = table.resource_row(name)
    if pod_req == 0 or not res.is_scalar(name) or idx is None:
        return np.zeros(0, dtype=np.int64), None
    return nodes.col(table.requested[idx]), nodes.col(table.allocatable[idx])


def requested_and_allocatable_row(table: NodeTable, row: int, specs: Sequence[ResourceSpec], pod_requests: Sequence[int],
                                  use_requested: bool) -> list[tuple[int, int]]:
    """``requested_and_allocatable`` of one row, as Python ints (the scalar form, for a few rows)."""
    pairs = []
    for spec, pod_req in zip(specs, pod_requests):
        name = spec.name
        if name == res.CPU:
            used = table.requested[CPU, row] if use_requested else table.non_zero[0, row]
            alloc = int(table.allocatable[CPU, row])
        elif name == res.MEMORY:
            used = table.requested[MEMORY, row] if use_requested else table.non_zero[1, row]
            alloc = int(table.allocatable[MEMORY, row])
        elif name == res.EPHEMERAL_STORAGE:
            used, alloc = table.requested[EPHEMERAL, row], int(table.allocatable[EPHEMERAL, row])
        else:
            idx = table.resource_row(name)
            if pod_req == 0 or not res.is_scalar(name) or idx is None:
                pairs.append((0, 0))
                continue
            used, alloc = table.requested[idx, row], int(table.allocatable[idx, row])
        pairs.append((int(used) + pod_req if alloc else 0, alloc))
    return pairs


def check_resources(specs: Sequence[ResourceSpec]) -> None:
    """Upstream's ``resources not found`` error for a scorer configured with no resources."""
    if not specs:
        raise StatusError(Status.from_error(RuntimeError("resources not found")))


# --- strategies -------------------------------------------------------------------------------------
def go_div(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """Integer division truncating toward zero, as Go's ``/`` on int64."""
    q = np.abs(a) // np.abs(b)
    return np.where((np.sign(a) * np.sign(b)) < 0, -q, q)


#: Below this capacity, ``floor(x * 100 / cap)`` computed in float64 equals Go's int64 result: the
#: products stay exact (< 2**53) and a non-integer quotient is at least 1/cap away from the next
#: integer, far more than float64's rounding error at 100.
FLOAT_EXACT_LIMIT = 2**44


def _floats_exact(allocatable: list[np.ndarray]) -> bool:
    return all(len(a) == 0 or int(a.max()) < FLOAT_EXACT_LIMIT for a in allocatable)


def _weighted(specs: Sequence[ResourceSpec], per_resource: Callable[[np.ndarray, np.ndarray, bool], np.ndarray],
              fast_paths: bool) -> Scorer:
    """Weighted integer mean of per-resource scores over the resources the node has. With
    ``fast_paths``, float arithmetic where it gives the integer result exactly."""
    def scorer(requested: list[np.ndarray], allocatable: list[np.ndarray]) -> np.ndarray:
        size = len(requested[0]) if requested else 0
        exact = fast_paths and _floats_exact(allocatable)
        total = np.zeros(size)
        weights: np.ndarray | int = 0
        for spec, req, alloc in zip(specs, requested, allocatable):
            if alloc.all():
                total += per_resource(req, alloc, exact) * spec.weight
                weights = weights + spec.weight
                continue
            present = alloc != 0
            score = per_resource(req, np.where(present, alloc, 1), exact)
            total += np.where(present, score * spec.weight, 0)
            weights = weights + np.where(present, spec.weight, 0)
        if isinstance(weights, int):
            return np.floor(total / weights).astype(np.int64) if weights else np.zeros(size, dtype=np.int64)
        return np.where(weights > 0, np.floor(total / np.maximum(weights, 1)), 0).astype(np.int64)

    return scorer


def least_allocated(specs: Sequence[ResourceSpec], fast_paths: bool = True) -> Scorer:
    """``leastRequestedScore``: ``(capacity - requested) * 100 / capacity``, 0 when over capacity."""
    def score(req: np.ndarray, cap: np.ndarray, exact: bool) -> np.ndarray:
        if exact:
            return np.floor(np.maximum(cap - req, 0) * float(MAX_NODE_SCORE) / cap)
        return np.where(req > cap, 0, ((cap - req) * MAX_NODE_SCORE) // cap).astype(np.float64)

    return _weighted(specs, score, fast_paths)


def most_allocated(specs: Sequence[ResourceSpec], fast_paths: bool = True) -> Scorer:
    """``mostRequestedScore``: ``requested * 100 / capacity``, requested capped at capacity."""
    def score(req: np.ndarray, cap: np.ndarray, exact: bool) -> np.ndarray:
        if exact:
            return np.floor(np.minimum(req, cap) * float(MAX_NODE_SCORE) / cap)
        return ((np.minimum(req, cap) * MAX_NODE_SCORE) // cap).astype(np.float64)

    return _weighted(specs, score, fast_paths)


RowScorer = Callable[[list[tuple[int, int]]], int]


def _weighted_row(specs: Sequence[ResourceSpec], per_resource: Callable[[int, int], int]) -> RowScorer:
    """``_weighted``'s scalar form on one row's (requested, allocatable) pairs, in Go's integers
    (the float path there is taken only where it gives these)."""
    def scorer(pairs: list[tuple[int, int]]) -> int:
        total = weights = 0
        for spec, (req, alloc) in zip(specs, pairs):
            if alloc:
                total += per_resource(req, alloc) * spec.weight
                weights += spec.weight
        return total // weights if weights > 0 else 0

    return scorer


def least_allocated_row(specs: Sequence[ResourceSpec]) -> RowScorer:
    """``least_allocated`` of one row."""
    return _weighted_row(specs, lambda req, cap: 0 if req > cap else (cap - req) * MAX_NODE_SCORE // cap)


def most_allocated_row(specs: Sequence[ResourceSpec]) -> RowScorer:
    """``most_allocated`` of one row."""
    return _weighted_row(specs, lambda req, cap: min(req, cap) * MAX_NODE_SCORE // cap)


def broken_linear(shape: Sequence[tuple[int, int]]) -> Callable[[np.ndarray], np.ndarray]:
    """``helper.BuildBrokenLinearFunction`` over an array of utilizations."""
    def fn(p: np.ndarray) -> np.ndarray:
        out = np.full(p.shape, shape[-1][1], dtype=np.int64)
        decided = np.zeros(p.shape, dtype=bool)
        for i, (util, score) in enumerate(shape):
            hit = (~decided) & (p <= util)
            if i == 0:
                out[hit] = score
            else:
                pu, ps = shape[i - 1]
                out[hit] = ps + go_div((score - ps) * (p[hit] - pu), util - pu)
            decided |= hit
        return out

    return fn


def go_round(x: np.ndarray) -> np.ndarray:
    """``math.Round`` (half away from zero) of non-negative floats, as int64."""
    whole = np.trunc(x)
    return (whole + ((x - whole) >= 0.5)).astype(np.int64)


def requested_to_capacity_ratio(specs: Sequence[ResourceSpec], shape: Sequence[tuple[int, int]]) -> Scorer:
    """Scores from the utilization->score curve (shape scores scaled from 0-10 to 0-100); resources
    scoring 0 are left out of the weighted mean, which is rounded."""
    scaled = [(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape]
    curve = broken_linear(scaled)

    def scorer(requested: list[np.ndarray], allocatable: list[np.ndarray]) -> np.ndarray:
        size = len(requested[0]) if requested else 0
        total = np.zeros(size, dtype=np.int64)
        weights = np.zeros(size, dtype=np.int64)
        for spec, req, alloc in zip(specs, requested, allocatable):
            present = alloc != 0
            safe = np.where(present, alloc, 1)
            util = np.where(req > safe, MAX_UTILIZATION, (np.minimum(req, safe) * MAX_UTILIZATION) // safe)
            score = curve(util)
            counted = present & (score > 0)
            total += np.where(counted, score * spec.weight, 0)
            weights += np.where(counted, spec.weight, 0)
        mean = total / np.maximum(weights, 1)
        return np.where(weights > 0, go_round(mean), 0)

    return scorer


def balanced_allocation(requested: list[np.ndarray], allocatable: list[np.ndarray], fast_paths: bool = True) -> np.ndarray:
    """``balancedResourceScorer``: ``(1 - std) * 100`` of the requested fractions (capped at 1) of
    the resources the node has; two fractions use ``|a - b| / 2``, fewer give std 0."""
    size = len(requested[0]) if requested else 0
    if fast_paths and len(requested) == 2 and allocatable[0].all() and allocatable[1].all():
        # The usual case (cpu and memory on every node): std of two fractions is half their gap.
        first = np.minimum(requested[0] / allocatable[0], 1.0)
        second = np.minimum(requested[1] / allocatable[1], 1.0)
        return ((1 - np.abs(first - second) / 2) * MAX_NODE_SCORE).astype(np.int64)
    valid = [alloc != 0 for alloc in allocatable]
    fractions = [np.minimum(np.where(v, req, 0) / np.where(v, alloc, 1), 1.0)
                 for v, req, alloc in zip(valid, requested, allocatable)]
    count = np.zeros(size, dtype=np.int64)
    total = np.zeros(size)
    for v, f in zip(valid, fractions):
        count += v
        total += np.where(v, f, 0.0)
    std = np.zeros(size)
    if (count == 2).any():
        std = np.where(count == 2, _two_fraction_std(valid, fractions, size), std)
    many = count > 2
    if many.any():
        mean = total / np.maximum(count, 1)
        squares = np.zeros(size)
        for v, f in zip(valid, fractions):
            squares += np.where(v, (f - mean) * (f - mean), 0.0)
        std = np.where(many, np.sqrt(squares / np.maximum(count, 1)), std)
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)


def balanced_allocation_row(pairs: list[tuple[int, int]]) -> int:
    """``balanced_allocation`` of one row's (requested, allocatable) pairs, in the same float64
    operations in the same order."""
    fractions = [min(float(req) / float(alloc), 1.0) for req, alloc in pairs if alloc]
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    elif len(fractions) > 2:
        total = 0.0
        for f in fractions:
            total += f
        mean = total / len(fractions)
        squares = 0.0
        for f in fractions:
            squares += (f - mean) * (f - mean)
        std = math.sqrt(squares / len(fractions))
    else:
        std = 0.0
    return int((1 - std) * MAX_NODE_SCORE)


def _two_fraction_std(valid: list[np.ndarray], fractions: list[np.ndarray], size: int) -> np.ndarray:
    """``|first - second| / 2`` of the first two valid fractions of each node."""
    first = np.full(size, np.nan)
    second = np.full(size, np.nan)
    for v, f in zip(valid, fractions):
        take_first = v & np.isnan(first)
        take_second = v & ~take_first & np.isnan(second)
        first = np.where(take_first, f, first)
        second = np.where(take_second, f, second)
    return np.abs((first - second) / 2)


def default_normalize(scores: np.ndarray, reverse: bool) -> np.ndarray:
    """``helper.DefaultNormalizeScore``: scale to 0-100 by the highest score (reversed on demand)."""
    top = int(scores.max()) if len(scores) else 0
    if top <= 0:
        return np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64) if reverse else scores
    out = MAX_NODE_SCORE * scores // top
    return MAX_NODE_SCORE - out if reverse else out
