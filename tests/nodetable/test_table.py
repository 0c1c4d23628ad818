"""The columnar node table mirrors NodeInfos exactly and stays consistent across updates."""

import numpy as np

from kubesched.api.selectors import parse_node_selector
from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.nodetable.selectors import node_selector_mask
from kubesched.scheduler.nodetable.table import CPU, MEMORY, NodeTable
from kubesched.scheduler.nodetable.tree import zone_key
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
    scratch = NodeTable.from_infos([copy])
    assert scratch.requested[CPU, 0] == 0
    assert table.requested[CPU, 0] == 1000


def test_scratch_table_from_rows_equals_one_built_from_the_copies():
    zone = "topology.kubernetes.io/zone"
    taint = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    table, infos = table_of(make_node("a", cpu="4", labels={zone: "z1"}), make_node("b", cpu="2", taints=taint),
                            make_node("c", extra={"example.com/gpu": "2"}, labels={zone: "z2", "x": "1"}))
    for info in infos:
        pod = PodInfo(make_pod(f"p-{info.name}", cpu="500m", node=info.name))
        info.add_pod(pod)
        table.pod_added(info, pod)
    copies = []
    for info in (infos[2], infos[0]):
        copy = info.clone()
        added = make_pod(f"q-{info.name}", cpu="1", memory="1Gi")
        added["spec"]["containers"][0]["resources"]["requests"]["example.com/other"] = "1"  # a resource new to the table
        copy.add_pod(PodInfo(added))
        copies.append(copy)
    rows = np.array([table.row_of["c"], table.row_of["a"]])
    fast, slow = NodeTable.from_rows(table, rows, copies), NodeTable.from_infos(copies)
    assert fast.names == slow.names == ["c", "a"]
    for name in slow.resource_names:
        f, s = fast.resource_index[name], slow.resource_index[name]
        assert list(fast.allocatable[f, :2]) == list(slow.allocatable[s, :2]), name
        assert list(fast.requested[f, :2]) == list(slow.requested[s, :2]), name
    assert list(fast.pod_count[:2]) == list(slow.pod_count[:2]) == [2, 2]
    assert list(fast.non_zero[:, :2].ravel()) == list(slow.non_zero[:, :2].ravel())
    assert [fast.taint_signatures[t] for t in fast.taint_sig[:2]] == [slow.taint_signatures[t] for t in slow.taint_sig[:2]]
    for key in (zone, "x", "kubernetes.io/hostname"):
        decode = lambda t, k: [t.labels[k].values[c] if c >= 0 else None for c in t.label_codes(k)]  # noqa: E731
        assert decode(fast, key) == decode(slow, key), key
    assert [fast.names[r] for r in fast.order()] == [slow.names[r] for r in slow.order()]


def test_zone_key_prefers_the_beta_labels_like_get_zone_key():
    beta_zone, ga_zone = "failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone"
    beta_region, ga_region = "failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region"
    cases = [
        ({ga_zone: "ga", beta_zone: "beta"}, ":\x00:beta"),
        ({ga_zone: "ga"}, ":\x00:ga"),
        ({beta_zone: "", ga_zone: "ga"}, ""),  # a present beta label wins even when empty
        ({ga_region: "r-ga", beta_region: "r-beta", ga_zone: "z"}, "r-beta:\x00:z"),
        ({}, ""),
    ]
    for labels, expected in cases:
        assert zone_key(labels) == expected, labels


def test_gt_and_lt_compare_label_values_as_int64_beyond_float_precision():
    big = 2**53
    values = [str(big), str(big + 1), str(2**63 - 1), "-9223372036854775808", "x", "9223372036854775808"]
    table, infos = table_of(*(make_node(f"n{i}", labels={"v": v}) for i, v in enumerate(values)), make_node("none"))
    for op, operand in [("Gt", str(big)), ("Lt", str(big + 1)), ("Gt", str(2**63 - 2)), ("Lt", "-9223372036854775807")]:
        spec = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "v", "operator": op, "values": [operand]}]}]}
        selector = parse_node_selector(spec)
        expected = [selector.matches(i.labels, i.name) for i in infos]
        assert list(node_selector_mask(table.all_rows(), selector)) == expected, (op, operand)
    assert list(node_selector_mask(table.all_rows(), parse_node_selector(
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "v", "operator": "Gt", "values": [str(big)]}]}]}))) == \
        [False, True, True, False, False, False, False]


def test_match_fields_select_nodes_by_name_including_unknown_names():
    table, _ = table_of(*(make_node(f"n{i}") for i in range(4)))
    for op, names, expected in [("In", ["n2"], [False, False, True, False]), ("NotIn", ["n2"], [True, True, False, True]),
                                ("In", ["ghost"], [False] * 4), ("NotIn", ["ghost"], [True] * 4)]:
        selector = parse_node_selector({"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": op, "values": names}]}]})
        assert list(node_selector_mask(table.all_rows(), selector)) == expected
        assert list(node_selector_mask(table.batch(np.array([3, 2])), selector)) == [expected[3], expected[2]]


def test_label_vocabulary_is_compacted_under_node_churn():
    table, _ = table_of(*(make_node(f"n{i}", labels={"zone": "a"}) for i in range(3)))
    old_column = table.label_column("kubernetes.io/hostname")
    for i in range(3, 500):
        table.set_node(NodeInfo(make_node(f"n{i}", labels={"zone": "a"})))
        table.remove_node(f"n{i - 3}")
    column = table.label_column("kubernetes.io/hostname")
    assert len(column.values) <= 2 * 64 + 1
    assert [column.values[c] for c in table.label_codes("kubernetes.io/hostname")] == table.names[: table.n]
    assert old_column.values[:3] == ["n0", "n1", "n2"]  # earlier columns are left untouched
    assert len(table.label_column("zone").values) == 1
