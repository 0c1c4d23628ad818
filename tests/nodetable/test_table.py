"""The columnar node table mirrors NodeInfos exactly and stays consistent across updates."""

import numpy as np

from kubesched.api.selectors import parse_node_selector
from kubesched.framework.types import NodeInfo, PodInfo
from kubesched.nodetable.selectors import node_selector_mask
from kubesched.nodetable.table import CPU, MEMORY, NodeTable
from tests.helpers import make_node, make_pod


def table_of(*nodes):
    table = NodeTable()
    infos = [NodeInfo(n) for n in nodes]
    for info in infos:
        table.set_node(info)
    return table, infos


def test_columns_follow_node_infos_and_pod_deltas():
    table, (a, _b) = table_of(make_node("a", cpu="4"), make_node("b", cpu="2", memory="1Gi"))
    assert list(table.allocatable[CPU, :2]) == [4000, 2000]
    assert table.allocatable[MEMORY, 1] == 2**30
    pod = PodInfo(make_pod("p", cpu="500m", node="a"))
    a.add_pod(pod)
    table.pod_added(a, pod)
    assert table.requested[CPU, 0] == 500 and table.pod_count[0] == 1
    a.remove_pod(pod.uid)
    table.pod_removed(a, pod)
    assert table.requested[CPU, 0] == 0 and table.pod_count[0] == 0


def test_removing_a_node_moves_the_last_row_into_the_hole():
    table, _ = table_of(make_node("a", cpu="1"), make_node("b", cpu="2"), make_node("c", cpu="3", labels={"x": "y"}))
    table.remove_node("a")
    assert table.n == 2
    assert table.names[:2] == ["c", "b"]
    assert table.row_of == {"c": 0, "b": 1}
    assert list(table.allocatable[CPU, :2]) == [3000, 2000]
    codes = table.label_codes("x")
    assert codes[0] >= 0 and codes[1] == -1


def test_extended_resources_add_rows_on_demand():
    table, _ = table_of(make_node("a", extra={"example.com/gpu": "2"}), make_node("b"))
    idx = table.resource_row("example.com/gpu")
    assert list(table.allocatable[idx, :2]) == [2, 0]


def test_visiting_order_is_round_robin_over_zones():
    zone = "topology.kubernetes.io/zone"
    table, _ = table_of(*(make_node(f"n{i}", labels={zone: f"z{i % 2}"}) for i in range(4)),
                        make_node("n4", labels={zone: "z0"}))
    assert [table.names[r] for r in table.order()] == ["n0", "n1", "n2", "n3", "n4"]
    table2, _ = table_of(make_node("a1", labels={zone: "a"}), make_node("a2", labels={zone: "a"}), make_node("b1", labels={zone: "b"}))
    assert [table2.names[r] for r in table2.order()] == ["a1", "b1", "a2"]


def test_node_selector_masks_agree_with_per_node_matching():
    nodes = [make_node(f"n{i}", labels={"cpus": str(i), "tier": "gold" if i % 2 else "silver"}) for i in range(6)]
    table, infos = table_of(*nodes)
    selectors = [
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["2"]}]}]},
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gold"]}]},
                               {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "missing", "operator": "DoesNotExist"},
                                                     {"key": "cpus", "operator": "Lt", "values": ["4"]}]}]},
    ]
    for spec in selectors:
        selector = parse_node_selector(spec)
        expected = [selector.matches(i.labels, i.name) for i in infos]
        assert list(node_selector_mask(table.all_rows(), selector)) == expected
        rows = np.array([5, 1, 3])
        assert list(node_selector_mask(table.batch(rows), selector)) == [expected[r] for r in rows]


def test_scratch_table_from_modified_node_info():
    table, (a,) = table_of(make_node("a", cpu="4"))
    pod = PodInfo(make_pod("p", cpu="1", node="a"))
    a.add_pod(pod)
    table.pod_added(a, pod)
    copy = a.clone()
    copy.remove_pod(pod.uid)
    scratch = NodeTable.from_infos([copy], like=table)
    assert scratch.requested[CPU, 0] == 0
    assert table.requested[CPU, 0] == 1000
