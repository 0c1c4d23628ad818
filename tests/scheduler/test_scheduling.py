"""Scheduling end to end on the embedded cluster: placements, FitError text, events, conditions,
event-driven requeue and the binding cycle."""

from __future__ import annotations

import asyncio

from kubesched.api.kinds import EVENT, NODE, POD
from kubesched.scheduler.framework.interface import BindPlugin, FilterPlugin, PermitPlugin, ReservePlugin, ScorePlugin
from kubesched.scheduler.framework.registry import merge
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.simulator.simulate import simulate
from tests.helpers import make_node, make_pod
from tests.scheduler.conftest import core_config


def strip_uids(objs):
    for o in objs:
        o["metadata"].pop("uid", None)
    return objs


def pod_by_name(result, name):
    return next(p for p in result.pods() if p["metadata"]["name"] == name)


def scheduled_condition(pod):
    return next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")


def test_pods_are_spread_by_least_allocated_and_oversized_pods_report_upstreams_fit_error():
    objs = strip_uids([make_node("n1", cpu="2"), make_node("n2", cpu="2"), make_node("n3", cpu="1"),
                       *(make_pod(f"p{i}", cpu="500m") for i in range(6)), make_pod("huge", cpu="3")])
    result = simulate(objs, core_config(), seed=7)
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in result.pods()}
    assert all(placed[f"p{i}"] for i in range(6))
    counts = {n: list(placed.values()).count(n) for n in ("n1", "n2", "n3")}
    # LeastAllocated: the 1-cpu node scores lower from the start; ties between equal nodes are random
    assert sorted(counts.values()) in ([1, 2, 3], [2, 2, 2])
    huge = pod_by_name(result, "huge")
    condition = scheduled_condition(huge)
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
    assert condition["message"] == "0/3 nodes are available: 3 Insufficient cpu."
    events = [e for e in result.store.iter_all(EVENT) if e["involvedObject"]["name"] == "huge"]
    assert {e["reason"] for e in events} == {"FailedScheduling"}
    assert events[0]["type"] == "Warning" and events[0]["message"] == condition["message"]
    scheduled = [e for e in result.store.iter_all(EVENT) if e["reason"] == "Scheduled"]
    assert len(scheduled) == 6
    assert scheduled[0]["message"].startswith("Successfully assigned default/p")


def test_fit_error_counts_each_reason_and_sorts_them():
    objs = strip_uids([make_node("small", cpu="1", memory="1Gi"), make_node("cordoned", unschedulable=True),
                       make_node("full", cpu="8", pods="1"), make_pod("occupant", node="full"),
                       make_pod("p", cpu="2", memory="2Gi")])
    result = simulate(objs, core_config(), seed=1)
    message = scheduled_condition(pod_by_name(result, "p"))["message"]
    assert message == ("0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Too many pods, "
                       "1 node(s) were unschedulable.")


def test_a_pod_rejected_for_resources_is_retried_when_a_node_is_added_not_after_five_minutes():
    from kubesched.apiserver.memory_client import MemoryClient
    from kubesched.apiserver.store import ObjectStore
    from kubesched.scheduler.scheduler import Scheduler
    from kubesched.simulator.virtualtime import run_virtual
    from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock

    async def scenario():
        loop = asyncio.get_running_loop()
        store = ObjectStore(LoopClock(loop, VIRTUAL_EPOCH), seed=1)
        store.create(NODE, make_node("small", cpu="1"))
        store.create(POD, strip_uids([make_pod("p", cpu="2")])[0])
        sched = Scheduler(MemoryClient(store), core_config(), clock=LoopClock(loop, VIRTUAL_EPOCH), seed=1)
        await sched.start()
        runner = loop.create_task(sched.run())
        await asyncio.sleep(15)
        assert not store.get(POD, "default", "p")["spec"].get("nodeName")
        assert sched.queue.counts()["unschedulable"] == 1
        store.create(NODE, make_node("big", cpu="4"))
        await asyncio.sleep(3)  # well within backoff, far from the 5-minute flush
        node = store.get(POD, "default", "p")["spec"].get("nodeName")
        await sched.stop()
        runner.cancel()
        return node

    assert run_virtual(scenario()) == "big"


