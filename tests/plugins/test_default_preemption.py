"""DefaultPreemption: upstream's unit cases (PostFilter, DryRunPreemption, SelectBestCandidate,
custom selection and ordering, PodEligibleToPreemptOthers, Preempt), PDB handling and the
candidate bounds, run through the framework on the columnar node table.

Resources follow upstream's tests: nodes of 500m CPU / 500 bytes (plus 32 pods), pods of
small 100m, medium 200m, large 300m, very large 500m.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from kubesched.api.apierrors import NotFound
from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.config.args import DefaultPreemptionArgs
from kubesched.scheduler.config.types import PluginRef, PluginSet, Profile
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.diagnosis import NodeToStatus
from kubesched.scheduler.framework.events import ActionType, QueueingHint, Resource
from kubesched.scheduler.framework.interface import FilterPlugin, NominatingMode, PreFilterExtensions, PreFilterPlugin
from kubesched.scheduler.framework.preemption_report import PreemptionObserver, PreemptionRecord
from kubesched.scheduler.framework.registry import merge
from kubesched.scheduler.framework.runtime import Framework, HandleContext
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.metrics import Metrics
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.defaultpreemption._levels import priority_levels
from kubesched.scheduler.plugins.defaultpreemption.default_preemption import DefaultPreemption, pod_terminating_by_preemption
from kubesched.scheduler.plugins.defaultpreemption.preemption import (
    DEFERRED,
    Candidate,
    ParsedPDB,
    Victims,
    default_score_funcs,
    filter_pods_with_pdb_violation,
    importance_key,
    parse_pdbs,
    pick_one_node_for_preemption,
)
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.utils.clock import VIRTUAL_EPOCH, ManualClock, rfc3339

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}
ONE_POD = {"pods": "1"}
NODE_RES = {"cpu": "200m", "memory": "400"}
LABEL_KEYS = ("hostname", "zone", "region")


# ================================================================================================
# builders
# ================================================================================================
def node(spec: str, capacity: dict | None = None, labels: dict | None = None) -> dict:
    """``st.MakeNode()``: 32 pods plus ``capacity``; ``name/zone/region`` also sets those labels."""
    parts = spec.split("/")
    all_labels = {LABEL_KEYS[i]: value for i, value in enumerate(parts)}
    all_labels.update(labels or {})
    cap = {"pods": "32", **(capacity if capacity is not None else VERY_LARGE)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": parts[0], "labels": all_labels},
            "spec": {}, "status": {"capacity": dict(cap), "allocatable": dict(cap)}}


def start(seconds: float) -> str:
    return rfc3339(VIRTUAL_EPOCH - 10_000 + seconds)


def pod(name: str, *, node: str | None = None, priority: int | None = None, req: dict | None = None,
        labels: dict | None = None, started: float | None = None, namespace: str = "default",
        terminating: bool = False, conditions: list | None = None, nominated: str | None = None, **spec: Any) -> dict:
    container: dict[str, Any] = {"name": "c", "image": "pause"}
    if req:
        container["resources"] = {"requests": dict(req)}
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": namespace, "uid": name, "labels": labels or {}},
                           "spec": {"containers": [container], **spec}, "status": {}}
    if node:
        out["spec"]["nodeName"] = node
    if priority is not None:
        out["spec"]["priority"] = priority
    if started is not None:
        out["status"]["startTime"] = start(started)
    if terminating:
        out["metadata"]["deletionTimestamp"] = start(1000)
    if conditions:
        out["status"]["conditions"] = conditions
    if nominated:
        out["status"]["nominatedNodeName"] = nominated
    return out


DISRUPTED = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}


def pdb(name: str, match: dict | None, allowed: int = 0, disrupted: tuple[str, ...] = (), namespace: str = "default") -> dict:
    spec = {} if match is None else {"selector": {"matchLabels": match}}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": namespace},
            "spec": spec, "status": {"disruptionsAllowed": allowed, "disruptedPods": {p: start(0) for p in disrupted}}}


def spread(key: str) -> dict:
    return {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}}


def anti_affinity(key: str, topology: str) -> dict:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"}]}, "topologyKey": topology}]}}


# ================================================================================================
# test plugins (upstream's tf.FakeFilterPlugin, TrueFilter, FalseFilter, MatchFilter, TestPlugin)
# ================================================================================================
class FakeFilter(FilterPlugin):
    """Counts its calls and returns ``code`` on every node (Success passes)."""

    name = "FakeFilter"
    code = Code.Success

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.calls = 0

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        self.calls += 1
        if self.code == Code.Success:
            return None
        return Status(self.code, f"injecting failure for pod {pod.name}")


class TrueFilter(FilterPlugin):
    name = "TrueFilter"

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        return None


class FalseFilter(FilterPlugin):
    name = "FalseFilter"

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        return Status(Code.Unschedulable, "injecting failure")


class MatchFilter(FilterPlugin):
    name = "MatchFilter"

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        return None if pod.name == node_info.name else Status(Code.Unschedulable, "node name does not match")


class _ErrorExtensions(PreFilterExtensions):
    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        if node_info.labels.get("error") == "true":
            return Status.from_error(RuntimeError(f"failed to add pod: {pod.name}"))
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        if node_info.labels.get("error") == "true":
            return Status.from_error(RuntimeError(f"failed to remove pod: {pod.name}"))
        return None


class ErrorPlugin(PreFilterPlugin):
    """Upstream's TestPlugin: AddPod/RemovePod fail on nodes labelled ``error=true``."""

    name = "test-plugin"

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Any) -> tuple[None, None]:
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return _ErrorExtensions()


REGISTRY = merge(in_tree_registry(), {p.name: p for p in (FakeFilter, TrueFilter, FalseFilter, MatchFilter, ErrorPlugin)})


# ================================================================================================
# the handle's collaborators
# ================================================================================================
class Informers:
    def __init__(self, objects: dict[str, dict[str, dict]]) -> None:
        self.objects = objects

    def store(self, kind: str) -> dict[str, dict]:
        return self.objects.setdefault(kind, {})


class Nominator:
    def __init__(self) -> None:
        self.by_node: dict[str, list[PodInfo]] = {}

    def nominated_pods_for_node(self, name: str) -> list[PodInfo]:
        return list(self.by_node.get(name, ()))

    def nominated_node_names(self) -> list[str]:
        return list(self.by_node)


class Client:
    """Records the API calls preemption makes."""

    def __init__(self, missing: tuple[str, ...] = ()) -> None:
        self.patches: list[tuple[str, list[dict], str | None]] = []
        self.deleted: list[str] = []
        self.missing = set(missing)

    async def patch_pod_status(self, pod: dict, conditions: list[dict], nominated: str | None) -> None:
        if pod["metadata"]["name"] in self.missing:
            raise NotFound("pods not found")
        self.patches.append((pod["metadata"]["name"], conditions, nominated))

    async def delete(self, kind: Any, namespace: str | None, name: str, **_: Any) -> None:
        if name in self.missing:
            raise NotFound("pods not found")
        self.deleted.append(name)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str | None, str, str, str, str]] = []

    def eventf(self, regarding: dict, related: dict | None, event_type: str, reason: str, action: str, note: str) -> None:
        self.events.append((regarding["metadata"]["name"], (related or {}).get("metadata", {}).get("name"),
                            event_type, reason, action, note))


@dataclass
class Env:
    fw: Framework
    table: NodeTable
    plugin: DefaultPreemption
    client: Client
    recorder: Recorder
    nominator: Nominator
    metrics: Metrics
    objects: dict[str, dict[str, dict]] = field(default_factory=dict)

    def state_for(self, preemptor: dict) -> tuple[CycleState, PodInfo]:
        state = CycleState()
        info = PodInfo(preemptor)
        _, status, _ = self.fw.run_pre_filter(state, info)
        assert status is None or status.is_success(), status
        return state, info

    def sorted_infos(self) -> list[NodeInfo]:
        return sorted(self.table.infos[: self.table.n], key=lambda i: i.name)

    def dry_run(self, preemptor: dict, pdbs: list[dict] = (), offset: int | None = None) -> list[Candidate]:  # type: ignore[assignment]
        state, info = self.state_for(preemptor)
        infos = self.sorted_infos()
        rand_offset, num = self.plugin.get_offset_and_num_candidates(len(infos))
        candidates, _, _ = self.plugin.evaluator.dry_run_preemption(
            state, info, infos, parse_pdbs({str(i): p for i, p in enumerate(pdbs)}), rand_offset if offset is None else offset, num)
        return candidates

    def statuses(self, failures: dict[str, Code]) -> NodeToStatus:
        m = NodeToStatus(self.table.names[: self.table.n])
        for name, code in failures.items():
            m.set(name, Status(code))
        return m


