"""The scheduler's metrics are recorded where upstream records them, and recording them never
changes a placement."""

from __future__ import annotations

import asyncio

from kubesched.api.kinds import NODE, POD
from kubesched.scheduler.framework.interface import PermitPlugin, PostBindPlugin, PreBindPlugin, ReservePlugin
from kubesched.scheduler.framework.registry import merge
from kubesched.scheduler.plugins.registry import in_tree_registry
from tests.helpers import make_node, make_pod
from tests.scheduler.conftest import core_config
from tests.scheduler.test_requeue import SETTLE, Running, run, running

PROFILE = "default-scheduler"


def sample(r: Running, name: str, **labels: str) -> float:
    return r.sched.metrics.registry.get_sample_value(f"scheduler_{name}", labels) or 0.0


class EveryBindingPoint(ReservePlugin, PermitPlugin, PreBindPlugin, PostBindPlugin):
    name = "EveryBindingPoint"

    def reserve(self, state, pod, node_name):
        return None

    def unreserve(self, state, pod, node_name):
        return None

    def permit(self, state, pod, node_name):
        return None, 0

    def pre_bind(self, state, pod, node_name):
        return None

    def post_bind(self, state, pod, node_name):
        return None


def test_every_extension_point_records_its_duration_with_the_code_it_returned():
    points = ("PreFilter", "Filter", "PreScore", "Score", "Reserve", "Permit", "PreBindPreFlight", "PreBind", "Bind", "PostBind")

    async def scenario() -> dict[str, float]:
        registry = merge(in_tree_registry(), {"EveryBindingPoint": EveryBindingPoint})
        async with running([make_node("n1"), make_node("n2"), make_pod("p")], core_config("EveryBindingPoint"), registry) as r:
            await asyncio.sleep(SETTLE)
            assert r.node_of("p")
            return {point: sample(r, "framework_extension_point_duration_seconds_count",
                                  extension_point=point, status="Success", profile=PROFILE) for point in points}

    assert run(scenario) == dict.fromkeys(points, 1.0)


def test_failed_attempts_record_the_algorithm_latency_too():
    async def scenario() -> tuple[float, float, float]:
        async with running([make_node("n1"), make_pod("p"), make_pod("huge", cpu="64")], core_config()) as r:
            await asyncio.sleep(SETTLE)
            attempts = sum(sample(r, "schedule_attempts_total", result=result, profile=PROFILE) for result in ("scheduled", "unschedulable"))
            return attempts, sample(r, "scheduling_algorithm_duration_seconds_count"), \
                sample(r, "framework_extension_point_duration_seconds_count", extension_point="Filter", status="Success", profile=PROFILE)

    assert run(scenario) == (2, 2, 2)


def test_plugin_evaluations_event_handling_and_queueing_hints_are_counted():
    async def scenario() -> dict[str, float]:
        async with running([make_node("small", cpu="1"), make_pod("p", cpu="2")], core_config()) as r:
            await asyncio.sleep(SETTLE)
            r.store.create(NODE, make_node("big", cpu="4"))
            await asyncio.sleep(SETTLE)
            assert r.node_of("p") == "big"
            return {
                "Filter evaluations": sample(r, "plugin_evaluation_total", plugin="NodeResourcesFit", extension_point="Filter", profile=PROFILE),
                "PreFilter evaluations": sample(r, "plugin_evaluation_total", plugin="NodeResourcesFit", extension_point="PreFilter", profile=PROFILE),
                "NodeAdd handled": sample(r, "event_handling_duration_seconds_count", event="NodeAdd"),
                "pod add handled": sample(r, "event_handling_duration_seconds_count", event="UnschedulablePodAdd"),
                "binding handled": sample(r, "event_handling_duration_seconds_count", event="AssignedPodAdd"),
                "hint asked": sample(r, "queueing_hint_execution_duration_seconds_count", plugin="NodeResourcesFit", event="NodeAdd", hint="Queue"),
            }

    assert run(scenario) == {"Filter evaluations": 3.0, "PreFilter evaluations": 2.0, "NodeAdd handled": 2.0, "pod add handled": 1.0,
                             "binding handled": 1.0, "hint asked": 1.0}


def test_a_cycle_without_ties_leaves_the_placement_random_source_alone():
    """Sampling which cycles record plugin metrics draws from its own source: placements depend on
    tie-breaks only."""

    async def scenario() -> bool:
        async with running([make_node("n1")], core_config()) as r:
            before = r.sched.rng.getstate()
            r.store.create(POD, make_pod("p"))
            await asyncio.sleep(SETTLE)
            assert r.node_of("p") == "n1"
            return r.sched.rng.getstate() == before

    assert run(scenario)
