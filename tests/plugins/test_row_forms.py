"""The scalar forms the memos use for a few changed rows (NodeResourcesFit's failure keys and
scorers, BalancedAllocation) give what the vectorised functions give, row by row, on nodes with and
without the resources asked for, over and under capacity."""

import random

import numpy as np
import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.config.args import LEAST_ALLOCATED, MOST_ALLOCATED
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins._resource_allocation import (
    ResourceSpec,
    balanced_allocation,
    balanced_allocation_row,
    requested_and_allocatable,
    requested_and_allocatable_row,
)
from kubesched.scheduler.plugins.noderesources.fit import NodeResourcesFit, _FitRequest, build_row_scorer, build_scorer
from tests.helpers import make_node, make_pod

GPU = "example.com/gpu"
SPECS = [
    (ResourceSpec("cpu", 1), ResourceSpec("memory", 1)),
    (ResourceSpec("cpu", 3), ResourceSpec("memory", 1), ResourceSpec(GPU, 2)),
    (ResourceSpec("cpu", 1), ResourceSpec("ephemeral-storage", 2), ResourceSpec("memory", 5)),
]


def random_table(rng: random.Random, count: int = 60) -> NodeTable:
    """Nodes of odd sizes (some without memory, cpu or the extended resource), each with random pods,
    a few of them beyond what the node has."""
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
