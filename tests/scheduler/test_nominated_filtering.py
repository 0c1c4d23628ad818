"""Filtering beside nominated pods (upstream RunFilterPluginsWithNominatedPods): on a node with
higher-or-equal priority pods nominated to it, a node that fails with them reports that status,
and only nodes that pass both ways count towards the feasible nodes to find."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import BatchFilterPlugin, FilterPlugin, FilterVerdict
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.schedule_one import Algorithm
from tests.framework.conftest import build_framework
from tests.helpers import make_pod

POD = PodInfo(make_pod("p", priority=0))
NOMINEE = PodInfo(make_pod("nominee", priority=10))
#: A node may hold one pod; the message says how many it already has.
CAPACITY = 1


def verdict(info: NodeInfo) -> Status | None:
    if len(info.pods) < CAPACITY:
        return None
    return Status(Code.Unschedulable, f"full with {len(info.pods)} pod(s)")


class OnePodPerNode(FilterPlugin):
    name = "OnePodPerNode"

    def filter(self, state, pod, node_info):
        return verdict(node_info)


class OnePodPerNodeBatch(BatchFilterPlugin):
    name = "OnePodPerNode"

    def filter_nodes(self, state, pod, nodes):
        statuses = [verdict(info) for info in nodes.infos()]
        keys = np.array([0 if s is None else i + 1 for i, s in enumerate(statuses)])
        return FilterVerdict.from_keys(keys, {i + 1: s for i, s in enumerate(statuses) if s is not None})


class Nominator:
    def __init__(self, nominations: dict[str, list[PodInfo]]) -> None:
        self.nominations = nominations

    def nominated_node_names(self) -> list[str]:
        return list(self.nominations)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self.nominations.get(node_name, [])


def find(plugin, bound: dict[str, int]) -> tuple[list[str], dict[str, str]]:
    """Feasible nodes and each failed node's message, with NOMINEE nominated to n1."""
    fw, table = build_framework(plugin, nodes=("n1", "n2"), nominator=Nominator({"n1": [NOMINEE]}))
    for name, count in bound.items():
        for i in range(count):
            table.infos[table.row_of[name]].add_pod(PodInfo(make_pod(f"{name}-{i}", node=name)))
    feasible, diagnosis = asyncio.run(Algorithm(100, random.Random(0)).find_nodes_that_fit(fw, CycleState(), POD, table))
    names = [table.names[int(row)] for row in feasible]
    return names, {name: status.message() for name, status in diagnosis.node_to_status.items()}


@pytest.mark.parametrize("plugin", [OnePodPerNode, OnePodPerNodeBatch], ids=["classic", "batch"])
def test_a_node_failing_with_and_without_its_nominees_reports_the_status_with_them(plugin):
    assert find(plugin, {"n1": 1, "n2": 1}) == ([], {"n1": "full with 2 pod(s)", "n2": "full with 1 pod(s)"})


@pytest.mark.parametrize("plugin", [OnePodPerNode, OnePodPerNodeBatch], ids=["classic", "batch"])
def test_a_node_free_only_without_its_nominees_is_not_feasible(plugin):
    assert find(plugin, {}) == (["n2"], {"n1": "full with 1 pod(s)"})


class AlwaysPasses(FilterPlugin):
    name = "AlwaysPasses"

    def filter(self, state, pod, node_info):
        return None


def test_without_score_plugins_the_search_goes_on_past_a_node_its_nominees_fill():
    """With no Score plugin one feasible node is enough; the first node visited only fits without
    its nominee, so the search must not stop there."""
    fw, table = build_framework(OnePodPerNodeBatch, AlwaysPasses, nodes=("n1", "n2"), nominator=Nominator({"n1": [NOMINEE]}))
    assert not fw.has_score_plugins()
    feasible, diagnosis = asyncio.run(Algorithm(100, random.Random(0)).find_nodes_that_fit(fw, CycleState(), POD, table))
    assert [table.names[int(row)] for row in feasible] == ["n2"]
    assert {name: s.message() for name, s in diagnosis.node_to_status.items()} == {"n1": "full with 1 pod(s)"}


def test_lower_priority_nominees_are_ignored():
    fw, table = build_framework(OnePodPerNode, nodes=("n1",), nominator=Nominator({"n1": [PodInfo(make_pod("low", priority=-1))]}))
    feasible, _ = asyncio.run(Algorithm(100, random.Random(0)).find_nodes_that_fit(fw, CycleState(), POD, table))
    assert [table.names[int(row)] for row in feasible] == ["n1"]


def test_nominee_failures_apply_in_visiting_order_up_to_enough_feasible_nodes() -> None:
    """The vectorised application of the failures beside nominees does what the node-by-node
    pass does: in visiting order, stop before a position with ``to_find`` feasible nodes before
    it (nodes lost to nominees not counted), and record each failure there."""
    from kubesched.scheduler.schedule_one import _apply_nominee_failures

    rng = random.Random(3)
    for _ in range(300):
        n = rng.randrange(1, 40)
        passed = np.array([rng.random() < 0.5 for _ in range(n)])
        nominees = np.array(sorted(rng.sample(range(n), rng.randrange(0, n + 1))), dtype=np.int64)
        found = [Status(Code.Unschedulable, f"s{i}") for i in range(3)]
        failures = np.array([rng.choice([-1, 0, 1, 2]) for _ in nominees], dtype=np.int64)
        to_find = rng.randrange(1, 6)
        ids = np.where(passed, -1, 0).astype(np.int32)
        statuses = [Status(Code.Unschedulable, "main")]
        want_passed, want = passed.copy(), {}
        feasible_before = np.cumsum(passed) - passed
        lost = 0
        for k, position in enumerate(nominees.tolist()):
            if feasible_before[position] - lost >= to_find:
                break
            if failures[k] < 0:
                continue
            lost += int(want_passed[position])
            want_passed[position] = False
            want[position] = found[failures[k]].message()
        _apply_nominee_failures(nominees, failures, found, passed, ids, statuses, to_find)
        assert passed.tolist() == want_passed.tolist()
        got = {p: statuses[ids[p]].message() for p in range(n) if statuses[ids[p]].message() != "main" and ids[p] >= 0}
        assert got == want