def build(nodes: list[dict], pods: list[dict], *, plugins: tuple[str, ...] = ("NodeResourcesFit",), preemptor: dict | None = None,
          pdbs: list[dict] = (), args: DefaultPreemptionArgs | None = None, fake_code: Code = Code.Success,  # type: ignore[assignment]
          client: Client | None = None, seed: int = 0, observer: PreemptionObserver | None = None) -> Env:
    table = NodeTable()
    for n in nodes:
        table.set_node(NodeInfo(n))
    for p in pods:
        info = table.get(p["spec"]["nodeName"])
        assert info is not None
        pi = PodInfo(p)
        info.add_pod(pi)
        table.pod_added(info, pi)
    profile = Profile()
    point_plugins = {"queueSort": ["PrioritySort"], "bind": ["DefaultBinder"], "postFilter": ["DefaultPreemption"],
                     "preEnqueue": ["DefaultPreemption"],
                     "preFilter": [p for p in plugins if issubclass(REGISTRY[p], PreFilterPlugin)],  # type: ignore[arg-type]
                     "filter": [p for p in plugins if p != "test-plugin"]}
    for point, names_ in point_plugins.items():
        profile.plugins.points[point] = PluginSet([PluginRef(n) for n in names_])
    if args is not None:
        profile.plugin_config["DefaultPreemption"] = args
    objects: dict[str, dict[str, dict]] = {"Pod": {}, "PodDisruptionBudget": {}}
    for p in [*pods, *([preemptor] if preemptor else [])]:
        objects["Pod"][f"{p['metadata']['namespace']}/{p['metadata']['name']}"] = p
    for i, b in enumerate(pdbs):
        objects["PodDisruptionBudget"][f"default/{b['metadata']['name']}-{i}"] = b
    nominator, metrics, recorder = Nominator(), Metrics(), Recorder()
    client = client or Client()
    ctx = HandleContext(clock=ManualClock(), snapshot=lambda: table, informers=Informers(objects), nominator=nominator,
                        client=client, recorder=recorder, metrics=metrics, rng=random.Random(seed),
                        preemption_observer=observer)
    fw = Framework(REGISTRY, profile, ctx)
    if "FakeFilter" in fw.plugins:
        fw.plugins["FakeFilter"].code = fake_code  # type: ignore[attr-defined]
    plugin = fw.plugins["DefaultPreemption"]
    assert isinstance(plugin, DefaultPreemption)
    return Env(fw, table, plugin, client, recorder, nominator, metrics, objects)


def names_of(pods: list[PodInfo]) -> list[str]:
    return [p.name for p in pods]


def summary(candidates: list[Candidate]) -> list[tuple[str, list[str], int]]:
    return sorted((c.name, sorted(names_of(c.victims.pods)), c.victims.num_pdb_violations) for c in candidates)


# ================================================================================================
# PostFilter (upstream TestPostFilter)
# ================================================================================================
U, UAU = Code.Unschedulable, Code.UnschedulableAndUnresolvable

POST_FILTER_CASES = [
    ("pod with higher priority can be made schedulable",
     [node("node1", ONE_POD)], [pod("p1", node="node1")], pod("p", priority=HIGH), {"node1": U}, (),
     "node1", None),
    ("pod with tied priority is still unschedulable",
     [node("node1", ONE_POD)], [pod("p1", node="node1")], pod("p"), {"node1": U}, (),
     "", Status(U, "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")),
    ("preemption should respect filteredNodesStatuses",
     [node("node1", ONE_POD)], [pod("p1", node="node1")], pod("p", priority=HIGH), {"node1": UAU}, (),
     "", Status(U, "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")),
    ("preemption should respect absent NodeToStatusReader entry meaning UnschedulableAndUnresolvable",
     [node("node1", ONE_POD)], [pod("p1", node="node1")], pod("p", priority=HIGH), {}, (),
     "", Status(U, "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")),
    ("pod can be made schedulable on one node",
     [node("node1", ONE_POD), node("node2", ONE_POD)],
     [pod("p1", node="node1", priority=HIGH), pod("p2", node="node2", priority=LOW)], pod("p", priority=MID),
     {"node1": U, "node2": U}, (), "node2", None),
    ("pod can be made schedulable on minHighestPriority node",
     [node("node1", ONE_POD), node("node2", ONE_POD)],
     [pod("p1", node="node1", priority=HIGH, labels={"pdb": "non-violating"}),
      pod("p2", node="node1", priority=LOW, labels={"pdb": "violating"}),
      pod("p3", node="node2", priority=MID, labels={"pdb": "violating"})],
     pod("p", priority=VERY_HIGH), {"node1": U, "node2": U},
     (pdb("violating-pdb", {"pdb": "violating"}, 0), pdb("non-violating-pdb", {"pdb": "non-violating"}, 2**31 - 1)),
     "node2", None),
    ("no candidate nodes found, no enough resource after removing low priority pods",
     [node("node1", NODE_RES), node("node2", NODE_RES)], [pod("p1", node="node1"), pod("p2", node="node2")],
     pod("p", priority=HIGH, req=LARGE), {"node1": U, "node2": U}, (),
     "", Status(U, "preemption: 0/2 nodes are available: 2 Insufficient cpu.")),
    ("no candidate nodes found with mixed reasons, no lower priority pod and no enough CPU resource",
     [node("node1", ONE_POD), node("node2", NODE_RES), node("node3", ONE_POD)],
     [pod("p1", node="node1", priority=HIGH), pod("p2", node="node2"), pod("p3", node="node3", priority=HIGH)],
     pod("p", priority=HIGH, req=LARGE), {"node1": U, "node2": U, "node3": U}, (),
     "", Status(U, "preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod.")),
    ("no candidate nodes found with mixed reason, 2 UnschedulableAndUnresolvable nodes and 2 nodes don't have enough CPU resource",
     [node("node1", NODE_RES), node("node2", NODE_RES), node("node3", NODE_RES), node("node4", NODE_RES)],
     [pod("p1", node="node1"), pod("p2", node="node2")], pod("p", priority=HIGH, req=LARGE),
     {"node1": U, "node2": U, "node4": UAU}, (),
     "", Status(U, "preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for scheduling.")),
]


@pytest.mark.parametrize(("nodes", "pods", "preemptor", "failures", "pdbs", "want_node", "want_status"),
                         [pytest.param(*c[1:], id=c[0]) for c in POST_FILTER_CASES])
def test_post_filter(nodes, pods, preemptor, failures, pdbs, want_node, want_status) -> None:
    env = build(nodes, pods, preemptor=preemptor, pdbs=list(pdbs))
    state, info = env.state_for(preemptor)
    result, status = env.plugin.post_filter(state, info, env.statuses(failures))
    assert status == want_status
    assert result is not None and result.nominating_info is not None
    assert result.nominating_info.nominated_node_name == want_node
    assert result.nominating_info.mode == NominatingMode.Override
    assert env.metrics.preemption_attempts._value.get() == 1


def test_post_filter_reports_a_remove_pod_error_when_no_node_is_a_candidate() -> None:
    env = build([node("node1", LARGE, labels={"error": "true"})], [pod("p1", node="node1")],
                plugins=("NodeResourcesFit", "test-plugin"), preemptor=pod("p", priority=HIGH, req=LARGE))
    state, info = env.state_for(env.objects["Pod"]["default/p"])
    result, status = env.plugin.post_filter(state, info, env.statuses({"node1": U}))
    assert result is None
    assert status is not None and status.code == Code.Error
    assert status.message() == 'preemption: running RemovePod on PreFilter plugin "test-plugin": failed to remove pod: p'


def test_post_filter_ignores_an_error_on_one_node_when_another_is_a_candidate() -> None:
    env = build([node("node1", LARGE, labels={"error": "true"}), node("node2", LARGE)],
                [pod("p1", node="node1"), pod("p2", node="node2", req=MEDIUM)],
                plugins=("NodeResourcesFit", "test-plugin"), preemptor=pod("p", priority=HIGH, req=LARGE))
    state, info = env.state_for(env.objects["Pod"]["default/p"])
    result, status = env.plugin.post_filter(state, info, env.statuses({"node1": U, "node2": U}))
    assert status is None
    assert result.nominating_info.nominated_node_name == "node2"  # type: ignore[union-attr]


def test_post_filter_errors_when_the_preemptor_is_gone_from_the_informer() -> None:
    env = build([node("node1", ONE_POD)], [pod("p1", node="node1")])
    state, info = env.state_for(pod("p", priority=HIGH))
    result, status = env.plugin.post_filter(state, info, env.statuses({"node1": U}))
    assert result is None and status is not None and status.code == Code.Error
    assert status.message() == 'preemption: pod "p" not found'


# ================================================================================================
# DryRunPreemption (upstream TestDryRunPreemption)
# ================================================================================================
@dataclass
class DryRunCase:
    name: str
    nodes: list[str]
    init: list[dict]
    preemptors: list[dict]
    expected: list[list[tuple[str, list[str], int]]]
    plugins: tuple[str, ...] = ("NodeResourcesFit",)
    pdbs: list[dict] = field(default_factory=list)
    fake_code: Code = Code.Success
    args: DefaultPreemptionArgs | None = None
    offsets: list[int] | None = None
    filter_calls: list[int] | None = None  # FakeFilter calls, where upstream's count is reproduced


FOO = {"foo": ""}
APP_FOO = {"app": "foo"}

