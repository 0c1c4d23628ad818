"""NodeUnschedulable: cordoned nodes take only pods tolerating the unschedulable taint; hints."""

from __future__ import annotations

import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, QueueingHint, Resource
from kubesched.scheduler.framework.status import Code
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.nodeunschedulable.node_unschedulable import ERR_REASON_UNSCHEDULABLE, NodeUnschedulable
from tests.helpers import make_node, make_pod

TOLERATE = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]


def table_of(*nodes: dict) -> NodeTable:
    table = NodeTable()
    for n in nodes:
        table.set_node(NodeInfo(n))
    return table


@pytest.mark.parametrize("name,unschedulable,tolerations,fits", [
    ("a schedulable node takes any pod", False, None, True),
    ("a cordoned node rejects a pod without the toleration", True, None, False),
    ("a cordoned node takes a pod tolerating the unschedulable taint", True, TOLERATE, True),
    ("an Equal toleration with an empty value tolerates it too", True,
     [{"key": "node.kubernetes.io/unschedulable", "operator": "Equal", "effect": "NoSchedule"}], True),
    ("a toleration for another effect doesn't", True,
     [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}], False),
    ("tolerate-everything tolerates it", True, [{"operator": "Exists"}], True),
], ids=lambda v: v if isinstance(v, str) else "")
def test_filter(name, unschedulable, tolerations, fits):
    table = table_of(make_node("n", unschedulable=unschedulable))
    pod = PodInfo(make_pod("p", **({"tolerations": tolerations} if tolerations else {})))
    verdict = NodeUnschedulable().filter_nodes(CycleState(), pod, table.all_rows())
    status = None if verdict is None else verdict.status_at(0)
    if fits:
        assert status is None
    else:
        assert status.code == Code.UnschedulableAndUnresolvable and status.reasons == [ERR_REASON_UNSCHEDULABLE]


def test_filter_on_a_batch_and_scratch_table():
    table = table_of(*(make_node(f"n{i}", unschedulable=i % 2 == 1) for i in range(6)))
    pl, pod = NodeUnschedulable(), PodInfo(make_pod("p"))
    verdict = pl.filter_nodes(CycleState(), pod, table.all_rows())
    assert list(verdict.codes) == [-1, 0, -1, 0, -1, 0]
    for row in range(6):
        one = pl.filter_nodes(CycleState(), pod, NodeTable.from_infos([table.infos[row]]).all_rows())
        assert (one is None) == (row % 2 == 0)


@pytest.mark.parametrize("name,old,new,expected", [
    ("queue an added schedulable node", None, make_node("n"), QueueingHint.Queue),
    ("skip an added cordoned node", None, make_node("n", unschedulable=True), QueueingHint.QueueSkip),
    ("queue an uncordoned node", make_node("n", unschedulable=True), make_node("n"), QueueingHint.Queue),
    ("skip a node staying schedulable", make_node("n"), make_node("n", labels={"a": "b"}), QueueingHint.QueueSkip),
    ("skip a node being cordoned", make_node("n"), make_node("n", unschedulable=True), QueueingHint.QueueSkip),
], ids=lambda v: v if isinstance(v, str) else "")
def test_node_change_hint(name, old, new, expected):
    assert NodeUnschedulable._after_node_change(make_pod("p"), old, new) == expected


def test_pod_toleration_hint():
    pl, pod = NodeUnschedulable(), make_pod("p")
    assert pl._after_pod_toleration_change(pod, pod, make_pod("p", tolerations=TOLERATE)) == QueueingHint.Queue
    assert pl._after_pod_toleration_change(pod, pod, make_pod("p", tolerations=[{"key": "x", "operator": "Exists"}])) == QueueingHint.QueueSkip
    assert pl._after_pod_toleration_change(pod, None, make_pod("other", tolerations=TOLERATE)) == QueueingHint.QueueSkip


def test_events():
    events = [(e.event.resource, e.event.action) for e in NodeUnschedulable().events_to_register()]
    assert events == [(Resource.Node, ActionType.Add | ActionType.UpdateNodeTaint), (Resource.Pod, ActionType.UpdatePodToleration)]
