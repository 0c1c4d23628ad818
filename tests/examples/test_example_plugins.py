"""The two example out-of-tree plugins (docs/writing-a-plugin.md) work through the harness and the CLI."""

from __future__ import annotations

from pathlib import Path

import yaml

from kubesched.cli.main import main
from kubesched.scheduler.framework.registry import load_out_of_tree
from kubesched.testing import PluginHarness, Status
from tests.helpers import make_node, make_pod

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plugins"


def priced(name, cost):
    return make_node(name, labels={"example.com/hourly-cost": str(cost)})


def test_cheapest_node_filters_by_budget_and_prefers_cheap_nodes():
    (cheapest,) = load_out_of_tree(str(EXAMPLES / "cheapest_node.py")).values()
    h = PluginHarness(cheapest, nodes=[priced("a", 10), priced("b", 40), priced("c", 90), make_node("free")])
    pod = make_pod("p")
    pod["metadata"]["annotations"] = {"example.com/max-hourly-cost": "50"}
    r = h.run(pod)
    assert r.filter["c"] == Status("Unschedulable", ["node(s) cost more than 50 cents an hour"])
    assert r.filter["a"].is_success and r.filter["free"].is_success
    assert r.raw_scores == {"a": 10, "b": 40, "c": 90, "free": 0}
    assert r.scores == {"a": 89, "b": 56, "c": 0, "free": 100}


def test_pods_per_app_counts_same_app_pods_per_node():
    (plugin,) = load_out_of_tree(str(EXAMPLES / "pods_per_app.py")).values()
    pods = [make_pod("x1", labels={"app": "x"}, node="n1"), make_pod("x2", labels={"app": "x"}, node="n1"),
            make_pod("x3", labels={"app": "x"}, node="n2")]
    h = PluginHarness(plugin, args={"maxPerNode": 2}, nodes=[make_node("n1"), make_node("n2"), make_node("n3")], pods=pods)
    r = h.run(make_pod("new", labels={"app": "x"}))
    assert r.filter["n1"] == Status("Unschedulable", ["node(s) already run 2 pods of this app"])
    assert r.raw_scores == {"n1": 0, "n2": 1, "n3": 2}
    assert r.scores == {"n1": 0, "n2": 50, "n3": 100}


def test_examples_run_from_the_cli(tmp_path, capsys):
    config = yaml.safe_load((EXAMPLES / "config.yaml").read_text())
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    code = main(["simulate", "-f", str(EXAMPLES / "cluster.yaml"), "--plugin", str(EXAMPLES / "cheapest_node.py"),
                 "--plugin", str(EXAMPLES / "pods_per_app.py"), "--config", str(tmp_path / "config.yaml")])
    out = capsys.readouterr().out
    assert code == 0
    placed = {line.split()[1]: line.split()[3] for line in out.splitlines() if line.startswith("default")}
    assert sorted(placed.values()) == ["cheap-1", "cheap-1", "cheap-2", "cheap-2", "pricey-1", "pricey-1"]