DRY_RUN_CASES = [
    DryRunCase("a pod that does not fit on any node", ["node1", "node2"],
               [pod("p1", node="node1", priority=MID), pod("p2", node="node2", priority=MID)],
               [pod("p", priority=HIGH)], [[]], plugins=("FalseFilter",), filter_calls=[2]),
    DryRunCase("a pod that fits with no preemption", ["node1", "node2"],
               [pod("p1", node="node1", priority=MID), pod("p2", node="node2", priority=MID)],
               [pod("p", priority=HIGH)], [[]], plugins=("TrueFilter",), fake_code=Code.Unschedulable, filter_calls=[2]),
    DryRunCase("a pod that fits on one node with no preemption", ["node1", "node2"],
               [pod("p1", node="node1", priority=MID), pod("p2", node="node2", priority=MID)],
               [pod("node1", priority=HIGH)], [[]], plugins=("MatchFilter",), fake_code=Code.Unschedulable, filter_calls=[2]),
    DryRunCase("a pod that fits on both nodes when lower priority pods are preempted", ["node1", "node2"],
               [pod("p1", node="node1", priority=MID, req=LARGE), pod("p2", node="node2", priority=MID, req=LARGE)],
               [pod("p", priority=HIGH, req=LARGE)], [[("node1", ["p1"], 0), ("node2", ["p2"], 0)]]),
    DryRunCase("a pod that would fit on the nodes, but other pods running are higher priority, no preemption would happen",
               ["node1", "node2"],
               [pod("p1", node="node1", priority=MID, req=LARGE), pod("p2", node="node2", priority=MID, req=LARGE)],
               [pod("p", priority=LOW, req=LARGE)], [[]], filter_calls=[0]),
    DryRunCase("medium priority pod is preempted, but lower priority one stays as it is small", ["node1", "node2"],
               [pod("p1.1", node="node1", priority=LOW, req=SMALL), pod("p1.2", node="node1", priority=MID, req=LARGE),
                pod("p2", node="node2", priority=MID, req=LARGE)],
               [pod("p", priority=HIGH, req=LARGE)], [[("node1", ["p1.2"], 0), ("node2", ["p2"], 0)]]),
    DryRunCase("mixed priority pods are preempted", ["node1", "node2"],
               [pod("p1.1", node="node1", priority=MID, req=SMALL), pod("p1.2", node="node1", priority=LOW, req=SMALL),
                pod("p1.3", node="node1", priority=MID, req=MEDIUM), pod("p1.4", node="node1", priority=HIGH, req=SMALL),
                pod("p2", node="node2", priority=HIGH, req=LARGE)],
               [pod("p", priority=HIGH, req=LARGE)], [[("node1", ["p1.2", "p1.3"], 0)]]),
    DryRunCase("mixed priority pods are preempted, pick later StartTime one when priorities are equal", ["node1", "node2"],
               [pod("p1.1", node="node1", priority=LOW, req=SMALL, started=5),
                pod("p1.2", node="node1", priority=LOW, req=SMALL, started=4),
                pod("p1.3", node="node1", priority=MID, req=MEDIUM, started=3),
                pod("p1.4", node="node1", priority=HIGH, req=SMALL, started=2),
                pod("p2", node="node2", priority=HIGH, req=LARGE, started=1)],
               [pod("p", priority=HIGH, req=LARGE)], [[("node1", ["p1.1", "p1.3"], 0)]]),
    DryRunCase("pod with anti-affinity is preempted", ["node1", "node2"],
               [pod("p1.1", node="node1", labels=FOO, priority=LOW, req=SMALL, affinity=anti_affinity("foo", "hostname")),
                pod("p1.2", node="node1", priority=MID, req=SMALL), pod("p1.3", node="node1", priority=HIGH, req=SMALL),
                pod("p2", node="node2", priority=HIGH, req=SMALL)],
               [pod("p", labels=FOO, priority=HIGH, req=SMALL)], [[("node1", ["p1.1"], 0)]],
               plugins=("NodeResourcesFit", "InterPodAffinity")),
    DryRunCase("preemption to resolve pod topology spread filter failure", ["node-a/zone1", "node-b/zone1", "node-x/zone2"],
               [pod("pod-a1", node="node-a", labels=FOO, priority=MID), pod("pod-a2", node="node-a", labels=FOO, priority=LOW),
                pod("pod-b1", node="node-b", labels=FOO, priority=LOW), pod("pod-x1", node="node-x", labels=FOO, priority=HIGH),
                pod("pod-x2", node="node-x", labels=FOO, priority=HIGH)],
               [pod("p", labels=FOO, priority=HIGH, topologySpreadConstraints=[spread("zone"), spread("hostname")])],
               [[("node-a", ["pod-a2"], 0), ("node-b", ["pod-b1"], 0)]], plugins=("PodTopologySpread",), filter_calls=[5]),
    DryRunCase("get Unschedulable in the preemption phase when the filter plugins filtering the nodes", ["node1", "node2"],
               [pod("p1", node="node1", priority=MID, req=LARGE), pod("p2", node="node2", priority=MID, req=LARGE)],
               [pod("p", priority=HIGH, req=LARGE)], [[]], fake_code=Code.Unschedulable, filter_calls=[2]),
    DryRunCase("preemption with violation of same pdb", ["node1"],
               [pod("p1.1", node="node1", labels=APP_FOO, priority=MID, req=MEDIUM),
                pod("p1.2", node="node1", labels=APP_FOO, priority=MID, req=MEDIUM)],
               [pod("p", priority=HIGH, req=VERY_LARGE)], [[("node1", ["p1.1", "p1.2"], 1)]], pdbs=[pdb("foo", APP_FOO, 1)]),
    DryRunCase("preemption with violation of the pdb with pod whose eviction was processed, the victim doesn't belong to DisruptedPods",
               ["node1"],
               [pod("p1.1", node="node1", labels=APP_FOO, priority=MID, req=MEDIUM),
                pod("p1.2", node="node1", labels=APP_FOO, priority=MID, req=MEDIUM)],
               [pod("p", priority=HIGH, req=VERY_LARGE)], [[("node1", ["p1.1", "p1.2"], 1)]],
               pdbs=[pdb("foo", APP_FOO, 1, disrupted=("p2",))]),
    DryRunCase("preemption with violation of the pdb with pod whose eviction was processed, the victim belongs to DisruptedPods",
               ["node1"],
               [pod("p1.1", node="node1", labels=APP_FOO, priority=MID, req=MEDIUM),
                pod("p1.2", node="node1", labels=APP_FOO, priority=MID, req=MEDIUM)],
               [pod("p", priority=HIGH, req=VERY_LARGE)], [[("node1", ["p1.1", "p1.2"], 0)]],
               pdbs=[pdb("foo", APP_FOO, 1, disrupted=("p1.2",))]),
    DryRunCase("preemption with violation of the pdb with pod whose eviction was processed, "
               "the victim which belongs to DisruptedPods is treated as 'nonViolating'", ["node1"],
               [pod("p1.1", node="node1", labels=APP_FOO, priority=MID, req=MEDIUM),
                pod("p1.2", node="node1", labels=APP_FOO, priority=MID, req=MEDIUM),
                pod("p1.3", node="node1", labels=APP_FOO, priority=MID, req=MEDIUM)],
               [pod("p", priority=HIGH, req=VERY_LARGE)], [[("node1", ["p1.1", "p1.2", "p1.3"], 1)]],
               pdbs=[pdb("foo", APP_FOO, 1, disrupted=("p1.3",))]),
    DryRunCase("all nodes are possible candidates, but DefaultPreemptionArgs limits to 2", [f"node{i}" for i in range(1, 6)],
               [pod(f"p{i}", node=f"node{i}", priority=MID, req=LARGE) for i in range(1, 6)],
               [pod("p", priority=HIGH, req=LARGE)], [[("node1", ["p1"], 0), ("node5", ["p5"], 0)]],
               args=DefaultPreemptionArgs(40, 1), offsets=[4]),
    DryRunCase("some nodes are not possible candidates, DefaultPreemptionArgs limits to 2", [f"node{i}" for i in range(1, 6)],
               [pod(f"p{i}", node=f"node{i}", priority=VERY_HIGH if i in (2, 5) else MID, req=LARGE) for i in range(1, 6)],
               [pod("p", priority=HIGH, req=LARGE)], [[("node1", ["p1"], 0), ("node3", ["p3"], 0)]],
               args=DefaultPreemptionArgs(40, 1), offsets=[4]),
    DryRunCase("preemption offset across multiple scheduling cycles and wrap around", [f"node{i}" for i in range(1, 6)],
               [pod(f"p{i}", node=f"node{i}", priority=MID, req=LARGE) for i in range(1, 6)],
               [pod(f"tp{i}", priority=HIGH, req=LARGE) for i in range(1, 4)],
               [[("node1", ["p1"], 0), ("node5", ["p5"], 0)], [("node2", ["p2"], 0), ("node3", ["p3"], 0)],
                [("node4", ["p4"], 0), ("node5", ["p5"], 0)]],
               args=DefaultPreemptionArgs(40, 1), offsets=[4, 1, 3]),
    DryRunCase("preemption looks past numCandidates until a non-PDB violating node is found", [f"node{i}" for i in range(1, 6)],
               [pod(f"p{i}", node=f"node{i}", priority=MID, req=LARGE, labels=APP_FOO if i in (1, 2, 5) else {})
                for i in range(1, 6)],
               [pod("p", priority=HIGH, req=LARGE)], [[("node1", ["p1"], 1), ("node3", ["p3"], 0), ("node5", ["p5"], 1)]],
               pdbs=[pdb("foo", APP_FOO, 0)], args=DefaultPreemptionArgs(40, 2), offsets=[4]),
]


@pytest.mark.parametrize("case", DRY_RUN_CASES, ids=[c.name for c in DRY_RUN_CASES])
def test_dry_run_preemption(case: DryRunCase) -> None:
    env = build([node(n) for n in case.nodes], case.init, plugins=("FakeFilter", *case.plugins), args=case.args,
                fake_code=case.fake_code)
    offsets = iter(case.offsets or [0] * len(case.preemptors))
    env.plugin.offset_rand = lambda n: next(offsets)
    fake = env.fw.plugins["FakeFilter"]
    for cycle, preemptor in enumerate(case.preemptors):
        before = fake.calls  # type: ignore[attr-defined]
        assert summary(env.dry_run(preemptor, case.pdbs)) == case.expected[cycle], f"cycle {cycle}"
        if case.filter_calls is not None:
            assert fake.calls - before == case.filter_calls[cycle], f"cycle {cycle}"  # type: ignore[attr-defined]


def test_dry_run_victims_are_ordered_most_important_first_when_pdb_and_other_victims_mix() -> None:
    env = build([node("node1")], [pod("a", node="node1", priority=LOW, req=MEDIUM, labels=APP_FOO, started=1),
                                  pod("b", node="node1", priority=MID, req=MEDIUM, started=2)])
    [candidate] = env.dry_run(pod("p", priority=HIGH, req=VERY_LARGE), [pdb("foo", APP_FOO, 0)])
    # "a" violates the PDB and is tried first, yet the victims end up sorted by importance.
    assert names_of(candidate.victims.pods) == ["b", "a"]
    assert candidate.victims.num_pdb_violations == 1


