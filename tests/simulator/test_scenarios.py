"""Scenarios on the virtual clock: the file format's checks (every error names the step and the
field), each operation's effect on the cluster and on the timeline, a drain that honours a
PodDisruptionBudget, and a node failure whose evictions wait for tolerationSeconds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.api.kinds import NODE
from kubesched.scheduler.config import default_configuration
from kubesched.simulator.scenario import ScenarioError, load_scenario
from kubesched.simulator.simulate import SimulationResult, simulate
from kubesched.simulator.timeline import TimelineEntry
from tests.helpers import make_node, make_pod

ROOT = Path(__file__).resolve().parents[2]


def write_scenario(tmp_path: Path, steps: list[dict], **top: Any) -> Path:
    path = tmp_path / "scenario.yaml"
    doc = {"apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario", "steps": steps, **top}
    path.write_text(yaml.safe_dump(doc))
    return path


def run(tmp_path: Path, objects: list[dict], steps: list[dict]) -> SimulationResult:
    scenario = load_scenario(write_scenario(tmp_path, steps))
    return simulate(objects, default_configuration(), scenario=scenario)


def placements(result: SimulationResult) -> dict[str, str]:
    return {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") or "" for p in result.pods()}


def events(result: SimulationResult, kind: str) -> list[TimelineEntry]:
    assert result.timeline is not None
    return [e for e in result.timeline if e.event == kind]


def deployment(name: str, replicas: int, cpu: str = "1", **spec: Any) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx",
                                                           "resources": {"requests": {"cpu": cpu}}}], **spec}}}}


# --- the file format ---------------------------------------------------------------------------------
@dataclass
class Invalid:
    steps: list[dict]
    message: str
    top: dict = field(default_factory=dict)


INVALID = {
    "a step without a time": Invalid([{"cordon": {"nodes": ["a"]}}], "steps[0]: at: Field required"),
    "a time that is not a Go duration": Invalid([{"at": "90", "cordon": {"nodes": ["a"]}}],
                                                 'steps[0] (at 90): at: time: missing unit in duration "90"'),
    "a time without quotes or unit": Invalid([{"at": 90, "cordon": {"nodes": ["a"]}}],
                                             "steps[0]: at: must be a duration with a unit, such as 90s or 1m30s, got 90"),
    "a negative time": Invalid([{"at": "-5s", "cordon": {"nodes": ["a"]}}], "steps[0] (at -5s): at: must not be negative, got -5s"),
    "two operations in one step": Invalid([{"at": "1s", "cordon": {"nodes": ["a"]}, "uncordon": {"nodes": ["a"]}}],
                                           "steps[0] (at 1s): a step has exactly one operation of apply, delete, scale"),
    "a step without an operation": Invalid([{"at": "1s"}], "steps[0] (at 1s): a step has exactly one operation"),
    "an unknown operation": Invalid([{"at": "1s", "reboot": {"nodes": ["a"]}}],
                                     "steps[0] (at 1s): reboot: Extra inputs are not permitted"),
    "nodes and a selector together": Invalid([{"at": "1s", "drain": {"nodes": ["a"], "selector": "zone=a"}}],
                                              "steps[0] (at 1s): drain: give either nodes (names) or selector"),
    "a selector that does not parse": Invalid([{"at": "1s", "cordon": {"selector": "zone in (a"}}],
                                               "steps[0] (at 1s): cordon.selector: unable to parse requirement"),
    "an unknown taint effect": Invalid([{"at": "1s", "taint": {"nodes": ["a"], "taints": [{"key": "k", "effect": "NoRun"}]}}],
                                        "steps[0] (at 1s): taint.taints[0].effect: Input should be 'NoSchedule'"),
    "a drain timeout that is not a duration": Invalid([{"at": "1s", "drain": {"nodes": ["a"], "timeout": "soon"}}],
                                                       'steps[0] (at 1s): drain.timeout: time: invalid duration "soon"'),
    "scaling a kind that has no replicas": Invalid([{"at": "1s", "scale": {"kind": "Pod", "name": "p", "replicas": 1}}],
                                                    "steps[0] (at 1s): scale.kind: Input should be 'Deployment'"),
    "negative replicas": Invalid([{"at": "1s", "scale": {"kind": "Deployment", "name": "d", "replicas": -1}}],
                                  "steps[0] (at 1s): scale.replicas: Input should be greater than or equal to 0"),
    "deleting a kind kubesched does not serve": Invalid([{"at": "1s", "delete": [{"kind": "Widget", "name": "w"}]}],
                                                         "steps[0] (at 1s): delete[0]: kind Widget is not served by kubesched"),
    "a node template with a name": Invalid(
        [{"at": "1s", "addNodes": {"count": 1, "prefix": "n-", "template": {"metadata": {"name": "x"}}}}],
        "steps[0] (at 1s): addNodes: template.metadata.name must not be set"),
    "a node template the API rejects": Invalid(
        [{"at": "1s", "addNodes": {"count": 1, "prefix": "n-", "template": {"status": {"capacity": {"cpu": "lots"}}}}}],
        "steps[0] (at 1s): "),
    "an inline object the API rejects": Invalid(
        [{"at": "1s", "apply": {"objects": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}]}}],
        "steps[0] (at 1s): "),
    "a manifest file that does not exist": Invalid([{"at": "1s", "apply": {"files": ["missing.yaml"]}}],
                                                   "steps[0] (at 1s): "),
    "steps out of time order": Invalid([{"at": "2m", "cordon": {"nodes": ["a"]}}, {"at": "1m", "uncordon": {"nodes": ["a"]}}],
                                        "steps[1].at: 1m is before the previous step's 2m"),
    "no steps": Invalid([], "steps: List should have at least 1 item"),
    "another kind of file": Invalid([{"at": "1s", "cordon": {"nodes": ["a"]}}], "kind: Input should be 'Scenario'",
                                    {"kind": "Pod"}),
}


@pytest.mark.parametrize("case", INVALID.values(), ids=INVALID.keys())
def test_an_invalid_scenario_is_refused_naming_the_step_and_field(case: Invalid, tmp_path: Path) -> None:
    path = write_scenario(tmp_path, case.steps, **case.top)
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    assert str(raised.value).startswith(f"{path}: invalid scenario: ")
    assert case.message in str(raised.value)


def test_a_file_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("- at: 1s\n")
    with pytest.raises(ScenarioError, match="must hold one mapping"):
        load_scenario(path)


def test_apply_reads_files_relative_to_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "more.yaml").write_text(yaml.safe_dump(make_node("extra")))
    scenario = load_scenario(write_scenario(tmp_path, [{"at": "5s", "apply": {"files": ["more.yaml"]}}]))
    assert scenario.steps[0].apply is not None
    assert [m["metadata"]["name"] for m in scenario.steps[0].apply.manifests] == ["extra"]


# --- operations ------------------------------------------------------------------------------------
@dataclass
class Operation:
    objects: list[dict]
    steps: list[dict]
    #: Pod name -> node ("" for pending) at the end, for the pods named.
    placed: dict[str, str] = field(default_factory=dict)
    #: Timeline events expected, as (event, object) pairs.
    timeline: list[tuple[str, str]] = field(default_factory=list)
    nodes: list[str] | None = None


TWO_NODES = [make_node("a", cpu="2"), make_node("b", cpu="2")]
OPERATIONS = {
    "apply creates a pod that the scheduler then binds": Operation(
        [make_node("a")], [{"at": "30s", "apply": {"objects": [make_pod("late", cpu="1")]}}],
        placed={"late": "a"}, timeline=[("created", "Pod default/late"), ("bound", "Pod default/late")]),
    "delete removes a pod and frees its room for a pending one": Operation(
        [make_node("a", cpu="2"), make_pod("first", cpu="2"), {**make_pod("second", cpu="2"), "spec": {
            **make_pod("second", cpu="2")["spec"], "priority": 0}}],
        [{"at": "10s", "delete": [{"kind": "Pod", "name": "first"}]}],
        timeline=[("deleted", "Pod default/first"), ("bound", "Pod default/second")]),
    "scale creates replicas, pending where nothing fits": Operation(
        [make_node("a", cpu="2"), deployment("web", 1)], [{"at": "1m", "scale": {"kind": "Deployment", "name": "web",
                                                                                  "replicas": 3}}],
        timeline=[("created", "Pod default/web-"), ("pending", "Pod default/web-")]),
    "cordon keeps new pods off the node": Operation(
        TWO_NODES, [{"at": "1s", "cordon": {"nodes": ["a"]}},
                    {"at": "5s", "apply": {"objects": [make_pod("p", cpu="1"), make_pod("q", cpu="1")]}}],
        placed={"p": "b", "q": "b"}, timeline=[("cordoned", "Node a")]),
    "uncordon makes the node schedulable again": Operation(
        [make_node("a", cpu="1", unschedulable=True), make_pod("p", cpu="1")],
        [{"at": "10s", "uncordon": {"nodes": ["a"]}}], placed={"p": "a"}, timeline=[("uncordoned", "Node a")]),
    "a NoSchedule taint keeps new pods off without evicting": Operation(
        [*TWO_NODES, make_pod("old", cpu="1", nodeName="a")],
        [{"at": "1s", "taint": {"nodes": ["a"], "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}},
         {"at": "5s", "apply": {"objects": [make_pod("new", cpu="1")]}}],
        placed={"old": "a", "new": "b"}, timeline=[("tainted", "Node a")]),
    "a NoExecute taint evicts the pods that do not tolerate it": Operation(
        [*TWO_NODES, make_pod("p", cpu="1", nodeName="a")],
        [{"at": "1s", "taint": {"nodes": ["a"], "taints": [{"key": "k", "effect": "NoExecute"}]}}],
        timeline=[("tainted", "Node a"), ("evicted", "Pod default/p")]),
    "untaint lets a pending pod in": Operation(
        [make_node("a", taints=[{"key": "k", "effect": "NoSchedule"}]), make_pod("p", cpu="1")],
        [{"at": "10s", "untaint": {"nodes": ["a"], "taints": [{"key": "k"}]}}], placed={"p": "a"},
        timeline=[("pending", "Pod default/p"), ("untainted", "Node a"), ("bound", "Pod default/p")]),
    "failNode makes the node unknown and tainted": Operation(
        TWO_NODES, [{"at": "1s", "failNode": {"nodes": ["a"]}}],
        timeline=[("tainted", "Node a"), ("node unknown", "Node a")]),
    "recoverNode lifts the unreachable taints": Operation(
        TWO_NODES, [{"at": "1s", "failNode": {"nodes": ["a"]}}, {"at": "2m", "recoverNode": {"nodes": ["a"]}}],
        timeline=[("node unknown", "Node a"), ("node ready", "Node a"), ("untainted", "Node a")]),
    "addNodes makes room for pending pods": Operation(
        [make_node("a", cpu="1"), make_pod("p", cpu="1"), make_pod("q", cpu="1")],
        [{"at": "1m", "addNodes": {"count": 2, "prefix": "a",
                                   "template": {"status": {"capacity": {"cpu": "1", "pods": "10"},
                                                           "allocatable": {"cpu": "1", "pods": "10"}}}}}],
        timeline=[("node added", "Node a1"), ("node added", "Node a2"), ("bound", "Pod default/")],
        nodes=["a", "a1", "a2"]),
    "removeNodes deletes the node and PodGC its pods": Operation(
        [*TWO_NODES, make_pod("p", cpu="1", nodeName="a")], [{"at": "10s", "removeNodes": {"selector": "kubernetes.io/hostname=a"}}],
        timeline=[("node removed", "Node a"), ("deleted", "Pod default/p")], nodes=["b"]),
}


@pytest.mark.parametrize("case", OPERATIONS.values(), ids=OPERATIONS.keys())
def test_each_operation_acts_on_the_cluster_at_its_time(case: Operation, tmp_path: Path) -> None:
    result = run(tmp_path, case.objects, case.steps)
    assert result.scenario_errors == []
    final = placements(result)
    for pod, node in case.placed.items():
        assert final[pod] == node, pod
    assert result.timeline is not None
    remaining = list(result.timeline)
    for event, obj in case.timeline:
        found = next((i for i, e in enumerate(remaining) if e.event == event and e.object.startswith(obj)), None)
        assert found is not None, f"no {event} {obj} (in order) on the timeline"
        remaining = remaining[found + 1:]
    steps = events(result, "step")
    assert [round(e.seconds) for e in steps] == [round(float(s["at"].rstrip("sm")) * (60 if s["at"].endswith("m") else 1))
                                                 for s in case.steps]
    if case.nodes is not None:
        assert sorted(n["metadata"]["name"] for n in result.store.iter_all(NODE)) == case.nodes


FAILING = {
    "cordon of a node that does not exist": ([{"at": "1s", "cordon": {"nodes": ["ghost"]}}],
                                             'steps[0] (at 1s): cordon: node "ghost" not found'),
    "a selector that matches no node": ([{"at": "1s", "failNode": {"selector": "zone=nowhere"}}],
                                        "steps[0] (at 1s): failNode: no node matches selector zone=nowhere"),
    "scale of a Deployment that does not exist": ([{"at": "1s", "scale": {"kind": "Deployment", "name": "x", "replicas": 1}}],
                                                  'steps[0] (at 1s): scale: deployments.apps "x" not found'),
    "untaint of a taint the node does not carry": ([{"at": "1s", "untaint": {"nodes": ["a"], "taints": [{"key": "k"}]}}],
                                                   'steps[0] (at 1s): untaint: taint "k-" not found on node "a"'),
}


@pytest.mark.parametrize(("steps", "message"), FAILING.values(), ids=FAILING.keys())
def test_a_step_that_cannot_be_carried_out_is_an_error_on_the_timeline(steps: list[dict], message: str,
                                                                      tmp_path: Path) -> None:
    result = run(tmp_path, [make_node("a"), make_pod("p", cpu="1")], steps)
    assert result.scenario_errors == [message]
    assert events(result, "error")
    assert placements(result) == {"p": "a"}


# --- drain and node failure ------------------------------------------------------------------------
def test_a_drain_re_places_each_evicted_pod_within_the_disruption_budget(tmp_path: Path) -> None:
    example = ROOT / "examples" / "scenarios" / "drain"
    objects = yaml.safe_load_all((example / "cluster.yaml").read_text())
    result = simulate([o for o in objects if o], default_configuration(),
                      scenario=load_scenario(example / "scenario.yaml"))
    assert result.scenario_errors == []
    evicted = [e.object for e in events(result, "evicted")]
    assert len(evicted) == 2 and all(e.startswith("Pod default/web-") for e in evicted)
    # The budget (3 of 4 available) refused the second web eviction until a replacement ran.
    blocked = events(result, "eviction blocked")
    assert blocked and "The disruption budget web needs 3 healthy pods" in blocked[0].message
    retried = next(e for e in events(result, "evicted") if e.object == blocked[0].object)
    assert retried.seconds >= blocked[0].seconds + 5 - 1e-6
    final = placements(result)
    assert "node-a" not in final.values()
    web = [name for name in final if name.startswith("web-")]
    assert len(web) == 4 and all(final[name] in ("node-b", "node-c") for name in web)
    assert final["batch"] == "node-b"
    assert events(result, "drained")[0].object == "Node node-a"
    assert result.removed == []


def test_a_drain_that_a_budget_blocks_for_good_reports_the_pods_left(tmp_path: Path) -> None:
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "all", "namespace": "default"},
           "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}}
    objects = [make_node("a"), make_node("b"), deployment("web", 2, nodeSelector={"kubernetes.io/hostname": "a"}), pdb]
    result = run(tmp_path, objects, [{"at": "30s", "drain": {"nodes": ["a"], "timeout": "1m"}}])
    incomplete = events(result, "drain incomplete")
    assert len(incomplete) == 1 and incomplete[0].message.startswith("timed out after 1m0s; still on the node: default/web-")
    assert "The disruption budget all needs 2 healthy pods" in incomplete[0].message
    assert round(incomplete[0].seconds) == 90
    assert sorted(placements(result).values()) == ["a", "a"]


def test_a_node_failure_evicts_after_the_pods_toleration_seconds(tmp_path: Path) -> None:
    tolerate = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 120}
    objects = [make_node("a", labels={"zone": "z1"}), make_node("b", labels={"zone": "z2"}),
               {**deployment("api", 1, tolerations=[tolerate], nodeSelector={"zone": "z1"})},
               make_pod("default-toleration", cpu="1", nodeName="a")]
    result = run(tmp_path, objects, [{"at": "10s", "failNode": {"selector": "zone=z1"}}])
    tainted = next(e for e in events(result, "tainted") if "NoExecute" in e.message)
    evicted = {e.object: e.seconds for e in events(result, "evicted")}
    api = next(name for name in evicted if name.startswith("Pod default/api-"))
    assert evicted[api] - tainted.seconds == pytest.approx(120, abs=1)
    assert evicted["Pod default/default-toleration"] - tainted.seconds == pytest.approx(300, abs=1)
    # the replacement api pod is pending: its nodeSelector picks only the failed zone
    pending = [e for e in events(result, "pending") if e.object.startswith("Pod default/api")]
    assert pending and "node(s) had untolerated taint" in pending[-1].message


def test_a_no_execute_taint_evicts_a_tolerating_pod_once_its_toleration_seconds_pass(tmp_path: Path) -> None:
    tolerate = {"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 45}
    objects = [make_node("a"), make_pod("brief", cpu="1", nodeName="a", tolerations=[tolerate]),
               make_pod("forever", cpu="1", nodeName="a", tolerations=[{**tolerate, "tolerationSeconds": None}])]
    result = run(tmp_path, objects, [{"at": "20s", "taint": {"nodes": ["a"], "taints": [{"key": "maintenance",
                                                                                          "effect": "NoExecute"}]}}])
    (evicted,) = events(result, "evicted")
    assert evicted.object == "Pod default/brief" and evicted.seconds == pytest.approx(65)
    assert placements(result) == {"forever": "a"}
