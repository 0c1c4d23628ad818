"""The figures ``simulate --report`` plots: allocation per node and pending pods' reasons."""

from __future__ import annotations

from kubesched.scheduler.config import default_configuration
from kubesched.simulator import htmlreport
from kubesched.simulator.simulate import simulate
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
    rows = [(a.zone, a.name, a.cpu, a.cpu_allocatable, a.memory, a.pods) for a in htmlreport.allocations(result)]
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