def test_dry_run_of_every_node_matches_a_one_node_dry_run() -> None:
    """The batched dry run agrees with SelectVictimsOnNode node by node (random clusters)."""
    rng = random.Random(7)
    for _ in range(20):
        nodes = [node(f"n{i}", {"cpu": f"{rng.choice([1, 2, 4])}", "memory": "8Gi"}) for i in range(6)]
        pods = [pod(f"p{i}", node=f"n{rng.randrange(6)}", priority=rng.choice([LOW, MID, HIGH]),
                    req={"cpu": f"{rng.choice([100, 300, 500, 900])}m"}, started=rng.randrange(100)) for i in range(24)]
        env = build(nodes, [p for p in pods if _fits(p, nodes, pods)])
        preemptor = pod("in", priority=VERY_HIGH if rng.random() < 0.5 else MID, req={"cpu": f"{rng.choice([500, 1500])}m"})
        state, info = env.state_for(preemptor)
        infos = env.sorted_infos()
        together = env.plugin.select_victims_on_nodes(state, info, infos, [], thorough=True)
        quick = env.plugin.select_victims_on_nodes(state, info, infos, [], thorough=False)
        for node_info, batched, fast in zip(infos, together, quick, strict=True):
            alone = env.plugin.select_victims_on_node(state, info, node_info, [])
            assert names_of(batched.victims) == names_of(alone.victims)
            assert batched.status == alone.status
            # Not thorough, a node may be DEFERRED only if it is no candidate; otherwise nothing changes.
            if fast.status is DEFERRED:
                assert not alone.victims and alone.status is not None
            else:
                assert (names_of(fast.victims), fast.status) == (names_of(alone.victims), alone.status)


def test_nodes_screened_from_the_table_columns_get_the_answers_their_pods_give() -> None:
    """For the scheduler's own nodes "no victims" and DEFERRED come from the table's columns (the
    requests per priority level); for copies of them, from their pods: the answers agree, with
    nominated pods of every priority on some nodes."""
    rng = random.Random(5)
    for _ in range(20):
        nodes = [node(f"n{i}", {"cpu": f"{rng.choice([1, 2, 4])}", "memory": "8Gi"}) for i in range(8)]
        pods = [pod(f"p{i}", node=f"n{rng.randrange(8)}", priority=rng.choice([LOW, MID, HIGH]),
                    req={"cpu": f"{rng.choice([100, 300, 500, 900])}m"}, started=rng.randrange(100)) for i in range(30)]
        env = build(nodes, [p for p in pods if _fits(p, nodes, pods)])
        for i in range(3):
            name = f"n{rng.randrange(8)}"
            nominee = pod(f"nominee{i}", priority=rng.choice([MID, VERY_HIGH]), req={"cpu": "500m"}, nominated=name)
            env.nominator.by_node.setdefault(name, []).append(PodInfo(nominee))
        preemptor = pod("in", priority=rng.choice([MID, HIGH, VERY_HIGH]), req={"cpu": f"{rng.choice([500, 1500])}m"})
        state, info = env.state_for(preemptor)
        infos = env.sorted_infos()
        assert all(env.table.get(i.name) is i for i in infos)
        for thorough in (False, True):
            from_columns = env.plugin.select_victims_on_nodes(state, info, infos, [], thorough=thorough)
            from_pods = env.plugin.select_victims_on_nodes(state, info, [i.clone() for i in infos], [], thorough=thorough)
            assert [(names_of(a.victims), a.status) for a in from_columns] == \
                [(names_of(b.victims), b.status) for b in from_pods]


def test_priority_levels_sum_the_pods_below_a_priority_through_pod_and_node_changes() -> None:
    env = build([node("a", {"cpu": "4"}), node("b", {"cpu": "4"}), node("c", {"cpu": "4"})],
                [pod("a-low", node="a", priority=LOW, req={"cpu": "1"}), pod("a-mid", node="a", priority=MID, req={"cpu": "2"}),
                 pod("c-low", node="c", priority=LOW, req={"cpu": "500m", "memory": "1Gi"})])
    levels = priority_levels(env.table)
    row = env.table.row_of

    def below(priority: int) -> dict[str, tuple[int, int]]:
        names = ["a", "b", "c"]
        count, requests = levels.below(priority, np.array([row[n] for n in names]))
        cpu = requests.get("cpu", np.zeros(3, dtype=np.int64))
        return {n: (int(count[i]), int(cpu[i])) for i, n in enumerate(names)}

    assert below(LOW) == {"a": (0, 0), "b": (0, 0), "c": (0, 0)}
    assert below(HIGH) == {"a": (2, 3000), "b": (0, 0), "c": (1, 500)}
    assert below(MID) == {"a": (1, 1000), "b": (0, 0), "c": (1, 500)}
    extra = PodInfo(pod("b-low", node="b", priority=LOW, req={"cpu": "700m"}))
    info_b = env.table.get("b")
    info_b.add_pod(extra)
    env.table.pod_added(info_b, extra)
    assert below(MID)["b"] == (1, 700)
    env.table.remove_node("a")  # "c" moves into the hole
    count, _ = levels.below(HIGH, np.array([row["b"], row["c"]]))
    assert count.tolist() == [1, 1]


def _reference_select(env: Env, state: CycleState, preemptor: PodInfo, info: NodeInfo,
                      pdbs: list[ParsedPDB]) -> tuple[list[str], int, Status | None]:
    """Upstream's SelectVictimsOnNode written literally, one node at a time, on the runtime's
    per-node path (``run_filters_with_nominated_pods``)."""
    fw, now = env.fw, env.fw.clock.wall()
    potential = [p for p in info.pods.values() if p.priority < preemptor.priority]
    node, state = info.clone(), state.clone()
    for victim in potential:
        node.remove_pod(victim.uid)
        assert fw.run_pre_filter_extension_remove_pod(state, preemptor, victim, node) is None
    if not potential:
        return [], 0, Status(UAU, "No preemption victims found for incoming pod")
    status = fw.run_filters_with_nominated_pods(state, preemptor, node)
    if status is not None:
        return [], 0, status
    key = lambda p: (-p.priority, p.start_time if p.start_time is not None else now)  # noqa: E731
    violating, non_violating = filter_pods_with_pdb_violation(sorted(potential, key=key), pdbs)
    victims: list[PodInfo] = []
    num_violating = 0
    for group in (violating, non_violating):
        for candidate in group:
            node.add_pod(candidate)
            assert fw.run_pre_filter_extension_add_pod(state, preemptor, candidate, node) is None
            if fw.run_filters_with_nominated_pods(state, preemptor, node) is not None:
                node.remove_pod(candidate.uid)
                assert fw.run_pre_filter_extension_remove_pod(state, preemptor, candidate, node) is None
                victims.append(candidate)
                num_violating += group is violating
    if violating and non_violating:
        victims.sort(key=key)
    return names_of(victims), num_violating, None


@pytest.mark.parametrize("with_affinity", [False, True], ids=["resources only", "with anti-affinity (per-node states)"])
def test_batched_dry_runs_match_upstreams_per_node_algorithm(with_affinity: bool) -> None:
    rng = random.Random(11 + with_affinity)
    plugins = ("NodeResourcesFit", "InterPodAffinity") if with_affinity else ("NodeResourcesFit",)
    for _ in range(25):
        nodes = [node(f"n{i}/z{i % 2}", {"cpu": "2", "memory": "8Gi"}) for i in range(5)]
        pods, used = [], dict.fromkeys(range(5), 0)
        for i in range(30):
            n, cpu = rng.randrange(5), rng.choice([100, 300, 500, 900])
            if used[n] + cpu > 2000:
                continue
            used[n] += cpu
            extra = {"affinity": anti_affinity("foo", "zone")} if with_affinity and rng.random() < 0.2 else {}
            pods.append(pod(f"p{i}", node=f"n{n}", priority=rng.choice([LOW, MID, HIGH]), req={"cpu": f"{cpu}m"},
                            started=rng.randrange(50), labels={"app": "db"} if rng.random() < 0.4 else {}, **extra))
        env = build(nodes, pods, plugins=plugins)
        for n in rng.sample(range(5), 2):
            env.nominator.by_node[f"n{n}"] = [PodInfo(pod(f"nom{n}", priority=rng.choice([MID, VERY_HIGH]), req={"cpu": "700m"}))]
        preemptor = pod("in", priority=rng.choice([MID, HIGH, VERY_HIGH]), req={"cpu": f"{rng.choice([500, 1200])}m"},
                        labels={"foo": ""} if with_affinity else {})
        budgets = parse_pdbs({"x": pdb("db", {"app": "db"}, rng.randrange(3))})
        state, info = env.state_for(preemptor)
        infos = env.sorted_infos()
        got = env.plugin.select_victims_on_nodes(state, info, infos, budgets, thorough=True)
        for node_info, selection in zip(infos, got, strict=True):
            assert (names_of(selection.victims), selection.num_pdb_violations, selection.status) == \
                _reference_select(env, state, info, node_info, budgets), node_info.name


def _fits(p: dict, nodes: list[dict], pods: list[dict]) -> bool:
    """Keep the random cluster within capacity (pods are added in order)."""
    used = sum(int(q["spec"]["containers"][0]["resources"]["requests"]["cpu"][:-1]) for q in pods[: pods.index(p)]
               if q["spec"]["nodeName"] == p["spec"]["nodeName"] and _fits(q, nodes, pods))
    cap = next(int(n["status"]["allocatable"]["cpu"]) * 1000 for n in nodes if n["metadata"]["name"] == p["spec"]["nodeName"])
    return used + int(p["spec"]["containers"][0]["resources"]["requests"]["cpu"][:-1]) <= cap


