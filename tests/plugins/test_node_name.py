"""NodeName: a pod naming a node fits only that node; the hint waits for that node."""

from __future__ import annotations

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, QueueingHint, Resource
from kubesched.scheduler.framework.status import Code
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.nodename.node_name import ERR_REASON, NodeName
from tests.helpers import make_node, make_pod


def table_of(*names: str) -> NodeTable:
    table = NodeTable()
    for n in names:
        table.set_node(NodeInfo(make_node(n)))
    return table


def test_pod_without_node_name_fits_every_node():
    assert NodeName().filter_nodes(CycleState(), PodInfo(make_pod("p")), table_of("a", "b").all_rows()) is None


def test_pod_with_node_name_fits_only_that_node():
    table = table_of("a", "b", "c")
    verdict = NodeName().filter_nodes(CycleState(), PodInfo(make_pod("p", node="b")), table.all_rows())
    assert list(verdict.codes) == [0, -1, 0]
    assert verdict.statuses[0].code == Code.UnschedulableAndUnresolvable and verdict.statuses[0].reasons == [ERR_REASON]


def test_pod_naming_a_missing_node_fits_nothing_and_scratch_tables_agree():
    table = table_of("a", "b")
    pl = NodeName()
    assert list(pl.filter_nodes(CycleState(), PodInfo(make_pod("p", node="zz")), table.all_rows()).codes) == [0, 0]
    scratch = NodeTable.from_infos([table.infos[1]])
    assert pl.filter_nodes(CycleState(), PodInfo(make_pod("p", node="b")), scratch.all_rows()) is None
    assert pl.filter_nodes(CycleState(), PodInfo(make_pod("p", node="a")), scratch.all_rows()) is not None


def test_node_add_hint():
    assert NodeName._after_node_add(make_pod("p", node="a"), None, make_node("a")) == QueueingHint.Queue
    assert NodeName._after_node_add(make_pod("p", node="a"), None, make_node("b")) == QueueingHint.QueueSkip
    assert NodeName._after_node_add(make_pod("p"), None, make_node("b")) == QueueingHint.Queue


def test_events():
    assert [(e.event.resource, e.event.action) for e in NodeName().events_to_register()] == [(Resource.Node, ActionType.Add)]
