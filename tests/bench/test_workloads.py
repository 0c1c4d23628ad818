"""Smoke tests of ``kubesched bench``: every workload at upstream's smallest size, for correctness
(every measured pod bound where the workload's constraints allow), never for speed."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from kubesched.api.kinds import NODE, POD
from kubesched.bench import templates as t
from kubesched.bench.runner import (
    NAME_ALPHABET,
    NAME_SUFFIX_LENGTH,
    BenchError,
    BenchOptions,
    BenchResult,
    Executor,
    NodeNamer,
    run_async,
)
from kubesched.bench.targets import EmbeddedTarget, Target
from kubesched.bench.workloads import INIT_PODS, NODES, PODS, WORKLOADS, Churn, Workload, workload


def small_options(w: Workload, **kwargs: Any) -> BenchOptions:
    sizes = {"nodes": w.small.get(NODES), "init_pods": w.small.get(INIT_PODS), "pods": w.small.get(PODS)}
    return BenchOptions(**{**sizes, "timeout": 30, **kwargs})


async def run_small(name: str, **kwargs: Any) -> tuple[BenchResult, dict[str, Any]]:
    """Run ``name`` at its small size; returns the result and the final pods and nodes."""
    w = workload(name)
    seen: dict[str, Any] = {}

    def inspect(target: Target) -> None:
        assert isinstance(target, EmbeddedTarget)
        seen["pods"] = list(target.store.iter_all(POD))
        seen["nodes"] = {n["metadata"]["name"]: n for n in target.store.iter_all(NODE)}

    result = await run_async(w, small_options(w, on_finish=inspect, **kwargs))
    return result, seen


def bound_in(pods: list[dict], namespace: str) -> list[dict]:
    return [p for p in pods if p["metadata"]["namespace"] == namespace and p["spec"].get("nodeName")]


@pytest.mark.parametrize("name", list(WORKLOADS))
async def test_every_workload_schedules_its_measured_pods_at_small_size(name: str) -> None:
    result, seen = await run_small(name)
    assert result.complete, result.incomplete_reason
    assert result.scheduled == result.measured_pods == workload(name).small[PODS]
    assert result.attempts["scheduled"] == result.measured_pods
    assert result.attempts["error"] == 0
    assert result.nodes_scored_percent is not None
    assert result.peak_rss_bytes and result.peak_rss_bytes > 0
    assert len([n for n in seen["nodes"] if not n.startswith("node-churn-")]) == workload(name).small[NODES]


async def test_batched_cycles_count_every_feasible_node_as_scored() -> None:
    """SchedulingBasic's pods fit every node and every node is scored (percentageOfNodesToScore
    100): the cycles served from the kept totals report all of them, as full cycles do."""
    result, _ = await run_small("SchedulingBasic", nodes=50, init_pods=10, pods=200)
    assert result.nodes_scored_percent == 100.0


async def test_required_anti_affinity_puts_one_green_pod_per_node() -> None:
    _, seen = await run_small("SchedulingPodAntiAffinity")
    green = [p for p in seen["pods"] if p["metadata"]["namespace"] in ("sched-0", "sched-1")]
    assert len(green) == 5
    assert len({p["spec"]["nodeName"] for p in green}) == 5


async def test_nodes_get_hostname_and_round_robin_zone_labels() -> None:
    _, seen = await run_small("TopologySpreading")
    zones = Counter(n["metadata"]["labels"][t.ZONE_KEY] for n in seen["nodes"].values())
    assert zones == {"moon-1": 2, "moon-2": 2, "moon-3": 1}
    assert all(n["metadata"]["labels"][t.HOSTNAME_KEY] == name for name, n in seen["nodes"].items())


async def test_topology_spreading_keeps_the_measured_pods_within_max_skew() -> None:
    _, seen = await run_small("TopologySpreading")
    zone_of = {name: n["metadata"]["labels"][t.ZONE_KEY] for name, n in seen["nodes"].items()}
    per_zone = Counter(zone_of[p["spec"]["nodeName"]] for p in bound_in(seen["pods"], "namespace-2"))
    counts = [per_zone.get(z, 0) for z in ("moon-1", "moon-2", "moon-3")]
    assert sum(counts) == 10 and max(counts) - min(counts) <= 5


async def test_preemption_evicts_three_low_priority_pods_per_preemptor() -> None:
    result, seen = await run_small("PreemptionBasic")
    assert result.attempts["unschedulable"] >= 5  # each preemptor failed once, then nominated
    low = bound_in(seen["pods"], "namespace-1")
    high = bound_in(seen["pods"], "namespace-2")
    assert len(high) == 5 and len(low) == 20 - 5 * 3
    assert len({p["spec"]["nodeName"] for p in high}) == 5


async def test_unschedulable_churn_pods_stay_pending_while_measured_pods_schedule() -> None:
    result, seen = await run_small("Unschedulable", nodes=20, pods=600)
    assert result.complete
    churned = [p for p in seen["pods"] if p["metadata"]["namespace"] == "namespace-2"]
    assert all(not p["spec"].get("nodeName") for p in churned)


class RecordingTarget(Target):
    """Records churn calls; ``done`` is set after ``limit`` calls."""

    def __init__(self, limit: int) -> None:
        self.calls: list[tuple[str, str]] = []
        self.limit = limit
        self.done = asyncio.Event()

    def _record(self, verb: str, obj: dict) -> None:
        self.calls.append((verb, obj["kind"]))
        if len(self.calls) >= self.limit:
            self.done.set()

    async def create(self, obj: dict) -> dict:
        self._record("create", obj)
        return {**obj, "metadata": {**obj["metadata"], "name": "x"}}

    async def delete(self, obj: dict) -> None:
        self._record("delete", obj)


@pytest.mark.parametrize(("mode", "expected"), [
    ("recreate", [("create", "Node"), ("create", "Service"), ("delete", "Node"), ("delete", "Service"),
                  ("create", "Node"), ("create", "Service")]),
    ("create", [("create", "Node"), ("create", "Service")] * 3),
])
async def test_churn_creates_every_tick_or_alternates_create_and_delete(mode: str, expected: list) -> None:
    target = RecordingTarget(limit=len(expected))
    op = Churn(mode, (t.node_churn, t.service_churn), interval_ms=1)
    task = asyncio.get_running_loop().create_task(Executor._churn(SimpleNamespace(target=target), op, "ns"))  # type: ignore[arg-type]
    await target.done.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert target.calls[: len(expected)] == expected


async def test_sizes_can_be_overridden_but_not_invented() -> None:
    w = workload("SchedulingWithMixedChurn")
    result = await run_async(w, BenchOptions(nodes=3, pods=6, timeout=30))
    assert result.params == {NODES: 3, PODS: 6} and result.complete
    with pytest.raises(Exception, match="has no initPods parameter"):
        await run_async(w, BenchOptions(nodes=3, init_pods=1, pods=6))


async def test_a_plugin_missing_from_the_registry_fails_only_the_workload_that_needs_it() -> None:
    from kubesched.scheduler.plugins.registry import in_tree_registry

    registry = {k: v for k, v in in_tree_registry().items() if k != "DefaultPreemption"}
    with pytest.raises(Exception, match="PreemptionBasic needs the DefaultPreemption plugin"):
        await run_async(workload("PreemptionBasic"), small_options(workload("PreemptionBasic")), registry)


def test_workload_names_are_case_insensitive_and_unknown_ones_list_the_known() -> None:
    assert workload("schedulingbasic").name == "SchedulingBasic"
    with pytest.raises(KeyError, match="SchedulingBasic"):
        workload("Nope")


def first_repeated_draw(seed: int) -> int:
    """How many five-character suffixes ``random.Random(seed)`` draws before one repeats."""
    rng, seen = random.Random(seed), set()
    while True:
        suffix = "".join(rng.choice(NAME_ALPHABET) for _ in range(NAME_SUFFIX_LENGTH))
        if suffix in seen:
            return len(seen) + 1
        seen.add(suffix)


@pytest.mark.parametrize("seed", [0, 7])
def test_node_names_stay_unique_when_the_generator_repeats_a_suffix(seed: int) -> None:
    count = first_repeated_draw(seed)  # the seeded generator itself collides within these draws
    namer = NodeNamer(random.Random(seed))
    names = [namer.name("scheduler-perf-") for _ in range(count)]
    assert len(set(names)) == count
    assert all(n.startswith("scheduler-perf-") and len(n) == len("scheduler-perf-") + NAME_SUFFIX_LENGTH for n in names)


def test_node_namer_gives_up_with_a_clear_error_when_every_draw_is_taken() -> None:
    class Constant(random.Random):
        def choice(self, seq: Any) -> Any:
            return seq[0]

    namer = NodeNamer(Constant())
    assert namer.name("n-") == "n-bbbbb"
    with pytest.raises(BenchError, match="no free node name with prefix 'n-'"):
        namer.name("n-")


async def test_memory_per_node_and_per_pod_counts_every_node_and_bound_pod() -> None:
    result, seen = await run_small("SchedulingBasic")
    memory = result.memory
    assert memory is not None
    assert memory["nodes"] == len(seen["nodes"]) == workload("SchedulingBasic").small[NODES]
    assert memory["bound_pods"] == len(bound_in(seen["pods"], "namespace-1")) + len(bound_in(seen["pods"], "namespace-2"))
    assert memory["rss_after_pods_bytes"] > 0 and memory["rss_before_nodes_bytes"] > 0
    assert memory["per_pod_bytes"] == (memory["rss_after_pods_bytes"] - memory["rss_after_nodes_bytes"]) / memory["bound_pods"]