# ================================================================================================
# SelectCandidate (upstream TestSelectBestCandidate): each criterion deciding a case
# ================================================================================================
SELECT_CASES = [
    ("a pod that fits on both nodes when lower priority pods are preempted", ["node1", "node2"],
     [pod("p1", node="node1", priority=MID, req=LARGE, started=0), pod("p2", node="node2", priority=MID, req=LARGE, started=0)],
     pod("p", priority=HIGH, req=LARGE), {"node1", "node2"}, {"first candidate in visiting order"}),
    ("node with min highest priority pod is picked", ["node1", "node2", "node3"],
     [pod("p1.1", node="node1", priority=MID, req=MEDIUM, started=0), pod("p1.2", node="node1", priority=MID, req=LARGE, started=0),
      pod("p2.1", node="node2", priority=MID, req=MEDIUM, started=0), pod("p2.2", node="node2", priority=LOW, req=MEDIUM, started=0),
      pod("p3.1", node="node3", priority=LOW, req=MEDIUM, started=0), pod("p3.2", node="node3", priority=LOW, req=MEDIUM, started=0)],
     pod("p", priority=HIGH, req=VERY_LARGE), {"node3"}, {"lowest highest-priority victim"}),
    ("when highest priorities are the same, minimum sum of priorities is picked", ["node1", "node2", "node3"],
     [pod("p1.1", node="node1", priority=MID, req=MEDIUM, started=0), pod("p1.2", node="node1", priority=MID, req=LARGE, started=0),
      pod("p2.1", node="node2", priority=MID, req=LARGE, started=0), pod("p2.2", node="node2", priority=LOW, req=MEDIUM, started=0),
      pod("p3.1", node="node3", priority=MID, req=MEDIUM, started=0), pod("p3.2", node="node3", priority=MID, req=MEDIUM, started=0)],
     pod("p", priority=HIGH, req=VERY_LARGE), {"node2"}, {"smallest sum of victim priorities"}),
    ("when highest priority and sum are the same, minimum number of pods is picked", ["node1", "node2", "node3"],
     [pod("p1.1", node="node1", priority=MID, req=SMALL, started=0), pod("p1.2", node="node1", priority=NEG, req=SMALL, started=0),
      pod("p1.3", node="node1", priority=MID, req=SMALL, started=0), pod("p1.4", node="node1", priority=NEG, req=SMALL, started=0),
      pod("p2.1", node="node2", priority=MID, req=LARGE, started=0), pod("p2.2", node="node2", priority=NEG, req=MEDIUM, started=0),
      pod("p3.1", node="node3", priority=MID, req=MEDIUM, started=0), pod("p3.2", node="node3", priority=NEG, req=SMALL, started=0),
      pod("p3.3", node="node3", priority=LOW, req=SMALL, started=0)],
     # The priority sum adds MaxInt32+1 per victim, so with equal raw sums it already prefers fewer victims.
     pod("p", priority=HIGH, req=VERY_LARGE), {"node2"}, {"smallest sum of victim priorities"}),
    ("sum of adjusted priorities is considered", ["node1", "node2", "node3"],
     [pod("p1.1", node="node1", priority=MID, req=SMALL, started=0), pod("p1.2", node="node1", priority=NEG, req=SMALL, started=0),
      pod("p1.3", node="node1", priority=NEG, req=SMALL, started=0), pod("p2.1", node="node2", priority=MID, req=LARGE, started=0),
      pod("p2.2", node="node2", priority=NEG, req=MEDIUM, started=0), pod("p3.1", node="node3", priority=MID, req=MEDIUM, started=0),
      pod("p3.2", node="node3", priority=NEG, req=SMALL, started=0), pod("p3.3", node="node3", priority=LOW, req=SMALL, started=0)],
     pod("p", priority=HIGH, req=VERY_LARGE), {"node2"}, {"smallest sum of victim priorities"}),
    ("non-overlapping lowest high priority, sum priorities, and number of pods", ["node1", "node2", "node3", "node4"],
     [pod("p1.1", node="node1", priority=MID, req=SMALL, started=0), pod("p1.2", node="node1", priority=LOW, req=SMALL, started=0),
      pod("p1.3", node="node1", priority=LOW, req=SMALL, started=0), pod("p2.1", node="node2", priority=HIGH, req=LARGE, started=0),
      pod("p3.1", node="node3", priority=MID, req=MEDIUM, started=0), pod("p3.2", node="node3", priority=LOW, req=SMALL, started=0),
      pod("p3.3", node="node3", priority=LOW, req=SMALL, started=0), pod("p3.4", node="node3", priority=LOW, req=MEDIUM, started=0),
      pod("p4.1", node="node4", priority=MID, req=MEDIUM, started=0), pod("p4.2", node="node4", priority=MID, req=SMALL, started=0),
      pod("p4.3", node="node4", priority=MID, req=SMALL, started=0), pod("p4.4", node="node4", priority=NEG, req=SMALL, started=0)],
     pod("p", priority=VERY_HIGH, req=VERY_LARGE), {"node1"}, {"smallest sum of victim priorities"}),
    ("same priority, same number of victims, different start time for each node's pod", ["node1", "node2", "node3"],
     [pod("p1.1", node="node1", priority=MID, req=MEDIUM, started=2), pod("p1.2", node="node1", priority=MID, req=MEDIUM, started=2),
      pod("p2.1", node="node2", priority=MID, req=MEDIUM, started=3), pod("p2.2", node="node2", priority=MID, req=MEDIUM, started=3),
      pod("p3.1", node="node3", priority=MID, req=MEDIUM, started=1), pod("p3.2", node="node3", priority=MID, req=MEDIUM, started=1)],
     pod("p", priority=HIGH, req=VERY_LARGE), {"node2"}, {"latest start time of the highest-priority victims"}),
    ("same priority, same number of victims, different start time for all pods", ["node1", "node2", "node3"],
     [pod("p1.1", node="node1", priority=MID, req=MEDIUM, started=4), pod("p1.2", node="node1", priority=MID, req=MEDIUM, started=2),
      pod("p2.1", node="node2", priority=MID, req=MEDIUM, started=5), pod("p2.2", node="node2", priority=MID, req=MEDIUM, started=1),
      pod("p3.1", node="node3", priority=MID, req=MEDIUM, started=3), pod("p3.2", node="node3", priority=MID, req=MEDIUM, started=6)],
     pod("p", priority=HIGH, req=VERY_LARGE), {"node3"}, {"latest start time of the highest-priority victims"}),
    ("different priority, same number of victims, different start time for all pods", ["node1", "node2", "node3"],
     [pod("p1.1", node="node1", priority=LOW, req=MEDIUM, started=4), pod("p1.2", node="node1", priority=MID, req=MEDIUM, started=2),
      pod("p2.1", node="node2", priority=MID, req=MEDIUM, started=6), pod("p2.2", node="node2", priority=LOW, req=MEDIUM, started=1),
      pod("p3.1", node="node3", priority=LOW, req=MEDIUM, started=3), pod("p3.2", node="node3", priority=MID, req=MEDIUM, started=5)],
     pod("p", priority=HIGH, req=VERY_LARGE), {"node2"}, {"latest start time of the highest-priority victims"}),
]


@pytest.mark.parametrize(("nodes", "pods", "preemptor", "expected", "decided_by"),
                         [pytest.param(*c[1:], id=c[0]) for c in SELECT_CASES])
def test_select_best_candidate(nodes, pods, preemptor, expected, decided_by) -> None:
    env = build([node(n) for n in nodes], pods)
    candidates = env.dry_run(preemptor)
    best, reason = env.plugin.evaluator.select_candidate(candidates, env.fw.clock.wall())
    assert best.name in expected
    assert reason in decided_by


def test_fewest_pdb_violations_is_the_first_criterion() -> None:
    victims = {"a": Victims([PodInfo(pod("x", priority=LOW))], 1), "b": Victims([PodInfo(pod("y", priority=MID))], 0)}
    assert pick_one_node_for_preemption(victims, None, 0.0) == ("b", 0)


def test_fewest_victims_decides_when_highest_priority_and_adjusted_sum_tie() -> None:
    # Adding MaxInt32+1 per victim makes a lone 0 and a pair (0, -2^31) sum alike.
    victims = {"two": Victims([PodInfo(pod("x", priority=0)), PodInfo(pod("y", priority=-(2**31)))]),
               "one": Victims([PodInfo(pod("z", priority=0))])}
    assert pick_one_node_for_preemption(victims, None, 0.0) == ("one", 3)


def test_pods_without_start_time_count_as_started_now() -> None:
    victims = {"old": Victims([PodInfo(pod("x", priority=LOW, started=5))]), "new": Victims([PodInfo(pod("y", priority=LOW))])}
    assert pick_one_node_for_preemption(victims, None, VIRTUAL_EPOCH) == ("new", 4)


def test_the_one_pass_pick_agrees_with_applying_the_criteria_in_turn() -> None:
    """Random victims (few priorities and start times, so that every criterion ties somewhere):
    the default criteria in one pass pick the node and name the deciding criterion that
    upstream's criterion-by-criterion filtering does."""
    rng = random.Random(3)
    for _ in range(300):
        victims = {}
        for n in range(rng.randrange(2, 7)):
            pods = [PodInfo(pod(f"v{n}-{i}", priority=rng.choice([LOW, MID, -(2**31)]),
                                started=rng.choice([None, 1, 2])))
                    for i in range(rng.randrange(1, 4))]
            pods.sort(key=importance_key(VIRTUAL_EPOCH))
            victims[f"n{n}"] = Victims(pods, rng.choice([0, 0, 1]))
        assert pick_one_node_for_preemption(victims, None, VIRTUAL_EPOCH) == \
            pick_one_node_for_preemption(victims, default_score_funcs(victims, VIRTUAL_EPOCH), VIRTUAL_EPOCH)


