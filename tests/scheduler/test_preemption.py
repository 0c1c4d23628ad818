"""Preemption end to end on the embedded cluster with the default profile (upstream's integration
expectations in ``test/integration/scheduler/preemption``): victims get the DisruptionTarget
condition, a Preempted event and a graceful deletion; the preemptor is nominated, waits while they
terminate and is then bound to the nominated node; nominated pods keep their room; messages say
why preemption did not help.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kubesched.api.kinds import EVENT, NODE, POD, PRIORITY_CLASS, kind_named
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config import default_configuration
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.components import start_components
from kubesched.simulator.simulate import SIMULATION_COMPONENTS, SimulationResult, simulate
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock
from tests.helpers import make_node, make_pod


def priority_class(name: str, value: int, policy: str | None = None) -> dict:
    pc: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
    if policy:
        pc["preemptionPolicy"] = policy
    return pc


CLASSES = [priority_class("low", 100), priority_class("mid", 500), priority_class("high", 1000),
           priority_class("high-never", 1000, "Never")]


def p(name: str, cpu: str, cls: str, node: str | None = None, started: str | None = None, grace: int | None = None,
      labels: dict | None = None) -> dict:
    out = make_pod(name, cpu=cpu, node=node, labels=labels, priorityClassName=cls)
    out["metadata"].pop("uid")
    if started:
        out["status"] = {"startTime": started}
    if grace is not None:
        out["spec"]["terminationGracePeriodSeconds"] = grace
    return out


def pdb(name: str, labels: dict, allowed: int) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": labels}}, "status": {"disruptionsAllowed": allowed}}


def by_name(result: SimulationResult, name: str) -> dict | None:
    return next((x for x in result.pods() if x["metadata"]["name"] == name), None)


def condition(pod: dict, kind: str) -> dict | None:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def events(store: ObjectStore, reason: str) -> list[dict]:
    return [e for e in store.iter_all(EVENT) if e["reason"] == reason]


def history(store: ObjectStore, name: str) -> list[tuple[str, dict]]:
    """Every change of pod ``name`` the store committed, oldest first."""
    return [(e.type, e.object) for e in store.watch(POD, since=0).drain() if e.object["metadata"]["name"] == name]


# ================================================================================================
# through simulate: everything is created up front, victims already running
# ================================================================================================
def test_a_high_priority_pod_preempts_and_is_bound_to_the_nominated_node_once_the_victim_is_gone():
    objs = [*CLASSES, make_node("n1", cpu="2"), make_node("n2", cpu="2"),
            p("keep", "1", "low", node="n1", started="2024-01-01T00:00:00Z"),
            p("victim", "1", "low", node="n1", started="2024-01-01T01:00:00Z"),
            p("other", "2", "high", node="n2"), p("preemptor", "1", "high")]
    result = simulate(objs, default_configuration(), seed=1)
    store = result.store
    assert [(r.preemptor, r.node, r.victims) for r in result.preemptions] == [("default/preemptor", "n1", ["default/victim"])]
    assert result.preemptions[0].decided_by == "only candidate"
    assert by_name(result, "victim") is None and by_name(result, "keep") is not None
    preemptor = by_name(result, "preemptor")
    assert preemptor["spec"]["nodeName"] == "n1"
    changes = history(store, "victim")
    marked = next(obj for kind, obj in changes if condition(obj, "DisruptionTarget"))
    assert condition(marked, "DisruptionTarget") | {"lastTransitionTime": None} == {
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "lastProbeTime": None,
        "lastTransitionTime": None, "observedGeneration": 1,
        "message": "default-scheduler: preempting to accommodate a higher priority pod"}
    assert changes[-1][0] == "DELETED"
    terminating = next(obj for _, obj in changes if obj["metadata"].get("deletionTimestamp"))
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 30
    # The preemptor was nominated to n1 before it was bound there (and after the victim left).
    preemptor_changes = history(store, "preemptor")
    nominated_at = next(i for i, (_, obj) in enumerate(preemptor_changes) if (obj.get("status") or {}).get("nominatedNodeName") == "n1")
    bound_at = next(i for i, (_, obj) in enumerate(preemptor_changes) if obj["spec"].get("nodeName"))
    assert nominated_at < bound_at
    all_changes = [(e.type, e.object["metadata"]["name"], bool(e.object["spec"].get("nodeName")))
                   for e in store.watch(POD, since=0).drain()]
    assert all_changes.index(("DELETED", "victim", True)) < all_changes.index(("MODIFIED", "preemptor", True))
    [preempted] = events(store, "Preempted")
    assert preempted["involvedObject"]["name"] == "victim"
    assert preempted["related"]["name"] == "preemptor"
    assert preempted["message"] == f"Preempted by pod {preemptor['metadata']['uid']} on node n1"
    assert preempted["type"] == "Normal" and preempted.get("action") == "Preempting"


def test_preemption_policy_never_leaves_lower_priority_pods_alone():
    objs = [*CLASSES, make_node("n1", cpu="2"), p("low", "2", "low", node="n1"), p("polite", "1", "high-never")]
    result = simulate(objs, default_configuration(), seed=1)
    polite = by_name(result, "polite")
    assert not polite["spec"].get("nodeName") and by_name(result, "low")["spec"]["nodeName"] == "n1"
    assert "preemption: not eligible due to preemptionPolicy=Never." in condition(polite, "PodScheduled")["message"]
    assert not events(result.store, "Preempted") and not result.preemptions


def test_a_pod_that_cannot_fit_even_without_lower_priority_pods_says_so():
    objs = [*CLASSES, make_node("n1", cpu="2"), make_node("n2", cpu="2", taints=[{"key": "k", "effect": "NoSchedule"}]),
            p("low", "1", "low", node="n1"), p("high", "1", "high", node="n1"), p("big", "1500m", "mid")]
    result = simulate(objs, default_configuration(), seed=1)
    message = condition(by_name(result, "big"), "PodScheduled")["message"]
    assert message.startswith("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). "
                              "no new claims to deallocate, preemption: 0/2 nodes are available: "
                              "1 Insufficient cpu, 1 Preemption is not helpful for scheduling.")
    assert not result.preemptions and by_name(result, "low")["spec"]["nodeName"] == "n1"


def test_the_fit_error_with_a_preemption_message_is_upstreams_text():
    objs = [*CLASSES, make_node("n1", cpu="2"), p("high", "2", "high", node="n1"), p("mid", "1", "mid")]
    result = simulate(objs, default_configuration(), seed=1)
    assert condition(by_name(result, "mid"), "PodScheduled")["message"] == (
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: "
        "0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def test_pdb_protected_pods_are_avoided_but_not_forbidden():
    objs = [*CLASSES, make_node("n1", cpu="2"), make_node("n2", cpu="2"), pdb("guard", {"app": "db"}, 0),
            p("db", "2", "low", node="n1", labels={"app": "db"}), p("batch", "2", "low", node="n2"),
            p("first", "2", "high"), p("second", "2", "high")]
    result = simulate(objs, default_configuration(), seed=3)
    records = [(r.preemptor, r.node, r.victims, r.decided_by) for r in result.preemptions]
    assert records == [("default/first", "n2", ["default/batch"], "fewest PDB violations"),
                       ("default/second", "n1", ["default/db"], "only candidate")]
    assert {by_name(result, n)["spec"]["nodeName"] for n in ("first", "second")} == {"n1", "n2"}


def test_explain_records_the_candidates_and_the_deciding_criterion():
    objs = [*CLASSES, make_node("n1", cpu="2"), make_node("n2", cpu="2"),
            p("v1", "2", "mid", node="n1"), p("v2", "2", "low", node="n2"), p("preemptor", "2", "high")]
    result = simulate(objs, default_configuration(), seed=1, explain=True)
    from kubesched.simulator.explain import attempts_to_json, preemption_lines

    explained = [a["preemption"] for a in attempts_to_json(result.attempts, result.preemption_of_attempt) if "preemption" in a]
    assert len(explained) == 1
    assert explained[0]["node"] == "n2" and explained[0]["decidedBy"] == "lowest highest-priority victim"
    assert sorted((c["node"], c["highestPriority"], c["victims"]) for c in explained[0]["candidates"]) == [
        ("n1", 500, ["default/v1"]), ("n2", 100, ["default/v2"])]
    lines = preemption_lines(explained[0])
    assert lines[0] == "Preemption: nominated to n2, evicting default/v2 (decided by: lowest highest-priority victim)"
    assert sum(line.startswith("  * n2:") for line in lines) == 1


# ================================================================================================
# staged: pods created at given (virtual) times
# ================================================================================================
def staged(initial: list[dict], steps: list[tuple[float, Callable[[ObjectStore], None]]], until: float) -> tuple[ObjectStore, Scheduler]:
    async def scenario() -> tuple[ObjectStore, Scheduler]:
        loop = asyncio.get_running_loop()
        clock = LoopClock(loop, VIRTUAL_EPOCH)
        store = ObjectStore(clock, seed=1)
        kinds = {"PriorityClass": PRIORITY_CLASS, "Node": NODE, "Pod": POD, "PodDisruptionBudget": kind_named("PodDisruptionBudget")}
        for obj in initial:
            store.create(kinds[obj["kind"]], obj)
        components = start_components(store, SIMULATION_COMPONENTS)
        sched = Scheduler(MemoryClient(store), default_configuration(), clock=clock, seed=1)
        await sched.start()
        runner = loop.create_task(sched.run())
        now = 0.0
        for at, action in steps:
            await asyncio.sleep(at - now)
            now = at
            action(store)
        await asyncio.sleep(until - now)
        await sched.stop()
        runner.cancel()
        await components.stop()
        return store, sched

    return run_virtual(scenario())


def create(*pods: dict) -> Callable[[ObjectStore], None]:
    return lambda store: [store.create(POD, x) for x in pods]  # type: ignore[func-returns-value]


def test_a_higher_priority_preemptor_clears_a_lower_nomination_and_keeps_the_room():
    store, sched = staged([*CLASSES, make_node("n1", cpu="2"), p("low", "2", "low", node="n1")],
                          [(0.0, create(p("mid", "1", "mid"))), (5.0, create(p("high", "2", "high")))], until=120)
    mid, high = store.get(POD, "default", "mid"), store.get(POD, "default", "high")
    assert high["spec"]["nodeName"] == "n1"
    assert not mid["spec"].get("nodeName") and not mid["status"].get("nominatedNodeName")
    mid_nominations = [(obj.get("status") or {}).get("nominatedNodeName") for _, obj in history(store, "mid")]
    assert "n1" in mid_nominations  # mid preempted first and was nominated...
    assert mid_nominations.index("n1") < len(mid_nominations) - 1 and mid_nominations[-1] is None  # ...then cleared
    # mid keeps failing: the room on n1 belongs to the nominated high-priority pod, then to it bound there.
    assert "Insufficient cpu" in condition(mid, "PodScheduled")["message"]
    assert [e["involvedObject"]["name"] for e in events(store, "Preempted")] == ["low"]
    assert sched.metrics.preemption_attempts._value.get() >= 2
    assert sched.metrics.preemption_victims._sum.get() == 1


def test_a_preemptor_waits_while_its_victims_terminate():
    # The victim takes 10 minutes to go: the unschedulable-pods flush retries the preemptor meanwhile.
    store, _ = staged([*CLASSES, make_node("n1", cpu="2"), p("low", "2", "low", node="n1", grace=600)],
                      [(0.0, create(p("high", "2", "high")))], until=400)
    high = store.get(POD, "default", "high")
    assert not high["spec"].get("nodeName") and high["status"]["nominatedNodeName"] == "n1"
    messages = [e["message"] for e in events(store, "FailedScheduling") if e["involvedObject"]["name"] == "high"]
    assert any("preemption: not eligible due to a terminating pod on the nominated node." in m for m in messages)
    assert len(events(store, "Preempted")) == 1


def test_several_preemptors_take_different_nodes():
    nodes = [make_node(f"n{i}", cpu="4") for i in range(4)]
    lows = [p(f"low-{i}-{j}", "900m", "low", node=f"n{i}") for i in range(4) for j in range(4)]
    store, _ = staged([*CLASSES, *nodes, *lows], [(0.0, create(*(p(f"high-{k}", "3", "high") for k in range(4))))], until=200)
    placed = sorted(store.get(POD, "default", f"high-{k}")["spec"].get("nodeName") for k in range(4))
    assert placed == ["n0", "n1", "n2", "n3"]
    # Each node keeps the one low pod that still fits beside a 3-CPU pod.
    survivors = [x for x in store.iter_all(POD) if x["metadata"]["name"].startswith("low-")]
    assert sorted(x["spec"]["nodeName"] for x in survivors) == ["n0", "n1", "n2", "n3"]
