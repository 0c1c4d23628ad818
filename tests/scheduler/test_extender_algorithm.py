"""The scheduling algorithm with extenders, node by node (upstream ``TestSchedulerWithExtenders``,
translated case by case): which extenders decide, how many nodes are searched and kept. The
extenders here are in-process fakes of the Extender protocol; ``test_extenders.py`` runs real
ones over HTTP."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.backend.cache import Cache
from kubesched.scheduler.config.types import PluginRef, Plugins, PluginSet, Profile
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.diagnosis import FitError
from kubesched.scheduler.framework.extender import ExtenderError, FilterOutcome, VictimPods
from kubesched.scheduler.framework.interface import FilterPlugin, Plugin, ScorePlugin
from kubesched.scheduler.framework.registry import Registry
from kubesched.scheduler.framework.runtime import Framework, HandleContext
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.scheduler.schedule_one import Algorithm, ScheduleResult
from kubesched.utils.clock import ManualClock
from tests.helpers import make_node, make_pod

Predicate = Callable[[str], bool]
Prioritizer = Callable[[str], int]


def true_predicate(node: str) -> bool:
    return True


def false_predicate(node: str) -> bool:
    return False


def node1_predicate(node: str) -> bool:
    return node == "node1"


def node2_predicate(node: str) -> bool:
    return node == "node2"


def error_predicate(node: str) -> bool:
    raise ExtenderError("some error")


def node1_prioritizer(node: str) -> int:
    return 10 if node == "node1" else 1


def node2_prioritizer(node: str) -> int:
    return 10 if node == "node2" else 1


def error_prioritizer(node: str) -> int:
    raise ExtenderError("some error")


@dataclass
class FakeExtender:
    """Upstream's ``FakeExtender``: predicates all must pass; prioritizers' scores times their
    weights are summed, and the extender's own weight is returned beside them."""

    name: str
    predicates: Sequence[Predicate] = ()
    prioritizers: Sequence[tuple[Prioritizer, int]] = ()
    weight: int = 0
    binder: bool = False
    ignorable: bool = False
    uninterested: bool = False

    def is_filter(self) -> bool:
        return bool(self.predicates)

    def is_prioritizer(self) -> bool:
        return bool(self.prioritizers)

    def is_binder(self) -> bool:
        return self.binder

    def supports_preemption(self) -> bool:
        return False

    def is_interested(self, pod: PodInfo) -> bool:
        return not self.uninterested

    async def filter(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> FilterOutcome:
        kept = [n.name for n in nodes if all(p(n.name) for p in self.predicates)]
        return FilterOutcome(kept, {n.name: f"{self.name} failed" for n in nodes if n.name not in kept})

    async def prioritize(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[list[tuple[str, int]], int]:
        return [(n.name, sum(f(n.name) * w for f, w in self.prioritizers)) for n in nodes], self.weight

    async def process_preemption(self, pod: PodInfo, victims: Mapping[str, VictimPods], table: NodeTable) -> dict[str, VictimPods]:
        raise ExtenderError("preemption is not faked")

    async def bind(self, pod: PodInfo, node: str) -> None:
        return None


class TrueFilter(FilterPlugin):
    name = "TrueFilter"

    def filter(self, state, pod, node_info):
        return None


class EqualPrioritizer(ScorePlugin):
    name = "EqualPrioritizerPlugin"

    def score(self, state, pod, node_name):
        return 1


class Node2Prioritizer(ScorePlugin):
    name = "Node2Prioritizer"

    def score(self, state, pod, node_name):
        return 100 if node_name == "node2" else 10


def framework(plugins: Sequence[tuple[type[Plugin], int]], nodes: Sequence[str]) -> tuple[Framework, NodeTable]:
    cache = Cache(ManualClock())
    for name in nodes:
        cache.add_node(make_node(name))
    table = cache.update_snapshot()
    registry: Registry = {**in_tree_registry(), **{p.name: p for p, _ in plugins}}
    refs = [PluginRef("PrioritySort"), *(PluginRef(p.name, w) for p, w in plugins), PluginRef("DefaultBinder")]
    ctx = HandleContext(clock=ManualClock(), snapshot=lambda: table)
    return Framework(registry, Profile(plugins=Plugins(multi_point=PluginSet(refs))), ctx), table


NODES = ["node1", "node2"]


@pytest.mark.parametrize(("plugins", "extenders", "nodes", "expected"), [
    ([(TrueFilter, 0)], [FakeExtender("FakeExtender1", [true_predicate]), FakeExtender("FakeExtender2", [error_predicate])],
     NODES, ExtenderError),
    ([(TrueFilter, 0)], [FakeExtender("FakeExtender1", [true_predicate]), FakeExtender("FakeExtender2", [false_predicate])],
     NODES, FitError),
    ([(TrueFilter, 0), (EqualPrioritizer, 1)],
     [FakeExtender("FakeExtender1", [true_predicate]), FakeExtender("FakeExtender2", [node1_predicate])],
     NODES, ScheduleResult("node1", 2, 1)),
    ([(TrueFilter, 0)], [FakeExtender("FakeExtender1", [node2_predicate]), FakeExtender("FakeExtender2", [node1_predicate])],
     NODES, FitError),
    ([(TrueFilter, 0)], [FakeExtender("FakeExtender1", [true_predicate], [(error_prioritizer, 10)], weight=1)],
     ["node1"], ScheduleResult("node1", 1, 1)),
    ([(TrueFilter, 0)], [FakeExtender("FakeExtender1", [true_predicate], [(node1_prioritizer, 10)], weight=1),
                         FakeExtender("FakeExtender2", [true_predicate], [(node2_prioritizer, 10)], weight=5)],
     NODES, ScheduleResult("node2", 2, 2)),
    ([(TrueFilter, 0), (Node2Prioritizer, 20)],
     [FakeExtender("FakeExtender1", [true_predicate], [(node1_prioritizer, 10)], weight=1)],
     NODES, ScheduleResult("node2", 2, 2)),
    ([(TrueFilter, 0), (Node2Prioritizer, 1)],
     [FakeExtender("FakeExtender1", [error_predicate], [(error_prioritizer, 10)], uninterested=True)],
     NODES, ScheduleResult("node2", 2, 2)),
    ([(TrueFilter, 0), (EqualPrioritizer, 1)],
     [FakeExtender("FakeExtender1", [error_predicate], ignorable=True), FakeExtender("FakeExtender2", [node1_predicate])],
     NODES, ScheduleResult("node1", 2, 1)),
    ([(TrueFilter, 0)], [FakeExtender("FakeExtender1", [true_predicate]), FakeExtender("FakeExtender2", [node1_predicate])],
     NODES, ScheduleResult("node1", 2, 1)),
    ([], [FakeExtender("FakeExtender1", binder=True)], NODES, ScheduleResult("node1", 1, 1)),
], ids=[
    "an extender in error fails the attempt",
    "an extender that keeps no node leaves none",
    "the second extender narrows to node1",
    "extenders narrow in turn until nothing is left",
    "a prioritizer in error gives no score",
    "the heavier extender's node wins",
    "a plugin's weighted score outweighs an extender's",
    "an extender not interested in the pod is not called",
    "an ignorable extender in error is skipped",
    "no scoring, extender filters configured, multiple feasible nodes are evaluated",
    "no scoring, no prefilters or extender filters configured, a single feasible node is evaluated",
])
async def test_scheduler_with_extenders(plugins, extenders, nodes, expected):
    fw, table = framework(plugins, nodes)
    algorithm = Algorithm(0, random.Random(0), extenders)
    pod = PodInfo(make_pod("pod"))
    if isinstance(expected, type):
        with pytest.raises(expected):
            await algorithm.schedule_pod(fw, CycleState(), pod, table)
    else:
        assert await algorithm.schedule_pod(fw, CycleState(), pod, table) == expected