def test_custom_score_functions_replace_the_default_criteria() -> None:
    victims = {"a": Victims([PodInfo(pod("x", priority=LOW))]), "b": Victims([PodInfo(pod("y", priority=HIGH))])}
    assert pick_one_node_for_preemption(victims, [lambda n: 1.0 if n == "b" else 0.0], 0.0) == ("b", 0)


# ================================================================================================
# custom victim eligibility and ordering (upstream TestCustomSelection, TestCustomOrdering)
# ================================================================================================
def _label_is(key: str, value: str):
    return lambda info, victim, preemptor: victim.labels.get(key) == value


def _node_is(name: str):
    return lambda info, victim, preemptor: info.name == name


def _preemptor_at_least(priority: int):
    return lambda info, victim, preemptor: preemptor.priority >= priority


def _victim_at_most(priority: int):
    return lambda info, victim, preemptor: victim.priority <= priority


LABELLED = [pod("v1", node="node1", labels={"preemptible": "no"}, priority=MID, req=LARGE, started=0),
            pod("v2", node="node2", labels={"preemptible": "yes"}, priority=MID, req=LARGE, started=0),
            pod("v3", node="node3", labels={"preemptible": "yes"}, priority=LOW, req=LARGE, started=0),
            pod("v4", node="node4", priority=LOW, req=LARGE, started=0)]
ON_NODE1 = [pod("v1", node="node1", priority=HIGH, req=MEDIUM, started=0), pod("v2", node="node1", priority=MID, req=SMALL, started=0),
            pod("v3", node="node1", priority=LOW, req=SMALL, started=0), pod("v4", node="node2", priority=MID, req=LARGE, started=0),
            pod("v5", node="node3", priority=LOW, req=LARGE, started=0)]
ON_NODE1_SMALL = [dict(ON_NODE1[0], spec={**ON_NODE1[0]["spec"], "containers": [
    {"name": "c", "image": "pause", "resources": {"requests": SMALL}}]}), *ON_NODE1[1:]]
THREE = [pod("v1", node="node1", priority=HIGH, req=LARGE, started=0), pod("v2", node="node2", priority=MID, req=LARGE, started=0),
         pod("v3", node="node3", priority=LOW, req=LARGE, started=0)]

CUSTOM_SELECTION_CASES = [
    ("filter for matching pod label: high priority", _label_is("preemptible", "yes"), 4, LABELLED, HIGH,
     {"node2": ["v2"], "node3": ["v3"]}),
    ("filter for matching pod label: mid priority", _label_is("preemptible", "yes"), 4, LABELLED, MID, {"node3": ["v3"]}),
    ("filter for matching pod label: low priority", _label_is("preemptible", "yes"), 4, LABELLED, LOW, {}),
    ("filter for matching victim node: high priority", _node_is("node1"), 3, ON_NODE1, HIGH, {"node1": ["v2", "v3"]}),
    ("filter for matching victim node: mid priority", _node_is("node1"), 3, ON_NODE1_SMALL, MID, {"node1": ["v3"]}),
    ("filter for matching victim node: low priority", _node_is("node1"), 3, ON_NODE1_SMALL, LOW, {}),
    ("only pods at or above specified priority can preempted: high priority", _preemptor_at_least(HIGH), 3, THREE, HIGH,
     {"node2": ["v2"], "node3": ["v3"]}),
    ("only pods at or above specified priority can preempted: mid priority", _preemptor_at_least(HIGH), 3, THREE, MID, {}),
    ("only pods at or below specified priority can be preempted: high priority", _victim_at_most(MID), 3, THREE, HIGH,
     {"node2": ["v2"], "node3": ["v3"]}),
]


@pytest.mark.parametrize(("eligible", "num_nodes", "pods", "priority", "expected"),
                         [pytest.param(*c[1:], id=c[0]) for c in CUSTOM_SELECTION_CASES])
def test_custom_selection(eligible, num_nodes, pods, priority, expected) -> None:
    env = build([node(f"node{i}") for i in range(1, num_nodes + 1)], pods)
    env.plugin.is_eligible_pod = eligible
    candidates = env.dry_run(pod("p", priority=priority, req=LARGE))
    assert len(candidates) == len(expected)
    now = env.fw.clock.wall()
    while candidates:
        best, _ = env.plugin.evaluator.select_candidate(candidates, now)
        assert names_of(best.victims.pods) == expected[best.name]
        candidates = [c for c in candidates if c.name != best.name]


@pytest.mark.parametrize(("order", "pods", "expected"), [
    pytest.param(lambda a, b: (a.start_time or 0) < (b.start_time or 0),
                 [pod("v1", node="node1", priority=LOW, req=MEDIUM, started=2), pod("v2", node="node1", priority=LOW, req=MEDIUM, started=0),
                  pod("v3", node="node1", priority=MID, req=MEDIUM, started=1)], ["v3", "v1"], id="select newest pods"),
    pytest.param(lambda a, b: a.name < b.name,
                 [pod("foo", node="node1", priority=LOW, req=MEDIUM, started=0), pod("bar", node="node1", priority=LOW, req=MEDIUM, started=0),
                  pod("baz", node="node1", priority=MID, req=MEDIUM, started=0)], ["baz", "foo"], id="select alphabetically-last pods"),
])
def test_custom_ordering(order, pods, expected) -> None:
    env = build([node("node1")], pods)
    env.plugin.more_important_pod = order
    [candidate] = env.dry_run(pod("p2", priority=HIGH, req=LARGE))
    assert names_of(candidate.victims.pods) == expected


# ================================================================================================
# eligibility (upstream TestPodEligibleToPreemptOthers)
# ================================================================================================
@pytest.mark.parametrize(("preemptor", "pods", "nominated_status", "expected"), [
    pytest.param(pod("p", priority=HIGH, nominated="node1"), [pod("p1", node="node1", priority=LOW, terminating=True)],
                 Status(UAU, "node(s) had untolerated taint(s)"), (True, ""), id="Pod with nominated node"),
    pytest.param(pod("p", priority=HIGH), [], None, (True, ""), id="Pod without nominated node"),
    pytest.param(pod("p", priority=HIGH, preemptionPolicy="Never"), [], None,
                 (False, "not eligible due to preemptionPolicy=Never."), id="Pod with 'PreemptNever' preemption policy"),
    pytest.param(pod("p", priority=HIGH, nominated="node1"),
                 [pod("p1", node="node1", priority=LOW, terminating=True, conditions=[DISRUPTED])], None,
                 (False, "not eligible due to a terminating pod on the nominated node."),
                 id="preemption victim pod terminating, as indicated by the dedicated DisruptionTarget condition"),
    pytest.param(pod("p", priority=HIGH, nominated="node1"), [pod("p1", node="node1", priority=LOW, terminating=True)], None,
                 (True, ""), id="non-victim Pods terminating"),
    pytest.param(pod("p", priority=HIGH, nominated="node1"),
                 [pod("p1", node="node1", priority=HIGH, terminating=True, conditions=[DISRUPTED])], None,
                 (True, ""), id="a terminating pod of equal priority is no victim of this pod"),
])
def test_pod_eligible_to_preempt_others(preemptor, pods, nominated_status, expected) -> None:
    env = build([node("node1")], pods)
    assert env.plugin.pod_eligible_to_preempt_others(PodInfo(preemptor), nominated_status) == expected


def test_pod_terminating_by_preemption_reads_the_first_disruption_target_condition() -> None:
    other = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}
    assert pod_terminating_by_preemption(PodInfo(pod("a", terminating=True, conditions=[DISRUPTED])))
    assert not pod_terminating_by_preemption(PodInfo(pod("b", terminating=True, conditions=[other, DISRUPTED])))
    assert not pod_terminating_by_preemption(PodInfo(pod("c", conditions=[DISRUPTED])))


# ================================================================================================
# Preempt (upstream TestPreempt): victims patched, deleted, evented; nominations cleared
# ================================================================================================
PREEMPT_CASES = [
    ("basic preemption logic", ["node1", "node2", "node3"],
     [pod("p1.1", node="node1", priority=LOW, req=SMALL), pod("p1.2", node="node1", priority=LOW, req=SMALL),
      pod("p2.1", node="node2", priority=HIGH, req=LARGE), pod("p3.1", node="node3", priority=MID, req=MEDIUM)],
     pod("p", priority=HIGH, req=VERY_LARGE, preemptionPolicy="PreemptLowerPriority"), ("NodeResourcesFit",), "node1", ["p1.1", "p1.2"]),
    ("preemption for topology spread constraints", ["node-a/zone1", "node-b/zone1", "node-x/zone2"],
     [pod("p-a1", node="node-a", labels=FOO, priority=HIGH), pod("p-a2", node="node-a", labels=FOO, priority=HIGH),
      pod("p-b1", node="node-b", labels=FOO, priority=LOW), pod("p-x1", node="node-x", labels=FOO, priority=HIGH),
      pod("p-x2", node="node-x", labels=FOO, priority=HIGH)],
     pod("p", labels=FOO, priority=HIGH, topologySpreadConstraints=[spread("zone"), spread("hostname")]),
     ("PodTopologySpread",), "node-b", ["p-b1"]),
    ("no preempting in pod", ["node1", "node2", "node3"],
     [pod("p1.1", node="node1", priority=LOW, req=SMALL), pod("p1.2", node="node1", priority=LOW, req=SMALL),
      pod("p2.1", node="node2", priority=HIGH, req=LARGE), pod("p3.1", node="node3", priority=MID, req=MEDIUM)],
     pod("p", priority=HIGH, req=VERY_LARGE, preemptionPolicy="Never"), ("NodeResourcesFit",), None, []),
    ("PreemptionPolicy is nil", ["node1", "node2", "node3"],
     [pod("p1.1", node="node1", priority=LOW, req=SMALL), pod("p1.2", node="node1", priority=LOW, req=SMALL),
      pod("p2.1", node="node2", priority=HIGH, req=LARGE), pod("p3.1", node="node3", priority=MID, req=MEDIUM)],
     pod("p", priority=HIGH, req=VERY_LARGE), ("NodeResourcesFit",), "node1", ["p1.1", "p1.2"]),
]


