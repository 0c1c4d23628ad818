"""``compare``: the same input under two configurations: moved pods, pods pending under one only,
utilisation figures checked against hand-computed values, and under a scenario what each
configuration did step by step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kubesched.cli.main import main
from kubesched.scheduler import config as config_module
from kubesched.scheduler.config import default_configuration
from kubesched.simulator.compare import StepCounts, compare
from kubesched.simulator.scenario import load_scenario
from tests.helpers import make_node, make_pod
from tests.simulator.test_scenarios import deployment

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = str(ROOT / "examples" / "cluster")
LEAST = str(ROOT / "examples" / "configs" / "least-allocated.yaml")
MOST = str(ROOT / "examples" / "configs" / "most-allocated.yaml")
ZONE = "topology.kubernetes.io/zone"
NO_TAINT_FILTER = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                   "profiles": [{"schedulerName": "default-scheduler",
                                 "plugins": {"filter": {"disabled": [{"name": "TaintToleration"}]}}}]}


def test_most_allocated_packs_the_bundled_example_onto_fewer_nodes(capsys):
    assert main(["compare", "-f", CLUSTER, "--config", LEAST, "--config", MOST, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    least, most = (doc["utilisation"][name] for name in ("least-allocated.yaml", "most-allocated.yaml"))
    assert most["nodesUsed"] < least["nodesUsed"]
    assert most["cpu"]["spread"] > least["cpu"]["spread"]
    assert {m["pod"] for m in doc["moved"]} >= {"shop/web-1", "shop/cache-1"}
    assert doc["samePlacement"] + len(doc["moved"]) == 10 and doc["pendingOnlyIn"] == {
        "least-allocated.yaml": {}, "most-allocated.yaml": {}}


def test_a_pod_pending_under_one_configuration_only_is_reported_with_its_message():
    tainted = make_node("n1", taints=[{"key": "k", "effect": "NoSchedule"}])
    result = compare([tainted, make_pod("p", cpu="1")],
                     [("default", default_configuration()), ("no-taints", config_module.load_dict(NO_TAINT_FILTER))])
    assert result.pending_only[0] == {"default/p": "0/1 nodes are available: 1 node(s) had untolerated taint(s). no new claims to deallocate, "
                                                   "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."}
    assert result.pending_only[1] == {} and result.moved == []


def test_utilisation_figures_match_the_requests_per_node():
    nodes = [make_node("a1", cpu="4", memory="8Gi", labels={ZONE: "a"}), make_node("a2", cpu="4", memory="8Gi", labels={ZONE: "a"}),
             make_node("b1", cpu="2", memory="4Gi", labels={ZONE: "b"}), make_node("off", unschedulable=True),
             make_node("gpu", cpu="16", taints=[{"key": "gpu", "effect": "NoSchedule"}], labels={ZONE: "b"})]
    pods = [make_pod("x", cpu="3", memory="2Gi", node="a1"), make_pod("y", cpu="1", memory="4Gi", node="b1")]
    result = compare(nodes + pods, [("A", default_configuration()), ("B", default_configuration())])
    util = result.utilisation[0].to_json()
    assert (util["nodes"], util["nodesUsed"]) == (4, 2)
    # cpu: a1 3/4, a2 0, b1 1/2, gpu 0; memory: a1 2/8, a2 0, b1 4/4, gpu 0.
    assert util["cpu"] == {"mean": 0.3125, "spread": 0.3248, "max": 0.75}
    assert util["memory"] == {"mean": 0.3125, "spread": 0.4098, "max": 1.0}
    assert util["zones"]["a"] == {"nodesUsed": 1, "cpu": {"mean": 0.375, "spread": 0.375, "max": 0.75},
                                  "memory": {"mean": 0.125, "spread": 0.125, "max": 0.25}}
    # The tainted GPU node has the most room, but ordinary pods cannot use it.
    assert util["largestFit"] == {"cpu": {"milliCPU": 4000, "node": "a2", "freeMemoryBytes": 8 * 2**30},
                                  "memory": {"memoryBytes": 8 * 2**30, "node": "a2", "freeMilliCPU": 4000}}
    assert result.same == 2 and result.moved == []


@pytest.mark.parametrize(("argv", "message"), [
    (["--config", LEAST], "--config: give exactly two configurations to compare, not 1"),
    (["--config", LEAST, "--config", "/nonexistent.yaml"], "--config /nonexistent.yaml: no such file or directory"),
])
def test_cli_refuses_anything_but_two_readable_configurations(argv, message, capsys):
    assert main(["compare", "-f", CLUSTER, *argv]) == 1
    assert message in capsys.readouterr().err


def test_cli_table_names_the_configurations_by_file(capsys):
    assert main(["compare", "-f", CLUSTER, "--config", LEAST, "--config", MOST]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("placed differently, 3 on the same node.")
    assert out[1].split() == ["POD", "least-allocated.yaml", "most-allocated.yaml"]
    assert any(line.split()[:4] == ["nodes", "used", "4/4", "3/4"] for line in out)


def drain_small_node(tmp_path: Path) -> tuple[list[dict], Path]:
    """One web replica on a 4-CPU and an 8-CPU node: LeastAllocated puts it on the big node,
    MostAllocated on the small one, which is drained at 30s."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({"apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario",
                                        "steps": [{"at": "30s", "drain": {"nodes": ["small"]}}]}))
    return [make_node("small", cpu="4"), make_node("big", cpu="8"), deployment("web", 1)], scenario