def test_unrelated_events_do_not_requeue_a_resource_rejected_pod():
    from kubesched.apiserver.memory_client import MemoryClient
    from kubesched.apiserver.store import ObjectStore
    from kubesched.scheduler.scheduler import Scheduler
    from kubesched.simulator.virtualtime import run_virtual
    from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock

    async def scenario():
        loop = asyncio.get_running_loop()
        clock = LoopClock(loop, VIRTUAL_EPOCH)
        store = ObjectStore(clock, seed=1)
        store.create(NODE, make_node("small", cpu="1"))
        store.create(POD, strip_uids([make_pod("p", cpu="2")])[0])
        sched = Scheduler(MemoryClient(store), core_config(), clock=clock, seed=1)
        await sched.start()
        runner = loop.create_task(sched.run())
        await asyncio.sleep(15)
        attempts_before = sched.metrics.schedule_attempts.labels("unschedulable", "default-scheduler")._value.get()
        store.mutate(NODE, None, "small", lambda n: n["metadata"].setdefault("annotations", {}).update(a="b"))
        store.create(NODE, make_node("tiny", cpu="500m"))  # NodeAdd whose hint says it cannot fit
        await asyncio.sleep(20)
        attempts_after = sched.metrics.schedule_attempts.labels("unschedulable", "default-scheduler")._value.get()
        await sched.stop()
        runner.cancel()
        return attempts_before, attempts_after

    before, after = run_virtual(scenario())
    assert before == after == 1


class AlwaysFailBind(BindPlugin):
    name = "AlwaysFailBind"
    calls = 0

    async def bind(self, state, pod, node_name):
        AlwaysFailBind.calls += 1
        return Status(Code.Error, "binding refused by test")


class RecordingReserve(ReservePlugin):
    name = "RecordingReserve"
    log: list[str] = []

    def reserve(self, state, pod, node_name):
        RecordingReserve.log.append(f"reserve {pod.name} {node_name}")

    def unreserve(self, state, pod, node_name):
        RecordingReserve.log.append(f"unreserve {pod.name} {node_name}")


def test_bind_failure_unreserves_forgets_and_retries():
    from kubesched.scheduler.config.types import PluginRef

    RecordingReserve.log.clear()
    cfg = core_config("RecordingReserve")
    cfg.profiles[0].plugins.get("bind").enabled = [PluginRef("AlwaysFailBind")]
    cfg.profiles[0].plugins.get("bind").disabled = [PluginRef("*")]
    registry = merge(in_tree_registry(), {"AlwaysFailBind": AlwaysFailBind, "RecordingReserve": RecordingReserve})
    result = simulate(strip_uids([make_node("n1"), make_pod("p", cpu="1")]), cfg, registry=registry, seed=1)
    pod = pod_by_name(result, "p")
    assert not pod["spec"].get("nodeName")
    condition = scheduled_condition(pod)
    assert condition["reason"] == "SchedulerError"
    assert 'running Bind plugin "AlwaysFailBind": binding refused by test' in condition["message"]
    assert RecordingReserve.log[:2] == ["reserve p n1", "unreserve p n1"]
    assert AlwaysFailBind.calls >= 2  # retried after backoff


class OddNodesOnly(FilterPlugin, ScorePlugin):
    """A classic per-node plugin, as a user would write one."""

    name = "OddNodesOnly"

    def filter(self, state, pod, node_info):
        if int(node_info.name[1:]) % 2 == 0:
            return Status(Code.Unschedulable, "node number is even")
        return None

    def score(self, state, pod, node_name):
        return int(node_name[1:])

    def normalize_score(self, state, pod, scores):
        top = max(s.score for s in scores) or 1
        for s in scores:
            s.score = s.score * 100 // top


def test_classic_out_of_tree_plugin_filters_and_scores_per_node():
    cfg = core_config("OddNodesOnly", weights={"OddNodesOnly": 5})
    registry = merge(in_tree_registry(), {"OddNodesOnly": OddNodesOnly})
    objs = strip_uids([*(make_node(f"n{i}") for i in range(6)), make_pod("p", cpu="1"), make_pod("q", cpu="1")])
    result = simulate(objs, cfg, registry=registry, seed=3, explain=True)
    assert {p["spec"]["nodeName"] for p in result.pods()} == {"n5"}
    attempt = result.attempts[0]
    assert attempt.filter_status["n2"].plugin == "OddNodesOnly"
    assert attempt.filter_status["n2"].reasons == ["node number is even"]
    assert sorted(attempt.feasible) == ["n1", "n3", "n5"]
    parts = {name: (list(raw), list(norm)) for name, raw, norm, _ in attempt.scores.plugins}
    order = attempt.feasible
    assert dict(zip(order, parts["OddNodesOnly"][1])) == {"n1": 20, "n3": 60, "n5": 100}


class FailsEverything(FilterPlugin):
    name = "FailsEverything"

    def filter(self, state, pod, node_info):
        return Status(Code.Unschedulable, "classic says no")


