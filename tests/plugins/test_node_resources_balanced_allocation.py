"""NodeResourcesBalancedAllocation: upstream's score cases (two and three resources, scalar
resources a node lacks, best-effort Skip) and the vectorised scores against a per-node reference."""

from __future__ import annotations

import math
import random

import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.config.args import NodeResourcesBalancedAllocationArgs, ResourceSpec
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.status import Code
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.noderesources.balanced_allocation import NodeResourcesBalancedAllocation
from tests.helpers import make_node

GPU = "nvidia.com/gpu"


def bpod(name: str, *requests: dict, node: str | None = None) -> dict:
    spec: dict = {"containers": [{"name": f"c{i}", "image": "i", "resources": {"requests": r}} for i, r in enumerate(requests)]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}


def cpu_and_memory(node: str | None = None, name: str = "cm") -> dict:
    return bpod(name, {"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"}, node=node)


def cpu_only(node: str | None = None, name: str = "co") -> dict:
    return bpod(name, {"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"}, node=node)


def cpu_memory_gpu(node: str, name: str = "cmg") -> dict:
    return bpod(name, {"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000", GPU: "3"}, node=node)


def bnode(name: str, milli_cpu: int, memory: int, gpu: int | None = None) -> dict:
    return make_node(name, cpu=f"{milli_cpu}m", memory=str(memory), extra={GPU: str(gpu)} if gpu is not None else None)


def args(*names: str) -> NodeResourcesBalancedAllocationArgs:
    return NodeResourcesBalancedAllocationArgs([ResourceSpec(n, 1) for n in names or ("cpu", "memory")])


def build(nodes: list[dict], pods: list[dict]) -> NodeTable:
    infos = {n["metadata"]["name"]: NodeInfo(n) for n in nodes}
    for p in pods:
        infos[p["spec"]["nodeName"]].add_pod(PodInfo(p))
    table = NodeTable()
    for info in infos.values():
        table.set_node(info)
    return table


CASES = [
    ("nothing scheduled, resources requested, differently sized nodes", cpu_and_memory(),
     [bnode("node1", 4000, 10000), bnode("node2", 6000, 10000)], [], args(), [87, 100]),
    ("resources requested, pods scheduled with resources", cpu_and_memory(),
     [bnode("node1", 10000, 20000), bnode("node2", 10000, 20000)], [cpu_only("node1"), cpu_and_memory("node2")], args(), [82, 95]),
    ("resources requested, pods scheduled with resources, differently sized nodes", cpu_and_memory(),
     [bnode("node1", 10000, 20000), bnode("node2", 10000, 50000)], [cpu_only("node1"), cpu_and_memory("node2")], args(), [82, 80]),
    ("requested resources at node capacity", cpu_only(),
     [bnode("node1", 6000, 10000), bnode("node2", 6000, 10000)], [cpu_only("node1"), cpu_and_memory("node2")], args(), [50, 75]),
    ("include scalar resource on a node for balanced resource allocation", bpod("p", {"memory": "0", GPU: "1"}),
     [bnode("node1", 3500, 40000, 8), bnode("node2", 3500, 40000, 8)], [cpu_and_memory("node2"), cpu_memory_gpu("node1")],
     args("cpu", "memory", GPU), [70, 65]),
    ("node without the scalar resource should skip the scalar resource", cpu_and_memory(),
     [bnode("node1", 3500, 40000, 8), bnode("node2", 3500, 40000)], [], args("cpu", "memory", GPU), [63, 63]),
]


@pytest.mark.parametrize("name,pod,nodes,pods,plugin_args,expected", CASES, ids=[c[0] for c in CASES])
def test_score(name, pod, nodes, pods, plugin_args, expected):
    table = build(nodes, pods)
    pl, state, p = NodeResourcesBalancedAllocation(plugin_args), CycleState(), PodInfo(pod)
    assert pl.pre_score(state, p, table.all_rows()) is None
    assert list(pl.score_nodes(state, p, table.all_rows())) == expected


