"""NodeResourcesFit: upstream's fit cases (init containers, sidecars, overhead, extended resources,
hugepages, ignored resources, unresolvable requests), the three scoring strategies, hints, the
kubelet helper, and the vectorised verdicts against a per-node reference."""

from __future__ import annotations

import itertools
import random
from types import SimpleNamespace

import numpy as np
import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.config.args import (
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from kubesched.scheduler.features import DEFAULT_GATES
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, QueueingHint, Resource
from kubesched.scheduler.framework.runtime import FrameworkOptions
from kubesched.scheduler.framework.status import Code, StatusError
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins._resource_allocation import broken_linear
from kubesched.scheduler.plugins.noderesources.fit import NodeResourcesFit, fits, insufficient_resources
from tests.helpers import make_node

EXT_A, EXT_B, HUGE = "example.com/aaa", "example.com/bbb", "hugepages-2Mi"


def container(requests: dict | None, name: str = "c", restart: str | None = None) -> dict:
    c: dict = {"name": name, "image": "img"}
    if requests:
        c["resources"] = {"requests": requests}
    if restart:
        c["restartPolicy"] = restart
    return c


def rpod(name: str = "p", *requests: dict | None, init: tuple = (), sidecars: tuple = (), overhead: dict | None = None,
         node: str | None = None, pod_level: dict | None = None) -> dict:
    """A pod with one container per ``requests`` entry (no container at all when none given)."""
    spec: dict = {"containers": [container(r, f"c{i}") for i, r in enumerate(requests)]}
    inits = [container(r, f"s{i}", "Always") for i, r in enumerate(sidecars)] + [container(r, f"i{i}") for i, r in enumerate(init)]
    if inits:
        spec["initContainers"] = inits
    if overhead:
        spec["overhead"] = overhead
    if pod_level:
        spec["resources"] = {"requests": pod_level}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}


def fit_node(name: str = "node", pods: str = "32", **extra: str) -> dict:
    """Upstream's ``makeResources(10, 20, 32, 5, 20, 5)``: 10m cpu, 20 bytes, 5 of each scalar."""
    return make_node(name, cpu="10m", memory="20", pods=pods,
                     extra={EXT_A: "5", "ephemeral-storage": "20", HUGE: "5", **extra})


def table_with(node: dict, *existing: dict) -> tuple[NodeTable, NodeInfo]:
    info = NodeInfo(node)
    for p in existing:
        info.add_pod(PodInfo(p))
    table = NodeTable()
    table.set_node(info)
    return table, info


def used(cpu: str, memory: str, **scalars: str) -> dict:
    return rpod("existing", {"cpu": cpu, "memory": memory, **scalars}, node="node")


def run_filter(pl: NodeResourcesFit, pod: dict, table: NodeTable, row: int = 0):
    state, p = CycleState(), PodInfo(pod)
    assert pl.pre_filter(state, p, table.all_rows()) == (None, None)
    verdict = pl.filter_nodes(state, p, table.all_rows())
    return None if verdict is None else verdict.status_at(row)