def test_under_a_scenario_each_step_says_what_each_configuration_did(tmp_path):
    objects, scenario = drain_small_node(tmp_path)
    configs = [(Path(p).name, config_module.load_text(Path(p).read_text(), source=p)) for p in (LEAST, MOST)]
    result = compare(objects, configs, scenario=load_scenario(scenario))
    start, drain = result.steps
    assert (start.step, start.seconds, start.description) == ("start", 0.0, "scheduling the input")
    assert start.counts == (StepCounts(1, 0, 0, 0), StepCounts(1, 0, 0, 0)) and not start.differs
    assert (drain.step, drain.seconds, drain.description) == ("steps[0]", 30.0, "drain small")
    # Only MostAllocated had the replica on the drained node: evicted, and its replacement bound on "big".
    assert drain.counts == (StepCounts(0, 0, 0, 0), StepCounts(bound=1, evicted=1, preempted=0, pending=0))
    assert drain.differs


def test_steps_are_in_the_json_and_the_table_and_absent_without_a_scenario(tmp_path, capsys):
    objects, scenario = drain_small_node(tmp_path)
    manifests = tmp_path / "cluster.yaml"
    manifests.write_text(yaml.safe_dump_all(objects))
    argv = ["compare", "-f", str(manifests), "--config", LEAST, "--config", MOST]
    assert main([*argv, "--scenario", str(scenario), "-o", "json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert steps[1] == {"step": "steps[0]", "at": "30s", "description": "drain small",
                        "least-allocated.yaml": {"bound": 0, "evicted": 0, "preempted": 0, "pending": 0},
                        "most-allocated.yaml": {"bound": 1, "evicted": 1, "preempted": 0, "pending": 0}}
    assert main([*argv, "--scenario", str(scenario)]) == 0
    table = capsys.readouterr().out.splitlines()
    at = table.index("Step by step (least-allocated.yaml / most-allocated.yaml; pending when the next step fired):")
    assert [line.split() for line in table[at + 1:]] == [
        ["STEP", "AT", "BOUND", "EVICTED", "PREEMPTED", "PENDING"],
        ["start", "0s", "1", "/", "1", "0", "/", "0", "0", "/", "0", "0", "/", "0"],
        ["steps[0]:", "drain", "small", "30s", "0", "/", "1", "0", "/", "1", "0", "/", "0", "0", "/", "0", "differs"]]
    assert main([*argv, "-o", "json"]) == 0
    assert "steps" not in json.loads(capsys.readouterr().out)


def test_a_step_that_cannot_be_carried_out_exits_1_after_the_comparison(tmp_path, capsys):
    objects, scenario = drain_small_node(tmp_path)
    scenario.write_text(yaml.safe_dump({"apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario",
                                        "steps": [{"at": "30s", "cordon": {"nodes": ["gone"]}}]}))
    manifests = tmp_path / "cluster.yaml"
    manifests.write_text(yaml.safe_dump_all(objects))
    assert main(["compare", "-f", str(manifests), "--config", LEAST, "--config", MOST, "--scenario", str(scenario)]) == 1
    captured = capsys.readouterr()
    assert "Step by step" in captured.out
    assert ('2 scenario step(s) could not be carried out: under least-allocated.yaml: steps[0] (at 30s): cordon: '
            'node "gone" not found; under most-allocated.yaml: steps[0] (at 30s): cordon: node "gone" not found') in captured.err
