"""NodePorts: upstream's conflict cases (IPs, 0.0.0.0, protocols, sidecars), the Skip, the hint,
the kubelet helper, and the port index against a per-node reference across table changes."""

from __future__ import annotations

import random

import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, QueueingHint, Resource
from kubesched.scheduler.framework.status import Code
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.nodeports.node_ports import ERR_REASON, NodePorts, fits_ports
from tests.helpers import make_node, make_pod


def port_pod(name: str, *specs: str, node: str | None = None, init_sidecar: bool = False) -> dict:
    """Ports as ``PROTO/IP/PORT`` strings."""
    ports = []
    for spec in specs:
        proto, ip, port = spec.split("/")
        ports.append({"containerPort": int(port), "hostPort": int(port), "hostIP": ip, "protocol": proto})
    pod = make_pod(name, node=node)
    if init_sidecar:
        pod["spec"]["initContainers"] = [{"name": "sidecar", "image": "s", "restartPolicy": "Always", "ports": ports}]
    else:
        pod["spec"]["containers"][0]["ports"] = ports
    return pod


def node_running(*pods: dict, name: str = "node") -> tuple[NodeTable, NodeInfo]:
    info = NodeInfo(make_node(name))
    for p in pods:
        info.add_pod(PodInfo(p))
    table = NodeTable()
    table.set_node(info)
    return table, info