U, R = Code.Unschedulable, Code.UnschedulableAndUnresolvable
FILTER_CASES = [
    ("no resources requested always fits", rpod("p"), used("10m", "20"), None, []),
    ("too many resources fails", rpod("p", {"cpu": "1m", "memory": "1"}), used("10m", "20"), U, ["Insufficient cpu", "Insufficient memory"]),
    ("too many resources fails due to init container cpu", rpod("p", {"cpu": "1m", "memory": "1"}, init=({"cpu": "3m", "memory": "1"},)),
     used("8m", "19"), U, ["Insufficient cpu"]),
    ("too many resources fails due to highest init container cpu",
     rpod("p", {"cpu": "1m", "memory": "1"}, init=({"cpu": "3m", "memory": "1"}, {"cpu": "2m", "memory": "1"})),
     used("8m", "19"), U, ["Insufficient cpu"]),
    ("too many resources fails due to init container memory", rpod("p", {"cpu": "1m", "memory": "1"}, init=({"cpu": "1m", "memory": "3"},)),
     used("9m", "19"), U, ["Insufficient memory"]),
    ("init container fits because it's the max, not sum", rpod("p", {"cpu": "1m", "memory": "1"}, init=({"cpu": "1m", "memory": "1"},)),
     used("9m", "19"), None, []),
    ("both resources fit", rpod("p", {"cpu": "1m", "memory": "1"}), used("5m", "5"), None, []),
    ("one resource memory fits", rpod("p", {"cpu": "2m", "memory": "1"}), used("9m", "5"), U, ["Insufficient cpu"]),
    ("one resource cpu fits", rpod("p", {"cpu": "1m", "memory": "2"}), used("5m", "19"), U, ["Insufficient memory"]),
    ("equal edge case", rpod("p", {"cpu": "5m", "memory": "1"}), used("5m", "19"), None, []),
    ("extended resource fits", rpod("p", {EXT_A: "1"}), used("0", "0"), None, []),
    ("extended resource capacity enforced", rpod("p", {EXT_A: "10"}), used("0", "0"), R, [f"Insufficient {EXT_A}"]),
    ("extended resource allocatable enforced", rpod("p", {EXT_A: "1"}), used("0", "0", **{EXT_A: "5"}), U, [f"Insufficient {EXT_A}"]),
    ("extended resource allocatable enforced for unknown resource", rpod("p", {EXT_B: "1"}), used("0", "0"), R, [f"Insufficient {EXT_B}"]),
    ("unknown extended resource of an init container", rpod("p", {}, init=({EXT_B: "1"},)), used("0", "0"), R, [f"Insufficient {EXT_B}"]),
    ("kubernetes.io resource capacity enforced", rpod("p", {"kubernetes.io/something": "10"}), used("0", "0"), R,
     ["Insufficient kubernetes.io/something"]),
    ("hugepages resource capacity enforced", rpod("p", {HUGE: "10"}), used("0", "0"), R, [f"Insufficient {HUGE}"]),
    ("hugepages resource allocatable enforced for multiple containers", rpod("p", {HUGE: "3"}, {HUGE: "3"}), used("0", "0"), R,
     [f"Insufficient {HUGE}"]),
    ("hugepages resource allocatable enforced against what is used", rpod("p", {HUGE: "3"}), used("0", "0", **{HUGE: "3"}), U,
     [f"Insufficient {HUGE}"]),
    ("resources + pod overhead fits", rpod("p", {"cpu": "1m", "memory": "1"}, overhead={"cpu": "3m", "memory": "13"}), used("5m", "5"), None, []),
    ("requests + overhead does not fit for memory", rpod("p", {"cpu": "1m", "memory": "1"}, overhead={"cpu": "1m", "memory": "15"}),
     used("5m", "5"), U, ["Insufficient memory"]),
    ("skip checking resource request with quantity zero", rpod("p", {"cpu": "1m", "memory": "1", EXT_B: "0"}), used("5m", "5"), None, []),
    ("sidecars add up with containers", rpod("p", {"cpu": "3m"}, sidecars=({"cpu": "3m"},)), used("5m", "5"), U, ["Insufficient cpu"]),
    ("an init container after a sidecar runs beside it", rpod("p", {"cpu": "1m"}, sidecars=({"cpu": "2m"},), init=({"cpu": "3m"},)),
     used("6m", "5"), U, ["Insufficient cpu"]),
    ("pod-level requests override the containers'", rpod("p", {"cpu": "9m"}, pod_level={"cpu": "2m"}), used("5m", "5"), None, []),
    ("a request larger than the node is unresolvable", rpod("p", {"cpu": "20m", "memory": "2"}), used("0", "19"), R,
     ["Insufficient cpu", "Insufficient memory"]),
    ("ephemeral storage is checked", rpod("p", {"ephemeral-storage": "25"}), used("0", "0"), R, ["Insufficient ephemeral-storage"]),
]


