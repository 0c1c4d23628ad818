"""The figures the reports of ``simulate``, ``capacity`` and ``compare`` plot: allocation per
node, pending pods' reasons, copies per node, and a scenario's counts over virtual time."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kubesched.scheduler.config import default_configuration
from kubesched.simulator import htmlreport
from kubesched.simulator.capacity import capacity
from kubesched.simulator.compare import compare
from kubesched.simulator.scenario import load_scenario
from kubesched.simulator.simulate import simulate
from kubesched.simulator.timeline import Counts, TimelineEntry, counts
from tests.helpers import make_node, make_pod

ZONE = "topology.kubernetes.io/zone"


def run(objects: list[dict]):
    return simulate(objects, default_configuration(), explain=True)


def test_allocation_sums_the_requests_of_the_pods_bound_to_each_node_by_zone():
    result = run([make_node("b1", cpu="4", memory="8Gi", labels={ZONE: "b"}),
                  make_node("a1", cpu="2", memory="4Gi", labels={ZONE: "a"}),
                  make_node("x1"),
                  make_pod("p1", cpu="1500m", memory="1Gi", node="a1"),
                  make_pod("p2", cpu="500m", memory="512Mi", node="a1")])
    rows = [(a.zone, a.name, a.cpu, a.cpu_allocatable, a.memory, a.pods) for a in htmlreport.allocations(result.store)]
    assert rows == [("a", "a1", 2000, 2000, 1536 * 2**20, 2), ("b", "b1", 0, 4000, 0, 0), ("(no zone)", "x1", 0, 4000, 0, 0)]


def test_pending_pod_counts_each_reason_over_the_nodes_it_ruled_out():
    result = run([make_node("small", cpu="1", memory="1Gi"), make_node("tiny", cpu="1", memory="8Gi"),
                  make_node("off", cpu="8", memory="8Gi", unschedulable=True),
                  make_pod("big", cpu="2", memory="2Gi")])
    (pod,) = htmlreport.pending_pods(result)
    assert (pod.key, pod.nodes) == ("default/big", 3)
    assert pod.reasons == [("NodeResourcesFit: Insufficient cpu", 2), ("NodeResourcesFit: Insufficient memory", 1),
                           ("NodeUnschedulable: node(s) were unschedulable", 1)]
    assert pod.message.startswith("0/3 nodes are available")


def test_page_escapes_text_and_says_when_nothing_is_pending():
    result = run([make_node("n1"), make_pod("p", cpu="1")])
    page = htmlreport.render(result, title="<b>R&D</b>")
    assert "<h1>&lt;b&gt;R&amp;D&lt;/b&gt;</h1>" in page and "<b>" not in page
    assert "None: every pod was scheduled." in page
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def bound_pod(name: str, node: str) -> dict:
    return make_pod(name, node=node)


COUNTS = {
    "a pod bound at the start counts as pending before it": (
        [TimelineEntry(0, "bound", "Pod default/a", "n1")], [bound_pod("a", "n1")],
        [Counts(0, 0, 1, 0, 0, 0), Counts(0, 1, 0, 1, 0, 0)]),
    "a pod bound in the manifests is there from the start, until evicted": (
        [TimelineEntry(5, "step", "steps[0]", "", "drain n1"), TimelineEntry(5, "evicted", "Pod default/a", "n1")], [],
        [Counts(0, 1, 0, 0, 0, 0), Counts(5, 1, 0, 0, 0, 0), Counts(5, 0, 0, 0, 1, 0)]),
    "a replacement is created pending, then bound": (
        [TimelineEntry(3, "created", "Pod default/b"), TimelineEntry(3, "pending", "Pod default/b", "", "0/1 nodes"),
         TimelineEntry(9, "bound", "Pod default/b", "n2")], [bound_pod("b", "n2")],
        [Counts(0, 0, 0, 0, 0, 0), Counts(3, 0, 1, 0, 0, 0), Counts(3, 0, 1, 0, 0, 0), Counts(9, 1, 0, 1, 0, 0)]),
    "a preempted pod leaves, a pod of the same name comes back": (
        [TimelineEntry(1, "preempted", "Pod default/a", "n1"), TimelineEntry(2, "created", "Pod default/a"),
         TimelineEntry(2, "bound", "Pod default/a", "n1")], [bound_pod("a", "n1")],
        [Counts(0, 1, 0, 0, 0, 0), Counts(1, 0, 0, 0, 0, 1), Counts(2, 0, 1, 0, 0, 1), Counts(2, 1, 0, 1, 0, 1)]),
}


@pytest.mark.parametrize(("entries", "final", "expected"), COUNTS.values(), ids=COUNTS.keys())
def test_counts_replay_the_timeline_from_the_pods_there_at_the_start(entries, final, expected):
    assert counts(entries, final) == expected


def test_a_terminating_pod_at_the_end_no_longer_counts():
    evicted = bound_pod("a", "n1")
    evicted["metadata"]["deletionTimestamp"] = "2026-01-01T00:05:00Z"
    assert counts([TimelineEntry(300, "evicted", "Pod default/a", "n1")], [evicted])[0] == Counts(0, 1, 0, 0, 0, 0)


def test_capacity_report_plots_the_copies_per_node_and_the_stop_reasons():
    result = capacity([make_node("n1", cpu="2"), make_node("n2", cpu="3"), make_node("off", cpu="8", unschedulable=True)],
                      [make_pod("w", cpu="1")], default_configuration(), explain=True)
    (pod,) = result.pods
    stop = htmlreport.stop_reasons(pod)
    assert (stop.nodes, stop.reasons) == (3, [("NodeResourcesFit: Insufficient cpu", 2),
                                               ("NodeUnschedulable: node(s) were unschedulable", 1)])
    page = result.to_html()
    assert re.findall(r'<g class="bar copies"><text class="label" x="0" y="\d+">([^<]+)</text><rect class="copies"', page) == ["n2", "n1"]
    assert re.findall(r'<rect class="reason"[^>]*><title>([^<]+)</title>', page) == ["2 of 3 node(s)", "1 of 3 node(s)"]
    assert "<h2>default/w: 5 instance(s)</h2>" in page
    assert page.count('<g class="node"') == 3 and "<script" not in page


def test_capacity_without_explanations_says_the_reasons_were_not_recorded():
    result = capacity([make_node("n1", cpu="1")], [make_pod("w", cpu="1")], default_configuration())
    assert result.pods[0].stop_attempt is None
    assert "No per-node filter reasons recorded for this pod" in result.to_html()


def test_simulate_report_has_the_scenario_timeline_and_compare_report_both_runs(tmp_path: Path):
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({"apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario",
                                        "steps": [{"at": "30s", "cordon": {"nodes": ["n1"]}}]}))
    objects = [make_node("n1", cpu="2"), make_node("n2", cpu="1"), make_pod("p", cpu="1"), make_pod("q", cpu="4")]
    steps = load_scenario(scenario)
    page = htmlreport.render(simulate(objects, default_configuration(), explain=True, scenario=steps))
    assert re.findall(r'<polyline class="series" data-series="(\w+)"', page) == ["bound", "pending", "evicted", "preempted"]
    assert re.findall(r'<g class="step">.*?<text[^>]*>([^<]+)</text>', page) == ["steps[0]"]
    page = compare(objects, [("A", default_configuration()), ("B", default_configuration())], explain=True,
                   scenario=steps).to_html(str(tmp_path / "report.html"))
    assert (tmp_path / "report.html").read_text() == page
    assert page.count('<svg class="allocation"') == 2 and page.count('<svg class="timeline') == 4
    assert re.findall(r'data-series="pending" data-label="(\w)"', page) == ["A", "B"]
    assert page.count('stroke-dasharray="6 4" points=') == 4  # B's lines are dashed
    assert page.count('<svg class="reasons" data-pod="default/q"') == 2  # pending under both
    assert "None: every pod placed under both is on the same node." in page