CASES = [
    ("another port is free", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], True),
    ("the same UDP port conflicts", ["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], False),
    ("the same TCP port conflicts", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], False),
    ("a different host IP is free", ["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], True),
    ("a different protocol is free", ["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], True),
    ("the second UDP port conflicts", ["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], False),
    ("the first TCP port conflicts", ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"], False),
    ("0.0.0.0 wanted conflicts with a specific IP in use", ["TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], False),
    ("0.0.0.0 among the wanted ports conflicts", ["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], False),
    ("a specific IP wanted conflicts with 0.0.0.0 in use", ["TCP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], False),
    ("0.0.0.0 on another protocol is free", ["UDP/0.0.0.0/8001"], ["TCP/0.0.0.0/8001"], True),
    ("0.0.0.0 UDP conflicts with a specific IP on UDP", ["UDP/0.0.0.0/8001"], ["TCP/0.0.0.0/8001", "UDP/127.0.0.1/8001"], False),
]


@pytest.mark.parametrize("name,wanted,used,fits", CASES, ids=[c[0] for c in CASES])
def test_filter(name, wanted, used, fits):
    table, info = node_running(port_pod("existing", *used, node="node"))
    pod = PodInfo(port_pod("p", *wanted))
    pl, state = NodePorts(), CycleState()
    assert pl.pre_filter(state, pod, table.all_rows()) == (None, None)
    verdict = pl.filter_nodes(state, pod, table.all_rows())
    status = None if verdict is None else verdict.status_at(0)
    if fits:
        assert status is None
    else:
        assert status.code == Code.Unschedulable and status.reasons == [ERR_REASON]
    assert fits_ports(pod, info) == fits


def test_pod_without_host_ports_is_skipped():
    table, _ = node_running()
    _, status = NodePorts().pre_filter(CycleState(), PodInfo(make_pod("p")), table.all_rows())
    assert status.code == Code.Skip


def test_restartable_init_container_ports_count_both_ways():
    table, _ = node_running(port_pod("existing", "TCP/0.0.0.0/80", node="node", init_sidecar=True))
    pl = NodePorts()
    for pod in (PodInfo(port_pod("p", "TCP/0.0.0.0/80")), PodInfo(port_pod("q", "TCP/1.2.3.4/80", init_sidecar=True))):
        state = CycleState()
        pl.pre_filter(state, pod, table.all_rows())
        assert pl.filter_nodes(state, pod, table.all_rows()).status_at(0).reasons == [ERR_REASON]


def test_ports_freed_when_the_pod_leaves():
    existing = PodInfo(port_pod("existing", "TCP/0.0.0.0/80", node="node"))
    table, info = node_running(existing.pod)
    pod, pl, state = PodInfo(port_pod("p", "TCP/0.0.0.0/80")), NodePorts(), CycleState()
    pl.pre_filter(state, pod, table.all_rows())
    assert pl.filter_nodes(state, pod, table.all_rows()) is not None
    info.remove_pod(existing.uid)
    table.pod_removed(info, existing)
    assert pl.filter_nodes(state, pod, table.all_rows()) is None


HINT_CASES = [
    ("skip an unscheduled deleted pod", port_pod("d", "TCP/0.0.0.0/80"), QueueingHint.QueueSkip),
    ("skip a deleted pod without host ports", make_pod("d", node="n"), QueueingHint.QueueSkip),
    ("skip a deleted pod on other ports", port_pod("d", "TCP/0.0.0.0/81", node="n"), QueueingHint.QueueSkip),
    ("queue a deleted pod that held the port", port_pod("d", "TCP/0.0.0.0/80", node="n"), QueueingHint.Queue),
    ("queue a deleted nominated pod that held the port",
     {**port_pod("d", "TCP/127.0.0.1/80"), "status": {"nominatedNodeName": "n"}}, QueueingHint.Queue),
]


@pytest.mark.parametrize("name,deleted,expected", HINT_CASES, ids=[c[0] for c in HINT_CASES])
def test_pod_deleted_hint(name, deleted, expected):
    assert NodePorts._after_pod_deleted(port_pod("p", "TCP/0.0.0.0/80"), deleted, None) == expected


def test_registers_pod_delete_with_hint_and_node_add_without():
    events = NodePorts().events_to_register()
    assert [(e.event.resource, e.event.action, e.hint is not None) for e in events] == [
        (Resource.Pod, ActionType.Delete, True), (Resource.Node, ActionType.Add, False)]


# --- index vs per-node reference ----------------------------------------------------------------------
def random_ports(rng: random.Random) -> list[str]:
    return [f"{rng.choice(['TCP', 'UDP'])}/{rng.choice(['0.0.0.0', '10.0.0.1', '10.0.0.2'])}/{rng.choice([80, 81, 82])}"
            for _ in range(rng.randint(0, 2))]


def assert_matches_reference(table: NodeTable, pl: NodePorts, rng: random.Random) -> None:
    for _ in range(10):
        ports = random_ports(rng) or ["TCP/0.0.0.0/80"]
        pod, state = PodInfo(port_pod("incoming", *ports)), CycleState()
        pl.pre_filter(state, pod, table.all_rows())
        verdict = pl.filter_nodes(state, pod, table.all_rows())
        for row in range(table.n):
            info = table.infos[row]
            assert (verdict is None or verdict.status_at(row) is None) == fits_ports(pod, info)
            scratch = NodeTable.from_infos([info])
            one = pl.filter_nodes(state, pod, scratch.all_rows())
            assert (one is None or one.status_at(0) is None) == fits_ports(pod, info)


@pytest.mark.parametrize("seed", range(4))
def test_index_matches_per_node_reference_across_changes(seed):
    rng = random.Random(seed)
    table, infos = NodeTable(), []
    for i in range(12):
        info = NodeInfo(make_node(f"n{i}"))
        table.set_node(info)
        infos.append(info)
    pl = NodePorts()
    pods: list[tuple[NodeInfo, PodInfo]] = []
    for step in range(60):
        info = rng.choice(infos)
        if pods and rng.random() < 0.3:
            info, pod = pods.pop(rng.randrange(len(pods)))
            info.remove_pod(pod.uid)
            table.pod_removed(info, pod)
        else:
            # One pod per (node, port) keeps upstream's set semantics and the NodeInfo counts equal.
            wanted = [p for p in random_ports(rng) if not info.used_ports.conflicts(PodInfo(port_pod("x", p)).host_ports[0])]
            pod = PodInfo(port_pod(f"p{step}", *wanted, node=info.name))
            info.add_pod(pod)
            table.pod_added(info, pod)
            pods.append((info, pod))
        if step == 30:
            gone = infos.pop(0)
            table.remove_node(gone.name)
            pods = [(i, p) for i, p in pods if i is not gone]
        if step % 15 == 0:
            assert_matches_reference(table, pl, rng)
    assert_matches_reference(table, pl, rng)