@pytest.mark.parametrize("async_preemption", [True, False])
@pytest.mark.parametrize(("nodes", "pods", "preemptor", "plugins", "want_node", "victims"),
                         [pytest.param(*c[1:], id=c[0]) for c in PREEMPT_CASES])
def test_preempt(nodes, pods, preemptor, plugins, want_node, victims, async_preemption) -> None:
    env = build([node(n) for n in nodes], pods, plugins=plugins, preemptor=preemptor)
    env.plugin.evaluator.enable_async = async_preemption
    state, info = env.state_for(preemptor)
    statuses = env.statuses({n.split("/")[0]: U for n in nodes})
    result, status = env.plugin.evaluator.preempt(state, info, statuses)
    if want_node is None:
        assert result is None and status == Status(U, "not eligible due to preemptionPolicy=Never.")
    else:
        assert status is None and result.nominating_info.nominated_node_name == want_node  # type: ignore[union-attr]
    assert sorted(env.client.deleted) == victims
    assert sorted(name for name, _, _ in env.client.patches) == victims
    for _, conditions, nominated in env.client.patches:
        assert nominated is None
        assert conditions == [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                               "message": "default-scheduler: preempting to accommodate a higher priority pod"}]
    assert sorted(e[0] for e in env.recorder.events) == victims
    for _, related, event_type, reason, action, note in env.recorder.events:
        assert (related, event_type, reason, action) == ("p", "Normal", "Preempted", "Preempting")
        assert note == f"Preempted by pod p on node {want_node}"
    assert not env.plugin.evaluator.executor.preempting
    if victims:
        assert env.metrics.preemption_victims._sum.get() == len(victims)


def test_victims_already_terminating_get_no_api_call() -> None:
    pods = [pod("p1.1", node="node1", priority=LOW, req=SMALL, terminating=True), pod("p1.2", node="node1", priority=LOW, req=SMALL),
            pod("p1.3", node="node1", priority=LOW, req=LARGE)]
    preemptor = pod("p", priority=HIGH, req=VERY_LARGE)
    env = build([node("node1")], pods, preemptor=preemptor)
    state, info = env.state_for(preemptor)
    _, status = env.plugin.evaluator.preempt(state, info, env.statuses({"node1": U}))
    assert status is None
    assert sorted(env.client.deleted) == ["p1.2", "p1.3"]


def test_a_victim_deleted_meanwhile_is_skipped_without_an_event() -> None:
    pods = [pod("p1.1", node="node1", priority=LOW, req=SMALL), pod("p1.2", node="node1", priority=LOW, req=SMALL)]
    preemptor = pod("p", priority=HIGH, req=VERY_LARGE)
    env = build([node("node1")], pods, preemptor=preemptor, client=Client(missing=("p1.1",)))
    state, info = env.state_for(preemptor)
    env.plugin.evaluator.preempt(state, info, env.statuses({"node1": U}))
    assert env.client.deleted == ["p1.2"]
    assert [e[0] for e in env.recorder.events] == ["p1.2"]


def test_lower_priority_pods_nominated_to_the_node_lose_their_nomination() -> None:
    preemptor = pod("p", priority=HIGH, req=VERY_LARGE)
    env = build([node("node1")], [pod("v", node="node1", priority=LOW, req=LARGE)], preemptor=preemptor)
    low = PodInfo(pod("low", priority=LOW, req=SMALL, nominated="node1"))
    high = PodInfo(pod("high", priority=VERY_HIGH, req=SMALL, nominated="node1"))
    unpatched = PodInfo(pod("pending", priority=LOW, req=SMALL))  # nominated in memory only: nothing to clear
    env.nominator.by_node["node1"] = [low, high, unpatched]
    state, info = env.state_for(preemptor)
    result, status = env.plugin.evaluator.preempt(state, info, env.statuses({"node1": U}))
    # The high nominee uses 100m: with the preemptor's 500m the node cannot fit both, so nothing to preempt there.
    assert status is not None and "Insufficient cpu" in status.message()
    env.nominator.by_node["node1"] = [low, unpatched]
    result, status = env.plugin.evaluator.preempt(state, info, env.statuses({"node1": U}))
    assert status is None and result.nominating_info.nominated_node_name == "node1"  # type: ignore[union-attr]
    assert ("low", [], "") in env.client.patches
    assert not any(name == "pending" for name, _, _ in env.client.patches)


def test_nominated_pods_of_higher_or_equal_priority_protect_their_space() -> None:
    env = build([node("node1"), node("node2")],
                [pod("v1", node="node1", priority=LOW, req=LARGE), pod("v2", node="node2", priority=LOW, req=LARGE)])
    env.nominator.by_node["node1"] = [PodInfo(pod("nominee", priority=HIGH, req=LARGE, nominated="node1"))]
    candidates = env.dry_run(pod("p", priority=HIGH, req=LARGE))
    assert summary(candidates) == [("node2", ["v2"], 0)]
    # A lower-priority nominee does not protect anything from this preemptor.
    env.nominator.by_node["node1"] = [PodInfo(pod("nominee", priority=MID, req=LARGE, nominated="node1"))]
    assert summary(env.dry_run(pod("p", priority=HIGH, req=LARGE))) == [("node1", ["v1"], 0), ("node2", ["v2"], 0)]


def test_a_nominated_preemptor_is_not_counted_against_itself() -> None:
    preemptor = pod("p", priority=HIGH, req=LARGE, nominated="node1")
    env = build([node("node1")], [pod("v1", node="node1", priority=LOW, req=LARGE)], preemptor=preemptor)
    env.nominator.by_node["node1"] = [PodInfo(preemptor)]
    assert summary(env.dry_run(preemptor)) == [("node1", ["v1"], 0)]


def test_the_preemption_observer_hears_candidates_and_the_deciding_criterion() -> None:
    preemptor = pod("p", priority=HIGH, req=LARGE)
    records: list[PreemptionRecord] = []
    env = build([node("node1"), node("node2"), node("node3")],
                [pod("v1", node="node1", priority=MID, req=LARGE), pod("v2", node="node2", priority=LOW, req=LARGE),
                 pod("v3", node="node3", priority=HIGH, req=LARGE)], preemptor=preemptor,
                observer=PreemptionObserver(records.append, record_candidates=True))
    state, info = env.state_for(preemptor)
    env.plugin.post_filter(state, info, env.statuses({"node1": U, "node2": U, "node3": U}))
    [record] = records
    assert (record.preemptor, record.node, record.victims) == ("default/p", "node2", ["default/v2"])
    assert record.decided_by == "lowest highest-priority victim"
    assert sorted((c.node, c.highest_priority) for c in record.candidates) == [("node1", MID), ("node2", LOW)]
    assert [(name, s.reasons) for name, s in record.rejected] == [("node3", ["No preemption victims found for incoming pod"])]


# ================================================================================================
# PreEnqueue, queueing hints, args
# ================================================================================================
def test_pre_enqueue_holds_a_preemptor_until_its_last_victim_is_being_deleted() -> None:
    env = build([node("node1")], [pod("v", node="node1", priority=LOW)])
    executor = env.plugin.evaluator.executor
    preemptor = PodInfo(pod("p", priority=HIGH))
    assert env.plugin.pre_enqueue(preemptor) is None
    executor.preempting.add("p")
    executor.victims["p"] = [("default", "v")]
    assert env.plugin.pre_enqueue(preemptor) == Status(UAU, "waiting for the preemption for this pod to be finished")
    executor.last_victims["p"] = ("default", "v")
    assert env.plugin.pre_enqueue(preemptor) is not None  # the last victim has no deletionTimestamp yet
    env.objects["Pod"]["default/v"]["metadata"]["deletionTimestamp"] = start(0)
    assert env.plugin.pre_enqueue(preemptor) is None
    env.objects["Pod"].pop("default/v")
    assert env.plugin.pre_enqueue(preemptor) is None


def test_a_preemption_whose_victims_are_all_gone_already_does_not_hold_the_preemptor() -> None:
    """The informer may deliver the victims' deletion before the background calls start; no later
    event would lift the gate."""
    env = build([node("node1")], [pod("v", node="node1", priority=LOW), pod("w", node="node1", priority=LOW)])
    executor = env.plugin.evaluator.executor
    preemptor = PodInfo(pod("p", priority=HIGH))
    executor.preempting.add("p")
    executor.victims["p"] = [("default", "v"), ("default", "w")]
    env.objects["Pod"].pop("default/v")
    assert env.plugin.pre_enqueue(preemptor) is not None  # w is still there
    env.objects["Pod"].pop("default/w")
    assert env.plugin.pre_enqueue(preemptor) is None


def test_events_register_assigned_pod_deletion_with_a_skipping_hint() -> None:
    env = build([node("node1")], [])
    [registered] = env.plugin.events_to_register()
    assert (registered.event.resource, registered.event.action) == (Resource.AssignedPod, ActionType.Delete)
    assert registered.hint(pod("p"), pod("v"), None) == QueueingHint.QueueSkip
    env.plugin.enable_async = False
    assert env.plugin.events_to_register() == []
    assert env.plugin.pre_enqueue(PodInfo(pod("p"))) is None


