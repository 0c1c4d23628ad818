"""The scalar forms the memos and batched cycles use for a few changed rows (NodeResourcesFit's
failure keys and scorers, BalancedAllocation, the plugins' ``filter_row`` and ``score_row``) give
what the vectorised functions give, row by row, on nodes with and without the resources asked for,
over and under capacity."""

import random

import numpy as np
import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.config.args import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ScoringStrategy,
    UtilizationShapePoint,
)
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import BatchFilterPlugin, BatchScorePlugin
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins._resource_allocation import (
    ResourceSpec,
    balanced_allocation,
    balanced_allocation_row,
    requested_and_allocatable,
    requested_and_allocatable_row,
)
from kubesched.scheduler.plugins.noderesources.balanced_allocation import NodeResourcesBalancedAllocation
from kubesched.scheduler.plugins.noderesources.fit import NodeResourcesFit, _FitRequest, build_row_scorer, build_scorer
from kubesched.scheduler.plugins.tainttoleration.taint_toleration import TaintToleration
from tests.helpers import make_node, make_pod

GPU = "example.com/gpu"
SPECS = [
    (ResourceSpec("cpu", 1), ResourceSpec("memory", 1)),
    (ResourceSpec("cpu", 3), ResourceSpec("memory", 1), ResourceSpec(GPU, 2)),
    (ResourceSpec("cpu", 1), ResourceSpec("ephemeral-storage", 2), ResourceSpec("memory", 5)),
]


def random_table(rng: random.Random, count: int = 60, best_effort: bool = False) -> NodeTable:
    """Nodes of odd sizes (some without memory, cpu or the extended resource), each with random pods,
    a few of them beyond what the node has; with ``best_effort``, a pod without requests on every
    third node too (counted at the defaults where requests are read as the scheduler counts them)."""
    table = NodeTable()
    for i in range(count):
        extra = {GPU: str(rng.choice([1, 2, 8]))} if rng.random() < 0.5 else {}
        extra["ephemeral-storage"] = rng.choice(["0", "10Gi", "97Gi"])
        node = make_node(f"n{i}", cpu=rng.choice(["0", "1", "3", "4", "96"]), memory=rng.choice(["0", "1Gi", "7Gi", "32Gi"]),
                         pods=str(rng.choice([1, 3, 110])), extra=extra)
        info = NodeInfo(node)
        for j in range(rng.randrange(5)):
            pod = make_pod(f"p{i}-{j}", cpu=f"{rng.randrange(1, 3000)}m", memory=f"{rng.randrange(1, 9000)}Mi", node=node["metadata"]["name"])
            info.add_pod(PodInfo(pod))
        if best_effort and i % 3 == 0:
            info.add_pod(PodInfo(make_pod(f"b{i}", node=node["metadata"]["name"])))
        table.set_node(info)
    return table


@pytest.mark.parametrize("seed", range(6))
def test_failure_keys_of_a_row_equal_the_vectorised_ones(seed):
    rng = random.Random(seed)
    table = random_table(rng)
    for checked in ([], [("cpu", 1500)], [("cpu", 100), ("memory", 2 << 30)], [("cpu", 10), (GPU, 2), ("example.com/none", 1)]):
        request = _FitRequest(checked)
        vectorised = NodeResourcesFit._failure_keys(request, table.all_rows())
        rows = [NodeResourcesFit._failure_key_of_row(request, table, row) for row in range(table.n)]
        assert rows == vectorised.tolist()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("specs", SPECS)
def test_scores_of_a_row_equal_the_vectorised_ones(seed, specs):
    rng = random.Random(seed)
    table = random_table(rng)
    for requests in ([100, 200 << 20, 1][: len(specs)], [0, 0, 0][: len(specs)], [2500, 9 << 30, 3][: len(specs)]):
        for use_requested in (False, True):
            requested, allocatable = requested_and_allocatable(table.all_rows(), specs, requests, use_requested)
            pairs = [requested_and_allocatable_row(table, row, specs, requests, use_requested) for row in range(table.n)]
            assert pairs == [[(int(r[row]), int(a[row])) for r, a in zip(requested, allocatable)] for row in range(table.n)]
            for kind in (LEAST_ALLOCATED, MOST_ALLOCATED):
                for fast in (True, False):
                    expected = build_scorer(kind, specs, [], fast)(requested, allocatable)
                    row_scorer = build_row_scorer(kind, specs)
                    assert row_scorer is not None
                    assert [row_scorer(p) for p in pairs] == expected.tolist()
            for fast in (True, False):
                expected = balanced_allocation(requested, allocatable, fast)
                assert [balanced_allocation_row(p) for p in pairs] == np.asarray(expected).tolist()


def _fit_args(kind: str, specs: tuple[ResourceSpec, ...]) -> NodeResourcesFitArgs:
    strategy = ScoringStrategy(type=kind, resources=list(specs))
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        strategy.requested_to_capacity_ratio = RequestedToCapacityRatioParam([UtilizationShapePoint(0, 10),
                                                                              UtilizationShapePoint(100, 0)])
    return NodeResourcesFitArgs(scoring_strategy=strategy)


def _row_form_plugins(specs: tuple[ResourceSpec, ...]) -> list[BatchFilterPlugin | BatchScorePlugin]:
    """NodeResourcesFit with each scoring strategy (RequestedToCapacityRatio has no scalar scorer:
    its rows go the default way), BalancedAllocation, and a plugin without row forms of its own."""
    plugins: list[BatchFilterPlugin | BatchScorePlugin] = [
        NodeResourcesFit(_fit_args(kind, specs)) for kind in (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)]
    return [*plugins, NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs(list(specs))), TaintToleration()]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("specs", SPECS)
def test_filter_row_and_score_row_equal_the_batch_forms(seed, specs):
    """What a batched cycle asks of the node that took the last pod equals that node's verdict and
    raw score in a run over every node: statuses and reasons, for pods that fit, that do not, and
    that ask for a resource some nodes lack."""
    rng = random.Random(seed)
    table = random_table(rng, best_effort=True)
    gpu = make_pod("gpu", cpu="10m")
    gpu["spec"]["containers"][0]["resources"]["requests"][GPU] = "2"
    pods = [make_pod("small", cpu="100m", memory="200Mi"), make_pod("large", cpu="2500m", memory="9Gi"), gpu, make_pod("none")]
    for pod in map(PodInfo, pods):
        for pl in _row_form_plugins(specs):
            state, nodes = CycleState(), table.all_rows()
            if hasattr(pl, "pre_filter"):
                pl.pre_filter(state, pod, nodes)
            if hasattr(pl, "pre_score"):
                pl.pre_score(state, pod, nodes)
            if isinstance(pl, BatchFilterPlugin):
                verdict = pl.filter_nodes(state, pod, nodes)
                expected = [None if verdict is None else verdict.status_at(row) for row in range(table.n)]
                assert [pl.filter_row(state, pod, table, row) for row in range(table.n)] == expected
            if isinstance(pl, BatchScorePlugin):
                assert [pl.score_row(state, pod, table, row) for row in range(table.n)] == \
                    pl.score_nodes(state, pod, nodes).tolist()