def test_score_without_pre_score():
    table = build([bnode("node1", 10000, 20000), bnode("node2", 10000, 20000)], [cpu_only("node1"), cpu_and_memory("node2")])
    p = PodInfo(cpu_and_memory())
    assert list(NodeResourcesBalancedAllocation(args()).score_nodes(CycleState(), p, table.all_rows())) == [82, 95]


def test_best_effort_pods_are_skipped():
    table = build([bnode("node1", 4000, 10000), bnode("node2", 4000, 10000)], [])
    status = NodeResourcesBalancedAllocation(args()).pre_score(CycleState(), PodInfo(bpod("p", {})), table.all_rows())
    assert status.code == Code.Skip


def test_defaults_to_cpu_and_memory():
    pl = NodeResourcesBalancedAllocation()
    assert [r.name for r in pl.resources] == ["cpu", "memory"]


# --- vectorised vs per-node reference ----------------------------------------------------------------
def reference(requested: list[int], allocatable: list[int]) -> int:
    fractions = [min(r / a, 1.0) for r, a in zip(requested, allocatable) if a != 0]
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    else:
        std = 0.0
    return int((1 - std) * 100)


@pytest.mark.parametrize("seed", range(5))
def test_scores_match_per_node_reference(seed):
    rng = random.Random(seed)
    names = ["cpu", "memory", GPU, "example.com/x"]
    nodes, pods = [], []
    for i in range(30):
        extra = {n: str(rng.randint(0, 8)) for n in names[2:] if rng.random() < 0.6}
        nodes.append(make_node(f"n{i}", cpu=f"{rng.randint(1, 8) * 500}m", memory=str(rng.randint(1, 8) * 1000), extra=extra))
        for j in range(rng.randint(0, 3)):
            req = {"cpu": f"{rng.randint(0, 4) * 250}m", "memory": str(rng.randint(0, 4) * 500),
                   **{n: str(rng.randint(0, 2)) for n in extra}}
            pods.append(bpod(f"e{i}-{j}", req, node=f"n{i}"))
    table = build(nodes, pods)
    pl = NodeResourcesBalancedAllocation(args(*names))
    for k in range(10):
        request = {"cpu": f"{rng.randint(0, 4) * 250}m", "memory": str(rng.randint(0, 4) * 500), GPU: str(rng.randint(0, 2))}
        p, state = PodInfo(bpod(f"p{k}", request)), CycleState()
        if pl.pre_score(state, p, table.all_rows()) is not None:
            continue
        got = pl.score_nodes(state, p, table.all_rows())
        pod_req = [p.requests.get(n, 0) for n in names]
        for row in range(table.n):
            info = table.infos[row]
            req, alloc = [], []
            for n, pr in zip(names, pod_req):
                a = info.allocatable.get(n, 0)
                skip = a == 0 or (pr == 0 and n not in ("cpu", "memory"))
                alloc.append(0 if skip else a)
                req.append(0 if skip else info.requested.get(n, 0) + pr)
            assert got[row] == reference(req, alloc), (row, req, alloc)


def test_differently_configured_instances_sharing_a_table_keep_their_own_scores():
    """Profiles share the snapshot's memos; equal request vectors over other resources must not collide."""
    table = build([bnode("node1", 4000, 40000, 8), bnode("node2", 8000, 40000, 4)], [])
    pod = PodInfo(bpod("p", {"cpu": "1000m", "memory": "2", GPU: "2"}))
    configs = [args("cpu", GPU), args("cpu", "memory")]
    alone = []
    for plugin_args in configs:
        fresh = build([bnode("node1", 4000, 40000, 8), bnode("node2", 8000, 40000, 4)], [])
        alone.append(list(NodeResourcesBalancedAllocation(plugin_args).score_nodes(CycleState(), pod, fresh.all_rows())))
    assert alone[0] != alone[1]
    shared = [list(NodeResourcesBalancedAllocation(a).score_nodes(CycleState(), pod, table.all_rows())) for a in configs]
    assert shared == alone