@pytest.mark.parametrize(("args", "nodes", "expected"), [
    pytest.param(DefaultPreemptionArgs(10, 100), 50, 50, id="fewer nodes than the absolute minimum: all of them"),
    pytest.param(DefaultPreemptionArgs(10, 100), 500, 100, id="absolute minimum above the percentage"),
    pytest.param(DefaultPreemptionArgs(10, 100), 5000, 500, id="percentage above the absolute minimum"),
    pytest.param(DefaultPreemptionArgs(40, 1), 5, 2, id="percentage rounds down"),
    pytest.param(DefaultPreemptionArgs(0, 3), 5, 3, id="no percentage"),
    pytest.param(DefaultPreemptionArgs(100, 0), 7, 7, id="every node"),
])
def test_min_candidate_bounds(args, nodes, expected) -> None:
    assert DefaultPreemption(args).calculate_num_candidates(nodes) == expected


def test_invalid_args_are_rejected() -> None:
    with pytest.raises(ValueError, match="cannot be zero at the same time"):
        DefaultPreemption(DefaultPreemptionArgs(0, 0))


def test_the_offset_comes_from_the_schedulers_random_source() -> None:
    env = build([node("node1")], [], seed=42)
    offsets = [env.plugin.get_offset_and_num_candidates(1000)[0] for _ in range(3)]
    assert offsets == [random.Random(42).randrange(1000) for _ in range(1)] + offsets[1:]
    assert all(0 <= o < 1000 for o in offsets)


# ================================================================================================
# PodDisruptionBudgets
# ================================================================================================
def _pods(*specs: tuple[str, dict, str]) -> list[PodInfo]:
    return [PodInfo(pod(name, labels=labels, namespace=ns)) for name, labels, ns in specs]


def test_pdb_budget_is_consumed_in_order_and_only_in_the_pods_namespace() -> None:
    pods = _pods(("a", APP_FOO, "default"), ("b", APP_FOO, "default"), ("c", APP_FOO, "other"), ("d", {}, "default"))
    violating, ok = filter_pods_with_pdb_violation(pods, parse_pdbs({"x": pdb("foo", APP_FOO, 1)}))
    assert names_of(violating) == ["b"] and names_of(ok) == ["a", "c", "d"]


def test_pdbs_with_empty_nil_or_invalid_selectors_match_nothing() -> None:
    pods = _pods(("a", APP_FOO, "default"))
    invalid = pdb("bad", None)
    invalid["spec"]["selector"] = {"matchExpressions": [{"key": "app", "operator": "Bogus"}]}
    for budget in (pdb("empty", {}), pdb("nil", None), invalid):
        assert filter_pods_with_pdb_violation(pods, parse_pdbs({"x": budget})) == ([], pods)


def test_a_pod_matching_two_pdbs_violates_if_either_is_exhausted() -> None:
    pods = _pods(("a", {"app": "foo", "tier": "db"}, "default"))
    budgets = parse_pdbs({"x": pdb("one", APP_FOO, 5), "y": pdb("two", {"tier": "db"}, 0)})
    assert names_of(filter_pods_with_pdb_violation(pods, budgets)[0]) == ["a"]


def test_parsed_pdbs_keep_the_status() -> None:
    [parsed] = parse_pdbs({"x": pdb("foo", APP_FOO, 3, disrupted=("a",))})
    assert parsed == ParsedPDB("default", "foo", parsed.selector, 3, frozenset({"a"}))


def test_dry_run_answers_kept_across_preemptors_match_fresh_dry_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Answers kept for the next preemptor of the same shape (``KeptSelections``) are those a dry
    run without them gives, through pod, node, budget and object changes between preemptors, and
    pods starting (as the scheduler cache records a kubelet's start: the pod swapped in place, no
    row version moved)."""
    from kubesched.scheduler.plugins.defaultpreemption._dry_run import KeptSelections, VictimSelector

    served = []
    serve = KeptSelections.serve

    def counting(self: KeptSelections, screened: list, results: list) -> list:
        rest = serve(self, screened, results)
        served.append((len(screened) - len(rest), len(rest)))
        return rest

    monkeypatch.setattr(KeptSelections, "serve", counting)
    rng = random.Random(23)
    nodes = [node(f"n{i}/z{i % 2}", {"cpu": "2", "memory": "8Gi"}) for i in range(8)]
    env = build(nodes, [])
    objects_version = [0]
    env.fw.ctx.objects_version = lambda: objects_version[0]
    budget = rng.randrange(3)
    parsed_budgets: dict[int, list[ParsedPDB]] = {}
    for serial in range(120):
        roll = rng.random()
        infos = env.table.infos[: env.table.n]
        if roll < 0.45:
            info = rng.choice(infos)
            cpu = rng.choice([100, 300, 500, 900])
            if info.requested.get("cpu", 0) + cpu <= 2000:
                started = rng.randrange(50) if rng.random() < 0.6 else None
                p = PodInfo(pod(f"p{serial}", node=info.name, priority=rng.choice([LOW, MID]), req={"cpu": f"{cpu}m"},
                                started=started, labels={"app": "db"} if rng.random() < 0.4 else {}))
                info.add_pod(p)
                env.table.pod_added(info, p)
        elif roll < 0.7:
            info = rng.choice(infos)
            if info.pods:
                victim = info.remove_pod(rng.choice(sorted(info.pods)))
                assert victim is not None
                env.table.pod_removed(info, victim)
        elif roll < 0.75:
            budget = rng.randrange(3)
        elif roll < 0.8:
            objects_version[0] += 1
        elif roll < 0.85:
            old = rng.choice(infos)
            fresh = NodeInfo(node(f"{old.name}/z{rng.randrange(2)}", {"cpu": rng.choice(["2", "3"]), "memory": "8Gi"}))
            for p in old.pods.values():
                fresh.add_pod(p)
            env.table.set_node(fresh)
        elif roll < 0.95 and (waiting := [(i, p) for i in infos for p in i.pods.values() if p.start_time is None]):
            info, unstarted = rng.choice(waiting)
            info.pods[unstarted.uid] = PodInfo({**unstarted.pod, "status": {"startTime": start(rng.randrange(50))}})
            env.table.pod_started(info.name)
        preemptor = pod("in", priority=rng.choice([HIGH, HIGH, VERY_HIGH]), req={"cpu": f"{rng.choice([1200, 1200, 1500])}m"})
        # Parsed once per budget, as the plugin keeps them while the objects are unchanged (the
        # kept answers are kept per parsed budget).
        budgets = parsed_budgets.setdefault(budget, parse_pdbs({"x": pdb("db", {"app": "db"}, budget)}) if budget else [])
        state, info = env.state_for(preemptor)
        infos = env.sorted_infos()
        thorough = rng.random() < 0.3
        got = env.plugin.select_victims_on_nodes(state, info, infos, budgets, thorough=thorough)
        fresh_run = VictimSelector(env.fw, state, info, None, env.plugin._sorter(), budgets, thorough).select(infos)
        for node_info, a, b in zip(infos, got, fresh_run, strict=True):
            assert (names_of(a.victims), a.num_pdb_violations, a.status) == (names_of(b.victims), b.num_pdb_violations, b.status), \
                node_info.name
    assert sum(hits for hits, _ in served) and sum(misses for _, misses in served)


def test_a_kept_dry_run_answer_is_dropped_when_a_pod_of_its_node_starts() -> None:
    """A pod's start moves no row version (``NodeTable.pod_started``), but the victims' order reads
    start times: an answer kept for the node is not served again after one of its pods started,
    and an answer for another node still is."""
    from kubesched.scheduler.plugins.defaultpreemption._dry_run import KeptSelections
    from kubesched.scheduler.plugins.defaultpreemption.preemption import VictimSelection

    env = build([node("n1", {"cpu": "2"}), node("n2", {"cpu": "2"})],
                [pod("a", node="n1", priority=LOW, req={"cpu": "1"}), pod("b", node="n2", priority=LOW, req={"cpu": "1"})])
    table = env.table
    kept = KeptSelections()
    kept.begin(table, ("shape",), [])
    rows = [table.row_of["n1"], table.row_of["n2"]]
    for row in rows:
        kept.keep(row, list(table.infos[row].pods.values()), VictimSelection([], 0, None))
    screened = [(i, table.infos[row], [], row) for i, row in enumerate(rows)]
    results: list[VictimSelection | None] = [None, None]
    assert kept.serve(screened, results) == [] and all(results)
    table.pod_started("n1")
    results = [None, None]
    assert [item[3] for item in kept.serve(screened, results)] == [table.row_of["n1"]]
    assert results[0] is None and results[1] is not None


def test_default_criteria_in_one_pass_pick_as_applying_them_in_turn() -> None:
    """``pick_one_node_for_preemption`` with upstream's criteria (one pass, lexicographic) agrees
    with applying the same criteria one after another, node and deciding criterion alike."""
    from kubesched.scheduler.plugins.defaultpreemption.preemption import Victims, default_score_funcs

    rng = random.Random(17)
    now = VIRTUAL_EPOCH
    for _ in range(400):
        victims = {}
        for n in range(rng.randrange(2, 7)):
            pods = [PodInfo(pod(f"v{n}-{i}", priority=rng.choice([LOW, MID]),
                                started=rng.choice([None, 1.0, 2.0]))) for i in range(rng.randrange(1, 4))]
            victims[f"n{n}"] = Victims(pods, rng.choice([0, 0, 1]))
        assert pick_one_node_for_preemption(victims, None, now) == \
            pick_one_node_for_preemption(victims, default_score_funcs(victims, now), now)