@pytest.mark.parametrize("name,pod,existing,code,reasons", FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
def test_filter(name, pod, existing, code, reasons):
    table, info = table_with(fit_node(), existing)
    status = run_filter(NodeResourcesFit(), pod, table)
    if code is None:
        assert status is None
    else:
        assert status.code == code and status.reasons == reasons
    assert insufficient_resources(PodInfo(pod), info) == reasons


@pytest.mark.parametrize("args,fits_node", [
    (NodeResourcesFitArgs(ignored_resources=[EXT_B]), True),
    (NodeResourcesFitArgs(ignored_resource_groups=["example.com"]), True),
    (NodeResourcesFitArgs(ignored_resources=["example.com/other"]), False),
], ids=["ignored resource", "ignored resource group", "other resource ignored"])
def test_ignored_extended_resources(args, fits_node):
    args.set_defaults(DEFAULT_GATES)
    table, _ = table_with(fit_node())
    status = run_filter(NodeResourcesFit(args), rpod("p", {EXT_B: "1", EXT_A: "1"}), table)
    assert (status is None) == fits_node


def test_too_many_pods():
    table, _ = table_with(fit_node(pods="1"), used("0", "0"))
    status = run_filter(NodeResourcesFit(), rpod("p"), table)
    assert status.code == Code.Unschedulable and status.reasons == ["Too many pods"]
    table, _ = table_with(fit_node(pods="1"), used("0", "0"))
    status = run_filter(NodeResourcesFit(), rpod("p", {"cpu": "11m"}), table)
    assert status.code == Code.UnschedulableAndUnresolvable and status.reasons == ["Too many pods", "Insufficient cpu"]


def test_nodes_failing_alike_share_a_status():
    table = NodeTable()
    for i, cpu in enumerate(["1m", "1m", "10m", "1m"]):
        table.set_node(NodeInfo(make_node(f"n{i}", cpu=cpu, memory="20")))
    state, p, pl = CycleState(), PodInfo(rpod("p", {"cpu": "2m"})), NodeResourcesFit()
    pl.pre_filter(state, p, table.all_rows())
    verdict = pl.filter_nodes(state, p, table.all_rows())
    assert list(verdict.codes) == [0, 0, -1, 0] and len(verdict.statuses) == 1


@pytest.mark.parametrize("fast", [True, False])
def test_requests_with_more_checks_than_int64_bits_report_every_failure(fast):
    """Past 62 failure reasons the keys are Python ints; statuses still list every reason."""
    names = [f"example.com/r{i:02d}" for i in range(70)]
    table = NodeTable()
    table.set_node(NodeInfo(make_node("short", extra=dict.fromkeys(names, "1"))))
    table.set_node(NodeInfo(make_node("roomy", extra=dict.fromkeys(names, "5"))))
    last = NodeInfo(make_node("last", extra=dict.fromkeys(names, "5")))
    last.add_pod(PodInfo(rpod("e", {names[-1]: "4"}, node="last")))
    table.set_node(last)
    table.set_node(NodeInfo(make_node("absent", extra=dict.fromkeys(names[:-1], "5"))))
    pod = rpod("p", dict.fromkeys(names, "2"))
    handle = SimpleNamespace(options=FrameworkOptions(fast_paths=fast), feature_gates=None)
    state, p, pl = CycleState(), PodInfo(pod), NodeResourcesFit(handle=handle)
    pl.pre_filter(state, p, table.all_rows())
    verdict = pl.filter_nodes(state, p, table.all_rows())
    short, roomy, last, absent = (verdict.status_at(i) for i in range(4))
    assert short.code == Code.UnschedulableAndUnresolvable and short.reasons == [f"Insufficient {n}" for n in names]
    assert roomy is None
    assert last.code == Code.Unschedulable and last.reasons == [f"Insufficient {names[-1]}"]
    assert absent.code == Code.UnschedulableAndUnresolvable and absent.reasons == [f"Insufficient {names[-1]}"]


# --- scoring -----------------------------------------------------------------------------------------
def score_node(name: str, cpu: str, memory: str, **extra: str) -> dict:
    return make_node(name, cpu=cpu, memory=memory, extra=extra)


def fit_args(kind: str, resources: list[tuple[str, int]] | None = None, shape: list[tuple[int, int]] | None = None) -> NodeResourcesFitArgs:
    strategy = ScoringStrategy(type=kind, resources=[ResourceSpec(n, w) for n, w in (resources or [("cpu", 1), ("memory", 1)])])
    if shape is not None:
        strategy.requested_to_capacity_ratio = RequestedToCapacityRatioParam([UtilizationShapePoint(u, s) for u, s in shape])
    return NodeResourcesFitArgs(scoring_strategy=strategy)


def scores(args: NodeResourcesFitArgs, pod: dict, nodes: list[dict], existing: list[dict] = ()) -> list[int]:
    infos = {n["metadata"]["name"]: NodeInfo(n) for n in nodes}
    for e in existing:
        infos[e["spec"]["nodeName"]].add_pod(PodInfo(e))
    table = NodeTable()
    for info in infos.values():
        table.set_node(info)
    pl, state, p = NodeResourcesFit(args), CycleState(), PodInfo(pod)
    assert pl.pre_score(state, p, table.all_rows()) is None
    return list(pl.score_nodes(state, p, table.all_rows()))


REQ_3000_5000 = rpod("p", {"cpu": "1000", "memory": "2000"}, {"cpu": "2000", "memory": "3000"})
N4000, N6000 = score_node("node1", "4000", "10000"), score_node("node2", "6000", "10000")


SHARED_CONFIGS = [
    ("strategies", [fit_args("LeastAllocated"), fit_args("MostAllocated"),
                    fit_args("RequestedToCapacityRatio", shape=[(0, 0), (100, 10)])]),
    ("weights", [fit_args("LeastAllocated", [("cpu", 1), ("memory", 1)]), fit_args("LeastAllocated", [("cpu", 1), ("memory", 5)])]),
    ("shapes", [fit_args("RequestedToCapacityRatio", shape=[(0, 0), (100, 10)]),
                fit_args("RequestedToCapacityRatio", shape=[(0, 10), (100, 0)])]),
]


@pytest.mark.parametrize("name,configs", SHARED_CONFIGS, ids=[c[0] for c in SHARED_CONFIGS])
def test_differently_configured_instances_sharing_a_table_keep_their_own_scores(name, configs):
    """Profiles share the snapshot's memos: each configuration scores as it would alone."""
    nodes, pod = [N4000, N6000], REQ_3000_5000
    alone = [scores(a, pod, nodes) for a in configs]
    assert len({tuple(s) for s in alone}) == len(alone)
    table = NodeTable()
    for n in nodes:
        table.set_node(NodeInfo(n))
    p, shared = PodInfo(pod), []
    for a in configs:
        pl, state = NodeResourcesFit(a), CycleState()
        pl.pre_score(state, p, table.all_rows())
        shared.append(list(pl.score_nodes(state, p, table.all_rows())))
    assert shared == alone


_ids = itertools.count()


def on(node: str, cpu: str | None, memory: str | None, **scalars: str) -> dict:
    """An existing pod on ``node`` requesting what is given."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return rpod(f"e{next(_ids)}", {**requests, **scalars}, node=node)


LEAST_CASES = [
    ("nothing scheduled, nothing requested", rpod("p"), [N4000, score_node("node2", "4000", "10000")], [], [100, 100]),
    ("nothing scheduled, resources requested, differently sized nodes", REQ_3000_5000, [N4000, N6000], [], [37, 50]),
    ("no resources requested, pods scheduled", rpod("p"), [N4000, score_node("node2", "4000", "10000")],
     [rpod("a", node="node1"), rpod("b", node="node1"), rpod("c", node="node2"), rpod("d", node="node2")], [100, 100]),
    ("no resources requested, pods scheduled with resources", rpod("p"),
     [score_node("node1", "10000", "20000"), score_node("node2", "10000", "20000")],
     [on("node1", "3000", "0"), on("node1", "3000", "0"), on("node2", "3000", "0"), on("node2", "3000", "5000")], [70, 57]),
    ("resources requested, pods scheduled with resources", REQ_3000_5000,
     [score_node("node1", "10000", "20000"), score_node("node2", "10000", "20000")],
     [on("node1", "3000", "0"), on("node2", "3000", "5000")], [57, 45]),
    ("resources requested, pods scheduled with resources, differently sized nodes", REQ_3000_5000,
     [score_node("node1", "10000", "20000"), score_node("node2", "10000", "50000")],
     [on("node1", "3000", "0"), on("node2", "3000", "5000")], [57, 60]),
    ("requested resources exceed node capacity", rpod("p", {"cpu": "3000", "memory": "0"}),
     [N4000, score_node("node2", "4000", "10000")], [on("node1", "3000", "0"), on("node2", "3000", "5000")], [50, 25]),
    ("zero node resources, pods scheduled with resources", rpod("p"), [score_node("node1", "0", "0"), score_node("node2", "0", "0")],
     [on("node1", "3000", "0"), on("node2", "3000", "5000")], [0, 0]),
]


@pytest.mark.parametrize("name,pod,nodes,existing,expected", LEAST_CASES, ids=[c[0] for c in LEAST_CASES])
def test_least_allocated(name, pod, nodes, existing, expected):
    assert scores(fit_args("LeastAllocated"), pod, nodes, existing) == expected


def test_least_allocated_with_custom_weights():
    # cpu 25, memory 50 -> (25 * 1 + 50 * 2) / 3 = 41 ; node2: 50, 50 -> 50
    args = fit_args("LeastAllocated", [("memory", 2), ("cpu", 1)])
    assert scores(args, REQ_3000_5000, [N4000, N6000]) == [41, 50]


def test_least_allocated_extended_resources_only_count_when_requested():
    nodes = [score_node("node1", "6000", "10000"), score_node("node2", "6000", "10000", **{"intel.com/foo": "4"})]
    args = fit_args("LeastAllocated", [("cpu", 1), ("memory", 1), ("intel.com/foo", 1)])
    assert scores(args, REQ_3000_5000, nodes) == [50, 50]
    with_foo = rpod("p", {"cpu": "1000", "memory": "2000", "intel.com/foo": "2"}, {"cpu": "2000", "memory": "3000"})
    nodes[0] = score_node("node1", "6000", "10000", **{"intel.com/foo": "4"})
    nodes[1] = score_node("node2", "6000", "10000", **{"intel.com/foo": "10"})
    # node1: (50 + 50 + 50) / 3 = 50 ; node2: (50 + 50 + 80) / 3 = 60
    assert scores(args, with_foo, nodes) == [50, 60]


MOST_CASES = [
    ("nothing scheduled, nothing requested", rpod("p"), [N4000, score_node("node2", "4000", "10000")], [], [0, 0]),
    ("nothing scheduled, resources requested, differently sized nodes", REQ_3000_5000, [N4000, N6000], [], [62, 50]),
    ("resources requested, pods scheduled with resources", REQ_3000_5000,
     [score_node("node1", "10000", "20000"), score_node("node2", "10000", "20000")],
     [on("node1", "3000", "0"), on("node2", "3000", "5000")], [42, 55]),
    ("resources requested with more than the node, pods scheduled with resources",
     rpod("p", {"cpu": "2000", "memory": "10000"}, {"cpu": "3000", "memory": "10000"}),
     [score_node("node1", "4000", "10000"), score_node("node2", "10000", "8000")], [], [100, 75]),
]


@pytest.mark.parametrize("name,pod,nodes,existing,expected", MOST_CASES, ids=[c[0] for c in MOST_CASES])
def test_most_allocated(name, pod, nodes, existing, expected):
    assert scores(fit_args("MostAllocated"), pod, nodes, existing) == expected


def test_most_allocated_with_custom_weights():
    # node1: cpu 75, memory 50 -> (75 * 1 + 50 * 2) / 3 = 58 ; node2: 50, 50 -> 50
    assert scores(fit_args("MostAllocated", [("memory", 2), ("cpu", 1)]), REQ_3000_5000, [N4000, N6000]) == [58, 50]


LEAST_SHAPE = [(0, 10), (100, 0)]


@pytest.mark.parametrize("name,pod,nodes,existing,expected", [
    ("nothing scheduled, nothing requested", rpod("p"), [N4000, score_node("node2", "4000", "10000")],
     [rpod("a", node="node1"), rpod("b", node="node1")], [100, 100]),
    ("nothing scheduled, resources requested, differently sized nodes", REQ_3000_5000, [N4000, N6000],
     [rpod("a", node="node1"), rpod("b", node="node1")], [38, 50]),
    ("no resources requested, pods scheduled with resources", rpod("p"), [N4000, N6000],
     [on("node1", "3000", "5000"), on("node2", "3000", "5000")], [38, 50]),
], ids=["nothing requested", "differently sized nodes", "pods scheduled with resources"])
def test_requested_to_capacity_ratio(name, pod, nodes, existing, expected):
    assert scores(fit_args("RequestedToCapacityRatio", shape=LEAST_SHAPE), pod, nodes, existing) == expected


FOO = "intel.com/foo"


@pytest.mark.parametrize("name,pod,existing,expected", [
    ("nothing requested: the extended resource is left out", rpod("p"), [], [0, 0]),
    ("resources requested, pods scheduled with less resources", rpod("p", {FOO: "2"}), [], [2, 5]),
    ("resources requested, on a node with an existing pod", rpod("p", {FOO: "2"}), [on("node2", None, None, **{FOO: "2"})], [2, 10]),
    ("resources requested, pods scheduled with more resources", rpod("p", {FOO: "4"}), [], [5, 10]),
], ids=["nothing requested", "less resources", "existing pod", "more resources"])
def test_bin_packing_single_extended_resource(name, pod, existing, expected):
    nodes = [score_node("node1", "4", "10000Mi", **{FOO: "8"}), score_node("node2", "4", "10000Mi", **{FOO: "4"})]
    args = fit_args("RequestedToCapacityRatio", [(FOO, 1)], [(0, 0), (100, 1)])
    assert scores(args, pod, nodes, existing) == expected


def test_bin_packing_multiple_extended_resources_weighted():
    nodes = [score_node("node1", "4", "10000Mi", **{FOO: "8", "intel.com/bar": "4"}),
             score_node("node2", "4", "10000Mi", **{FOO: "4", "intel.com/bar": "8"})]
    args = fit_args("RequestedToCapacityRatio", [(FOO, 3), ("intel.com/bar", 5)], [(0, 0), (100, 1)])
    # node1: foo 2/8 -> 2, bar 2/4 -> 5 -> (2*3 + 5*5) / 8 = 3.875 -> 4 ; node2: (5*3 + 2*5) / 8 = 3.125 -> 3
    assert scores(args, rpod("p", {FOO: "2", "intel.com/bar": "2"}), nodes) == [4, 3]


@pytest.mark.parametrize("points,assertions", [
    ([(10, 1), (90, 9)], [(-10, 1), (0, 1), (9, 1), (10, 1), (15, 1), (19, 1), (20, 2), (89, 8), (90, 9), (99, 9), (100, 9), (110, 9)]),
    ([(0, 2), (40, 10), (100, 0)], [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)]),
    ([(0, 2), (40, 2), (100, 2)], [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)]),
], ids=["rising", "up and down", "flat"])
def test_broken_linear_function(points, assertions):
    fn = broken_linear(points)
    got = fn(np.array([p for p, _ in assertions], dtype=np.int64))
    assert list(got) == [e for _, e in assertions]


def test_score_uses_non_zero_defaults_for_containers_requesting_nothing():
    # one container without requests counts 100m cpu / 200Mi memory
    nodes = [score_node("node1", "1", "1000Mi")]
    # cpu (1000 - 100) * 100 / 1000 = 90 ; memory (1000Mi - 200Mi) * 100 / 1000Mi = 80 -> 85
    assert scores(fit_args("LeastAllocated"), rpod("p", None), nodes) == [85]


def test_score_without_resources_is_an_error():
    args = fit_args("LeastAllocated")
    args.scoring_strategy.resources = []
    table, _ = table_with(fit_node())
    with pytest.raises(StatusError, match="resources not found"):
        NodeResourcesFit(args).score_nodes(CycleState(), PodInfo(rpod("p")), table.all_rows())


# --- hints ---------------------------------------------------------------------------------------------
def test_events_registered():
    events = [(e.event.resource, e.event.action) for e in NodeResourcesFit().events_to_register()]
    assert events == [(Resource.Pod, ActionType.Delete | ActionType.UpdatePodScaleDown),
                      (Resource.Node, ActionType.Add | ActionType.UpdateNodeAllocatable)]


POD_HINT_CASES = [
    ("skip a deleted unscheduled pod", rpod("other", {"cpu": "1"}), None, QueueingHint.QueueSkip),
    ("queue a deleted scheduled pod", rpod("other", {"cpu": "1"}, node="n"), None, QueueingHint.Queue),
    ("queue the target pod scaling down", rpod("p", {"cpu": "2"}), rpod("p", {"cpu": "1"}), QueueingHint.Queue),
    ("skip an unscheduled pod scaling down", rpod("other", {"cpu": "2"}), rpod("other", {"cpu": "1"}), QueueingHint.QueueSkip),
    ("queue a scheduled pod freeing what the pod asks for", rpod("other", {"cpu": "2"}, node="n"), rpod("other", {"cpu": "1"}, node="n"),
     QueueingHint.Queue),
    ("skip a scheduled pod freeing something else", rpod("other", {"memory": "2"}, node="n"), rpod("other", {"memory": "1"}, node="n"),
     QueueingHint.QueueSkip),
]


@pytest.mark.parametrize("name,old,new,expected", POD_HINT_CASES, ids=[c[0] for c in POD_HINT_CASES])
def test_pod_event_hint(name, old, new, expected):
    assert NodeResourcesFit._after_pod_event(rpod("p", {"cpu": "1"}), old, new) == expected


NODE_HINT_CASES = [
    ("skip an added node too small", None, make_node("n", cpu="1"), QueueingHint.QueueSkip),
    ("queue an added node that fits", None, make_node("n", cpu="4"), QueueingHint.Queue),
    ("queue a node whose cpu grew", make_node("n", cpu="3"), make_node("n", cpu="4"), QueueingHint.Queue),
    ("skip a node that grew memory only", make_node("n", cpu="4", memory="1Gi"), make_node("n", cpu="4", memory="2Gi"), QueueingHint.QueueSkip),
    ("queue a node allowing more pods", make_node("n", cpu="4", pods="1"), make_node("n", cpu="4", pods="2"), QueueingHint.Queue),
    ("skip a node that shrank but still fits", make_node("n", cpu="5"), make_node("n", cpu="4"), QueueingHint.QueueSkip),
]


@pytest.mark.parametrize("name,old,new,expected", NODE_HINT_CASES, ids=[c[0] for c in NODE_HINT_CASES])
def test_node_change_hint(name, old, new, expected):
    assert NodeResourcesFit()._after_node_change(rpod("p", {"cpu": "2"}), old, new) == expected


def defaulted(args: NodeResourcesFitArgs) -> NodeResourcesFitArgs:
    args.set_defaults(DEFAULT_GATES)
    return args


def test_node_hint_ignores_nothing_as_upstream_fits_does():
    pl = NodeResourcesFit(defaulted(NodeResourcesFitArgs(ignored_resources=[EXT_B])))
    assert pl._after_node_change(rpod("p", {EXT_B: "1"}), None, make_node("n")) == QueueingHint.QueueSkip


def test_fits_reports_numbers_for_the_kubelet():
    _, info = table_with(fit_node(), used("9m", "0"))
    [cpu] = fits(PodInfo(rpod("p", {"cpu": "2m"})), info)
    assert (cpu.resource_name, cpu.requested, cpu.used, cpu.capacity, cpu.unresolvable) == ("cpu", 2, 9, 10, False)


# --- vectorised vs per-node reference ----------------------------------------------------------------
def random_request(rng: random.Random) -> dict:
    out = {}
    for name, choices in (("cpu", ["100m", "500m", "2"]), ("memory", ["1Gi", "3Gi"]), (EXT_A, ["1", "2"]), (EXT_B, ["1"])):
        if rng.random() < 0.5:
            out[name] = rng.choice(choices)
    return out


@pytest.mark.parametrize("seed", range(5))
def test_batch_verdicts_match_per_node_reference(seed):
    rng = random.Random(seed)
    table = NodeTable()
    for i in range(25):
        # Existing pods only ask for what every node lists (NodeTable.write_aggregates cannot add a
        # resource row yet, see the report), so each node lists EXT_A, maybe as 0.
        info = NodeInfo(make_node(f"n{i}", cpu=rng.choice(["1", "2", "4"]), memory=rng.choice(["2Gi", "4Gi"]),
                                  pods=rng.choice(["2", "3", "110"]), extra={EXT_A: str(rng.randint(0, 3))}))
        for j in range(rng.randint(0, 3)):
            existing = {k: v for k, v in random_request(rng).items() if k != EXT_B}
            info.add_pod(PodInfo(rpod(f"e{i}-{j}", existing, node=info.name)))
        table.set_node(info)
    ignored = [EXT_B] if seed % 2 else []
    pl = NodeResourcesFit(defaulted(NodeResourcesFitArgs(ignored_resources=ignored)))
    for k in range(20):
        pod = rpod(f"p{k}", *(random_request(rng) for _ in range(rng.randint(0, 2))))
        state, p = CycleState(), PodInfo(pod)
        pl.pre_filter(state, p, table.all_rows())
        verdict = pl.filter_nodes(state, p, table.all_rows())
        for row in range(table.n):
            info = table.infos[row]
            expected = [r for r in fits(p, info) if r.resource_name not in ignored]
            got = None if verdict is None else verdict.status_at(row)
            assert (got.reasons if got else []) == [r.reason for r in expected]
            if got:
                assert (got.code == Code.UnschedulableAndUnresolvable) == any(r.unresolvable for r in expected)
            scratch = NodeTable.from_infos([info])
            one = pl.filter_nodes(state, p, scratch.all_rows())
            assert (one.status_at(0).reasons if one and one.status_at(0) else []) == [r.reason for r in expected]


# --- through the framework ------------------------------------------------------------------------
def test_node_local_plugins_run_through_the_framework():
    """The default node-local plugins with their default weights: filters record the first failing
    plugin, scores are normalised and weighted."""
    from kubesched.scheduler.config.types import PluginRef, Plugins, PluginSet, Profile
    from kubesched.scheduler.framework.runtime import Framework, HandleContext
    from kubesched.scheduler.plugins.registry import in_tree_registry
    from kubesched.utils.clock import ManualClock

    table = NodeTable()
    table.set_node(NodeInfo(make_node("small", cpu="1", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}])))
    table.set_node(NodeInfo(make_node("big", cpu="8", labels={"disk": "ssd"})))
    table.set_node(NodeInfo(make_node("cordoned", cpu="8", unschedulable=True)))
    names = [("PrioritySort", 0), ("DefaultBinder", 0), ("NodeUnschedulable", 0), ("NodeName", 0), ("TaintToleration", 3),
             ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1), ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1)]
    profile = Profile(plugins=Plugins(multi_point=PluginSet([PluginRef(n, w) for n, w in names])),
                      plugin_config={"NodeResourcesFit": defaulted(NodeResourcesFitArgs())})
    fw = Framework(in_tree_registry(), profile, HandleContext(clock=ManualClock(), snapshot=lambda: table))
    pod = PodInfo(rpod("p", {"cpu": "2", "memory": "1Gi"}))
    pod.pod["spec"]["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}
    state = CycleState()
    _, status, _ = fw.run_pre_filter(state, pod)
    assert status is None and state.skip_filter_plugins == {"NodeAffinity", "NodePorts"}
    _, ids, statuses = fw.run_batch_filters(state, pod, table.all_rows())
    assert [statuses[i].plugin if i >= 0 else None for i in ids] == ["NodeResourcesFit", None, "NodeUnschedulable"]
    feasible = table.batch(np.array([1]))
    assert fw.run_pre_score(state, pod, feasible) is None
    result = fw.run_score(state, pod, feasible, keep_parts=True)
    parts = {name: (int(norm[0]), weight) for name, _, norm, weight in result.plugins}
    assert parts["TaintToleration"] == (100, 3) and parts["NodeAffinity"] == (100, 2)
    assert int(result.total[0]) == sum(score * weight for score, weight in parts.values())