def test_the_first_failing_plugin_in_configured_order_is_recorded_for_mixed_styles():
    from kubesched.scheduler.config.types import PluginRef

    registry = merge(in_tree_registry(), {"FailsEverything": FailsEverything})
    messages = {}
    for first, second in (("FailsEverything", "NodeResourcesFit"), ("NodeResourcesFit", "FailsEverything")):
        cfg = core_config()
        filters = cfg.profiles[0].plugins.get("filter")
        filters.enabled = [PluginRef(first), PluginRef(second)]
        filters.disabled = [PluginRef("*")]
        result = simulate(strip_uids([make_node("n1", cpu="1"), make_pod("p", cpu="2")]), cfg, registry=registry, seed=1)
        messages[first] = scheduled_condition(pod_by_name(result, "p"))["message"]
    assert messages == {"FailsEverything": "0/1 nodes are available: 1 classic says no.",
                        "NodeResourcesFit": "0/1 nodes are available: 1 Insufficient cpu."}


def test_explicit_plugins_run_after_multi_point_ones_as_upstream_orders_them():
    from kubesched.scheduler.config.types import PluginRef

    cfg = core_config()
    cfg.profiles[0].plugins.get("filter").enabled = [PluginRef("FailsEverything")]
    registry = merge(in_tree_registry(), {"FailsEverything": FailsEverything})
    result = simulate(strip_uids([make_node("n1", cpu="1"), make_pod("p", cpu="2")]), cfg, registry=registry, seed=1)
    assert scheduled_condition(pod_by_name(result, "p"))["message"] == "0/1 nodes are available: 1 Insufficient cpu."


class WaitForPartner(PermitPlugin):
    """Pods labelled ``group`` wait until their partner arrives (a tiny gang scheduler)."""

    name = "WaitForPartner"
    timeout = 30.0

    def permit(self, state, pod, node_name):
        group = pod.labels.get("group")
        if not group:
            return None, 0
        partner = None

        def find(wp):
            nonlocal partner
            if wp.pod.labels.get("group") == group and wp.pod.uid != pod.uid:
                partner = wp

        self.handle.iterate_waiting_pods(find)
        if partner is not None:
            partner.allow(self.name)
            return None, 0
        if pod.labels.get("reject"):
            return Status(Code.Unschedulable, "rejected by partner policy"), 0
        return Status(Code.Wait), self.timeout


def test_permit_wait_allow():
    cfg = core_config("WaitForPartner")
    registry = merge(in_tree_registry(), {"WaitForPartner": WaitForPartner})
    objs = strip_uids([make_node("n1"), make_pod("a", labels={"group": "g"}), make_pod("b", labels={"group": "g"})])
    result = simulate(objs, cfg, registry=registry, seed=1)
    assert all(p["spec"].get("nodeName") == "n1" for p in result.pods())


def test_permit_wait_times_out_with_upstreams_message():
    cfg = core_config("WaitForPartner")
    registry = merge(in_tree_registry(), {"WaitForPartner": WaitForPartner})
    result = simulate(strip_uids([make_node("n1"), make_pod("lonely", labels={"group": "g"})]), cfg, registry=registry, seed=1)
    pod = pod_by_name(result, "lonely")
    assert not pod["spec"].get("nodeName")
    assert scheduled_condition(pod)["message"] == "0/1 nodes are available: 1 rejected due to timeout after waiting 30s at plugin WaitForPartner."


def test_permit_reject():
    cfg = core_config("WaitForPartner")
    registry = merge(in_tree_registry(), {"WaitForPartner": WaitForPartner})
    objs = strip_uids([make_node("n1"), make_pod("r", labels={"group": "g", "reject": "yes"})])
    result = simulate(objs, cfg, registry=registry, seed=1)
    condition = scheduled_condition(pod_by_name(result, "r"))
    assert condition["message"] == "0/1 nodes are available: 1 rejected by partner policy."
    assert condition["reason"] == "Unschedulable"


def test_pods_for_other_schedulers_are_left_alone_and_gated_pods_wait():
    objs = strip_uids([make_node("n1"), make_pod("other", schedulerName="someone-else"),
                       make_pod("gated", schedulingGates=[{"name": "example.com/wait"}]), make_pod("mine")])
    result = simulate(objs, core_config(), seed=1)
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in result.pods()}
    assert placed == {"other": None, "gated": None, "mine": "n1"}
    assert "conditions" not in pod_by_name(result, "other")["status"]


def test_same_seed_same_placements():
    objs = [make_node(f"n{i}") for i in range(20)] + [make_pod(f"p{i}", cpu="100m") for i in range(60)]
    first = simulate(strip_uids([dict(o, metadata=dict(o["metadata"])) for o in objs]), core_config(), seed=42)
    second = simulate(strip_uids([dict(o, metadata=dict(o["metadata"])) for o in objs]), core_config(), seed=42)
    assert [p["spec"].get("nodeName") for p in first.pods()] == [p["spec"].get("nodeName") for p in second.pods()]
