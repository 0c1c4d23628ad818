"""``compare``: the same input under two configurations: moved pods, pods pending under one only,
and utilisation figures checked against hand-computed values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubesched.cli.main import main
from kubesched.scheduler import config as config_module
from kubesched.scheduler.config import default_configuration
from kubesched.simulator.compare import compare
from tests.helpers import make_node, make_pod

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
