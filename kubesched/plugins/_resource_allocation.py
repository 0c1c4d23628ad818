"""Shared scoring over requested / allocatable resources (upstream ``noderesources/resource_allocation.go``),
vectorised over nodes: one (requested, allocatable) array pair per configured resource.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from kubesched.api import resources as res
from kubesched.framework.interface import MAX_NODE_SCORE
from kubesched.framework.types import PodInfo
from kubesched.nodetable.table import CPU, EPHEMERAL, MEMORY, NodeBatch

MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10


@dataclass(frozen=True)
class ResourceSpec:
    name: str
    weight: int


DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))

Scorer = Callable[[list[np.ndarray], list[np.ndarray]], np.ndarray]


def go_div(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """Integer division truncating toward zero, as Go's ``/`` on int64."""
    q = np.abs(a) // np.abs(b)
    return np.where((np.sign(a) * np.sign(b)) < 0, -q, q)


def pod_request_list(pod: PodInfo, specs: Sequence[ResourceSpec], use_requested: bool) -> list[int]:
    """The pod's request for each configured resource; cpu/memory get the non-zero defaults
    (100m / 200Mi for containers asking nothing) unless ``use_requested``."""
    out = []
    requests = pod.requests
    non_zero_cpu, non_zero_mem = pod.non_zero_requests
    for spec in specs:
        if spec.name == res.CPU and not use_requested:
            out.append(non_zero_cpu)
        elif spec.name == res.MEMORY and not use_requested:
            out.append(non_zero_mem)
        else:
            out.append(requests.get(spec.name, 0))
    return out


def requested_and_allocatable(nodes: NodeBatch, specs: Sequence[ResourceSpec], pod_requests: Sequence[int],
                              use_requested: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per resource: (node requested + pod request, node allocatable), zeros where the resource is
    skipped (an extended resource the pod does not ask for, or one the node lacks)."""
    table = nodes.table
    requested_list, allocatable_list = [], []
    size = len(nodes)
    for spec, pod_req in zip(specs, pod_requests):
        name = spec.name
        if pod_req == 0 and res.is_scalar(name):
            requested_list.append(np.zeros(size, dtype=np.int64))
            allocatable_list.append(np.zeros(size, dtype=np.int64))
            continue
        idx = table.resource_row(name)
        if idx is None:
            requested_list.append(np.zeros(size, dtype=np.int64))
            allocatable_list.append(np.zeros(size, dtype=np.int64))
            continue
        alloc = nodes.col(table.allocatable[idx])
        if name == res.CPU:
            used = nodes.col(table.requested[CPU] if use_requested else table.non_zero[0])
        elif name == res.MEMORY:
            used = nodes.col(table.requested[MEMORY] if use_requested else table.non_zero[1])
        elif name == res.EPHEMERAL_STORAGE:
            used = nodes.col(table.requested[EPHEMERAL])
        else:
            used = nodes.col(table.requested[idx])
        requested_list.append(used + pod_req)
        allocatable_list.append(alloc)
    return requested_list, allocatable_list


def _weighted(specs: Sequence[ResourceSpec], per_resource: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Scorer:
    def scorer(requested: list[np.ndarray], allocatable: list[np.ndarray]) -> np.ndarray:
        total = np.zeros(len(requested[0]) if requested else 0, dtype=np.int64)
        weights = np.zeros_like(total)
        for spec, req, alloc in zip(specs, requested, allocatable):
            present = alloc != 0
            score = per_resource(req, np.where(present, alloc, 1))
            total += np.where(present, score * spec.weight, 0)
            weights += np.where(present, spec.weight, 0)
        return np.where(weights > 0, total // np.maximum(weights, 1), 0)

    return scorer


def least_allocated(specs: Sequence[ResourceSpec]) -> Scorer:
    """``(capacity - requested) * 100 / capacity``, 0 when over capacity; weighted mean over resources."""
    def score(req: np.ndarray, cap: np.ndarray) -> np.ndarray:
        return np.where(req > cap, 0, ((cap - req) * MAX_NODE_SCORE) // cap)

    return _weighted(specs, score)


def most_allocated(specs: Sequence[ResourceSpec]) -> Scorer:
    """``requested * 100 / capacity`` with requested capped at capacity; weighted mean over resources."""
    def score(req: np.ndarray, cap: np.ndarray) -> np.ndarray:
        return (np.minimum(req, cap) * MAX_NODE_SCORE) // cap

    return _weighted(specs, score)


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


def requested_to_capacity_ratio(specs: Sequence[ResourceSpec], shape: Sequence[tuple[int, int]]) -> Scorer:
    """Scores from a utilization->score curve; resources scoring 0 are left out of the mean."""
    scaled = [(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape]
    curve = broken_linear(scaled)

    def scorer(requested: list[np.ndarray], allocatable: list[np.ndarray]) -> np.ndarray:
        size = len(requested[0]) if requested else 0
        total = np.zeros(size, dtype=np.int64)
        weights = np.zeros(size, dtype=np.int64)
        for spec, req, alloc in zip(specs, requested, allocatable):
            present = alloc != 0
            safe = np.where(present, alloc, 1)
            util = np.where(req > safe, MAX_UTILIZATION, (req * MAX_UTILIZATION) // safe)
            score = curve(util)
            counted = present & (score > 0)
            total += np.where(counted, score * spec.weight, 0)
            weights += np.where(counted, spec.weight, 0)
        mean = total / np.maximum(weights, 1)
        return np.where(weights > 0, np.floor(mean + 0.5), 0).astype(np.int64)

    return scorer
